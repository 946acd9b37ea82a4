"""The status document of ``--action fail``, field by field against docs/operator.md."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from sweeper.core.families import KINDS
from sweeper.core.jobs import parse_job
from sweeper.core.kinds import (
    EXCLUDE_ANNOTATION,
    LEGACY_TOUCHED_AT_ANNOTATION,
    TOUCHED_AT_ANNOTATION,
)
from sweeper.core.patches import failed_status, failure_message, status_patch, touch_patch
from tests.unit.objects import KIND, NOW, ago, condition, job, running_conditions

PYTORCH = KIND["PyTorchJob"]
NOW_STAMP = "2024-05-01T12:00:00Z"


def running_status() -> dict[str, Any]:
    status: dict[str, Any] = job()["status"]
    return status


def test_completion_time_is_set_to_now_when_unset() -> None:
    assert failed_status(PYTORCH, "train", running_status(), NOW)["completionTime"] == NOW_STAMP


def test_an_existing_completion_time_is_kept() -> None:
    status = {**running_status(), "completionTime": ago(30)}
    assert "completionTime" not in failed_status(PYTORCH, "train", status, NOW)


def test_the_running_condition_only_flips_its_status() -> None:
    before = running_status()["conditions"][1]
    after = failed_status(PYTORCH, "train", running_status(), NOW)["conditions"][1]
    assert after == {**before, "status": "False"}


def test_other_conditions_are_kept_verbatim_and_in_order() -> None:
    status = running_status()
    status["conditions"].append(condition("Restarting", "False"))
    conditions = failed_status(PYTORCH, "train", status, NOW)["conditions"]
    assert [c["type"] for c in conditions] == ["Created", "Running", "Restarting", "Failed"]
    assert conditions[0] == status["conditions"][0]
    assert conditions[2] == status["conditions"][2]


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_the_failed_condition_is_the_operators_with_the_sweeper_named(kind: Any) -> None:
    failed = failed_status(kind, "bert", running_status(), NOW)["conditions"][-1]
    assert failed == {
        "type": "Failed",
        "status": "True",
        "reason": f"{kind.name}Failed",
        "message": "Job bert has failed because it was active longer than specified deadline"
        " (enforced by kubeflow-deadline-sweeper)",
        "lastUpdateTime": NOW_STAMP,
        "lastTransitionTime": NOW_STAMP,
    }


def test_times_are_whole_seconds_utc_with_z_as_the_operator_writes() -> None:
    now = NOW + timedelta(microseconds=987654)
    failed = failed_status(PYTORCH, "train", running_status(), now)["conditions"][-1]
    assert failed["lastUpdateTime"] == failed["lastTransitionTime"] == NOW_STAMP


def test_a_previous_failed_false_condition_is_replaced_not_duplicated() -> None:
    status = running_status()
    status["conditions"].append(condition("Failed", "False"))
    conditions = failed_status(PYTORCH, "train", status, NOW)["conditions"]
    assert [(c["type"], c["status"]) for c in conditions] == [
        ("Created", "True"),
        ("Running", "False"),
        ("Failed", "True"),
    ]


def test_a_job_without_conditions_gets_just_the_failed_one() -> None:
    document = failed_status(PYTORCH, "train", {"startTime": ago(100)}, NOW)
    assert [c["type"] for c in document["conditions"]] == ["Failed"]


def test_only_conditions_and_completion_time_are_written() -> None:
    # A merge patch leaves the rest of the status (startTime, replicaStatuses...) untouched.
    assert set(failed_status(PYTORCH, "train", running_status(), NOW)) == {
        "conditions",
        "completionTime",
    }


def test_the_status_patch_is_guarded_by_the_resource_version() -> None:
    raw = job(resource_version="4242")
    patch = status_patch(PYTORCH, raw, NOW)
    assert patch == {
        "metadata": {"resourceVersion": "4242"},
        "status": failed_status(PYTORCH, "train", raw["status"], NOW),
    }


def test_the_input_status_is_not_mutated() -> None:
    status = running_status()
    snapshot = repr(status)
    failed_status(PYTORCH, "train", status, NOW)
    assert repr(status) == snapshot


def test_a_failed_job_is_finished_by_deadline_once_the_document_is_applied() -> None:
    raw = job()
    raw["status"].update(status_patch(PYTORCH, raw, NOW)["status"])
    parsed = parse_job(raw, PYTORCH)
    assert (parsed.finished, parsed.failed_by_deadline) == ("Failed", True)


def test_the_message_extends_the_operators() -> None:
    assert failure_message("x").startswith(
        "Job x has failed because it was active longer than specified deadline"
    )


def test_touch_patch_sets_only_the_sweeper_annotation_and_drops_the_old_key() -> None:
    # The old key goes in the same patch (null in a merge patch): one stamp per job afterwards.
    assert touch_patch(NOW + timedelta(microseconds=5)) == {
        "metadata": {
            "annotations": {TOUCHED_AT_ANNOTATION: NOW_STAMP, LEGACY_TOUCHED_AT_ANNOTATION: None}
        }
    }


def test_the_annotation_keys_are_the_projects_own_and_fit_the_key_limits() -> None:
    # A qualified key: a DNS subdomain prefix (<= 253, labels <= 63) and a name <= 63.
    for key in (TOUCHED_AT_ANNOTATION, EXCLUDE_ANNOTATION):
        prefix, name = key.split("/")
        assert prefix == "kubeflow-deadline-sweeper.github.io"
        assert len(prefix) <= 253 and all(len(label) <= 63 for label in prefix.split("."))
        assert len(name) <= 63


def test_running_conditions_fixture_matches_the_operator_shape() -> None:
    # Guard for the fixtures above: the operator writes type/status/reason/message and times.
    assert set(running_conditions(NOW)[0]) == {
        "type",
        "status",
        "reason",
        "message",
        "lastUpdateTime",
        "lastTransitionTime",
    }
