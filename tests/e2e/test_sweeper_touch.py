"""``--action touch`` against a real apiserver: the annotation, and nothing else."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e

# Fields the apiserver itself changes on any write; everything else must stay as it was.
SERVER_OWNED = ("resourceVersion", "managedFields")


def without_server_fields(job: w.Obj) -> w.Obj:
    meta = {k: v for k, v in job["metadata"].items() if k not in SERVER_OWNED}
    return {**job, "metadata": meta}


def test_touch_adds_only_the_annotation_to_an_overdue_job(control_plane, namespace, sweep):
    before = w.create_job(control_plane, namespace, "late", annotations={"team": "vision"})
    started = w.now()

    run = sweep("-n", namespace, "--action", "touch")

    finished = w.now()
    after = w.get_job(control_plane, namespace, "PyTorchJob", "late")
    assert run.result.returncode == 0, run.explain()
    touched_at = after["metadata"]["annotations"].pop(w.TOUCHED_AT)
    assert started <= w.parse_stamp(touched_at) <= finished
    assert touched_at.endswith("Z")
    assert without_server_fields(after) == without_server_fields(before)


def test_the_old_keys_are_read_and_a_touch_moves_the_stamp_to_the_new_key(
    control_plane, namespace, sweep
):
    # 0.1.0's opt-out is still honoured; 0.1.0's stamp (before the deadline: not this one's
    # touch) is replaced by the new key in the same patch, other annotations untouched.
    opted_out = w.create_job(
        control_plane, namespace, "opted-out", annotations={w.OLD_EXCLUDE: "true"}
    )
    long_ago = w.stamp(w.now() - dt.timedelta(hours=3))
    w.create_job(
        control_plane, namespace, "late", annotations={w.OLD_TOUCHED_AT: long_ago, "team": "vision"}
    )
    started = w.now()

    run = sweep("-n", namespace, "--action", "touch")

    assert run.result.returncode == 0, run.explain()
    after = w.get_job(control_plane, namespace, "PyTorchJob", "opted-out")
    assert after["metadata"]["resourceVersion"] == opted_out["metadata"]["resourceVersion"]
    annotations = w.get_job(control_plane, namespace, "PyTorchJob", "late")["metadata"][
        "annotations"
    ]
    assert set(annotations) == {w.TOUCHED_AT, "team"}, annotations
    assert started <= w.parse_stamp(annotations[w.TOUCHED_AT])
    job_writes = [
        w.request_summary(e)
        for e in w.writes(run.requests)
        if e["objectRef"]["resource"] != "events"
    ]
    assert job_writes == [("patch", "pytorchjobs", namespace, "late")], run.explain()


def test_touch_sends_one_patch_to_the_job_and_writes_nothing_else(control_plane, namespace, sweep):
    w.create_job(control_plane, namespace, "late")
    w.create_job(control_plane, namespace, "not-due", started_ago=10)
    w.create_job(control_plane, namespace, "succeeded", finished="Succeeded")
    w.create_job(control_plane, namespace, "opted-out", annotations={w.EXCLUDE: "true"})
    w.create_job(control_plane, namespace, "no-deadline", deadline=None)

    run = sweep("-n", namespace, "--action", "touch")

    assert run.result.returncode == 0, run.explain()
    job_writes = [
        w.request_summary(e)
        for e in w.writes(run.requests)
        if e["objectRef"]["resource"] != "events"
    ]
    assert job_writes == [("patch", "pytorchjobs", namespace, "late")], run.explain()
    assert {w.request_summary(e)[:2] for e in w.writes(run.requests)} <= {
        ("patch", "pytorchjobs"),
        ("create", "events"),
    }


@pytest.mark.parametrize(
    ("name", "options"),
    [
        pytest.param("not-due", {"started_ago": 10}, id="not-due-untouched"),
        pytest.param("succeeded", {"finished": "Succeeded"}, id="succeeded-untouched"),
        pytest.param("opted-out", {"annotations": {w.EXCLUDE: "true"}}, id="opted-out-untouched"),
        pytest.param("no-deadline", {"deadline": None}, id="no-deadline-untouched"),
    ],
)
def test_touch_leaves_jobs_that_are_not_overdue_unchanged(
    control_plane, namespace, sweep, name, options: dict[str, Any]
):
    before = w.create_job(control_plane, namespace, name, **options)

    run = sweep("-n", namespace, "--action", "touch")

    assert run.result.returncode == 0, run.explain()
    after = w.get_job(control_plane, namespace, "PyTorchJob", name)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_the_touch_records_an_event_from_the_sweeper_on_the_job(control_plane, namespace, sweep):
    job = w.create_job(control_plane, namespace, "late")

    run = sweep("-n", namespace, "--action", "touch")

    assert run.result.returncode == 0, run.explain()
    about_job = w.events_about(control_plane, job)
    assert len(about_job) == 1, about_job
    assert about_job[0]["reportingComponent"] == w.COMPONENT
    assert about_job[0]["source"]["component"] == w.COMPONENT
