"""The compact views built from listed objects."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import timedelta
from typing import Any

import pytest

from sweeper.core.families.trainer import TRAINER_VERSION, TRAINJOB
from sweeper.core.jobs import parse_job, parse_owned
from sweeper.core.kinds import (
    EXCLUDE_ANNOTATION,
    LEGACY_EXCLUDE_ANNOTATION,
    LEGACY_TOUCHED_AT_ANNOTATION,
    TOUCHED_AT_ANNOTATION,
)
from tests.unit.objects import KIND, NOW, ago, condition, deadline_failed, job, owned, trainjob


def test_a_running_job_view() -> None:
    view = parse_job(job(), KIND["PyTorchJob"])
    assert view.malformed is None
    assert (view.namespace, view.name, view.uid) == (
        "team-a",
        "train",
        "uid-PyTorchJob-team-a-train",
    )
    assert view.start_time == NOW - timedelta(hours=2)
    assert view.deadline == NOW - timedelta(hours=1)
    assert (view.finished, view.suspended, view.deleting, view.excluded) == (
        None,
        False,
        False,
        False,
    )


def test_the_touch_annotation_is_read_back() -> None:
    view = parse_job(job(annotations={TOUCHED_AT_ANNOTATION: ago(30)}), KIND["PyTorchJob"])
    assert view.touched_at == NOW - timedelta(seconds=30)


@pytest.mark.parametrize(
    ("annotations", "excluded"),
    [
        pytest.param({EXCLUDE_ANNOTATION: "true"}, True, id="new-key"),
        pytest.param({LEGACY_EXCLUDE_ANNOTATION: " True "}, True, id="old-key"),
        pytest.param(
            {EXCLUDE_ANNOTATION: "false", LEGACY_EXCLUDE_ANNOTATION: "true"},
            True,
            id="old-true-new-false",
        ),
        pytest.param(
            {EXCLUDE_ANNOTATION: "true", LEGACY_EXCLUDE_ANNOTATION: "no"},
            True,
            id="new-true-old-no",
        ),
        pytest.param({LEGACY_EXCLUDE_ANNOTATION: "yes"}, False, id="old-key-not-true"),
        pytest.param({"deadline-sweeper.example.com/exclude": "true"}, False, id="another-prefix"),
    ],
)
def test_either_exclude_key_opts_a_job_out(annotations: dict[str, str], excluded: bool) -> None:
    assert parse_job(job(annotations=annotations), KIND["PyTorchJob"]).excluded is excluded


@pytest.mark.parametrize(
    ("annotations", "touched_ago"),
    [
        pytest.param({TOUCHED_AT_ANNOTATION: ago(30)}, 30, id="new-key"),
        pytest.param({LEGACY_TOUCHED_AT_ANNOTATION: ago(40)}, 40, id="old-key"),
        pytest.param(
            {TOUCHED_AT_ANNOTATION: ago(30), LEGACY_TOUCHED_AT_ANNOTATION: ago(400)},
            30,
            id="new-is-newer",
        ),
        pytest.param(
            {TOUCHED_AT_ANNOTATION: ago(400), LEGACY_TOUCHED_AT_ANNOTATION: ago(30)},
            30,
            id="old-is-newer",
        ),
        pytest.param(
            {TOUCHED_AT_ANNOTATION: "garbled", LEGACY_TOUCHED_AT_ANNOTATION: ago(40)},
            40,
            id="new-garbled",
        ),
        pytest.param(
            {TOUCHED_AT_ANNOTATION: ago(30), LEGACY_TOUCHED_AT_ANNOTATION: "garbled"},
            30,
            id="old-garbled",
        ),
        pytest.param(
            {TOUCHED_AT_ANNOTATION: "x", LEGACY_TOUCHED_AT_ANNOTATION: "y"}, None, id="both-garbled"
        ),
    ],
)
def test_the_later_touch_of_either_key_counts(
    annotations: dict[str, str], touched_ago: int | None
) -> None:
    view = parse_job(job(annotations=annotations), KIND["PyTorchJob"])
    expected = None if touched_ago is None else NOW - timedelta(seconds=touched_ago)
    assert view.touched_at == expected


def test_failed_wins_over_succeeded_when_both_are_true() -> None:
    raw = job(conditions=[condition("Succeeded"), *deadline_failed()])
    view = parse_job(raw, KIND["PyTorchJob"])
    assert (view.finished, view.failed_by_deadline) == ("Failed", True)


def test_the_end_of_a_finished_job_is_its_condition_turning_true() -> None:
    succeeded = parse_job(job(conditions=[condition("Succeeded")]), KIND["PyTorchJob"])
    assert succeeded.finished_at == NOW - timedelta(seconds=60)
    failed = condition("Failed") | {"lastTransitionTime": "2024-05-01T11:00:00Z"}
    both = parse_job(job(conditions=[condition("Succeeded"), failed]), KIND["PyTorchJob"])
    assert both.finished_at == NOW - timedelta(hours=1)
    assert parse_job(job(), KIND["PyTorchJob"]).finished_at is None


@pytest.mark.parametrize(
    ("labels", "queued"),
    [
        pytest.param({"kueue.x-k8s.io/queue-name": "team-a"}, True, id="kueue-label"),
        pytest.param({"kueue.x-k8s.io/queue-name": 3}, False, id="not-a-name"),
        pytest.param({"app": "x"}, False, id="other-labels"),
        pytest.param("labels", False, id="labels-not-a-mapping"),
    ],
)
def test_a_kueue_job_is_queued(labels: object, queued: bool) -> None:
    raw = job()
    raw["metadata"]["labels"] = labels
    assert parse_job(raw, KIND["PyTorchJob"]).queued is queued


@pytest.mark.parametrize(
    ("conditions", "by_deadline", "by_sweeper"),
    [
        pytest.param(deadline_failed(), True, False, id="the-operator-failed-it"),
        pytest.param(deadline_failed(by_sweeper=True), True, True, id="the-sweeper-failed-it"),
        pytest.param([condition("Failed", message="OOMKilled")], False, False, id="other-failure"),
    ],
)
def test_who_failed_a_job_by_its_deadline(
    conditions: list[dict[str, Any]], by_deadline: bool, by_sweeper: bool
) -> None:
    view = parse_job(job(conditions=conditions), KIND["PyTorchJob"])
    assert (view.failed_by_deadline, view.failed_by_sweeper) == (by_deadline, by_sweeper)


def test_a_malformed_view_keeps_the_identity_it_could_read() -> None:
    view = parse_job(job(deadline="soon"), KIND["TFJob"])
    assert (view.name, view.namespace, view.malformed) == (
        "train",
        "team-a",
        "spec.runPolicy.activeDeadlineSeconds",
    )


def test_no_deadline_no_start_means_no_deadline_instant() -> None:
    assert parse_job(job(deadline=None), KIND["TFJob"]).deadline is None
    assert parse_job(job(started_ago=None), KIND["TFJob"]).deadline is None


def test_owned_objects_read_the_controller_reference() -> None:
    owner = job()
    pod = parse_owned(owned("w-0", owner, phase="Pending"))
    assert pod is not None
    assert (pod.name, pod.uid, pod.phase, pod.controller_uid) == (
        "w-0",
        "uid-w-0",
        "Pending",
        "uid-PyTorchJob-team-a-train",
    )


def test_unusable_owned_objects_are_ignored() -> None:
    assert parse_owned({"metadata": {"name": "x"}}) is None
    assert parse_owned("pod") is None
    assert parse_owned({"metadata": "x"}) is None


def test_an_owner_reference_that_is_not_the_controller_is_not_ownership() -> None:
    pod = parse_owned(owned("w-0", job(), controller=False))
    assert pod is not None
    assert pod.controller_uid is None


def test_a_view_interns_the_namespace_never_a_name_or_uid() -> None:
    # See tests/unit/k8s/test_decode.py: every job's name and uid interned leaked on 3.12.0-6.
    unique = uuid.uuid4().hex
    namespace = sys.intern(f"ns-{unique}")
    name = sys.intern(f"job-{unique}")
    uid = sys.intern(f"uid-{unique}")
    # Through JSON, so the parser gets its own equal strings, as from the API server.
    raw = json.loads(
        json.dumps(job("PyTorchJob", f"job-{unique}", f"ns-{unique}", uid=f"uid-{unique}"))
    )
    view = parse_job(raw, KIND["PyTorchJob"])
    assert (view.namespace, view.name, view.uid) == (namespace, name, uid)
    assert view.namespace is namespace
    assert view.name is not name
    assert view.uid is not uid


@pytest.mark.parametrize(
    ("kind", "version", "specs", "replicas"),
    [
        pytest.param(
            "TFJob",
            "v1",
            {"Chief": {"replicas": 1}, "Worker": {"replicas": 3}},
            4,
            id="every-role",
        ),
        pytest.param(
            "MPIJob",
            "v2beta1",
            {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}},
            2,
            id="mpi-operator-launcher-is-a-batch-jobs-pod",
        ),
        pytest.param(
            "MPIJob",
            "v1",
            {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}},
            3,
            id="training-operator-mpijob-launcher-is-its-own",
        ),
        pytest.param("TFJob", "v1", {"Worker": {}}, None, id="no-replicas-unknown"),
        pytest.param("TFJob", "v1", {"Worker": {"replicas": "3"}}, None, id="not-a-number"),
        pytest.param("TFJob", "v1", {"Worker": {"replicas": True}}, None, id="a-boolean"),
        pytest.param("TFJob", "v1", {"Worker": {"replicas": -1}}, None, id="negative"),
        pytest.param("TFJob", "v1", {"Worker": None}, None, id="a-role-null"),
        pytest.param("TFJob", "v1", [], None, id="not-a-mapping"),
    ],
)
def test_the_pods_its_controller_creates(
    kind: str, version: str, specs: object, replicas: int | None
) -> None:
    raw = job(kind)
    raw["spec"][KIND[kind].replica_specs] = specs
    view = parse_job(raw, KIND[kind], version)
    assert view.malformed is None
    assert view.replicas == replicas


def test_a_trainjobs_pods_are_not_counted_from_its_spec() -> None:
    assert parse_job(trainjob(), TRAINJOB, TRAINER_VERSION).replicas is None
