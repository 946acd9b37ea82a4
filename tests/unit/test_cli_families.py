"""``--family``: the controller families a run sweeps, whatever kind each serves.

MPIJob is the Training Operator's kind at ``v1`` and mpi-operator's at ``v2beta1``, so
``--kind MPIJob`` alone cannot leave mpi-operator's MPIJobs out; the chart passes its
``families`` value as ``--family`` and grants RBAC for those families only.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION, MPIJOB
from sweeper.core.families.trainer import TRAINER_VERSION, TRAINJOB
from sweeper.core.families.training_operator import PYTORCHJOB
from sweeper.core.kinds import VERSION
from sweeper.k8s.cluster import ServedKind
from tests.unit.fakes import FakeWatchCluster
from tests.unit.objects import NOW, job, mpijob, owned, trainjob
from tests.unit.test_cli import Harness

SERVED = (
    ServedKind(PYTORCHJOB, VERSION),
    ServedKind(MPIJOB, MPI_OPERATOR_VERSION),
    ServedKind(TRAINJOB, TRAINER_VERSION),
)


def mpi_operator_cluster() -> Harness:
    """PyTorchJobs, TrainJobs and mpi-operator's MPIJobs, each with one past its deadline."""
    fake = FakeWatchCluster(served=SERVED, date=NOW)
    fake.add_job(job(name="pt"))
    done = fake.add_job(mpijob("done", failed="DeadlineExceeded"))
    fake.add_pod(owned("done-worker-0", done))
    fake.add_job(mpijob("gang", waits=True))
    fake.add_job(trainjob("tj", deadline=600, created_ago=7200))
    return Harness(fake)


def judged(result: Any) -> list[tuple[str, str]]:
    assert result.exit_code == 0, result.stderr
    return [(j["kind"], j["name"]) for j in json.loads(result.stdout)["jobs"]]


@pytest.mark.parametrize(
    ("args", "env", "kinds"),
    [
        pytest.param(
            # What the chart rendered for `families: [training-operator]` before --family.
            ["--family", "training-operator", "--kind", "PyTorchJob", "--kind", "MPIJob"],
            {},
            [("PyTorchJob", "pt")],
            id="training-operator-leaves-mpi-operators-mpijobs-out",
        ),
        pytest.param(["--family", "training-operator"], {}, [("PyTorchJob", "pt")], id="no-kind"),
        pytest.param(
            ["--family", "mpi-operator", "--family", "trainer"],
            {},
            [("MPIJob", "done"), ("MPIJob", "gang"), ("TrainJob", "tj")],
            id="repeated",
        ),
        pytest.param(
            [],
            {"SWEEPER_FAMILY": "mpi-operator trainer"},
            [("MPIJob", "done"), ("MPIJob", "gang"), ("TrainJob", "tj")],
            id="environment",
        ),
        pytest.param(
            [],
            {},
            [("PyTorchJob", "pt"), ("MPIJob", "done"), ("MPIJob", "gang"), ("TrainJob", "tj")],
            id="default-every-family",
        ),
    ],
)
def test_a_family_left_out_is_not_swept_whatever_kinds_it_serves(
    args: list[str], env: dict[str, str], kinds: list[tuple[str, str]]
) -> None:
    harness = mpi_operator_cluster()

    result = harness.invoke("--dry-run", "-o", "json", "--action", "fail", *args, env=env)

    assert sorted(judged(result)) == sorted(kinds)
    listed = {r.name for r in harness.fake.requests if r.method == "list"}
    assert ("mpijobs" in listed) == any(k == "MPIJob" for k, _ in kinds)


def test_a_kind_served_by_a_family_left_out_is_logged_as_skipped() -> None:
    harness = mpi_operator_cluster()

    result = harness.invoke(
        "--dry-run", "--family", "training-operator", "--kind", "MPIJob", "--log-format", "text"
    )

    assert result.exit_code == 0, result.stderr
    assert (
        "MPIJob is served at kubeflow.org/v2beta1 by the mpi-operator family, "
        "which --family leaves out; skipped"
    ) in result.stderr
    assert "MPIJob is not served" not in result.stderr


def test_an_unknown_family_is_one_line_and_exit_two() -> None:
    result = mpi_operator_cluster().invoke("--family", "kuberay")

    assert result.exit_code == 2
    assert "--family" in result.stderr
    assert "'kuberay' is not one of 'training-operator', 'mpi-operator', 'trainer'" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
