"""The ``DeadlineApproaching`` warning: when it is due, for which jobs, its name and its text."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from sweeper.core.jobs import DeadlineSource, Job, parse_job
from sweeper.core.kinds import EXCLUDE_ANNOTATION
from sweeper.core.model import ActionMode, Enforcement, PodsMode
from sweeper.core.warn import (
    event_name,
    explain_warning,
    message,
    source,
    warning_due,
    warning_of,
)
from tests.unit.objects import KIND, NOW, condition, job, mpijob, trainjob

TOUCH = Enforcement()
# A 1 h deadline, 50 min into it: 10 min left.
LEFT_S = 600


def view(raw: dict[str, Any], warn_before: float | None = 900, **fields: Any) -> Job:
    version = raw["apiVersion"].rsplit("/", 1)[1]
    return replace(parse_job(raw, KIND[raw["kind"]], version), warn_before=warn_before, **fields)


def running(**kwargs: Any) -> dict[str, Any]:
    return job(deadline=3600, started_ago=3600 - LEFT_S, **kwargs)


@pytest.mark.parametrize(
    ("warn_before", "now_offset", "due"),
    [
        pytest.param(900, 0, True, id="inside-the-window"),
        pytest.param(LEFT_S, 0, True, id="at-the-instant-exactly"),
        pytest.param(LEFT_S - 1, 0, False, id="a-second-before-the-instant"),
        pytest.param(900, LEFT_S - 1, True, id="a-second-before-the-deadline"),
        pytest.param(900, LEFT_S, False, id="at-the-deadline-the-action-speaks"),
        pytest.param(900, LEFT_S + 60, False, id="past-the-deadline"),
        pytest.param(10 * 3600, 0, True, id="longer-than-the-deadline-due-from-the-start"),
        pytest.param(None, 0, False, id="no-warnBefore"),
    ],
)
def test_warning_is_due_from_its_instant_until_the_deadline(
    warn_before: float | None, now_offset: float, due: bool
) -> None:
    now = NOW + timedelta(seconds=now_offset)
    assert (warning_due(view(running(), warn_before), now, TOUCH) is not None) is due


def test_the_warning_instant_is_the_deadline_less_warn_before() -> None:
    warning = warning_of(view(running(), 300), TOUCH)
    assert warning is not None
    assert warning.deadline == NOW + timedelta(seconds=LEFT_S)
    assert warning.at == warning.deadline - timedelta(seconds=300)


def test_a_huge_warn_before_is_due_from_the_start_not_an_error() -> None:
    warning = warning_of(view(running(), 1e15), TOUCH)
    assert warning is not None
    assert warning.due(NOW)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(running(conditions=[condition("Succeeded")]), id="finished"),
        pytest.param(running(suspend=True), id="suspended"),
        pytest.param(
            running(conditions=[condition("Suspended", "True")]), id="resuming-clock-restarts"
        ),
        pytest.param(running(annotations={EXCLUDE_ANNOTATION: "true"}), id="excluded"),
        pytest.param(running(managed_by="kueue.x-k8s.io/multikueue"), id="managed-elsewhere"),
        pytest.param(running(deleting=True), id="being-deleted"),
        pytest.param(job(deadline=None, started_ago=60), id="no-deadline"),
        pytest.param(job(deadline=3600, started_ago=None), id="not-started"),
        pytest.param(job(deadline="1h", started_ago=60), id="malformed"),
        pytest.param(trainjob(created_ago=60, suspend=True), id="suspended-trainjob"),
    ],
)
def test_no_warning_for_a_job_its_rules_would_not_end(raw: dict[str, Any]) -> None:
    assert warning_of(view(raw, 10 * 3600), TOUCH) is None
    assert warning_due(view(raw, 10 * 3600), NOW, TOUCH) is None


@pytest.mark.parametrize(
    ("raw", "enforcement", "ends"),
    [
        pytest.param(
            running(),
            TOUCH,
            "the sweeper touches it so that the Training Operator fails it; then its Running "
            "and Pending pods are deleted, giving their GPUs back",
            id="v1-touch",
        ),
        pytest.param(
            running(),
            Enforcement(action=ActionMode.AUTO),
            "the sweeper touches it so that the Training Operator fails it (and fails it "
            "itself 2m00s later at most); then its Running and Pending pods are deleted, "
            "giving their GPUs back",
            id="v1-auto",
        ),
        pytest.param(
            running(),
            Enforcement(action=ActionMode.FAIL, terminate_pods=PodsMode.ALL),
            "the sweeper fails it; then all its pods are deleted, giving their GPUs back",
            id="v1-fail-all-pods",
        ),
        pytest.param(
            running(),
            Enforcement(terminate_pods=PodsMode.POLICY),
            "the sweeper touches it so that the Training Operator fails it; then its pods are "
            "kept or deleted as its cleanPodPolicy says",
            id="v1-terminate-pods-policy",
        ),
        pytest.param(
            mpijob(started_ago=60),
            TOUCH,
            "its controller fails it; then its Running and Pending pods are deleted, giving "
            "their GPUs back",
            id="mpi-launcher-job-enforces",
        ),
        pytest.param(
            mpijob(started_ago=60, waits=True),
            TOUCH,
            "its controller fails it (the sweeper, if it has no launcher Job by then); then its "
            "Running and Pending pods are deleted, giving their GPUs back",
            id="mpi-gang-without-launcher",
        ),
        pytest.param(
            trainjob(created_ago=60),
            TOUCH,
            "its controller fails it; then its JobSet is deleted, giving its GPUs back",
            id="trainjob",
        ),
        pytest.param(
            trainjob(created_ago=60),
            Enforcement(reclaim_grace=0.0),
            "its controller fails it; then its JobSet is deleted, giving its GPUs back",
            id="trainjob-no-reclaim-grace",
        ),
    ],
)
def test_the_warning_says_what_the_family_does_at_the_deadline(
    raw: dict[str, Any], enforcement: Enforcement, ends: str
) -> None:
    warning = warning_of(view(raw, 10 * 3600), enforcement)
    assert warning is not None
    assert warning.ends == ends


def test_the_family_is_named_for_the_metric() -> None:
    families = {
        (w.family if (w := warning_of(view(raw, 10 * 3600), TOUCH)) else None)
        for raw in (running(), mpijob(started_ago=60), trainjob(created_ago=60))
    }
    assert families == {"training-operator", "mpi-operator", "trainer"}


DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def test_the_event_name_is_one_per_job_and_deadline() -> None:
    first = view(running(uid="u-1"))
    deadline = first.deadline
    assert deadline is not None
    name = event_name(first, deadline)
    assert name.startswith("train.deadline-approaching.")
    assert DNS_SUBDOMAIN.match(name)
    # Another pass, another replica: the same name.
    assert event_name(view(running(uid="u-1")), deadline) == name
    # A new deadline (a resume, a new rule), a namesake job: a new name.
    assert event_name(first, deadline + timedelta(seconds=1)) != name
    assert event_name(view(running(uid="u-2")), deadline) != name


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("a" * 253, id="longest-subdomain"),
        pytest.param("a" * 220 + "-" + "b" * 32, id="cut-right-after-a-dash"),
        pytest.param("a" * 220 + "." + "b" * 32, id="cut-right-after-a-dot"),
    ],
)
def test_a_long_job_name_still_gives_a_valid_event_name(name: str) -> None:
    long = view(running(name=name))
    assert long.deadline is not None
    made = event_name(long, long.deadline)
    assert len(made) <= 253
    assert DNS_SUBDOMAIN.match(made)


@pytest.mark.parametrize(
    ("deadline_source", "rule", "said"),
    [
        pytest.param(DeadlineSource.JOB, None, "its own activeDeadlineSeconds", id="own"),
        pytest.param(
            DeadlineSource.JOB,
            "gpu",
            "its own activeDeadlineSeconds (platform rule gpu)",
            id="own-within-a-rule",
        ),
        pytest.param(
            DeadlineSource.DEFAULT, "gpu", "the default of platform rule gpu", id="default"
        ),
        pytest.param(DeadlineSource.CAP, "gpu", "the cap of platform rule gpu", id="cap"),
    ],
)
def test_the_source_of_the_deadline(
    deadline_source: DeadlineSource, rule: str | None, said: str
) -> None:
    assert source(view(running(), deadline_source=deadline_source, rule=rule)) == said


def test_the_message_names_the_deadline_when_its_source_and_what_happens() -> None:
    warning = warning_of(view(running(), rule="gpu", deadline_source=DeadlineSource.CAP), TOUCH)
    assert warning is not None
    assert message(warning, NOW) == (
        "deadline 2024-05-01T12:10:00Z (in 10m00s), set by the cap of platform rule gpu: "
        "the sweeper fails it; then its Running and Pending pods are deleted, giving their "
        "GPUs back"
    )


def test_a_v1_deadline_the_job_does_not_carry_is_said_to_be_failed_by_the_sweeper() -> None:
    # The operator reads only its own field: a touch cannot end it, whatever --action.
    own = warning_of(view(running(), rule="gpu"), TOUCH)
    default = warning_of(view(running(), rule="gpu", deadline_source=DeadlineSource.DEFAULT), TOUCH)
    assert own is not None
    assert default is not None
    assert own.ends.startswith("the sweeper touches it")
    assert default.ends.startswith("the sweeper fails it;")


@pytest.mark.parametrize(
    ("raw", "now_offset", "said"),
    [
        pytest.param(
            running(),
            -600,
            "warnBefore 15m00s: DeadlineApproaching at 2024-05-01T11:55:00Z "
            "(in 5m00s), Event train.deadline-approaching.",
            id="ahead",
        ),
        pytest.param(
            running(),
            0,
            "warnBefore 15m00s: DeadlineApproaching due since "
            "2024-05-01T11:55:00Z, Event train.deadline-approaching.",
            id="due",
        ),
        pytest.param(
            running(), LEFT_S, "warnBefore 15m00s: none once the deadline is reached", id="past"
        ),
        pytest.param(
            running(suspend=True),
            0,
            "warnBefore 15m00s: no warning, its rules would not end it at a deadline",
            id="not-ended",
        ),
    ],
)
def test_explain_says_when_the_warning_falls(
    raw: dict[str, Any], now_offset: float, said: str
) -> None:
    seen = explain_warning(view(raw), NOW + timedelta(seconds=now_offset), TOUCH)
    assert seen.startswith(said)
