"""Fixtures of the families' tests: mpi-operator, and Trainer v2 with JobSet, on real binaries.

Imported into ``tests/e2e/conftest.py`` (one import line), as ``conftest_operator`` is. Each
fixture starts a control plane of its own for one test module, with the family's controllers
on it (``devcluster.families.Controllers``, what ``scripts/devcluster up --mpi-operator`` and
``--trainer`` run): kube-controller-manager's garbage collector and Job controller act on
every namespace, and the MPIJob CRD is v2beta1 there, so the session's ``control_plane``,
shared by the other modules, must not see them.

- ``mpi_cluster``: MPIJob v2beta1 served, kube-controller-manager and mpi-operator;
- ``trainer_cluster``: kube-controller-manager, JobSet and Trainer v2 with their webhooks and
  the ``torch-distributed`` ClusterTrainingRuntime;
- ``family_namespace``: a fresh namespace on the module's cluster;
- ``family_sweep``: the CLI run against the module's cluster (as ``sweep`` is against the
  session's), returning a ``clusters.Sweep`` with the requests it made.

Without the binaries the tests skip locally and fail in CI, as every e2e test does. Each
module's tests go to one pytest-xdist worker together (``tests/conftest.py``), so a module
starts its controllers once; mpi-operator's hard-coded health port allows one per machine, and
a second waits for the first (``devcluster.mpi_operator``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devcluster import BinaryMissing, ControlPlane, binaries
from devcluster.controller_manager import ControllerManager
from devcluster.families import Controllers, Wanted
from devcluster.mpi_operator import MPIOperator
from devcluster.trainer import JobSet, Trainer
from tests import summary
from tests.e2e import clusters, families


@dataclass(frozen=True)
class MPICluster:
    """A control plane serving MPIJob v2beta1, with the controllers that run MPIJobs.

    Attributes:
        cp: The control plane.
        controller_manager: kube-controller-manager (Job controller, garbage collector).
        mpi_operator: mpi-operator.
    """

    cp: ControlPlane
    controller_manager: ControllerManager
    mpi_operator: MPIOperator


@dataclass(frozen=True)
class TrainerCluster:
    """A control plane with the controllers that run TrainJobs.

    Attributes:
        cp: The control plane.
        controller_manager: kube-controller-manager (Job controller, garbage collector).
        jobset: The JobSet controller.
        trainer: The Trainer v2 controller manager.
    """

    cp: ControlPlane
    controller_manager: ControllerManager
    jobset: JobSet
    trainer: Trainer


@pytest.fixture(scope="module")
def family_control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A control plane of the module's own, for one family's controllers."""
    with clusters.start_control_plane() as cp:
        yield cp


def _start(cp: ControlPlane, wanted: Wanted, request: pytest.FixtureRequest) -> Controllers:
    try:
        controllers = Controllers.start(cp, wanted)
    except BinaryMissing as e:
        clusters.binaries_missing(e)
        raise  # unreachable: binaries_missing always raises
    names = ", ".join(f"{name} {binaries.version(name)}" for name in wanted.binaries())
    summary.record(request.config, "devcluster", f"families: {names} on {cp.server}")
    return controllers


@pytest.fixture(scope="module")
def mpi_cluster(
    family_control_plane: ControlPlane, request: pytest.FixtureRequest
) -> Iterator[MPICluster]:
    """mpi-operator and kube-controller-manager on a control plane serving MPIJob v2beta1."""
    with _start(family_control_plane, Wanted(mpi_operator=True), request) as controllers:
        assert controllers.controller_manager is not None
        assert controllers.mpi_operator is not None
        yield MPICluster(
            family_control_plane, controllers.controller_manager, controllers.mpi_operator
        )


@pytest.fixture(scope="module")
def trainer_cluster(
    family_control_plane: ControlPlane, request: pytest.FixtureRequest
) -> Iterator[TrainerCluster]:
    """Trainer v2, JobSet and kube-controller-manager, with the ``torch-distributed`` runtime."""
    with _start(family_control_plane, Wanted(trainer=True), request) as controllers:
        assert controllers.controller_manager is not None
        assert controllers.jobset is not None
        assert controllers.trainer is not None
        yield TrainerCluster(
            family_control_plane,
            controllers.controller_manager,
            controllers.jobset,
            controllers.trainer,
        )


@pytest.fixture
def family_namespace(family_control_plane: ControlPlane, request: pytest.FixtureRequest) -> str:
    """A fresh namespace named after the test, on the module's control plane.

    Nothing is emptied afterwards: the control plane is the module's, and goes with it.
    """
    prefix = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    return family_control_plane.create_namespace(prefix or "family")


@pytest.fixture(scope="module")
def family_sweep(family_control_plane: ControlPlane) -> Callable[..., clusters.Sweep]:
    """Run the CLI against the module's cluster, as user ``sweeper`` (``system:masters``).

    ``family_sweep("-n", ns, "--action", "fail")``; ``kubeconfig=`` and ``user=`` as for
    ``sweep``.
    """
    default = family_control_plane.user_kubeconfig(clusters.SWEEPER_USER, ["system:masters"])

    def run(
        *args: str,
        kubeconfig: Path | None = None,
        user: str = clusters.SWEEPER_USER,
        env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> clusters.Sweep:
        return clusters.sweep(
            family_control_plane, kubeconfig or default, user, *args, env=env, timeout=timeout
        )

    return run


@pytest.fixture(scope="module")
def chart_sweep(
    family_control_plane: ControlPlane,
    family_sweep: Callable[..., clusters.Sweep],
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Callable[..., clusters.Sweep]:
    """The CLI with ``--policy`` over the module's ``RULES``, as its ``USER`` with the chart's
    grants for them; the module's ``CHART`` gives the chart's family, kind and ``waits``
    (``tests.e2e.families.chart_policy_sweep``)."""
    module = request.module
    return families.chart_policy_sweep(
        family_control_plane,
        family_sweep,
        tmp_path_factory.mktemp("chart"),
        user=module.USER,
        rules=module.RULES,
        **module.CHART,
    )
