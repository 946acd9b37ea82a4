"""The real Kubeflow Training Operator v1.9.4 as a subprocess against a ``ControlPlane``.

This is what the end-to-end tests, ``scripts/devcluster up --operator`` and ``scripts/demo``
run to reproduce the deadline bug and to check that the sweeper fixes it with the operator
itself. The set-up follows the operator's own start-up code (``cmd/training-operator.v1/main.go``
and ``pkg/cert`` at v1.9.4):

- the namespace named by ``MY_POD_NAMESPACE`` (``kubeflow`` by default) must exist, with a
  Secret ``training-operator-webhook-cert`` in it, or the manager exits;
- the cert rotator (open-policy-agent/cert-controller) accepts that Secret as it is when it
  holds a CA valid beyond its 90-day look-ahead for the DNS name ``training-operator-ca`` with
  the key in PKCS#1 ("RSA PRIVATE KEY"), and a server certificate for
  ``training-operator.<namespace>.svc``; anything less and it writes new material;
- it waits for ``tls.crt`` in the hard-coded ``/tmp/k8s-webhook-server/serving-certs``,
  where the webhook server also reads ``tls.crt``/``tls.key``. The harness writes the same
  material as the Secret there. That directory is shared by the whole machine. As root (CI,
  the node tier) each operator gets one of its own: it runs in a mount namespace of its own
  (``mounts.private_mounts``) where a directory in its control plane's workdir is
  bind-mounted on ``/tmp/k8s-webhook-server``, so operators run side by side (two pytest-xdist
  workers, a benchmark beside the suite). Without root **only one operator per machine runs at
  a time**: ``Operator.start`` takes an exclusive file lock (``LOCK_PATH``) and waits for it,
  and ``stop`` releases it;
- no ValidatingWebhookConfiguration is created: nothing can reach the webhook server, and its
  ``failurePolicy: Fail`` would reject every job update, the sweeper's touches included. The
  rotator only logs that it did not find one;
- metrics, health probes and the webhook server listen on free ports; ``/readyz`` answers 200
  once the certificates are in place, then the job controllers start.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import fcntl
import logging
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from devcluster import binaries, pki
from devcluster.mounts import private_mounts, private_mounts_available
from devcluster.processes import (
    Command,
    Controller,
    Launcher,
    Process,
    free_port,
    wait_until,
)

if TYPE_CHECKING:
    from devcluster.controlplane import ControlPlane

log = logging.getLogger(__name__)

# Hard-coded upstream (pkg/cert/cert.go: certDir); the webhook server's default is the same
# path under $TMPDIR, so the harness pins TMPDIR=/tmp for the child as well.
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
LOCK_PATH = Path("/tmp/k8s-webhook-server.lock")

SECRET_NAME = "training-operator-webhook-cert"  # noqa: S105 - a name, not a secret
SERVICE_NAME = "training-operator"
# cert-controller verifies the CA certificate against this DNS name (pkg/cert/cert.go: caName).
CA_NAME = "training-operator-ca"
CA_ORGANIZATION = "training-operator"

# Every scheme v1.9.4 serves, by the names of their controllers ("<scheme>-controller").
SCHEMES = ("tfjob", "pytorchjob", "xgboostjob", "mpijob", "paddlejob", "jaxjob")
# Up to v1.8.x MXJob instead of JAXJob (pkg/controller.v1/register_controller.go of each tag).
SCHEMES_BEFORE_1_9 = ("tfjob", "pytorchjob", "mxjob", "xgboostjob", "mpijob", "paddlejob")


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.lstrip("v").split(".")[:3])


def served_schemes(version: str) -> tuple[str, ...]:
    """The schemes a Training Operator release serves, e.g. ``served_schemes("v1.7.0")``."""
    return SCHEMES if _release(version) >= (1, 9) else SCHEMES_BEFORE_1_9


# The rotator refreshes anything that expires within 90 days; stay well clear of that
# (for the CA and the server certificate alike).
_VALIDITY = dt.timedelta(days=365)


class OperatorError(RuntimeError):
    """The operator could not be started, or stopped running; the message has its log tail."""


@dataclass(frozen=True)
class WebhookCertificates:
    """The material both the Secret and the certificate directory hold.

    Attributes:
        ca_crt: CA certificate, PEM.
        ca_key: CA private key, PKCS#1 PEM ("RSA PRIVATE KEY"), as the rotator parses it.
        tls_crt: Server certificate for ``training-operator.<namespace>.svc`` and 127.0.0.1.
        tls_key: Server private key, PKCS#1 PEM.
    """

    ca_crt: bytes
    ca_key: bytes
    tls_crt: bytes
    tls_key: bytes

    def secret_data(self) -> dict[str, bytes]:
        """The Secret's data keys, as cert-controller names them."""
        return {
            "ca.crt": self.ca_crt,
            "ca.key": self.ca_key,
            "tls.crt": self.tls_crt,
            "tls.key": self.tls_key,
        }


