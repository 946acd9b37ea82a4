"""The executor's writes for a platform deadline: ``set-deadline`` and a TrainJob failed at a cap.

The cluster is the in-memory fake; the HTTP requests of ``patch_batch_job`` are in
``tests/unit/k8s/test_kube.py``, and the controllers' answers to these writes in
``tests/e2e/test_family_*_platform.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from sweeper.act.executor import Executor
from sweeper.config import DryRun
from sweeper.core.clock import SYSTEM_CLOCK
from sweeper.core.decide import judge
from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION
from sweeper.core.families.trainer import TRAINER_VERSION
from sweeper.core.jobs import DeadlineSource, Job, parse_job
from sweeper.core.kinds import COMPONENT
from sweeper.core.model import Enforcement, Outcome, Plan, Result
from sweeper.core.platform import PlatformRule, apply
from sweeper.stop import Stop
from tests.unit.fakes import FakeCluster, Request
from tests.unit.objects import KIND, NOW, ago, jobset, mpijob, owned, trainjob

POLICY = Enforcement()
CAP = DeadlineSource.CAP
DEFAULT = DeadlineSource.DEFAULT


def rule(seconds: int, source: DeadlineSource) -> PlatformRule:
    if source is DEFAULT:
        return PlatformRule("gpu", default_deadline=seconds)
    return PlatformRule("gpu", max_deadline=seconds)


def listed(raw: dict[str, Any], seconds: int, source: DeadlineSource) -> Job:
    kind = KIND[raw["kind"]]
    version = TRAINER_VERSION if raw["kind"] == "TrainJob" else MPI_OPERATOR_VERSION
    job = apply(parse_job(raw, kind, version), rule(seconds, source))
    assert job.deadline_source is source
    return job


def run(fake: FakeCluster, job: Job, dry_run: DryRun | None = None) -> Outcome:
    entry = judge(job, NOW, POLICY)
    plan = Plan(now=NOW, enforcement=POLICY, entries=(entry,))
    under = rule(job.deadline_seconds or 0, job.deadline_source)
    executor = Executor(
        fake, dry_run=dry_run, stop=Stop(SYSTEM_CLOCK), view=lambda fresh: apply(fresh, under)
    )
    (outcome,) = executor.execute(plan).outcomes
    return outcome


def writes(fake: FakeCluster) -> list[tuple[str, str | None]]:
    return [(r.method, r.name) for r in fake.writes]


def launcher(
    owner: dict[str, Any], *, started_ago: float, own: int | None = None
) -> dict[str, Any]:
    """The batch/v1 Job mpi-operator made as ``owner``'s launcher (newLauncherJob)."""
    raw = owned(f"{owner['metadata']['name']}-launcher", owner, phase=None)
    raw["metadata"]["resourceVersion"] = "7"
    raw["spec"] = {} if own is None else {"activeDeadlineSeconds": own}
    raw["status"] = {"startTime": ago(started_ago), "active": 1}
    return raw


# --- TrainJob ------------------------------------------------------------------------------------


def test_a_trainjob_without_a_deadline_gets_the_effective_one_guarded_then_an_event() -> None:
    fake = FakeCluster()
    raw = fake.add_job(trainjob(deadline=None, created_ago=60))

    outcome = run(fake, listed(raw, 3600, DEFAULT))

    assert outcome.result is Result.DONE
    assert writes(fake) == [("patch", "tj"), ("create-event", "tj")]
    (patch,) = [r.body for r in fake.writes if r.method == "patch"]
    assert patch == {"metadata": {"resourceVersion": "1"}, "spec": {"activeDeadlineSeconds": 3600}}
    assert fake.job("trainjobs", "team-a", "tj")["spec"]["activeDeadlineSeconds"] == 3600
    (event,) = fake.events
    assert (event["type"], event["reason"]) == ("Normal", "DeadlineSet")
    assert "(1h00m, the default of platform rule gpu)" in event["message"]


def test_a_trainjob_that_got_its_own_deadline_meanwhile_is_left_alone() -> None:
    fake = FakeCluster()
    raw = fake.add_job(trainjob(deadline=None, created_ago=60))
    job = listed(raw, 3600, DEFAULT)
    fake.job("trainjobs", "team-a", "tj")["spec"]["activeDeadlineSeconds"] = 60

    outcome = run(fake, job)

    assert (outcome.result, writes(fake)) == (Result.LEFT_ALONE, [])
    assert outcome.detail == "re-read: now skip (operator-enforced)"


def test_a_conflict_rereads_and_writes_again() -> None:
    fake = FakeCluster()
    raw = fake.add_job(trainjob(deadline=None, created_ago=60))
    bumped = False

    def someone_writes_first(request: Request) -> None:
        nonlocal bumped
        if request.method == "patch" and not bumped:
            bumped = True
            fake.job("trainjobs", "team-a", "tj")["metadata"]["resourceVersion"] = "2"

    fake.before = someone_writes_first
    outcome = run(fake, listed(raw, 3600, DEFAULT))

    assert outcome.result is Result.DONE
    patches = [r.body["metadata"]["resourceVersion"] for r in fake.writes if r.method == "patch"]
    assert patches == ["1", "2"]


