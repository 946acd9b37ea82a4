"""``--action fail`` against a real apiserver: the operator's status document, then the pods.

The expected document is docs/operator.md's "What the operator does on the deadline", with the
sweeper's message: ``completionTime`` set when unset, Running flipped to False (other fields
kept), ``Failed=True`` appended with reason ``<Kind>Failed``; nothing else in the status moves.
"""

from __future__ import annotations

import copy

import pytest

from devcluster import jobs
from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e

MESSAGE = (
    "Job {name} has failed because it was active longer than specified deadline "
    "(enforced by kubeflow-deadline-sweeper)"
)


def expected_status(before: w.Obj, kind: str, name: str, at: str) -> w.Obj:
    status = copy.deepcopy(before)
    for condition in status["conditions"]:
        if condition["type"] == "Running":
            condition["status"] = "False"
    status["conditions"].append(
        {
            "type": "Failed",
            "status": "True",
            "reason": f"{kind}Failed",
            "message": MESSAGE.format(name=name),
            "lastUpdateTime": at,
            "lastTransitionTime": at,
        }
    )
    status.setdefault("completionTime", at)
    return status


@pytest.mark.parametrize("kind", list(jobs.KINDS), ids=str)
def test_fail_writes_exactly_the_operators_status_document(control_plane, namespace, sweep, kind):
    before = w.create_job(control_plane, namespace, "late", kind=kind)
    started = w.now()

    run = sweep("-n", namespace, "--action", "fail")

    finished = w.now()
    assert run.result.returncode == 0, run.explain()
    after = w.get_job(control_plane, namespace, kind, "late")
    failed_at = after["status"]["conditions"][-1]["lastTransitionTime"]
    assert started <= w.parse_stamp(failed_at) <= finished
    assert after["status"] == expected_status(before["status"], kind, "late", failed_at)
    assert after["spec"] == before["spec"]
    assert after["metadata"].get("annotations") == before["metadata"].get("annotations")


def test_fail_keeps_an_existing_completion_time(control_plane, namespace, sweep):
    before = w.create_job(control_plane, namespace, "late")
    status = copy.deepcopy(before["status"])
    status["completionTime"] = status["startTime"]
    w.set_status(control_plane, namespace, "PyTorchJob", "late", status)

    run = sweep("-n", namespace, "--action", "fail")

    assert run.result.returncode == 0, run.explain()
    after = w.get_job(control_plane, namespace, "PyTorchJob", "late")
    assert after["status"]["completionTime"] == status["completionTime"]


@pytest.mark.parametrize(
    ("terminate_pods", "deleted"),
    [
        ("active", {"late-master-0", "late-worker-0", "late-worker-1"}),
        ("all", {"late-master-0", "late-worker-0", "late-worker-1", "late-worker-2"}),
        ("policy", set()),  # no cleanPodPolicy: v1.9.4 reads it as None and keeps every pod
    ],
    ids=["active-running-and-pending", "all", "policy-none-keeps-them"],
)
def test_fail_deletes_the_jobs_pods_and_same_named_services_only(
    control_plane, namespace, sweep, terminate_pods, deleted
):
    late = w.create_job(control_plane, namespace, "late", workers=3)
    ours = w.create_replicas(
        control_plane, late, {"Master": ["Running"], "Worker": ["Running", "Pending", "Succeeded"]}
    )
    # Same job-name label, but not controlled by this job (e.g. left by an earlier job of
    # the same name): not the sweeper's to delete.
    look_alikes = w.create_replicas(control_plane, late, {"Stale": ["Running"]}, owned=False)
    other = w.create_job(control_plane, namespace, "other", started_ago=10)
    others = w.create_replicas(control_plane, other, {"Master": ["Running"], "Worker": ["Running"]})

    run = sweep("-n", namespace, "--action", "fail", "--terminate-pods", terminate_pods)

    assert run.result.returncode == 0, run.explain()
    survivors = set(ours + look_alikes + others) - deleted
    assert w.names(control_plane, namespace, "pods") == survivors
    assert w.names(control_plane, namespace, "services") == survivors
    deletes = [w.request_summary(e) for e in run.requests if e["verb"] == "delete"]
    assert sorted(deletes) == sorted(
        [("delete", "pods", namespace, p) for p in deleted]
        + [("delete", "services", namespace, p) for p in deleted]
    )


def test_fail_writes_the_status_before_deleting_any_pod(control_plane, namespace, sweep):
    late = w.create_job(control_plane, namespace, "late", workers=2)
    w.create_replicas(
        control_plane, late, {"Master": ["Running"], "Worker": ["Running", "Running"]}
    )

    run = sweep("-n", namespace, "--action", "fail")

    assert run.result.returncode == 0, run.explain()
    order = [w.request_summary(e)[:2] for e in w.writes(run.requests)]
    status_write = order.index(("patch", "pytorchjobs/status"))
    first_delete = min(i for i, (verb, _) in enumerate(order) if verb == "delete")
    assert status_write < first_delete, run.explain()
    assert order.count(("patch", "pytorchjobs/status")) == 1


def test_a_second_fail_run_changes_nothing(control_plane, namespace, sweep):
    late = w.create_job(control_plane, namespace, "late")
    w.create_replicas(control_plane, late, {"Master": ["Running"]})
    first = sweep("-n", namespace, "--action", "fail")
    assert first.result.returncode == 0, first.explain()
    after_first = w.get_job(control_plane, namespace, "PyTorchJob", "late")

    second = sweep("-n", namespace, "--action", "fail")

    assert second.result.returncode == 0, second.explain()
    assert w.writes(second.requests) == [], second.explain()
    after_second = w.get_job(control_plane, namespace, "PyTorchJob", "late")
    assert after_second["metadata"]["resourceVersion"] == after_first["metadata"]["resourceVersion"]


def test_the_failure_is_recorded_as_an_event_from_the_sweeper(control_plane, namespace, sweep):
    job = w.create_job(control_plane, namespace, "late")

    run = sweep("-n", namespace, "--action", "fail")

    assert run.result.returncode == 0, run.explain()
    about_job = w.events_about(control_plane, job)
    assert len(about_job) == 1, about_job
    assert about_job[0]["reportingComponent"] == w.COMPONENT
    assert about_job[0]["source"]["component"] == w.COMPONENT
    assert about_job[0]["involvedObject"]["kind"] == "PyTorchJob"