def webhook_certificates(namespace: str) -> WebhookCertificates:
    """Generate a CA and a server certificate that cert-controller will accept unchanged.

    Args:
        namespace: The operator's namespace; the server certificate names
            ``training-operator.<namespace>.svc`` as the rotator expects.
    """
    ca = pki.CertificateAuthority(
        CA_NAME,
        organization=CA_ORGANIZATION,
        # The rotator checks the CA like a leaf certificate for this name.
        alt_names=[CA_NAME],
        key_algorithm="rsa-2048",
        key_encoding="pkcs1",  # the rotator parses ca.key as PKCS#1 only
        validity=_VALIDITY,
    )
    server = ca.serving_cert([f"{SERVICE_NAME}.{namespace}.svc", "127.0.0.1"])
    return WebhookCertificates(
        ca_crt=ca.cert_pem, ca_key=ca.key_pem, tls_crt=server.cert_pem, tls_key=server.key_pem
    )


class MachineLock:
    """An exclusive ``flock`` on a file: one controller of a kind per machine.

    For a controller that hard-codes something machine-wide (the operator's certificate
    directory, mpi-operator's health port). The holder's pid is written into the file so that a
    waiting process can say who it waits for. The kernel drops the lock when the holder exits,
    however it exits.

    Attributes:
        path: The lock file.
        what: The controller, for the error message, e.g. ``a Training Operator``.
        why: Why only one can run, for the error message.
        error: The exception raised when the lock stays taken.
    """

    def __init__(
        self,
        path: Path = LOCK_PATH,
        *,
        what: str = "a Training Operator",
        why: str = f"the operator's certificate directory {CERT_DIR} is hard-coded",
        error: type[Exception] = OperatorError,
    ) -> None:
        self.path = path
        self.what = what
        self.why = why
        self.error = error
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the lock.

        Raises:
            Exception: ``error``: another process kept it for the whole time.
        """
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        waiting = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
                    os.close(fd)
                    raise self.error(
                        f"{self.what} of this harness already runs on this machine "
                        f"(pid {holder}, lock {self.path}); only one can run at a time because "
                        f"{self.why} (if it is yours: scripts/devcluster down)"
                    ) from None
                if not waiting:
                    waiting = True
                    holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
                    log.info("waiting for the lock %s, held by pid %s", self.path, holder)
                time.sleep(0.5)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd

    def release(self) -> None:
        """Release the lock (closing the file drops it); safe to call twice."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)


