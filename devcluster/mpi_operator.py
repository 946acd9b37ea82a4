"""The real mpi-operator (v0.8.x, MPIJob ``kubeflow.org/v2beta1``) as a subprocess.

mpi-operator does not enforce a deadline itself: it copies ``runPolicy.activeDeadlineSeconds``
into its launcher, a batch/v1 Job, and marks the MPIJob Failed when the Job controller fails
that Job. So it runs beside ``devcluster.controller_manager`` (Job controller and garbage
collector). The set-up follows its start-up code (``cmd/mpi-operator/app`` at v0.8.2):

- only one ``mpijobs.kubeflow.org`` CRD can exist: ``use_v2beta1_crd`` replaces the Training
  Operator's v1 CRD (which the control plane installs by default) with mpi-operator's own
  ``manifests/base/kubeflow.org_mpijobs.yaml``, copied from the Go module into the binary cache
  by ``scripts/build-binaries mpi-operator`` (never the repository). A Training Operator beside
  it must run without its MPIJob controller (``--enable-scheme`` without ``mpijob``);
- leader election cannot be turned off. It takes the Lease ``mpi-operator`` in
  ``--lock-namespace`` and does not release it on SIGTERM, so a second start in the same
  namespace waits for it to expire (about 16 s): each start gets a fresh lock namespace;
- its health server is hard-coded on ``:8080`` (every interface; a taken port is fatal), so
  only one mpi-operator runs on a machine at a time: ``MPIOperator.start`` waits for a machine
  lock (``LOCK_PATH``). Its metrics are off (``--monitoring-port=0``);
- ready means its log says ``Started workers``: the informers have synced and the workers run.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from devcluster import binaries, processes
from devcluster.operator import MachineLock

if TYPE_CHECKING:
    from devcluster.controlplane import ControlPlane

log = logging.getLogger(__name__)

NAME = "mpi-operator"
CRD_NAME = "mpijobs.kubeflow.org"
VERSION = "v2beta1"
# Hard-coded upstream (cmd/mpi-operator/app/server.go: healthCheckPort), on every interface.
HEALTH_PORT = 8080
LOCK_PATH = Path("/tmp/devcluster-mpi-operator.lock")
_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class MPIOperatorError(RuntimeError):
    """mpi-operator could not start, or stopped running; the message has its log tail."""


def manifests_dir() -> Path:
    """Where ``scripts/build-binaries mpi-operator`` copies its CRD, beside the binary."""
    return binaries.path(NAME).parent / "manifests"


def crd_file() -> Path:
    """mpi-operator's MPIJob v2beta1 CRD from the cache.

    Raises:
        binaries.BinaryMissing: It has not been copied yet; the message says how.
    """
    crd = manifests_dir() / "crds" / "kubeflow.org_mpijobs.yaml"
    if not crd.is_file():
        raise binaries.BinaryMissing(
            f"no MPIJob v2beta1 CRD at {crd}; run scripts/build-binaries mpi-operator "
            "(needs Go 1.26) to copy it from mpi-operator's Go module"
        )
    return crd


def use_v2beta1_crd(cp: ControlPlane) -> None:
    """Serve MPIJob ``v2beta1`` (mpi-operator's CRD) in place of the Training Operator's ``v1``.

    Deleting the v1 CRD deletes every v1 MPIJob: call it before any exists.
    """
    path = f"{_CRDS}/{CRD_NAME}"
    crd = cp.request("GET", path, expect=(200, 404))
    if crd.get("kind") == "CustomResourceDefinition":
        served = {v["name"] for v in crd["spec"]["versions"] if v["served"]}
        if served == {VERSION}:
            return
        cp.request("DELETE", path, expect=(200, 404))
        processes.wait_until(
            lambda: cp.request("GET", path, expect=(200, 404)).get("kind") == "Status",
            timeout=60,
            what=f"the v1 CRD {CRD_NAME} to be gone",
        )
    cp.install_crds([crd_file()])


class MPIOperator(processes.Controller):
    """One running mpi-operator watching every namespace of a control plane.

    Attributes:
        cp: The control plane, serving MPIJob v2beta1 (``use_v2beta1_crd``).
        version: Its release, e.g. ``v0.8.2``.
        log_path: Its stdout and stderr, appended across starts.
        lock_namespace: Where the current start keeps its leader-election Lease.
    """

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.version = binaries.version(NAME)
        self.binary = binaries.find(NAME)
        self.log_path = Path(cp.workdir) / "logs" / f"{NAME}.log"
        self.lock_namespace = ""
        self._lock = MachineLock(
            LOCK_PATH,
            what="an mpi-operator",
            why=f"its health port :{HEALTH_PORT} is hard-coded",
            error=MPIOperatorError,
        )
        self._launcher = processes.Launcher(NAME, self.log_path, error=MPIOperatorError)

    @classmethod
    def start(
        cls, cp: ControlPlane, *, timeout: float = 120.0, lock_timeout: float = 600.0
    ) -> MPIOperator:
        """Start it against ``cp`` (serving MPIJob v2beta1) and wait until its workers run.

        Raises:
            devcluster.binaries.BinaryMissing: mpi-operator is not built.
            MPIOperatorError: It exited or did not become ready, or another one kept the
                machine lock for ``lock_timeout`` seconds.
        """
        operator = cls(cp)
        operator._lock.acquire(lock_timeout)
        try:
            operator._launch(timeout)
        except BaseException:
            operator.stop()
            raise
        return operator

    @property
    def ready(self) -> bool:
        """Whether it runs and its workers have started (it has no readiness endpoint)."""
        return self.running and "Started workers" in self.log_since_start()

    def restart(self, timeout: float = 120.0) -> None:
        """Stop it and start a new one (with a fresh Lease, so without waiting for the old)."""
        self._launcher.stop()
        self._launch(timeout)

    def stop(self, grace: float = 15.0) -> None:
        """Stop the process and free the machine lock; safe to call twice."""
        self._launcher.stop(grace)
        self._lock.release()

    def wait_for_log(self, pattern: str, *, timeout: float = 60.0) -> re.Match[str]:
        """Wait until the current run's log matches a regular expression; return the match.

        Raises:
            MPIOperatorError: No match in time, or it exited meanwhile.
        """
        regex = re.compile(pattern, re.MULTILINE)
        try:
            processes.wait_until(
                lambda: regex.search(self.log_since_start()) is not None,
                timeout=timeout,
                what=f"{NAME} log line /{pattern}/",
                watch=self.processes,
            )
        except (TimeoutError, ChildProcessError) as e:
            raise MPIOperatorError(f"{e}\n--- {self.log_path} (tail) ---\n{self.log_tail()}") from e
        match = regex.search(self.log_since_start())
        assert match is not None  # noqa: S101 - the wait just found it
        return match

    def _launch(self, timeout: float) -> None:
        def command() -> processes.Command:
            self.lock_namespace = self.cp.create_namespace(NAME)
            env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "TZ"}}
            # It prefers $KUBECONFIG to --kubeConfig; both name the admin's.
            env["KUBECONFIG"] = str(self.cp.kubeconfig)
            argv = [
                str(self.binary),
                f"--kubeConfig={self.cp.kubeconfig}",
                f"--lock-namespace={self.lock_namespace}",
                "--monitoring-port=0",
            ]
            return processes.Command(argv, env, HEALTH_PORT)

        def ready(process: processes.Process) -> None:
            processes.wait_until(
                lambda: self.ready, timeout=timeout, what=f"{NAME} workers", watch=[process]
            )

        self._launcher.launch(command, ready)
        log.info("%s %s ready (Lease in %s)", NAME, self.version, self.lock_namespace)
