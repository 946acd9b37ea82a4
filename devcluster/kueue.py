"""The real Kueue controller (v0.17.0) as a subprocess beside the Training Operator.

The compat tier's Kueue tests (``tests/compat/test_kueue.py``) run it against a
``ControlPlane`` to show what the sweeper does to Kueue-managed jobs: admitted, preempted
(Kueue sets ``runPolicy.suspend``), re-admitted. The set-up follows Kueue's own start-up code
(``cmd/kueue/main.go`` and ``pkg/config`` at v0.17.0):

- its CRDs (``config/components/crd/bases``) are installed from the cache, where
  ``scripts/build-binaries kueue`` copies them from the Go module (never the repository). The
  conversion webhook that Kueue's kustomization adds between v1beta1 and v1beta2 is left out:
  everything here speaks v1beta2, the storage version;
- the ``Configuration`` (``config.kueue.x-k8s.io/v1beta2``, ``--config``) enables the
  ``kubeflow.org/pytorchjob`` integration only, turns leader election and the visibility server
  off, and puts metrics, health probes and the webhook server on free loopback ports;
- ``internalCertManagement`` is disabled: the webhook server reads a certificate that the
  devcluster CA issues for 127.0.0.1 from a certificate directory of the control plane's
  working directory. With it disabled, Kueue also reads a metrics certificate from the
  hard-coded ``/etc/kueue/metrics/certs`` and exits when it is missing, so the harness writes
  one (any valid one will do, nothing here checks the metrics TLS). As root it goes into
  Kueue's working directory, bind-mounted on that path in a mount namespace of Kueue's own
  (``mounts.private_mounts``; where ``/etc/kueue`` does not exist the namespace alone has
  it), so nothing is left on the machine; without root the harness writes the real directory
  (which only root can);
- its mutating and validating webhooks (``config/components/webhook/manifests.yaml``) are
  registered for Kueue's own resources and the PyTorchJob only (the others' integrations are
  off, and an unserved path with ``failurePolicy: Fail`` would refuse those objects), with each
  ``clientConfig`` rewritten to ``url: https://127.0.0.1:<port><path>`` and the CA bundle.
  ``stop`` removes them before it stops the process, so that no job update is refused after;
- ``/readyz`` answers 200 once the webhook server serves.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from devcluster import binaries, mounts, processes, webhooks

if TYPE_CHECKING:
    from devcluster.controlplane import ControlPlane

log = logging.getLogger(__name__)

NAME = "kueue"
NAMESPACE = "kueue-system"
# What Kueue reads when internalCertManagement is off (cmd/kueue/main.go: metricsCertPath).
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
# Kueue's integration name for the Training Operator's PyTorchJob (pkg/controller/jobs/kubeflow).
PYTORCHJOB = "kubeflow.org/pytorchjob"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
# Webhook configurations are cluster-scoped: these names are this harness's.
MUTATING = "devcluster-kueue-mutating"
VALIDATING = "devcluster-kueue-validating"


class KueueError(RuntimeError):
    """Kueue could not be started, or stopped running; the message has its log tail."""


def manifests_dir() -> Path:
    """Where ``scripts/build-binaries kueue`` puts the CRDs and webhooks, beside the binary."""
    return binaries.path(NAME).parent


def crd_files() -> list[Path]:
    """Kueue's CRD manifests from the cache.

    Raises:
        binaries.BinaryMissing: They have not been copied yet; the message says how.
    """
    files = sorted((manifests_dir() / "crds").glob("kueue.x-k8s.io_*.yaml"))
    if not files or not (manifests_dir() / "webhooks.yaml").is_file():
        raise binaries.BinaryMissing(
            f"no Kueue CRDs or webhooks in {manifests_dir()}; run scripts/build-binaries kueue "
            "(needs Go 1.26) to copy them from Kueue's Go module"
        )
    return files


def configuration(*, webhook_port: int, metrics_port: int, probe_port: int, cert_dir: Path) -> str:
    """The ``Configuration`` Kueue starts with (``--config``), as YAML."""
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe_port}"},
        "integrations": {"frameworks": [PYTORCHJOB]},
        # Its own aggregated API server would listen on 0.0.0.0 and wants an APIService.
        "featureGates": {"VisibilityOnDemand": False},
    }
    return yaml.safe_dump(config, sort_keys=False)


def _wanted(webhook: dict[str, Any]) -> bool:
    # Kueue's own resources and the one integration that is on.
    rules = webhook.get("rules") or []
    return any(
        "kueue.x-k8s.io" in rule.get("apiGroups", []) or "pytorchjobs" in rule.get("resources", [])
        for rule in rules
    )


def webhook_configurations(
    manifests: str, *, port: int, ca_pem: bytes
) -> list[tuple[str, dict[str, Any]]]:
    """Kueue's webhook configurations, pointed at ``https://127.0.0.1:<port>``.

    Args:
        manifests: ``config/components/webhook/manifests.yaml`` of the Kueue module.
        port: Where Kueue's webhook server listens.
        ca_pem: The CA that issued its serving certificate.

    Returns:
        (resource plural, body) pairs, mutating first.
    """
    names = {"MutatingWebhookConfiguration": MUTATING, "ValidatingWebhookConfiguration": VALIDATING}
    return webhooks.on_loopback(manifests, port=port, ca_pem=ca_pem, names=names, keep=_wanted)


class Kueue(processes.Controller):
    """One running Kueue controller against a control plane.

    Attributes:
        cp: The control plane (with the Training Operator's CRDs installed).
        version: Its release, e.g. ``v0.17.0``.
        log_path: Its stdout and stderr, in the control plane's working directory.
        metrics_cert_dir: Where the harness writes the metrics certificate: a directory of
            ``workdir`` that Kueue sees at ``METRICS_CERT_DIR`` (root), or that path itself.
    """

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.version = binaries.version(NAME)
        self.binary = binaries.find(NAME)
        self.workdir = Path(cp.workdir) / "kueue"
        self.log_path = self.workdir / "kueue.log"
        self._private = mounts.private_mounts_available()
        self.metrics_cert_dir = (
            self.workdir / "metrics-certs" if self._private else METRICS_CERT_DIR
        )
        self._launcher = processes.Launcher(NAME, self.log_path, error=KueueError)
        self._webhooks = webhooks.Registrations(cp)

    @classmethod
    def start(cls, cp: ControlPlane, *, timeout: float = 120.0) -> Kueue:
        """Install the CRDs, start Kueue, register its webhooks and wait until it serves.

        Raises:
            devcluster.binaries.BinaryMissing: Kueue or its manifests are not in the cache.
            KueueError: It exited or did not become ready; the message has its log tail.
        """
        crds = crd_files()
        kueue = cls(cp)
        try:
            cp.install_crds(crds)
            cp.request(
                "POST",
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                expect=(201, 409),
            )
            kueue._write_certificates()
            kueue._launch(timeout)
        except BaseException:
            kueue.stop()
            raise
        return kueue

    def stop(self, grace: float = 15.0) -> None:
        """Remove the webhooks, then stop the process. Safe to call twice."""
        self._unregister_webhooks()
        self._launcher.stop(grace)

    # --- internals ------------------------------------------------------------------------------

    def _write_certificates(self) -> None:
        serving = self.cp.ca.serving_cert(["127.0.0.1"])
        for directory in (self.workdir / "certs", self.metrics_cert_dir):
            directory.mkdir(parents=True, exist_ok=True)
            for name, data in (("tls.crt", serving.cert_pem), ("tls.key", serving.key_pem)):
                # Written whole, then renamed: a Kueue already watching the directory never
                # reads half a file.
                partial = directory / f".{name}.{os.getpid()}"
                partial.write_bytes(data)
                partial.chmod(0o600)
                partial.replace(directory / name)

    def _launch(self, timeout: float) -> None:
        webhook = 0

        def command() -> processes.Command:
            nonlocal webhook
            webhook, metrics, probe = (processes.free_port() for _ in range(3))
            config = self.workdir / "config.yaml"
            config.write_text(
                configuration(
                    webhook_port=webhook,
                    metrics_port=metrics,
                    probe_port=probe,
                    cert_dir=self.workdir / "certs",
                ),
                encoding="utf-8",
            )
            env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "TZ"}}
            env["KUBECONFIG"] = str(self.cp.kubeconfig)
            return processes.Command(self._argv(config), env, probe)

        def ready(process: processes.Process) -> None:
            self._register_webhooks(webhook)
            processes.wait_until(
                lambda: self.ready, timeout=timeout, what="kueue /readyz", watch=[process]
            )

        self._launcher.launch(command, ready, on_failure=self._unregister_webhooks)
        log.info("kueue %s ready (webhooks on 127.0.0.1:%d)", self.version, webhook)

    def _argv(self, config: Path) -> list[str]:
        argv = [str(self.binary), f"--config={config}", "--zap-log-level=info"]
        if not self._private:
            return argv
        binds = {METRICS_CERT_DIR: self.metrics_cert_dir}
        scratch = self.workdir / "mounts"
        scratch.mkdir(parents=True, exist_ok=True)
        return mounts.private_mounts(binds, argv, scratch=scratch)

    def _register_webhooks(self, port: int) -> None:
        manifests = (manifests_dir() / "webhooks.yaml").read_text(encoding="utf-8")
        self._webhooks.add(webhook_configurations(manifests, port=port, ca_pem=self.cp.ca_pem))

    def _unregister_webhooks(self) -> None:
        self._webhooks.remove()
