"""The rules of mpi-operator's MPIJob v2beta1 and Trainer v2's TrainJob, and their timers."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.core.decide import ALWAYS, due_at, explain, judge
from sweeper.core.families import FAMILIES, family_of, table
from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION
from sweeper.core.families.trainer import TRAINER_VERSION
from sweeper.core.jobs import DeadlineSource, parse_job
from sweeper.core.model import Action, ActionKind, ActionMode, Enforcement, PodsMode, Why
from tests.unit.objects import KIND, NOW, mpijob, trainjob

TOUCH = Enforcement()
FAIL = Enforcement(action=ActionMode.FAIL)


def mpi_verdict(raw: dict[str, Any], enforcement: Enforcement = TOUCH) -> tuple[str, str]:
    entry = judge(parse_job(raw, KIND["MPIJob"], MPI_OPERATOR_VERSION), NOW, enforcement)
    return entry.decision, entry.reason


def train_verdict(raw: dict[str, Any], enforcement: Enforcement = TOUCH) -> tuple[str, str]:
    entry = judge(parse_job(raw, KIND["TrainJob"], TRAINER_VERSION), NOW, enforcement)
    return entry.decision, entry.reason


MPI_CASES = [
    # Past it, the executor reads the launcher: mpi-operator copies the deadline only when it
    # creates it (newLauncherJob), so one added or shortened since is in no launcher.
    pytest.param(mpijob(), TOUCH, ("set-deadline", "overdue"), id="launcher-checked-when-due"),
    pytest.param(mpijob(), FAIL, ("set-deadline", "overdue"), id="whatever-the-action"),
    pytest.param(mpijob(started_ago=599), TOUCH, ("skip", "not-yet-due"), id="not-yet-due"),
    pytest.param(
        mpijob(failed="DeadlineExceeded"),
        TOUCH,
        ("terminate-pods", "failed-by-deadline"),
        id="workers-left-by-the-default-cleanPodPolicy",
    ),
    pytest.param(
        mpijob(failed="DeadlineExceeded", clean_pod_policy="None"),
        TOUCH,
        ("terminate-pods", "failed-by-deadline"),
        id="the-deadline-wins-over-a-written-None",
    ),
    pytest.param(
        mpijob(failed="DeadlineExceeded", clean_pod_policy="Running"),
        TOUCH,
        ("skip", "finished"),
        id="mpi-operator-cleans-up-itself",
    ),
    pytest.param(
        mpijob(failed="DeadlineExceeded", completed=False),
        TOUCH,
        ("skip", "finished"),
        id="no-completionTime-it-would-recreate-workers",
    ),
    pytest.param(
        mpijob(failed="BackoffLimitExceeded"),
        TOUCH,
        ("skip", "finished"),
        id="another-failure-is-not-ours",
    ),
    pytest.param(
        mpijob(failed="DeadlineExceeded"),
        Enforcement(terminate_pods=PodsMode.POLICY),
        ("skip", "finished"),
        id="policy-keeps-what-mpi-operator-keeps",
    ),
    pytest.param(
        mpijob(waits=True), TOUCH, ("set-deadline", "overdue"), id="gang-launcher-checked-when-due"
    ),
    pytest.param(
        mpijob(waits=True, started_ago=599),
        TOUCH,
        ("skip", "not-yet-due"),
        id="gang-not-yet-due",
    ),
    pytest.param(
        mpijob(waits=True, deadline=None), TOUCH, ("skip", "no-deadline"), id="gang-no-deadline"
    ),
    pytest.param(
        mpijob(waits=True, started_ago=None), TOUCH, ("skip", "not-started"), id="not-started"
    ),
    pytest.param(mpijob(waits=True, suspend=True), TOUCH, ("skip", "suspended"), id="suspended"),
]


@pytest.mark.parametrize(("raw", "enforcement", "verdict"), MPI_CASES)
def test_an_mpi_operator_mpijob_is_never_touched(
    raw: dict[str, Any], enforcement: Enforcement, verdict: tuple[str, str]
) -> None:
    assert mpi_verdict(raw, enforcement) == verdict


def test_a_gang_past_grace_only_is_due() -> None:
    raw = mpijob(waits=True, started_ago=630)
    assert mpi_verdict(raw, Enforcement(grace=60)) == ("skip", "not-yet-due")
    assert mpi_verdict(raw, Enforcement(grace=30)) == ("set-deadline", "overdue")


def test_an_mpijob_managed_by_another_controller_is_left_alone() -> None:
    raw = mpijob(waits=True)
    raw["spec"]["runPolicy"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    assert mpi_verdict(raw) == ("skip", "managed-elsewhere")
    raw["spec"]["runPolicy"]["managedBy"] = "kubeflow.org/mpi-operator"
    assert mpi_verdict(raw) == ("set-deadline", "overdue")


TRAIN_CASES = [
    pytest.param(
        trainjob(created_ago=650), ("skip", "operator-enforced"), id="controller-fails-it"
    ),
    pytest.param(
        trainjob(created_ago=600 + 121), ("skip", "controller-late"), id="controller-late"
    ),
    pytest.param(trainjob(created_ago=300), ("skip", "not-yet-due"), id="not-yet-due"),
    pytest.param(
        trainjob(created_ago=5000, resumed_ago=300),
        ("skip", "not-yet-due"),
        id="clock-restarts-on-resume",
    ),
    pytest.param(trainjob(deadline=None), ("skip", "no-deadline"), id="no-deadline"),
    pytest.param(
        trainjob(created_ago=5000, complete=True),
        ("skip", "finished"),
        id="complete-is-finished-not-late",
    ),
    pytest.param(trainjob(suspend=True), ("skip", "suspended"), id="suspended"),
    pytest.param(
        trainjob(created_ago=5000, suspend=False, still_suspended=True),
        ("skip", "resuming"),
        id="resumed-the-trainer-restarts-its-clock-first",
    ),
    pytest.param(
        trainjob(failed="DeadlineExceeded", failed_ago=121),
        ("delete-jobset", "jobset-left"),
        id="jobset-left-after-the-grace",
    ),
    pytest.param(
        trainjob(failed="DeadlineExceeded", failed_ago=60),
        ("skip", "reclaim-later"),
        id="within-the-grace",
    ),
    pytest.param(
        trainjob(failed="PodFailed", failed_ago=3600),
        ("skip", "finished"),
        id="v2.3.0-recreates-the-jobset-of-another-failure",
    ),
    pytest.param(
        trainjob(failed="DeadlineExceeded", managed_by="kueue.x-k8s.io/multikueue"),
        ("skip", "managed-elsewhere"),
        id="multikueue",
    ),
]


@pytest.mark.parametrize(("raw", "verdict"), TRAIN_CASES)
def test_a_trainjob_is_its_controllers_to_fail_and_its_left_jobset_the_sweepers(
    raw: dict[str, Any], verdict: tuple[str, str]
) -> None:
    assert train_verdict(raw) == verdict
    assert train_verdict(raw, FAIL) == verdict  # --action is the Training Operator's


def test_the_jobset_is_due_reclaim_grace_after_the_deadline_failure() -> None:
    raw = trainjob(failed="DeadlineExceeded", failed_ago=60)
    job = parse_job(raw, KIND["TrainJob"], TRAINER_VERSION)
    assert job.failed_at is not None
    due = due_at(job, NOW, TOUCH)
    assert due == job.failed_at + timedelta(seconds=120)
    assert isinstance(judge(job, due, TOUCH), Action)
    assert not isinstance(judge(job, due - timedelta(microseconds=1), TOUCH), Action)
    assert due_at(job, NOW, Enforcement(reclaim_grace=0)) == job.failed_at


@pytest.mark.parametrize(
    ("raw", "due"),
    [
        pytest.param(trainjob(), None, id="running-is-the-controllers"),
        pytest.param(trainjob(failed="PodFailed"), None, id="other-failure"),
        pytest.param(
            trainjob(failed="DeadlineExceeded", managed_by="kueue.x-k8s.io/multikueue"),
            None,
            id="multikueue",
        ),
    ],
)
def test_a_trainjob_the_sweeper_never_acts_on_arms_no_timer(raw: dict[str, Any], due: Any) -> None:
    assert due_at(parse_job(raw, KIND["TrainJob"], TRAINER_VERSION), NOW, TOUCH) is due


def test_a_trainjob_failure_without_a_readable_time_is_due_at_once() -> None:
    raw = trainjob(failed="DeadlineExceeded")
    raw["status"]["conditions"][0]["lastTransitionTime"] = "yesterday"
    job = parse_job(raw, KIND["TrainJob"], TRAINER_VERSION)
    assert job.malformed is None
    assert due_at(job, NOW, TOUCH) == ALWAYS


@pytest.mark.parametrize("waits", [False, True], ids=["at-startup", "gang"])
def test_an_mpijob_is_timed_from_its_start_and_its_left_workers_at_once(waits: bool) -> None:
    running = parse_job(mpijob(waits=waits), KIND["MPIJob"], MPI_OPERATOR_VERSION)
    assert running.start_time is not None
    assert due_at(running, NOW, TOUCH) == running.start_time + timedelta(seconds=600)
    left = parse_job(mpijob(failed="DeadlineExceeded"), KIND["MPIJob"], MPI_OPERATOR_VERSION)
    assert due_at(left, NOW, TOUCH) == ALWAYS


def test_a_trainjob_field_of_the_wrong_type_is_named() -> None:
    raw = trainjob()
    raw["spec"]["activeDeadlineSeconds"] = "600"
    job = parse_job(raw, KIND["TrainJob"], TRAINER_VERSION)
    assert job.malformed == "spec.activeDeadlineSeconds"
    assert train_verdict(raw) == ("skip", "malformed")


@pytest.mark.parametrize("family", FAMILIES, ids=[f.NAME for f in FAMILIES])
def test_every_familys_last_rule_decides_and_explain_walks_them_all(family: Any) -> None:
    raws = {
        "training-operator": (mpijob(), KIND["TFJob"], "v1"),
        "mpi-operator": (mpijob(waits=True), KIND["MPIJob"], MPI_OPERATOR_VERSION),
        "trainer": (trainjob(created_ago=700), KIND["TrainJob"], TRAINER_VERSION),
    }
    raw, kind, version = raws[family.NAME]
    job = parse_job(raw, kind, version)
    assert family_of(kind, version) is family
    steps, entry = explain(job, NOW, TOUCH)
    assert [step.rule for step in steps] == [rule.name for rule in table(family)]
    assert entry == judge(job, NOW, TOUCH)
    assert all(step.seen for step in steps)


def test_an_mpi_operator_failure_is_read_from_its_reason() -> None:
    job = parse_job(mpijob(failed="DeadlineExceeded"), KIND["MPIJob"], MPI_OPERATOR_VERSION)
    assert (job.finished, job.failed_by_deadline, job.completed) == ("Failed", True, True)
    assert job.clean_pod_policy is None
    entry = judge(job, NOW, FAIL)
    assert isinstance(entry, Action)
    assert entry.kind is ActionKind.TERMINATE_PODS


@settings(max_examples=200, deadline=None)
@given(
    family=st.sampled_from(["mpi", "trainer"]),
    deadline=st.one_of(st.none(), st.integers(-5, 5000)),
    age=st.integers(0, 10000),
    failed=st.sampled_from([None, "DeadlineExceeded", "Other"]),
    waits=st.booleans(),
    grace=st.integers(0, 300),
    reclaim=st.integers(0, 300),
    offset=st.integers(-400, 400),
)
def test_due_at_is_the_first_instant_judge_acts(
    *,
    family: str,
    deadline: int | None,
    age: int,
    failed: str | None,
    waits: bool,
    grace: int,
    reclaim: int,
    offset: int,
) -> None:
    if family == "mpi":
        raw = mpijob(deadline=deadline, started_ago=age, waits=waits, failed=failed)
        job = parse_job(raw, KIND["MPIJob"], MPI_OPERATOR_VERSION)
    else:
        raw = trainjob(deadline=deadline, created_ago=age, failed=failed, failed_ago=age / 2)
        job = parse_job(raw, KIND["TrainJob"], TRAINER_VERSION)
    enforcement = Enforcement(grace=grace, reclaim_grace=reclaim)
    moment = NOW + timedelta(seconds=offset)
    due = due_at(job, moment, enforcement)
    acts = isinstance(judge(job, moment, enforcement), Action)
    assert acts == (due is not None and moment >= due)


SHARED = [
    "malformed",
    "managed-elsewhere",
    "being-deleted",
    "opted-out",
    "finished",
    "suspended",
    "resuming",
    "no-deadline",
    "duration-overflow",
    "not-started",
]


@pytest.mark.parametrize("family", FAMILIES, ids=[f.NAME for f in FAMILIES])
def test_every_family_is_judged_by_the_shared_rules_first(family: Any) -> None:
    assert [rule.name for rule in table(family)][: len(SHARED)] == SHARED


def test_a_trainjob_kueue_just_resumed_is_left_to_the_trainer_to_restart_its_clock() -> None:
    # Suspended=True still written, suspend no longer set: the trainer has not reconciled the
    # resume, so its clock (the Suspended=False transition) is not where the view reads it.
    raw = trainjob(deadline=360000, created_ago=80 * 3600, suspend=False)
    raw["status"]["conditions"].append(
        {"type": "Suspended", "status": "True", "reason": "Suspended"}
    )
    job = parse_job(raw, KIND["TrainJob"], TRAINER_VERSION)
    capped = replace(job, deadline_seconds=72 * 3600, deadline_source=DeadlineSource.CAP)
    entry = judge(capped, NOW, TOUCH)
    assert (entry.decision, entry.reason) == ("skip", "resuming")
    assert due_at(capped, NOW, TOUCH) is None


def test_the_training_operators_platform_deadline_is_the_sweepers_to_enforce_never_written() -> (
    None
):
    job = parse_job(mpijob(), KIND["TFJob"], "v1")
    family = family_of(job.kind, job.version)
    assert family.carrier(job) == (job.kind.at("v1"), job.name)
    action = Action(job, ActionKind.SET_DEADLINE, Why.PLATFORM_DEADLINE, 0.0)
    assert isinstance(family.deadline_write(action, {}), str)
