"""kube-controller-manager with a chosen few controllers, beside a control plane without a node.

The families' controllers lean on Kubernetes' own: mpi-operator's launcher is a batch/v1 Job
whose ``activeDeadlineSeconds`` only the Job controller enforces, and JobSet runs its replicas
as Jobs too; deleting a JobSet or a Job leaves its children to the garbage collector. So a
control plane that runs them needs the Job controller and the garbage collector, and nothing
else: no node, no scheduler, no namespace or service-account controllers that would change
what the other tests see.

It serves nothing (``--secure-port=0``): no port, no health endpoint. Ready means that every
controller asked for logged its start (``READY_LINES``; 1.36 logs "Started controller" only at
V(1)).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from devcluster import binaries, processes

if TYPE_CHECKING:
    from devcluster.controlplane import ControlPlane

log = logging.getLogger(__name__)

NAME = "kube-controller-manager"
# What the families need: the Job controller (the launcher's deadline, JobSet's Jobs) and the
# garbage collector (what a deleted JobSet, Job or MPIJob owns).
CONTROLLERS = ("job-controller", "garbage-collector-controller")
# What each logs at V(0) once it runs: the Job controller as its workers start (its informers
# list what exists, so nothing created before is missed), the garbage collector once its
# monitors of every resource have synced.
READY_LINES = {
    "job-controller": '"Starting job controller"',
    "garbage-collector-controller": '"Proceeding to collect garbage"',
}


class ControllerManagerError(RuntimeError):
    """kube-controller-manager could not start; the message has its log tail."""


class ControllerManager(processes.Controller):
    """One kube-controller-manager running ``controllers`` against a control plane.

    Attributes:
        cp: The control plane.
        controllers: The controllers it runs (``--controllers``).
        log_path: Its stdout and stderr, in the control plane's working directory.
    """

    def __init__(self, cp: ControlPlane, controllers: Sequence[str] = CONTROLLERS) -> None:
        unknown = set(controllers) - set(READY_LINES)
        if unknown:
            raise ValueError(f"no ready line known for {sorted(unknown)}: add it to READY_LINES")
        self.cp = cp
        self.controllers = tuple(controllers)
        self.binary = binaries.find(NAME)
        self.log_path = Path(cp.workdir) / "logs" / f"{NAME}.log"
        self._launcher = processes.Launcher(NAME, self.log_path, error=ControllerManagerError)

    @classmethod
    def start(
        cls, cp: ControlPlane, controllers: Sequence[str] = CONTROLLERS, *, timeout: float = 120.0
    ) -> ControllerManager:
        """Start it and wait until each controller has started.

        Raises:
            devcluster.binaries.BinaryMissing: kube-controller-manager is not built.
            ControllerManagerError: It exited or did not start them in time.
        """
        manager = cls(cp, controllers)
        try:
            manager._launcher.launch(manager._command, lambda p: manager._wait_ready(p, timeout))
        except BaseException:
            manager.stop()
            raise
        log.info("%s ready (%s)", NAME, ", ".join(manager.controllers))
        return manager

    @property
    def ready(self) -> bool:
        """Whether it runs and each of its controllers logged that it started."""
        text = self.log_since_start()
        return self.running and all(READY_LINES[c] in text for c in self.controllers)

    def stop(self, grace: float = 15.0) -> None:
        """Stop the process; safe to call twice."""
        self._launcher.stop(grace)

    def _command(self) -> processes.Command:
        pki_dir = Path(self.cp.workdir) / "pki"
        argv = [
            str(self.binary),
            f"--kubeconfig={self.cp.kubeconfig}",
            # The signing key lets the token controller work should a test enable it; the root
            # CA is what it publishes as kube-root-ca.crt.
            f"--service-account-private-key-file={pki_dir / 'service-account.key'}",
            f"--root-ca-file={pki_dir / 'ca.crt'}",
            "--use-service-account-credentials=false",
            "--leader-elect=false",
            "--secure-port=0",
            f"--controllers={','.join(self.controllers)}",
        ]
        env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "TZ"}}
        return processes.Command(argv, env, health_port=0)

    def _wait_ready(self, process: processes.Process, timeout: float) -> None:
        processes.wait_until(
            lambda: self.ready,
            timeout=timeout,
            what=f"{NAME} to start {', '.join(self.controllers)}",
            watch=[process],
        )