@pytest.mark.parametrize("dry_run", [DryRun.CLIENT, DryRun.SERVER])
def test_a_dry_run_writes_no_deadline(dry_run: DryRun) -> None:
    fake = FakeCluster()
    raw = fake.add_job(trainjob(deadline=None, created_ago=60))

    outcome = run(fake, listed(raw, 3600, DEFAULT), dry_run)

    assert outcome.body == {
        "metadata": {"resourceVersion": "1"},
        "spec": {"activeDeadlineSeconds": 3600},
    }
    assert "activeDeadlineSeconds" not in fake.job("trainjobs", "team-a", "tj")["spec"]
    assert fake.events == []
    assert all(r.dry_run for r in fake.writes)


def test_a_capped_trainjob_is_failed_as_the_trainer_writes_it_then_its_jobset_goes() -> None:
    fake = FakeCluster()
    raw = fake.add_job(trainjob(deadline=7200, created_ago=700))
    fake.jobsets[("team-a", "tj")] = jobset(raw)
    fake.jobsets[("team-a", "other")] = jobset(raw, owner_uid="uid-someone-else")

    outcome = run(fake, listed(raw, 600, CAP))

    assert outcome.result is Result.DONE
    assert writes(fake) == [
        ("patch-status", "tj"),
        ("delete-jobset", "tj"),
        ("create-event", "tj"),
    ]
    (status,) = [r.body for r in fake.writes if r.method == "patch-status"]
    assert status["metadata"] == {"resourceVersion": "1"}
    (failed,) = status["status"]["conditions"]
    assert (failed["type"], failed["status"], failed["reason"]) == (
        "Failed",
        "True",
        "DeadlineExceeded",
    )
    assert failed["message"].startswith(
        "TrainJob exceeded its active deadline (10m00s, the cap of platform rule gpu)"
    )
    assert failed["message"].endswith(f"(enforced by {COMPONENT})")
    assert "completionTime" not in status["status"]
    assert set(fake.jobsets) == {("team-a", "other")}
    assert outcome.jobsets == ("tj",)
    # Read back, the failure is the sweeper's: its JobSet is reclaimed at once, never waited for.
    again = listed(fake.job("trainjobs", "team-a", "tj"), 600, CAP)
    assert (again.finished, again.failed_by_deadline, again.failed_by_sweeper) == (
        "Failed",
        True,
        True,
    )


# --- MPIJob --------------------------------------------------------------------------------------


def test_the_launcher_gets_the_seconds_that_fall_on_the_effective_instant_from_its_start() -> None:
    fake = FakeCluster()
    raw = fake.add_job(mpijob(deadline=7200, started_ago=900))
    fake.batch_jobs[("team-a", "mpi-launcher")] = launcher(raw, started_ago=880.5, own=7200)

    outcome = run(fake, listed(raw, 600, CAP))

    assert outcome.result is Result.DONE
    assert writes(fake) == [("patch-batch-job", "mpi-launcher"), ("create-event", "mpi")]
    # Started 19.5 s after the MPIJob: 580.5 s from it is the instant, rounded up.
    assert fake.batch_jobs[("team-a", "mpi-launcher")]["spec"]["activeDeadlineSeconds"] == 581
    (patch,) = [r.body for r in fake.writes if r.method == "patch-batch-job"]
    assert patch["metadata"] == {"resourceVersion": "7"}
    assert "patch-status" not in [r.method for r in fake.requests]
    (event,) = fake.events
    assert (event["reason"], event["involvedObject"]["kind"]) == ("DeadlineSet", "MPIJob")


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        pytest.param(
            lambda j: j["spec"].update(activeDeadlineSeconds=300),
            "own activeDeadlineSeconds 300 comes first",
            id="its-own-is-earlier",
        ),
        pytest.param(
            lambda j: j["status"].update(
                conditions=[{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]
            ),
            "launcher Job is Failed",
            id="finished",
        ),
        pytest.param(
            lambda j: j["metadata"]["ownerReferences"][0].update(uid="uid-other"),
            "not controlled by this MPIJob",
            id="not-its-own",
        ),
        pytest.param(lambda j: j["status"].pop("startTime"), "has not started", id="not-started"),
    ],
)
def test_a_launcher_that_needs_no_deadline_is_left_alone(change: Any, detail: str) -> None:
    fake = FakeCluster()
    raw = fake.add_job(mpijob(deadline=None, started_ago=900))
    fake.batch_jobs[("team-a", "mpi-launcher")] = launcher(raw, started_ago=890)
    change(fake.batch_jobs[("team-a", "mpi-launcher")])

    outcome = run(fake, listed(raw, 600, DEFAULT))

    assert (outcome.result, writes(fake)) == (Result.LEFT_ALONE, [])
    assert detail in outcome.detail


def test_a_gang_with_no_launcher_is_failed_as_mpi_operator_records_it_then_its_workers_go() -> None:
    fake = FakeCluster()
    raw = fake.add_job(mpijob(deadline=None, started_ago=900, waits=True))
    fake.add_pod(owned("mpi-worker-0", raw))

    outcome = run(fake, listed(raw, 600, DEFAULT))

    assert outcome.result is Result.DONE
    assert writes(fake) == [
        ("patch-status", "mpi"),
        ("delete-pod", "mpi-worker-0"),
        ("create-event", "mpi"),
    ]
    assert outcome.entry.reason == "no-launcher"
    status = fake.job("mpijobs", "team-a", "mpi")["status"]
    assert status["conditions"][-1]["reason"] == "DeadlineExceeded"
    assert "completionTime" in status
