"""Hostile annotations written with kubectl beside an overdue job, on the real kube-apiserver.

Any job owner can annotate their job. The values below are what kubectl and the API server
accept (annotations are free strings): RFC 3339 times whose UTC instant is before year 1 or
after 9999, a touch in the year 9999, a huge value, garbage, and an opt-out that says
"maybe". Each sits on its own overdue job beside a good one, in a one-shot run and under
``sweeper --watch`` (listed at start-up, and arriving later as watch events): the good job is
enforced, and each hostile one is judged as its value says (issue 19, C1 and C2).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import binaries
from tests.e2e import workloads as w
from tests.e2e.watchers import Watcher, wait_for

pytestmark = pytest.mark.e2e

# (job name, annotation key, value, the one-shot decision it leads to when the job is overdue)
HOSTILE = [
    ("before-year-1", w.TOUCHED_AT, "0001-01-01T00:00:00+01:00", "touch"),  # unparsable: no touch
    ("after-9999", w.TOUCHED_AT, "9999-12-31T23:59:59-01:00", "touch"),
    ("touched-in-9999", w.TOUCHED_AT, "9999-12-31T23:59:59Z", "touch"),  # future: no touch (C5)
    ("huge", w.TOUCHED_AT, "9" * 20000, "touch"),
    ("garbage", w.TOUCHED_AT, "not-a-time", "touch"),
    ("maybe", w.EXCLUDE, "maybe", "touch"),  # only "true" opts out
]


def kubectl(cp: Any, *args: str) -> None:
    subprocess.run(
        [str(binaries.find("kubectl")), "--kubeconfig", str(cp.kubeconfig), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )


def annotate(cp: Any, namespace: str, name: str, key: str, value: str) -> None:
    kubectl(cp, "-n", namespace, "annotate", "--overwrite", "pytorchjobs", name, f"{key}={value}")


def create_hostile_jobs(cp: Any, namespace: str, *, deadline: int = 60) -> None:
    for name, key, value, _ in HOSTILE:
        w.create_job(cp, namespace, name, deadline=deadline)
        annotate(cp, namespace, name, key, value)


def touched_at(cp: Any, namespace: str, name: str) -> str | None:
    job = w.get_job(cp, namespace, "PyTorchJob", name)
    return (job["metadata"].get("annotations") or {}).get(w.TOUCHED_AT)


def test_a_one_shot_run_enforces_the_good_job_beside_hostile_annotations(
    control_plane, namespace, sweep
):
    create_hostile_jobs(control_plane, namespace)
    w.create_job(control_plane, namespace, "good")

    run = sweep("-n", namespace, "--action", "touch", "-o", "json")

    assert run.result.returncode == 0, run.explain()
    decisions = {e["name"]: e["decision"] for e in w.report_jobs(run.result.stdout)}
    assert decisions == {"good": "touch"} | {name: d for name, _, _, d in HOSTILE}
    assert touched_at(control_plane, namespace, "good") is not None
    explained = sweep("--explain", f"{namespace}/before-year-1")
    assert explained.result.returncode == 0, explained.explain()


@pytest.fixture
def start_watcher(sweeper_kubeconfig: Path, tmp_path: Path, namespace: str) -> Iterator[Any]:
    started: list[Watcher] = []

    def start(*args: str) -> Watcher:
        watcher = Watcher(sweeper_kubeconfig, tmp_path, "-n", namespace, "--no-leader-elect", *args)
        started.append(watcher)
        return watcher

    yield start
    for watcher in started:
        watcher.stop()


def test_the_watch_enforces_the_good_job_on_time_beside_hostile_annotations(
    control_plane, namespace, start_watcher
):
    # Listed at start-up: the hostile jobs are overdue, the year-9999 touch included.
    create_hostile_jobs(control_plane, namespace)
    watcher = start_watcher()
    watcher.wait_ready()
    # Arriving as events: the same values on jobs not due for an hour.
    for name, key, value, _ in HOSTILE:
        w.create_job(control_plane, namespace, f"later-{name}", deadline=3600, started_ago=0)
        annotate(control_plane, namespace, f"later-{name}", key, value)
    job = w.create_job(control_plane, namespace, "good", deadline=4, started_ago=0)

    wait_for(lambda: touched_at(control_plane, namespace, "good") is not None, "touch", watcher)

    stamp = touched_at(control_plane, namespace, "good")
    assert stamp is not None
    start = w.parse_stamp(job["status"]["startTime"])
    assert w.parse_stamp(stamp) >= start.replace(microsecond=0)
    acted = {e["name"]: e["action"] for e in watcher.logs() if e.get("action")}
    assert acted["good"] == "touch", watcher.explain()
    # The overdue hostile jobs were judged at start-up as their values say.
    assert {n for n, _, _, d in HOSTILE if d == "touch"} <= set(acted), watcher.explain()
    assert not any(name.startswith("later-") for name in acted), watcher.explain()
    assert not [e for e in watcher.logs() if "cannot read" in str(e.get("message"))]
