"""The real Kubeflow Trainer v2 (TrainJob) and JobSet controllers as subprocesses.

A TrainJob (``trainer.kubeflow.org/v1alpha1``) runs as a JobSet (``jobset.x-k8s.io/v1alpha2``),
whose replicas are batch/v1 Jobs: the harness runs JobSet v0.12.0 and the trainer's controller
manager v2.3.0 beside ``devcluster.controller_manager`` (Job controller, garbage collector).
The set-up follows their start-up code (``main.go`` of JobSet, ``cmd/trainer-controller-manager``
of the trainer) and their manifests, all taken from the Go modules into the binary cache by
``scripts/build-binaries trainer jobset`` (never the repository):

- their CRDs are installed; the trainer's ``torch-distributed`` ClusterTrainingRuntime
  (``manifests/base/runtimes/torch_distributed.yaml``) is created once the trainer serves, as
  its validating webhook checks it (``Trainer.install_runtime``);
- each starts from a ``Configuration`` (``--config``) with leader election, its own certificate
  management and metrics off, and its webhook server and health probes on free loopback ports:
  nothing listens on another interface;
- their webhooks (each module's webhook ``manifests.yaml``) are registered with each
  ``clientConfig`` pointed at ``https://127.0.0.1:<port>`` and the devcluster CA, which issues
  their serving certificate for 127.0.0.1, as for Kueue. JobSet reads it from ``certDir``; the
  trainer's configuration has no such field, so it reads controller-runtime's default
  ``$TMPDIR/k8s-webhook-server/serving-certs`` with ``TMPDIR`` a directory of its own;
- JobSet's pod webhooks get the ``objectSelector`` its own kustomize patch adds (pods of a
  JobSet only). Every webhook is ``failurePolicy: Fail``, so ``stop`` removes the
  configurations before it stops the process;
- ``/readyz`` answers 200 once the webhook server serves.
"""

from __future__ import annotations

import abc
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

import yaml

from devcluster import binaries, processes, webhooks

if TYPE_CHECKING:
    from devcluster.controlplane import ControlPlane

log = logging.getLogger(__name__)

RUNTIME = "torch-distributed"
RUNTIMES = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"
# What JobSet's config/components/webhook/patches add to its two pod webhooks.
_JOBSET_PODS = {
    "matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]
}


class TrainerError(RuntimeError):
    """The trainer or JobSet could not start, or stopped; the message has its log tail."""


def manifests_dir(name: str) -> Path:
    """Where ``scripts/build-binaries`` copies a controller's manifests, beside its binary."""
    return binaries.path(name).parent / "manifests"


def manifest_files(name: str) -> tuple[list[Path], Path]:
    """A controller's CRDs and webhook manifests from the cache.

    Raises:
        binaries.BinaryMissing: They have not been copied yet; the message says how.
    """
    directory = manifests_dir(name)
    crds = sorted((directory / "crds").glob("*.yaml"))
    hooks = directory / "webhooks" / "manifests.yaml"
    if not crds or not hooks.is_file():
        raise binaries.BinaryMissing(
            f"no {name} CRDs or webhooks in {directory}; run scripts/build-binaries {name} "
            "(needs Go 1.26) to copy them from its Go module"
        )
    return crds, hooks


