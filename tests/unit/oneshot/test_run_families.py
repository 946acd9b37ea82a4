"""A pass over mpi-operator's MPIJobs and Trainer's TrainJobs: what each family reclaims."""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest

from sweeper.config import Config, DryRun, OutputFormat
from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION, MPIJOB
from sweeper.core.families.trainer import TRAINER_VERSION, TRAINJOB
from sweeper.k8s.cluster import ServedKind
from sweeper.oneshot.run import run
from tests.unit.fakes import FakeCluster
from tests.unit.objects import NOW, jobset, mpijob, owned, trainjob
from tests.unit.oneshot.test_run import Ticker, sweep
from tests.unit.test_act_platform import launcher

SERVED = (ServedKind(MPIJOB, MPI_OPERATOR_VERSION), ServedKind(TRAINJOB, TRAINER_VERSION))
JSON_OUT = Config(output=OutputFormat.JSON)


def cluster(*raws: dict[str, Any]) -> FakeCluster:
    fake = FakeCluster(served=SERVED, date=NOW)
    for raw in raws:
        fake.add_job(raw)
    return fake


def writes(fake: FakeCluster) -> list[tuple[str, str | None]]:
    return [(r.method, r.name) for r in fake.writes]


def test_the_workers_mpi_operator_keeps_after_the_deadline_are_deleted_not_its_finished_ones() -> (
    None
):
    fake = cluster()
    raw = fake.add_job(mpijob(failed="DeadlineExceeded"))
    fake.add_pod(owned("mpi-worker-0", raw))
    fake.add_pod(owned("mpi-worker-1", raw, phase="Pending"))
    fake.add_pod(owned("mpi-worker-2", raw, phase="Succeeded"))
    # The launcher's pod is the launcher Job's, not the MPIJob's.
    fake.add_pod(owned("mpi-launcher-x", raw, owner_uid="uid-launcher-job"))

    code, [report] = sweep(fake, JSON_OUT)

    assert code == 0
    assert writes(fake) == [
        ("delete-pod", "mpi-worker-0"),
        ("delete-pod", "mpi-worker-1"),
        ("create-event", "mpi"),
    ]
    (record,) = report["jobs"]
    assert (record["apiVersion"], record["decision"], record["result"]) == (
        "kubeflow.org/v2beta1",
        "terminate-pods",
        "done",
    )
    assert fake.events[0]["involvedObject"]["apiVersion"] == "kubeflow.org/v2beta1"


def test_a_gang_without_a_launcher_is_failed_as_mpi_operator_records_it_then_its_workers_go() -> (
    None
):
    fake = cluster()
    raw = fake.add_job(mpijob(waits=True))
    fake.add_pod(owned("mpi-worker-0", raw))

    code, [report] = sweep(fake, JSON_OUT)

    assert code == 0
    assert writes(fake) == [
        ("patch-status", "mpi"),
        ("delete-pod", "mpi-worker-0"),
        ("create-event", "mpi"),
    ]
    (status,) = [r.body for r in fake.writes if r.method == "patch-status"]
    assert status["metadata"]["resourceVersion"] == "1"  # changed since: 409, read again
    failed = status["status"]["conditions"][-1]
    assert (failed["type"], failed["status"], failed["reason"]) == (
        "Failed",
        "True",
        "DeadlineExceeded",
    )
    assert "no launcher Job" in failed["message"]
    assert "completionTime" in status["status"]
    assert report["jobs"][0]["reason"] == "no-launcher"


@pytest.mark.parametrize("waits", [False, True], ids=["at-startup", "gang"])
def test_a_launcher_carrying_the_mpijobs_own_deadline_is_left_to_the_job_controller(
    waits: bool,
) -> None:
    # Started 10 s after the MPIJob: the Job controller counts the 600 s from there.
    fake = cluster()
    raw = fake.add_job(mpijob(waits=waits, deadline=600, started_ago=900))
    fake.batch_jobs[("team-a", "mpi-launcher")] = launcher(raw, started_ago=890, own=600)

    code, [report] = sweep(fake, JSON_OUT)

    assert code == 0
    assert writes(fake) == []
    (record,) = report["jobs"]
    assert (record["decision"], record["result"]) == ("set-deadline", "left-alone")
    assert "carries activeDeadlineSeconds 600" in record["detail"]


