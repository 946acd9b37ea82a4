"""What mpi-operator v0.8.x does at an MPIJob's deadline, on its real binary and no sweeper.

The premises the MPIJob family rests on: mpi-operator copies ``activeDeadlineSeconds`` into
its launcher Job, the real Job controller fails that Job at the deadline, and mpi-operator
then marks the MPIJob Failed with a ``completionTime``; with no ``cleanPodPolicy`` (its
in-memory default is ``None``) the Running workers stay, for good; and deleting them then is
not undone; and with ``launcherCreationPolicy: WaitForWorkersReady``, a gang whose workers
never all get ready has no launcher, so nothing enforces its deadline. "For good" and
"nothing" are checked across a full resync: a restarted mpi-operator lists every
MPIJob afresh and syncs it once, and a sync of a finished MPIJob is where it would clean up.

Pods have no node here: the workers are made Running through ``pods/status``, and the launcher
stays Pending (the Job controller deletes it at the deadline either way).
"""

from __future__ import annotations

import datetime as dt
import re

import pytest

from devcluster import ControlPlane
from tests.e2e import families
from tests.e2e.conftest_families import MPICluster
from tests.e2e.conftest_operator import poll, sleep_until
from tests.e2e.workloads import parse_stamp

pytestmark = [pytest.mark.e2e]

# Long enough for the workers to be made Running before it, even on a busy machine.
ADS = 6
WORKERS = 2


def _failed_mpijob(cluster: MPICluster, namespace: str, clean_pod_policy: str | None) -> str:
    """An MPIJob whose workers ran, past its deadline and Failed; returns its name."""
    cp = cluster.cp
    name = "mpi"
    body = families.mpijob(name, ads=ADS, workers=WORKERS, clean_pod_policy=clean_pod_policy)
    families.create(cp, families.MPIJOBS, namespace, body)
    workers = poll(
        lambda: w if len(w := families.mpi_workers(cp, namespace, name)) == WORKERS else None,
        what=f"mpi-operator to create {WORKERS} workers",
    )
    for pod in workers:
        families.make_running(cp, pod)
    early = families.condition(families.get(cp, families.MPIJOBS, namespace, name), "Failed")
    assert early is None, "premise: the workers ran before the deadline (a slow machine?)"
    poll(
        lambda: families.condition(families.get(cp, families.MPIJOBS, namespace, name), "Failed"),
        timeout=90,
        what="the MPIJob to fail at its deadline",
    )
    return name


def _full_resync(cluster: MPICluster, namespace: str, name: str) -> None:
    """Restart mpi-operator and wait until it has synced the MPIJob once from a fresh list."""
    cluster.mpi_operator.restart()
    cluster.mpi_operator.wait_for_log(
        rf'Finished syncing job "{re.escape(namespace)}/{re.escape(name)}"'
    )


def _running_workers(cp: ControlPlane, namespace: str, name: str) -> list[str]:
    return [
        pod["metadata"]["name"]
        for pod in families.mpi_workers(cp, namespace, name)
        if pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
    ]


@pytest.mark.parametrize(
    ("clean_pod_policy", "workers_left"),
    [
        pytest.param(None, WORKERS, id="no-cleanPodPolicy-workers-stay"),
        # The control: the same run with cleanPodPolicy Running loses its workers, so the
        # first case's assertion tells the two apart.
        pytest.param("Running", 0, id="cleanPodPolicy-Running-workers-go"),
    ],
)
def test_the_job_controller_ends_the_launcher_and_mpi_operator_fails_the_mpijob(
    mpi_cluster: MPICluster,
    family_namespace: str,
    clean_pod_policy: str | None,
    workers_left: int,
) -> None:
    cp, namespace = mpi_cluster.cp, family_namespace

    name = _failed_mpijob(mpi_cluster, namespace, clean_pod_policy)
    _full_resync(mpi_cluster, namespace, name)

    mpijob = families.get(cp, families.MPIJOBS, namespace, name)
    assert mpijob is not None
    failed = families.condition(mpijob, "Failed") or {}
    assert (failed.get("reason"), failed.get("message")) == (
        "DeadlineExceeded",
        families.JOB_DEADLINE_MESSAGE,
    ), "mpi-operator copies the launcher Job's Failed condition"
    assert mpijob["status"].get("completionTime"), "a Failed MPIJob without it is not finished"
    assert "cleanPodPolicy" not in mpijob["spec"]["runPolicy"] or clean_pod_policy, (
        "premise: an omitted cleanPodPolicy stays absent on the stored object"
    )
    launcher = families.get(cp, families.JOBS, namespace, f"{name}-launcher")
    assert launcher is not None
    assert launcher["spec"]["activeDeadlineSeconds"] == ADS
    job_failed = families.condition(launcher, "Failed") or {}
    assert job_failed.get("reason") == "DeadlineExceeded", "the Job controller enforced it"
    assert len(_running_workers(cp, namespace, name)) == workers_left


def test_deleting_the_workers_of_a_failed_mpijob_is_not_undone(
    mpi_cluster: MPICluster, family_namespace: str
) -> None:
    cp, namespace = mpi_cluster.cp, family_namespace
    name = _failed_mpijob(mpi_cluster, namespace, clean_pod_policy=None)
    workers = families.mpi_workers(cp, namespace, name)
    assert len(_running_workers(cp, namespace, name)) == WORKERS, "premise: the workers stayed"

    for pod in workers:
        families.delete_pod(cp, pod)
    _full_resync(mpi_cluster, namespace, name)

    assert families.mpi_workers(cp, namespace, name) == [], "mpi-operator re-created a worker"
    mpijob = families.get(cp, families.MPIJOBS, namespace, name)
    assert families.condition(mpijob, "Failed") is not None, "the MPIJob stays Failed"


def test_a_gang_waiting_for_its_workers_has_no_launcher_and_so_no_deadline(
    mpi_cluster: MPICluster, family_namespace: str
) -> None:
    cp, namespace, name = mpi_cluster.cp, family_namespace, "gang"
    body = families.mpijob(
        name, ads=ADS, workers=WORKERS, launcher_creation_policy="WaitForWorkersReady"
    )
    families.create(cp, families.MPIJOBS, namespace, body)
    workers = poll(
        lambda: w if len(w := families.mpi_workers(cp, namespace, name)) == WORKERS else None,
        what=f"mpi-operator to create {WORKERS} workers",
    )
    families.make_running(cp, workers[0])  # the other never gets ready
    started = poll(
        lambda: (
            (families.get(cp, families.MPIJOBS, namespace, name) or {})
            .get("status", {})
            .get("startTime")
        ),
        what="mpi-operator to write the MPIJob's startTime",
    )

    sleep_until(parse_stamp(started) + dt.timedelta(seconds=ADS + 1))
    _full_resync(mpi_cluster, namespace, name)

    assert families.get(cp, families.JOBS, namespace, f"{name}-launcher") is None
    mpijob = families.get(cp, families.MPIJOBS, namespace, name)
    assert families.condition(mpijob, "Failed") is None, "nothing enforces the deadline"
    assert _running_workers(cp, namespace, name) == [workers[0]["metadata"]["name"]]