class WebhookController(processes.Controller):
    """A controller-runtime manager with its CRDs, a configuration and webhooks on loopback.

    Attributes:
        cp: The control plane.
        version: Its release.
        workdir: Its configuration, certificates and log, in the control plane's directory.
        log_path: Its stdout and stderr.
        webhook_port: Where its webhook server listens (127.0.0.1).
    """

    name: ClassVar[str]
    object_selectors: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.version = binaries.version(self.name)
        self.binary = binaries.find(self.name)
        self.crds, self.webhook_manifests = manifest_files(self.name)
        self.workdir = Path(cp.workdir) / self.name
        self.log_path = self.workdir / f"{self.name}.log"
        self.webhook_port = 0
        self._webhooks = webhooks.Registrations(cp)
        self._launcher = processes.Launcher(self.name, self.log_path, error=TrainerError)

    @classmethod
    def start(cls, cp: ControlPlane, *, timeout: float = 120.0) -> Self:
        """Install its CRDs, start it, wait until it serves, register its webhooks.

        Raises:
            devcluster.binaries.BinaryMissing: The binary or its manifests are not in the cache.
            TrainerError: It exited or did not become ready; the message has its log tail.
        """
        controller = cls(cp)
        try:
            cp.install_crds(controller.crds)
            controller._write_certificates()
            controller._launch(timeout)
        except BaseException:
            controller.stop()
            raise
        return controller

    def stop(self, grace: float = 15.0) -> None:
        """Remove its webhooks, then stop the process; safe to call twice."""
        self._webhooks.remove()
        self._launcher.stop(grace)

    @property
    @abc.abstractmethod
    def cert_dir(self) -> Path:
        """Where its webhook server reads ``tls.crt`` and ``tls.key``."""

    @abc.abstractmethod
    def configuration(self, *, webhook_port: int, probe_port: int) -> dict[str, Any]:
        """Its ``Configuration`` (``--config``)."""

    def environment(self) -> dict[str, str]:
        """Its environment: a clean one, with the admin's kubeconfig."""
        env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "TZ"}}
        env["KUBECONFIG"] = str(self.cp.kubeconfig)
        return env

    def _write_certificates(self) -> None:
        serving = self.cp.ca.serving_cert(["127.0.0.1"])
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        for name, data in (("tls.crt", serving.cert_pem), ("tls.key", serving.key_pem)):
            path = self.cert_dir / name
            path.write_bytes(data)
            path.chmod(0o600)

    def _launch(self, timeout: float) -> None:
        def command() -> processes.Command:
            self.webhook_port, probe = processes.free_port(), processes.free_port()
            config = self.workdir / "config.yaml"
            document = self.configuration(webhook_port=self.webhook_port, probe_port=probe)
            config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
            # V(2): where the trainer logs its deadline decisions (a refused delete included).
            argv = [str(self.binary), f"--config={config}", "--zap-log-level=2"]
            return processes.Command(argv, self.environment(), probe)

        def ready(process: processes.Process) -> None:
            processes.wait_until(
                lambda: self.ready, timeout=timeout, what=f"{self.name} /readyz", watch=[process]
            )
            names = {
                "MutatingWebhookConfiguration": f"devcluster-{self.name}-mutating",
                "ValidatingWebhookConfiguration": f"devcluster-{self.name}-validating",
            }
            self._webhooks.add(
                webhooks.on_loopback(
                    self.webhook_manifests.read_text(encoding="utf-8"),
                    port=self.webhook_port,
                    ca_pem=self.cp.ca_pem,
                    names=names,
                    object_selectors=self.object_selectors,
                )
            )

        self._launcher.launch(command, ready, on_failure=self._webhooks.remove)
        log.info(
            "%s %s ready (webhooks on 127.0.0.1:%d)", self.name, self.version, self.webhook_port
        )


class JobSet(WebhookController):
    """The JobSet controller (v0.12.0), which runs the trainer's JobSets as Jobs."""

    name = "jobset"
    object_selectors: ClassVar[dict[str, dict[str, Any]]] = {
        "mpod.kb.io": _JOBSET_PODS,
        "vpod.kb.io": _JOBSET_PODS,
    }

    @property
    def cert_dir(self) -> Path:
        """``certDir`` of its configuration."""
        return self.workdir / "certs"

    def configuration(self, *, webhook_port: int, probe_port: int) -> dict[str, Any]:
        """JobSet's ``config.jobset.x-k8s.io/v1alpha1`` Configuration."""
        return {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(self.cert_dir)},
            # "0": off. On, it serves TLS on :8443 from /tmp/k8s-metrics-server/serving-certs.
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
        }


class Trainer(WebhookController):
    """The Kubeflow Trainer v2 controller manager (v2.3.0): TrainJobs and their runtimes."""

    name = "trainer"

    @property
    def cert_dir(self) -> Path:
        """controller-runtime's default under the ``TMPDIR`` it is given."""
        return self.workdir / "tmp" / "k8s-webhook-server" / "serving-certs"

    def configuration(self, *, webhook_port: int, probe_port: int) -> dict[str, Any]:
        """The trainer's ``config.trainer.kubeflow.org/v1alpha1`` Configuration."""
        return {
            "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
            "kind": "Configuration",
            "health": {
                "healthProbeBindAddress": f"127.0.0.1:{probe_port}",
                "readinessEndpointName": "readyz",
                "livenessEndpointName": "healthz",
            },
            "metrics": {"bindAddress": "0", "secureServing": False},
            "webhook": {"host": "127.0.0.1", "port": webhook_port},
            "leaderElection": {"leaderElect": False},
            "certManagement": {"enable": False},
        }

    def environment(self) -> dict[str, str]:
        """The clean environment, with ``TMPDIR`` where its certificates are."""
        return {**super().environment(), "TMPDIR": str(self.workdir / "tmp")}

    def install_runtime(self) -> None:
        """Create the ClusterTrainingRuntime ``torch-distributed`` (through its webhook)."""
        runtime = manifests_dir(self.name) / "runtimes" / "torch_distributed.yaml"

        def created() -> bool:
            self.cp.request(
                "POST",
                RUNTIMES,
                runtime.read_bytes(),
                content_type="application/yaml",
                expect=(201, 409),
            )
            return True

        # The API server picks a new webhook configuration up a moment after it is created.
        processes.wait_until(created, timeout=30, what=f"ClusterTrainingRuntime {RUNTIME}")
