"""The watch mode under ``--policy`` for mpi-operator's MPIJobs and Trainer's TrainJobs.

A stream arms each job at its family's instant under its rule, and the timer's fire writes the
platform deadline where the job's controller enforces it.
"""

from __future__ import annotations

from datetime import timedelta

from sweeper.core.decide import ALWAYS, due_at
from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION, MPIJOB
from sweeper.core.families.trainer import TRAINER_VERSION, TRAINJOB
from sweeper.core.jobs import parse_job
from sweeper.k8s.cluster import ServedKind
from sweeper.watch.inbox import JobKey
from tests.unit.fakes import FakeWatchCluster
from tests.unit.objects import NOW, ago, jobset, mpijob, owned, trainjob
from tests.unit.watch.harness import policy_watcher

SERVED = (ServedKind(MPIJOB, MPI_OPERATOR_VERSION), ServedKind(TRAINJOB, TRAINER_VERSION))


def cluster() -> FakeWatchCluster:
    fake = FakeWatchCluster(served=SERVED, date=NOW)
    fake.add_namespace("team-a", {"tier": "gpu"})
    return fake


def test_a_trainjob_without_a_deadline_is_armed_at_once_and_gets_the_default_written() -> None:
    fake = cluster()
    raw = fake.add_job(trainjob(deadline=None, created_ago=60))
    fake.jobsets[("team-a", "tj")] = jobset(raw)
    w = policy_watcher(fake)
    listed = parse_job(fake.job("trainjobs", "team-a", "tj"), TRAINJOB, TRAINER_VERSION)
    assert due_at(listed, NOW, w.ctx.config.enforcement) is None
    assert due_at(w.ctx.view()(listed), NOW, w.ctx.config.enforcement) == ALWAYS

    w._fire.run(JobKey("TrainJob", "team-a", "tj"), NOW)

    assert [r.method for r in fake.writes] == ["patch", "create-event"]
    assert fake.job("trainjobs", "team-a", "tj")["spec"]["activeDeadlineSeconds"] == 3600
    assert ("team-a", "tj") in fake.jobsets  # the trainer's to end, on its clock


def test_an_mpijobs_launcher_gets_the_default_when_its_timer_fires_at_the_instant() -> None:
    fake = cluster()
    raw = fake.add_job(mpijob(deadline=None, started_ago=3600))
    launcher = owned("mpi-launcher", raw, phase=None)
    launcher["metadata"]["resourceVersion"] = "3"
    launcher["spec"] = {}
    launcher["status"] = {"startTime": ago(3590)}
    fake.batch_jobs[("team-a", "mpi-launcher")] = launcher
    w = policy_watcher(fake)
    listed = parse_job(fake.job("mpijobs", "team-a", "mpi"), MPIJOB, MPI_OPERATOR_VERSION)
    assert listed.start_time is not None
    assert due_at(w.ctx.view()(listed), NOW, w.ctx.config.enforcement) == NOW

    w._fire.run(JobKey("MPIJob", "team-a", "mpi"), NOW)

    assert [r.method for r in fake.writes] == ["patch-batch-job", "create-event"]
    # The launcher started 10 s after the MPIJob: 3590 s from it is the MPIJob's hour.
    assert launcher["spec"]["activeDeadlineSeconds"] == 3590
    assert (
        due_at(listed, NOW, w.ctx.config.enforcement) is None
    )  # no rule, no deadline: never armed
    assert listed.start_time + timedelta(hours=1) == NOW