@pytest.mark.parametrize("launcher_own", [None, 360000], ids=["added-later", "shortened"])
def test_a_deadline_the_launcher_does_not_carry_is_written_into_it_without_rules(
    launcher_own: int | None,
) -> None:
    # mpi-operator copies the MPIJob's deadline only when it creates the launcher
    # (newLauncherJob): one added or shortened since is in no launcher.
    fake = cluster()
    raw = fake.add_job(mpijob(deadline=7200, started_ago=3 * 3600))
    fake.batch_jobs[("team-a", "mpi-launcher")] = launcher(
        raw, started_ago=3 * 3600 - 10, own=launcher_own
    )

    code, [report] = sweep(fake, JSON_OUT)

    assert code == 0
    assert writes(fake) == [("patch-batch-job", "mpi-launcher"), ("create-event", "mpi")]
    # The MPIJob's instant, counted from the launcher's start 10 s later.
    assert fake.batch_jobs[("team-a", "mpi-launcher")]["spec"]["activeDeadlineSeconds"] == 7190
    (record,) = report["jobs"]
    assert (record["decision"], record["reason"], record["result"]) == (
        "set-deadline",
        "overdue",
        "done",
    )
    assert record["rule"] is None


def test_the_jobset_the_trainer_left_is_deleted_with_its_uid_and_an_event() -> None:
    fake = cluster()
    raw = fake.add_job(trainjob(failed="DeadlineExceeded", failed_ago=300))
    fake.jobsets[("team-a", "tj")] = jobset(raw)

    code, [report] = sweep(fake, JSON_OUT)

    assert code == 0
    assert writes(fake) == [("delete-jobset", "tj"), ("create-event", "tj")]
    assert fake.jobsets == {}
    (record,) = report["jobs"]
    assert (record["decision"], record["deleted"]) == ("delete-jobset", {"jobsets": ["tj"]})
    event = fake.events[0]
    assert (event["reason"], event["involvedObject"]["apiVersion"]) == (
        "DeadlineJobSetDeleted",
        "trainer.kubeflow.org/v1alpha1",
    )
    assert fake.methods().count("list-jobsets") == 1


def test_a_jobset_that_is_gone_deleting_or_someone_elses_is_never_deleted() -> None:
    fake = cluster()
    gone = fake.add_job(trainjob("gone", failed="DeadlineExceeded"))
    going = fake.add_job(trainjob("going", failed="DeadlineExceeded"))
    fake.jobsets[("team-a", "going")] = jobset(going, deleting=True)
    other = fake.add_job(trainjob("other", failed="DeadlineExceeded"))
    fake.jobsets[("team-a", "other")] = jobset(other, owner_uid="uid-someone-else")
    del gone

    code, [report] = sweep(fake, JSON_OUT)

    assert code == 0
    assert writes(fake) == []
    assert {(j["name"], j["reason"], j["detail"]) for j in report["jobs"]} == {
        (name, "finished", "Failed; its JobSet is gone") for name in ("gone", "going", "other")
    }


def test_a_dry_run_names_the_jobset_it_would_delete_and_writes_nothing() -> None:
    fake = cluster()
    raw = fake.add_job(trainjob(failed="DeadlineExceeded", failed_ago=300))
    fake.jobsets[("team-a", "tj")] = jobset(raw)

    out = io.StringIO()
    code = run(Config(dry_run=DryRun.CLIENT), lambda _config, *, stop: fake, out, clock=Ticker())

    assert code == 0
    assert writes(fake) == []
    assert ("team-a", "tj") in fake.jobsets
    (row,) = [line for line in out.getvalue().splitlines() if line.startswith("TrainJob")]
    assert "delete-jobset (jobset-left)" in row
    assert row.endswith("planned: jobset tj")


def test_the_run_says_whose_mpijob_the_cluster_serves(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    code, _ = sweep(cluster(mpijob()), JSON_OUT)

    assert code == 0
    assert "MPIJob is served at kubeflow.org/v2beta1: mpi-operator's" in caplog.text
