"""The controllers that run on top of a control plane, chosen by job family, started together.

``scripts/devcluster up`` and the e2e fixtures start them the same way (``Controllers.start``):

- ``operator``: the Training Operator v1 (``devcluster.operator``); beside mpi-operator it runs
  without its MPIJob controller (``--enable-scheme`` for every other scheme), as only one
  ``mpijobs.kubeflow.org`` CRD can exist and it is then mpi-operator's v2beta1;
- ``mpi_operator``: the v2beta1 MPIJob CRD in place of the v1 one, kube-controller-manager (Job
  controller, garbage collector) and mpi-operator (``devcluster.mpi_operator``);
- ``trainer``: kube-controller-manager, JobSet and Trainer v2 with their webhooks, and the
  ``torch-distributed`` ClusterTrainingRuntime (``devcluster.trainer``).

One kube-controller-manager serves both families. ``stop`` stops them in reverse order, so
JobSet's and the trainer's webhooks are gone before their servers are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from devcluster import binaries, operator_crds, processes
from devcluster.controller_manager import ControllerManager
from devcluster.mpi_operator import MPIOperator, crd_file, use_v2beta1_crd
from devcluster.operator import Operator, served_schemes
from devcluster.trainer import JobSet, Trainer, manifest_files

if TYPE_CHECKING:
    from devcluster.controlplane import ControlPlane


@dataclass(frozen=True)
class Wanted:
    """Which controllers to run on the control plane.

    Attributes:
        operator: The Training Operator v1.
        mpi_operator: mpi-operator, for MPIJob v2beta1.
        trainer: Trainer v2 and JobSet, for TrainJob.
    """

    operator: bool = False
    mpi_operator: bool = False
    trainer: bool = False

    @property
    def families(self) -> bool:
        """Whether a family beyond the Training Operator's runs (and so kube-controller-manager)."""
        return self.mpi_operator or self.trainer

    def binaries(self) -> list[str]:
        """The binaries these controllers need, beyond etcd and kube-apiserver."""
        names = ["training-operator"] if self.operator else []
        names += ["kube-controller-manager"] if self.families else []
        names += ["mpi-operator"] if self.mpi_operator else []
        names += ["jobset", "trainer"] if self.trainer else []
        return names

    def missing(self) -> list[str]:
        """What ``scripts/build-binaries`` must build (or copy the manifests of) first."""
        missing = []
        for name in self.binaries():
            try:
                binaries.find(name)
            except binaries.BinaryMissing:
                missing.append(name)
        # The manifests come with each binary's build, from the same Go module.
        checks: dict[str, Callable[[], object]] = {
            binaries.OPERATOR: operator_crds.crd_files,
            "mpi-operator": crd_file,
            "jobset": lambda: manifest_files("jobset"),
            "trainer": lambda: manifest_files("trainer"),
        }
        for name in [binaries.OPERATOR, *self.binaries()]:
            if name in checks and name not in missing:
                try:
                    checks[name]()
                except binaries.BinaryMissing:
                    missing.append(name)
        return missing

    def flags(self) -> list[str]:
        """The ``scripts/devcluster`` options that ask for them."""
        wanted = {"--operator": self.operator, "--mpi-operator": self.mpi_operator}
        wanted["--trainer"] = self.trainer
        return [flag for flag, on in wanted.items() if on]

    def parts(self) -> tuple[bool, bool, bool]:
        """The three choices, in the order of ``flags``."""
        return (self.operator, self.mpi_operator, self.trainer)

    def state(self) -> dict[str, bool]:
        """The choices as ``scripts/devcluster``'s state file records them."""
        return {
            "operator": self.operator,
            "mpi_operator": self.mpi_operator,
            "trainer": self.trainer,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> Wanted:
        """The choices a state file records (absent ones: not running)."""
        return cls(*(bool(state.get(key)) for key in cls().state()))

    def describe(self, versions: Mapping[str, str]) -> str:
        """What runs, for ``scripts/devcluster``'s line, e.g. ``, mpi-operator v0.8.2 running``."""
        operator = versions.get(binaries.OPERATOR, "")
        parts = [f"Training Operator {operator} " + ("running" if self.operator else "CRDs")]
        if self.mpi_operator:
            parts.append(f"mpi-operator {versions.get('mpi-operator', '')} running")
        if self.trainer:
            trainer, jobset = versions.get("trainer", ""), versions.get("jobset", "")
            parts.append(f"Trainer {trainer} and JobSet {jobset} running")
        return "".join(f", {part}" for part in parts)


@dataclass
class Controllers(processes.StopsOnExit):
    """The controllers running on one control plane; those not asked for are None.

    Attributes:
        cp: The control plane.
        operator: The Training Operator v1.
        controller_manager: kube-controller-manager (Job controller, garbage collector).
        mpi_operator: mpi-operator.
        jobset: The JobSet controller.
        trainer: The Trainer v2 controller manager.
    """

    cp: ControlPlane
    operator: Operator | None = None
    controller_manager: ControllerManager | None = None
    mpi_operator: MPIOperator | None = None
    jobset: JobSet | None = None
    trainer: Trainer | None = None
    _stopped: bool = field(default=False, repr=False)

    @classmethod
    def start(cls, cp: ControlPlane, wanted: Wanted, *, node: bool = False) -> Controllers:
        """Start what ``wanted`` asks for, in order; on a failure stop what started.

        Args:
            cp: The control plane.
            wanted: What to run.
            node: A real node runs beside it (``devcluster.node``), with a
                kube-controller-manager of its own running every controller: no second one.

        Raises:
            devcluster.binaries.BinaryMissing: A binary or its manifests are not in the cache.
            RuntimeError: A controller did not start (its own error, with its log tail).
        """
        started = cls(cp)
        try:
            if wanted.mpi_operator:
                use_v2beta1_crd(cp)
            if wanted.operator:
                version = binaries.version(binaries.OPERATOR)
                schemes = tuple(
                    s for s in served_schemes(version) if s != "mpijob" or not wanted.mpi_operator
                )
                started.operator = Operator.start(cp, schemes=schemes)
            if wanted.families and not node:
                started.controller_manager = ControllerManager.start(cp)
            if wanted.mpi_operator:
                started.mpi_operator = MPIOperator.start(cp)
            if wanted.trainer:
                started.jobset = JobSet.start(cp)
                started.trainer = Trainer.start(cp)
                started.trainer.install_runtime()
        except BaseException:
            started.stop()
            raise
        return started

    def running(self) -> list[processes.Controller]:
        """The controllers started, in start order."""
        return [
            c
            for c in (
                self.operator,
                self.controller_manager,
                self.mpi_operator,
                self.jobset,
                self.trainer,
            )
            if c is not None
        ]

    @property
    def processes(self) -> list[processes.Process]:
        """Their processes, for ``scripts/devcluster down`` to kill if need be."""
        return [p for c in self.running() for p in c.processes]

    def stop(self) -> None:
        """Stop them in reverse order (webhooks before their servers); safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        for controller in reversed(self.running()):
            controller.stop()
