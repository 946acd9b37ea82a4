"""Clean-ups of jobs failed by their deadline, on the real kube-apiserver.

- Retained jobs failed long ago (their pods gone) cost one pod list per pass, whatever their
  number, take no ``--max-actions`` slot, and never delay a due touch: the touch comes before
  every clean-up, and a job failed a minute ago still gets its Running pods deleted.
- A pod already being deleted (a finalizer keeps it, phase still ``Running``: what a long
  termination grace period looks like to the API server) is never deleted again nor reported
  terminated again, in a pass nor after the watch's own status write.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from tests.e2e import clusters
from tests.e2e import workloads as w
from tests.e2e.watchers import Watcher, wait_for

pytestmark = pytest.mark.e2e

FINALIZER = "e2e.deadline-sweeper.kubeflow.org/keep"


def deadline_failed(cp: ControlPlane, namespace: str, name: str, *, failed_ago: int) -> w.Obj:
    """A job the operator failed by its deadline ``failed_ago`` seconds ago (no pods)."""
    job = w.create_job(cp, namespace, name, deadline=60, started_ago=60 + failed_ago)
    at = w.stamp(w.now() - dt.timedelta(seconds=failed_ago))
    status = job["status"]
    for condition in status["conditions"]:
        if condition["type"] == "Running":
            condition["status"] = "False"
    status["conditions"].append(
        {
            "type": "Failed",
            "status": "True",
            "reason": "PyTorchJobFailed",
            "message": f"Job {name} has failed because it was active longer than specified "
            "deadline",
            "lastUpdateTime": at,
            "lastTransitionTime": at,
        }
    )
    status["completionTime"] = at
    return w.set_status(cp, namespace, "PyTorchJob", name, status)


def pod_requests(run: clusters.Sweep, verb: str) -> list[dict[str, Any]]:
    return [
        e
        for e in run.requests
        if e["verb"] == verb and (e.get("objectRef") or {}).get("resource") == "pods"
    ]


def test_old_clean_ups_cost_one_pod_list_no_slot_and_come_after_the_due_touch(
    control_plane: ControlPlane, namespace: str, sweep: Any
) -> None:
    for index in range(20):
        deadline_failed(control_plane, namespace, f"old-{index:02}", failed_ago=86400 + index)
    recent = deadline_failed(control_plane, namespace, "recent", failed_ago=60)
    [pod] = w.create_replicas(control_plane, recent, {"Master": ["Running"]})
    w.create_job(control_plane, namespace, "due-now", deadline=60, started_ago=61)

    run = sweep("-n", namespace, "--action", "auto", "--max-actions", "2", "-o", "json")

    assert run.result.returncode == 0, run.explain()
    jobs = run.jobs_by_name()
    assert (jobs["due-now"]["decision"], jobs["due-now"]["result"]) == ("touch", "done")
    assert (jobs["recent"]["decision"], jobs["recent"]["result"]) == ("terminate-pods", "done")
    assert jobs["recent"]["deleted"]["pods"] == [pod]
    assert {jobs[f"old-{i:02}"]["reason"] for i in range(20)} == {"finished"}
    assert len(pod_requests(run, "list")) == 1, run.explain()
    summaries = [w.request_summary(e) for e in run.requests]
    touch = summaries.index(("patch", "pytorchjobs", namespace, "due-now"))
    delete = summaries.index(("delete", "pods", namespace, pod))
    assert touch < delete, run.explain()
    assert w.names(control_plane, namespace, "pods") == set()


@pytest.fixture
def terminating(control_plane: ControlPlane, namespace: str) -> Iterator[list[str]]:
    """Removes the test finalizer from the namespace's pods afterwards, so they can go."""
    yield []
    for pod in control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]:
        if FINALIZER in (pod["metadata"].get("finalizers") or []):
            control_plane.request(
                "PATCH",
                f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}",
                {"metadata": {"finalizers": None}},
                content_type="application/merge-patch+json",
            )


def keep_while_deleted(cp: ControlPlane, namespace: str, pod: str) -> None:
    cp.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{pod}",
        {"metadata": {"finalizers": [FINALIZER]}},
        content_type="application/merge-patch+json",
    )


@pytest.mark.parametrize("action", ["fail", "auto"])
def test_a_pod_already_terminating_is_not_deleted_again_nor_reported(
    control_plane: ControlPlane, namespace: str, sweep: Any, terminating: list[str], action: str
) -> None:
    job = deadline_failed(control_plane, namespace, "failed", failed_ago=60)
    [pod] = w.create_replicas(control_plane, job, {"Master": ["Running"]})
    keep_while_deleted(control_plane, namespace, pod)
    control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{pod}")
    held = control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}")
    assert held["metadata"].get("deletionTimestamp"), held
    assert held["status"]["phase"] == "Running"

    run = sweep("-n", namespace, "--action", action, "-o", "json")

    assert run.result.returncode == 0, run.explain()
    [record] = w.report_jobs(run.result.stdout)
    assert (record["decision"], record["reason"], record["result"]) == (
        "skip",
        "finished",
        "skipped",
    ), record
    assert w.writes(run.requests) == [], run.explain()
    assert w.events_about(control_plane, job) == []


def test_the_watchs_own_status_write_deletes_no_pod_twice(
    control_plane: ControlPlane,
    namespace: str,
    sweeper_kubeconfig: Path,
    tmp_path: Path,
    terminating: list[str],
) -> None:
    job = w.create_job(control_plane, namespace, "late")
    [pod] = w.create_replicas(control_plane, job, {"Master": ["Running"]})
    keep_while_deleted(control_plane, namespace, pod)
    since = control_plane.audit_offset()
    watcher = Watcher(
        sweeper_kubeconfig,
        tmp_path,
        "-n",
        namespace,
        "--action",
        "fail",
        "--lease-namespace",
        namespace,
        # A clean-up that finds nothing left to delete is logged at debug level.
        "--log-level",
        "debug",
    )
    try:
        wait_for(
            lambda: any(e.get("action") == "fail" for e in watcher.logs()), "the fail", watcher
        )
        # The status write's MODIFIED event re-reads the job: a clean-up that finds only the
        # terminating pod. Its outcome is the last action the watch logs about the job.
        wait_for(
            lambda: any(e.get("action") == "terminate-pods" for e in watcher.logs()),
            "the look at the job after its own write",
            watcher,
        )
    finally:
        watcher.stop()

    outcomes = [
        (e["action"], e["result"]) for e in watcher.logs() if e.get("action") not in (None, "skip")
    ]
    assert outcomes == [("fail", "done"), ("terminate-pods", "left-alone")], watcher.explain()
    requests = control_plane.audit_events(user=clusters.SWEEPER_USER, since=since)
    deletes = [w.request_summary(e) for e in requests if e["verb"] == "delete"]
    assert deletes.count(("delete", "pods", namespace, pod)) == 1, deletes
    reasons = [e["reason"] for e in w.events_about(control_plane, job)]
    assert reasons == ["DeadlineExceeded"]
