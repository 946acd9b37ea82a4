"""A platform rule's deadline on mpi-operator's MPIJobs and Trainer's TrainJobs (docs/policy.md).

The views are built as ``sweeper.core.platform.apply`` leaves them: ``deadline_seconds`` the
effective deadline, ``declared_seconds`` the job's own, ``deadline_source`` and ``rule``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.core.decide import ALWAYS, due_at, explain, judge
from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION
from sweeper.core.families.trainer import TRAINER_VERSION
from sweeper.core.jobs import DeadlineSource, Job, parse_job
from sweeper.core.model import Action, ActionMode, Enforcement
from tests.unit.objects import KIND, NOW, mpijob, trainjob

DEFAULT = DeadlineSource.DEFAULT
CAP = DeadlineSource.CAP
JOB = DeadlineSource.JOB
TOUCH = Enforcement()


def under(job: Job, seconds: int, source: DeadlineSource, rule: str = "gpu") -> Job:
    """``job`` under a platform rule whose effective deadline is ``seconds`` from ``source``."""
    return replace(job, deadline_seconds=seconds, deadline_source=source, rule=rule)


def train(raw: dict[str, Any], seconds: int = 600, source: DeadlineSource = DEFAULT) -> Job:
    return under(parse_job(raw, KIND["TrainJob"], TRAINER_VERSION), seconds, source)


def mpi(raw: dict[str, Any], seconds: int = 600, source: DeadlineSource = DEFAULT) -> Job:
    return under(parse_job(raw, KIND["MPIJob"], MPI_OPERATOR_VERSION), seconds, source)


def verdict(job: Job, enforcement: Enforcement = TOUCH) -> tuple[str, str]:
    entry = judge(job, NOW, enforcement)
    return entry.decision, entry.reason


TRAIN_CASES = [
    pytest.param(
        train(trainjob(deadline=None, created_ago=10)),
        ("set-deadline", "platform-deadline"),
        id="default-written-at-once",
    ),
    pytest.param(
        train(trainjob(deadline=None, created_ago=5000)),
        ("set-deadline", "platform-deadline"),
        id="default-written-even-past-it-the-trainer-fails-it-then",
    ),
    pytest.param(
        train(trainjob(deadline=None, created_ago=10), source=CAP),
        ("set-deadline", "platform-deadline"),
        id="cap-without-its-own-is-written-too",
    ),
    pytest.param(
        train(trainjob(deadline=7200, created_ago=300), source=CAP),
        ("skip", "not-yet-due"),
        id="cap-below-its-own-not-yet",
    ),
    pytest.param(
        train(trainjob(deadline=7200, created_ago=600), source=CAP),
        ("fail", "platform-deadline"),
        id="cap-below-its-own-at-the-instant",
    ),
    pytest.param(
        train(trainjob(deadline=300, created_ago=350), 300, JOB),
        ("skip", "operator-enforced"),
        id="its-own-within-the-rule-is-the-trainers",
    ),
    pytest.param(
        train(trainjob(deadline=None, suspend=True)),
        ("skip", "suspended"),
        id="suspended-waits-for-resume",
    ),
    pytest.param(
        # Kueue admitted it: its clock restarts when the trainer flips Suspended to False.
        train(
            trainjob(deadline=7200, created_ago=5000, suspend=False, still_suspended=True),
            source=CAP,
        ),
        ("skip", "resuming"),
        id="cap-waits-for-the-trainer-to-restart-its-clock",
    ),
    pytest.param(
        train(trainjob(deadline=None, created_ago=5000, still_suspended=True)),
        ("skip", "resuming"),
        id="default-waits-for-the-trainer-to-restart-its-clock",
    ),
    pytest.param(
        train(trainjob(deadline=None, managed_by="kueue.x-k8s.io/multikueue")),
        ("skip", "managed-elsewhere"),
        id="multikueue",
    ),
    pytest.param(
        train(trainjob(deadline=None, failed="PodFailed")),
        ("skip", "finished"),
        id="failed-otherwise",
    ),
]


@pytest.mark.parametrize(("job", "expected"), TRAIN_CASES)
def test_a_trainjob_gets_a_platform_deadline_it_lacks_and_is_failed_at_a_cap_below_its_own(
    job: Job, expected: tuple[str, str]
) -> None:
    assert verdict(job) == expected
    assert verdict(job, Enforcement(action=ActionMode.FAIL)) == expected


def test_a_complete_trainjob_is_finished_not_late_and_gets_no_deadline() -> None:
    # The trainer copies JobSet's Completed as "Complete" (jobset.go, Status); read as
    # running, a Complete TrainJob past its deadline was reported controller-late.
    assert verdict(train(trainjob(created_ago=5000, complete=True), 600, JOB)) == (
        "skip",
        "finished",
    )
    assert verdict(train(trainjob(deadline=None, complete=True))) == ("skip", "finished")


def test_a_cap_is_due_at_the_trainers_instant_and_a_missing_deadline_at_once() -> None:
    capped = train(trainjob(deadline=7200, created_ago=300), source=CAP)
    assert capped.start_time is not None
    due = due_at(capped, NOW, Enforcement(grace=5))
    assert due == capped.start_time + timedelta(seconds=605)
    assert isinstance(judge(capped, due, Enforcement(grace=5)), Action)
    assert not isinstance(
        judge(capped, due - timedelta(microseconds=1), Enforcement(grace=5)), Action
    )
    assert due_at(train(trainjob(deadline=None)), NOW, TOUCH) == ALWAYS
    assert due_at(train(trainjob(deadline=None, suspend=True)), NOW, TOUCH) is None


def test_the_trainers_clock_restarts_on_resume_for_the_cap_too() -> None:
    resumed = train(trainjob(deadline=7200, created_ago=5000, resumed_ago=300), source=CAP)
    assert verdict(resumed) == ("skip", "not-yet-due")


def test_the_jobset_of_a_trainjob_the_sweeper_failed_goes_at_once() -> None:
    # The trainer deletes the JobSet only at its own deadline: nothing to wait for.
    raw = trainjob(failed="DeadlineExceeded", failed_ago=1)
    raw["status"]["conditions"][-1]["message"] += " (enforced by kubeflow-deadline-sweeper)"
    job = train(raw, 600, JOB)
    assert verdict(job) == ("delete-jobset", "jobset-left")
    assert due_at(job, NOW, TOUCH) == ALWAYS
    # The trainer's own failure still gets --reclaim-grace to delete it itself.
    assert verdict(train(trainjob(failed="DeadlineExceeded", failed_ago=1), 600, JOB)) == (
        "skip",
        "reclaim-later",
    )


MPI_CASES = [
    pytest.param(
        mpi(mpijob(deadline=None, started_ago=300)),
        ("skip", "not-yet-due"),
        id="default-not-yet",
    ),
    pytest.param(
        mpi(mpijob(deadline=None, started_ago=600)),
        ("set-deadline", "platform-deadline"),
        id="default-at-the-instant",
    ),
    pytest.param(
        mpi(mpijob(deadline=7200, started_ago=900), source=CAP),
        ("set-deadline", "platform-deadline"),
        id="cap-below-its-own",
    ),
    pytest.param(
        mpi(mpijob(deadline=None, started_ago=900, waits=True)),
        ("set-deadline", "platform-deadline"),
        id="gang-launcher-or-not-is-the-executors-to-see",
    ),
    pytest.param(
        mpi(mpijob(deadline=300, started_ago=900), 300, JOB),
        ("set-deadline", "overdue"),
        id="its-own-the-executor-reads-the-launcher-for",
    ),
    pytest.param(
        mpi(mpijob(deadline=300, started_ago=900, waits=True), 300, JOB),
        ("set-deadline", "overdue"),
        id="its-own-gang-too",
    ),
    pytest.param(
        mpi(mpijob(deadline=None, started_ago=None)),
        ("skip", "not-started"),
        id="not-started",
    ),
    pytest.param(
        mpi(mpijob(deadline=None, suspend=True)),
        ("skip", "suspended"),
        id="suspended",
    ),
    pytest.param(
        mpi(mpijob(deadline=None, failed="DeadlineExceeded")),
        ("terminate-pods", "failed-by-deadline"),
        id="then-the-workers-go",
    ),
]


@pytest.mark.parametrize(("job", "expected"), MPI_CASES)
def test_an_mpijob_gets_a_platform_deadline_through_its_launcher_at_the_instant(
    job: Job, expected: tuple[str, str]
) -> None:
    assert verdict(job) == expected
    assert verdict(job, Enforcement(action=ActionMode.FAIL)) == expected


def test_explain_shows_the_platform_rule_of_each_family() -> None:
    for job in (
        train(trainjob(deadline=7200, created_ago=600), source=CAP),
        mpi(mpijob(deadline=None, started_ago=900)),
    ):
        steps, entry = explain(job, NOW, TOUCH)
        name = "launcher-deadline" if job.kind.name == "MPIJob" else "platform-deadline"
        (step,) = [s for s in steps if s.rule == name]
        assert step.entry == entry
        assert "platform rule gpu" in step.seen
        assert ("the cap" if job.deadline_source is CAP else "the default") in step.seen


@settings(max_examples=200, deadline=None)
@given(
    family=st.sampled_from(["mpi", "trainer"]),
    declared=st.one_of(st.none(), st.integers(1, 5000)),
    effective=st.integers(1, 5000),
    source=st.sampled_from(list(DeadlineSource)),
    age=st.integers(0, 10000),
    waits=st.booleans(),
    resuming=st.booleans(),
    grace=st.integers(0, 300),
    offset=st.integers(-400, 400),
)
def test_due_at_is_the_first_instant_judge_acts_under_a_rule(
    *,
    family: str,
    declared: int | None,
    effective: int,
    source: DeadlineSource,
    age: int,
    waits: bool,
    resuming: bool,
    grace: int,
    offset: int,
) -> None:
    if family == "mpi":
        job = mpi(mpijob(deadline=declared, started_ago=age, waits=waits), effective, source)
    else:
        raw = trainjob(deadline=declared, created_ago=age, still_suspended=resuming)
        job = train(raw, effective, source)
    enforcement = Enforcement(grace=grace)
    moment = NOW + timedelta(seconds=offset)
    due = due_at(job, moment, enforcement)
    acts = isinstance(judge(job, moment, enforcement), Action)
    assert acts == (due is not None and moment >= due)
