"""``sweeper --watch`` across a kube-apiserver SIGKILL and restart (issue 13).

Jobs come due while the apiserver is down: the watcher's timers fire into refused connections.
Once the apiserver is back, every one of them gets its touch, a job not due is left alone, and
the watcher is still running. No timing assertion: ``benchmarks/watch_restart.py`` measures
how soon after the return.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster import ControlPlane
from tests.e2e import clusters
from tests.e2e import workloads as w
from tests.e2e.watchers import Watcher, wait_for

pytestmark = pytest.mark.e2e

DUE_IN_S = 12
DURING = ("due-1", "due-2", "due-3")


@pytest.fixture
def own_control_plane() -> Iterator[ControlPlane]:
    # Killing the session's apiserver would break every other test.
    with clusters.start_control_plane() as cp:
        yield cp


def touched_at(cp: ControlPlane, namespace: str, name: str) -> str | None:
    job = w.get_job(cp, namespace, "PyTorchJob", name)
    return (job["metadata"].get("annotations") or {}).get(w.TOUCHED_AT)


def tracked(watcher: Watcher) -> float:
    for line in watcher.metrics().splitlines():
        if line.startswith("deadline_sweeper_tracked_jobs "):
            return float(line.split()[1])
    return 0.0


def test_jobs_due_while_the_apiserver_is_down_are_touched_once_it_is_back(
    own_control_plane: ControlPlane, tmp_path: Path
) -> None:
    cp = own_control_plane
    namespace = cp.create_namespace("restart")
    kubeconfig = cp.user_kubeconfig(clusters.SWEEPER_USER, ["system:masters"])
    watcher = Watcher(kubeconfig, tmp_path, "-n", namespace, "--lease-namespace", namespace)
    try:
        watcher.wait_ready()
        created = [
            w.create_job(cp, namespace, name, deadline=DUE_IN_S, started_ago=0) for name in DURING
        ]
        w.create_job(cp, namespace, "not-due", deadline=3600, started_ago=0)
        wait_for(lambda: tracked(watcher) == len(DURING) + 1, "every job tracked", watcher)
        deadlines = [
            w.parse_stamp(job["status"]["startTime"]) + dt.timedelta(seconds=DUE_IN_S)
            for job in created
        ]
        dead = cp.kill_apiserver()
        assert dt.datetime.now(dt.UTC) < min(deadlines), "the kill came after a deadline"
        # Down until every deadline has passed and the timers have fired into the outage.
        time.sleep((max(deadlines) - dt.datetime.now(dt.UTC)).total_seconds() + 3)
        assert watcher.process.poll() is None, watcher.explain()
        cp.revive_apiserver(dead)

        wait_for(
            lambda: all(touched_at(cp, namespace, name) for name in DURING),
            "every job due during the outage touched",
            watcher,
        )

        for name, deadline in zip(DURING, deadlines, strict=True):
            stamp = touched_at(cp, namespace, name)
            assert stamp is not None
            assert w.parse_stamp(stamp) >= deadline.replace(microsecond=0), name
        assert touched_at(cp, namespace, "not-due") is None
        assert watcher.process.poll() is None, watcher.explain()
        assert watcher.probe("/readyz") == 200
    finally:
        watcher.stop()