class Operator(Controller):
    """One running Training Operator (v1.9.4 unless another is selected), watching every namespace.

    Attributes:
        cp: The control plane it runs against.
        namespace: The operator's own namespace (``MY_POD_NAMESPACE``), holding its Secret.
        version: Its release (``binaries.version``), e.g. ``v1.9.4``.
        schemes: The schemes it serves (``--enable-scheme``), all that its release serves by
            default (``served_schemes``).
        log_path: Its stdout and stderr, appended across restarts (a header line marks each
            start; ``log_since_start`` returns the current run's part).
        binary: The executable.
    """

    def __init__(
        self,
        cp: ControlPlane,
        namespace: str = "kubeflow",
        *,
        schemes: tuple[str, ...] | None = None,
        binary: Path | None = None,
    ) -> None:
        self.cp = cp
        self.namespace = namespace
        self.version = binaries.version("training-operator")
        self.schemes = tuple(s.lower() for s in schemes or served_schemes(self.version))
        self.binary = binary or binaries.find("training-operator")
        self.log_path = Path(cp.workdir) / "training-operator.log"
        self.certificates = webhook_certificates(namespace)
        # Root: a certificate directory of its own (see the module docstring); else the lock.
        self._private = private_mounts_available()
        self.cert_root = Path(cp.workdir) / "k8s-webhook-server" if self._private else None
        self.cert_dir = self.cert_root / "serving-certs" if self.cert_root else CERT_DIR
        self._lock = MachineLock()
        self._launcher = Launcher("training-operator", self.log_path, error=OperatorError)
        self._probe_port = 0
        self._metrics_port = 0
        # Where the webhook server listens (v1.8+), for a test that registers the webhooks.
        self.webhook_port = 0

    @property
    def starts(self) -> int:
        """How many times the operator process was started (failed tries included)."""
        return self._launcher.starts

    # --- lifecycle ------------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        cp: ControlPlane,
        namespace: str = "kubeflow",
        *,
        schemes: tuple[str, ...] | None = None,
        timeout: float = 180.0,
        lock_timeout: float = 600.0,
    ) -> Operator:
        """Prepare the cluster and the certificate directory, start the operator, wait until ready.

        Args:
            cp: A started control plane with the Kubeflow CRDs installed.
            namespace: The operator's namespace (created if missing).
            schemes: Schemes to serve (default: all its release serves); their CRDs must be
                installed.
            timeout: Seconds to wait for ``/readyz`` and for every job controller's workers.
            lock_timeout: Seconds to wait for another operator on this machine to stop.

        Raises:
            devcluster.binaries.BinaryMissing: The operator is not built.
            OperatorError: It exited or did not become ready; the message has its log tail.
        """
        operator = cls(cp, namespace, schemes=schemes)
        if not operator._private:
            operator._lock.acquire(lock_timeout)
        try:
            operator._prepare_cluster()
            operator._launch(timeout)
        except BaseException:
            operator.stop()
            raise
        return operator

    def stop(self, grace: float = 15.0) -> None:
        """Stop the operator (SIGTERM to its process group, SIGKILL after ``grace``), free the lock.

        Safe to call twice. The Secret and namespace stay; the certificate files are removed.
        """
        self._terminate(grace)
        if self._lock.held:
            for name in ("tls.crt", "tls.key", "ca.crt"):
                with contextlib.suppress(FileNotFoundError):
                    (CERT_DIR / name).unlink()
        self._lock.release()

    def pause(self, grace: float = 15.0) -> None:
        """Stop the operator process but keep the machine lock and certificates.

        For a test that keeps the operator down for a while: ``restart()`` then brings it back
        without waiting for another harness's operator, which ``stop()`` would let in.
        """
        self._terminate(grace)

    def restart(self, timeout: float = 180.0) -> None:
        """Stop the operator process and start a new one with the same certificates.

        Works after ``stop()`` too (it takes the machine lock again), which is how a test
        keeps the operator down for a while and then brings it back.
        """
        self._terminate()
        if not self._private:
            self._lock.acquire(600.0)
        self._prepare_cluster()
        self._launch(timeout)

    # --- state ----------------------------------------------------------------------------------

    @property
    def metrics_url(self) -> str:
        """Where its Prometheus metrics are served."""
        return f"http://127.0.0.1:{self._metrics_port}/metrics"

    def metrics(self) -> str:
        """The operator's Prometheus metrics, as text."""
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self._metrics_port}/metrics", timeout=5
        ) as r:
            return str(r.read().decode("utf-8", "replace"))

    def reconciles(self, scheme: str) -> int:
        """How many reconciles one job controller has finished in this run (any result).

        Args:
            scheme: A scheme of ``SCHEMES``, e.g. ``pytorchjob``.
        """
        return int(
            _metric_sum(self.metrics(), "controller_runtime_reconcile_total", "controller", scheme)
        )

    def idle(self, scheme: str) -> bool:
        """Whether one job controller has nothing queued and nothing in progress right now.

        With a log line showing that a job's reconcile began, this tells that it has ended,
        without sleeping.

        Args:
            scheme: A scheme of ``SCHEMES``, e.g. ``pytorchjob``.
        """
        text = self.metrics()
        queued = _metric_sum(text, "workqueue_depth", "name", scheme)
        working = _metric_sum(text, "controller_runtime_active_workers", "controller", scheme)
        return queued == 0 and working == 0

    def wait_for_log(self, pattern: str, *, timeout: float = 60.0) -> re.Match[str]:
        """Wait until the current run's log matches a regular expression.

        Args:
            pattern: A regular expression (searched, multi-line).
            timeout: Seconds to wait.

        Returns:
            The first match.

        Raises:
            OperatorError: No match in time, or the operator exited meanwhile.
        """
        regex = re.compile(pattern, re.MULTILINE)
        found: list[re.Match[str]] = []

        def matched() -> bool:
            match = regex.search(self.log_since_start())
            if match:
                found.append(match)
            return match is not None

        try:
            wait_until(
                matched,
                timeout=timeout,
                what=f"operator log line /{pattern}/",
                watch=self.processes,
            )
        except (TimeoutError, ChildProcessError) as e:
            raise OperatorError(f"{e}\n--- {self.log_path} (tail) ---\n{self.log_tail()}") from e
        return found[0]

    # --- internals ------------------------------------------------------------------------------

    def _prepare_cluster(self) -> None:
        # Imported here: the client is only needed once a control plane exists, and keeping
        # the module importable without it lets tooling inspect the harness cheaply.
        from kubernetes import client  # noqa: PLC0415
        from kubernetes.client import ApiException  # noqa: PLC0415

        core = client.CoreV1Api(self.cp.api())
        try:
            core.create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=self.namespace))
            )
        except ApiException as e:
            if e.status != 409:  # noqa: PLR2004 - 409 Conflict: it exists already
                raise
        secret = client.V1Secret(
            metadata=client.V1ObjectMeta(name=SECRET_NAME, namespace=self.namespace),
            type="Opaque",
            data={k: _b64(v) for k, v in self.certificates.secret_data().items()},
        )
        try:
            core.create_namespaced_secret(self.namespace, secret)
        except ApiException as e:
            if e.status != 409:  # noqa: PLR2004
                raise
            core.replace_namespaced_secret(SECRET_NAME, self.namespace, secret)
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        for name, data in (
            ("tls.crt", self.certificates.tls_crt),
            ("tls.key", self.certificates.tls_key),
            ("ca.crt", self.certificates.ca_crt),
        ):
            path = self.cert_dir / name
            path.write_bytes(data)
            path.chmod(0o600)

    def _env(self) -> dict[str, str]:
        # A clean environment: KUBEFLOW_NAMESPACE from the caller's shell would silently make
        # the operator watch one namespace only, and a stray KUBECONFIG would point elsewhere.
        env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "LC_ALL", "TZ"}}
        env.update(
            KUBECONFIG=str(self.cp.kubeconfig),
            MY_POD_NAMESPACE=self.namespace,
            TMPDIR="/tmp",  # the webhook server's cert dir follows TMPDIR; the rotator's does not
        )
        return env

    def _argv(self, webhook_port: int) -> list[str]:
        argv = [
            str(self.binary),
            f"--kubeconfig={self.cp.kubeconfig}",
            f"--metrics-bind-address=127.0.0.1:{self._metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{self._probe_port}",
            # v1.7 has no webhooks; its manager's (unused) webhook port has another flag.
            f"--webhook-server-port={webhook_port}"
            if _release(self.version) >= (1, 8)
            else f"--monitoring-port={webhook_port}",
            "--leader-elect=false",
        ]
        if set(self.schemes) != set(served_schemes(self.version)):
            argv += [f"--enable-scheme={s}" for s in self.schemes]
        if self.cert_root is not None:
            # The target exists on the machine (as it always has), so the namespace needs a
            # plain bind only: no overlay of /tmp, which holds the source itself.
            CERT_DIR.parent.mkdir(parents=True, exist_ok=True)
            binds = {CERT_DIR.parent: self.cert_root}
            return private_mounts(binds, argv)
        return argv

    def _launch(self, timeout: float) -> None:
        def command() -> Command:
            self._metrics_port, self._probe_port = free_port(), free_port()
            self.webhook_port = free_port()
            return Command(self._argv(self.webhook_port), self._env(), self._probe_port)

        self._launcher.launch(command, lambda process: self._wait_ready(process, timeout))

    def _wait_ready(self, process: Process, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        wait_until(
            lambda: self.ready, timeout=timeout, what="training-operator /readyz", watch=[process]
        )
        # /readyz turns 200 when the certificates are ready; the job controllers are
        # registered just after, in a goroutine. Wait for all of them so that "started"
        # means "reconciling".

        def controllers_started() -> bool:
            log = self.log_since_start()
            return all(_workers_started(log, scheme) for scheme in self.schemes)

        wait_until(
            controllers_started,
            timeout=max(1.0, deadline - time.monotonic()),
            what="the job controllers' workers",
            watch=[process],
        )

    def _terminate(self, grace: float = 15.0) -> None:
        self._launcher.stop(grace)


def _workers_started(log: str, scheme: str) -> bool:
    # controller-runtime logs "Starting workers" with the controller's name, in the console
    # (development) encoder of zap: ... "controller": "pytorchjob-controller" ...
    return re.search(rf'Starting workers.*"controller": "{scheme}-controller"', log) is not None


def _metric_sum(text: str, metric: str, label: str, scheme: str) -> float:
    # Sum of one metric's samples for "<scheme>-controller" in the Prometheus text format.
    pattern = re.compile(
        rf'^{metric}\{{[^}}]*{label}="{scheme}-controller"[^}}]*\}} (\S+)$', re.MULTILINE
    )
    return sum(float(value) for value in pattern.findall(text))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
