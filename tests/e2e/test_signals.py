"""SIGTERM or SIGINT mid-run: the write in flight completes, no other starts, report, exit 4.

A Kubernetes CronJob's pod gets SIGTERM when it is deleted or its deadline passes. The signal
is delivered at an exact point: the fault proxy's ``Before`` rule sends it to the sweeper
process while one of its patches is on its way to the apiserver, so that write is in flight
when the signal lands. The proxy's request log then shows what the sweeper did after it.

``--watch`` (a Deployment, whose pods are all stopped that way) ends the same way but exits 0,
and releases its Lease only once the write in flight is done.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane, processes
from tests.e2e import clusters
from tests.e2e import workloads as w
from tests.e2e.faultproxy import Before, FaultProxy, Respond, Rule, Seen
from tests.e2e.watchers import PATIENCE_S, Watcher

pytestmark = pytest.mark.e2e

JOBS = 12
# The signal lands while this job's patch (the 4th of the run) is in flight.
IN_FLIGHT = 4
PATCH_JOB = r"/pytorchjobs/late-\d+$"


@pytest.fixture
def many_late(control_plane: ControlPlane, namespace: str) -> str:
    for index in range(JOBS):
        w.create_job(control_plane, namespace, f"late-{index:02d}")
    return namespace


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy.for_control_plane(control_plane, lifetime=300) as p:
        yield p


def start(proxy: FaultProxy, *args: str) -> subprocess.Popen[str]:
    """Start the CLI through the proxy, with the same clean environment as ``run_sweeper``."""
    env = {
        k: v for k, v in os.environ.items() if k != "KUBECONFIG" and not k.startswith("SWEEPER_")
    }
    argv = [str(clusters.sweeper_executable()), "--kubeconfig", str(proxy.kubeconfig), *args]
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def touched(cp: ControlPlane, namespace: str) -> list[str]:
    items = cp.request("GET", w.job_path(namespace, "PyTorchJob"))["items"]
    return sorted(
        j["metadata"]["name"]
        for j in items
        if w.TOUCHED_AT in (j["metadata"].get("annotations") or {})
    )


def explain(out: str, err: str, proxy: FaultProxy) -> str:
    return f"stdout:\n{out}\nstderr:\n{err[-3000:]}\nproxy saw:\n{proxy.describe()}"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_mid_run_lets_the_write_in_flight_finish_starts_no_other_and_exits_4(
    control_plane: ControlPlane, many_late: str, proxy: FaultProxy, signum: signal.Signals
) -> None:
    running: list[subprocess.Popen[str]] = []

    def send(_seen: Seen) -> None:
        running[0].send_signal(signum)

    proxy.rules.append(Rule(Before(send, name="signal"), "PATCH", PATCH_JOB, nth=IN_FLIGHT))
    process = start(proxy, "-n", many_late, "--action", "touch", "-o", "json")
    running.append(process)
    out, err = process.communicate(timeout=120)

    assert process.returncode == 4, explain(out, err, proxy)
    [in_flight] = [s for s in proxy.seen if s.fault == "signal"]
    # The write that was on its way completed...
    assert in_flight.upstream_status == 200
    assert in_flight.status == 200
    # ...and nothing was written after it: no event, no other patch.
    later_writes = [s for s in proxy.writes() if s.index > in_flight.index]
    assert later_writes == [], proxy.describe()
    done = touched(control_plane, many_late)
    assert len(done) == IN_FLIGHT
    assert in_flight.path.rsplit("/", 1)[1] in done
    # The summary is still printed: every job, with what happened to it.
    (report,) = w.passes(out)
    results = [j["result"] for j in report["jobs"]]
    assert len(results) == JOBS
    assert results.count("done") == IN_FLIGHT
    assert results.count("not-started") == JOBS - IN_FLIGHT
    assert report["summary"]["stopped_by"]
    assert signum.name in report["summary"]["stopped_by"]
    assert "Traceback" not in err


def test_a_signal_during_a_retry_wait_stops_at_once_without_retrying(
    control_plane: ControlPlane, many_late: str, proxy: FaultProxy
) -> None:
    # A long Retry-After: the sweeper is certainly waiting when the signal arrives.
    proxy.rules.append(Rule(Respond(503, retry_after=30), "PATCH", PATCH_JOB, nth=2, times=None))
    process = start(proxy, "-n", many_late, "--action", "touch", "-o", "json")
    processes.wait_until(
        lambda: any(s.status == 503 for s in proxy.seen), timeout=60, what="the first 503"
    )
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)

    assert process.returncode == 4, explain(out, err, proxy)
    refused = proxy.matching("PATCH", PATCH_JOB)[1:]
    assert [s.status for s in refused] == [503], proxy.describe()  # no retry after the signal
    assert [s for s in proxy.writes() if s.index > refused[0].index] == []
    (report,) = w.passes(out)
    by_result: dict[str, Any] = {}
    for job in report["jobs"]:
        by_result.setdefault(job["result"], []).append(job["name"])
    assert len(by_result.get("done", [])) == 1, json.dumps(report, indent=1)
    assert "Traceback" not in err


# The watcher's write is held this long after the signal: longer than the renew deadline (3 s),
# after which the sweeper used to release the Lease whatever was still in flight.
HOLD_S = 6.0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_watch_stopped_mid_write_finishes_it_then_releases_the_lease_and_exits_0(
    control_plane: ControlPlane,
    namespace: str,
    proxy: FaultProxy,
    tmp_path: Path,
    signum: signal.Signals,
) -> None:
    w.create_job(control_plane, namespace, "late")
    running: list[Watcher] = []

    def signal_then_hold(_seen: Seen) -> None:
        running[0].process.send_signal(signum)
        time.sleep(HOLD_S)  # then forwarded: the write lands, and is answered, after this

    proxy.rules.append(
        Rule(Before(signal_then_hold, name="signal"), "PATCH", r"/pytorchjobs/late$")
    )
    watcher = Watcher(
        proxy.kubeconfig,
        tmp_path,
        "-n",
        namespace,
        "--lease-namespace",
        namespace,
        "--retry-period",
        "0.5",
        "--renew-deadline",
        "3",
        # Long enough that the write's window (until another replica may lead) outlasts the hold.
        "--lease-duration",
        "30",
        name="leader",
    )
    running.append(watcher)
    watcher.process.wait(timeout=PATIENCE_S)
    code = watcher.stop()

    [patch] = [s for s in proxy.seen if s.fault == "signal"]
    assert (patch.upstream_status, patch.status) == (200, 200), proxy.describe()
    assert touched(control_plane, namespace) == ["late"]
    [release] = [
        s
        for s in proxy.matching("PUT", r"/leases/")
        if s.json()["spec"].get("holderIdentity") == ""
    ]
    assert patch.ended is not None
    assert release.started >= patch.ended, proxy.describe()
    assert code == 0, watcher.explain()
    # No job write after the signal (not even the touch's Event); the release is the last word.
    later = [s for s in proxy.writes() if s.index > patch.index]
    assert [s for s in later if "/leases" not in s.path] == [], proxy.describe()
    assert later[-1] is release, proxy.describe()
    assert "Traceback" not in watcher.log_path.read_text()
