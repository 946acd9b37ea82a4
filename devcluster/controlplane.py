"""A real, throw-away Kubernetes control plane: etcd and kube-apiserver as child processes.

``ControlPlane.start()`` gives tests, benchmarks and ``scripts/devcluster`` a secure-port-only
kube-apiserver with RBAC, client-certificate users, service-account tokens (TokenRequest), an
audit log of every request and, by default, the six Training Operator CRDs established. There
is no kube-controller-manager, scheduler or kubelet, so namespaces never finish deleting, pods
stay unscheduled and nothing is garbage-collected.

Everything lives in one temporary directory that ``stop()`` removes after stopping the
processes; ``stop()`` also runs at interpreter exit and on SIGTERM/SIGHUP. This module owns the
processes; talking to the running apiserver as its admin is :class:`devcluster.admin.AdminClient`'s.
"""

from __future__ import annotations

import functools
import http.client
import json
import logging
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path

from devcluster import audit, binaries, kubeconfig, operator_crds, pki, processes
from devcluster.admin import ADMIN_USER, AdminClient, ApiError

__all__ = ["ADMIN_USER", "AdminClient", "ApiError", "ControlPlane", "ControlPlaneError"]

log = logging.getLogger(__name__)

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# Names the serving certificate answers to: loopback for us, the in-cluster names for
# completeness (the kubernetes Service gets the first IP of the service range).
_SERVING_HOSTS = [
    "127.0.0.1",
    "localhost",
    "10.0.0.1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
]
_PORT_ATTEMPTS = 5
_ETCD_TIMEOUT = 30.0
_APISERVER_TIMEOUT = 120.0
_LOG_TAIL_LINES = 30


class ControlPlaneError(RuntimeError):
    """The control plane could not start; the message carries the relevant log tails."""


@dataclass(frozen=True)
class NodeOptions:
    """How the API server differs when a real node joins it (see ``devcluster.node``).

    Attributes:
        advertise_address: The node's address, where pods reach the API server through the
            ``kubernetes`` Service; also added to the serving certificate.
        apiserver_args: Further kube-apiserver flags (kubelet client certificate, egress).
    """

    advertise_address: str
    apiserver_args: tuple[str, ...] = ()


class ControlPlane(AdminClient, processes.StopsOnExit):
    """A running etcd + kube-apiserver pair; build one with ``ControlPlane.start()``.

    Its requests, CRDs, users, namespaces and audit log are :class:`AdminClient`'s; this class
    starts, watches and stops the processes.

    Attributes:
        kubeconfig: Admin kubeconfig (client certificate, group ``system:masters``).
        timings: Seconds spent per start-up phase (``etcd``, ``apiserver``, ``crds``, ``total``).
        processes: The running child processes, in start order.
    """

    def __init__(
        self, workdir: Path, node: NodeOptions | None = None, apiserver_args: tuple[str, ...] = ()
    ) -> None:
        super().__init__(workdir, pki.CertificateAuthority())
        self.node = node
        self._apiserver_args = apiserver_args
        self.port = 0
        self.kubeconfig = workdir / "kubeconfig"
        self.timings: dict[str, float] = {}
        self.processes: list[processes.Process] = []
        self._admin = self._ca.client_cert(ADMIN_USER, ["system:masters"])
        self._stop_lock = threading.Lock()
        self._stopped = False
        self._cleanup_handle = processes.on_exit(self.stop)

    # --- lifecycle ----------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        crds: bool = True,
        node: NodeOptions | None = None,
        apiserver_args: tuple[str, ...] = (),
    ) -> ControlPlane:
        """Start etcd and kube-apiserver, wait until they serve, and install the CRDs.

        Args:
            crds: Install the six Training Operator CRDs and wait until they are established.
            node: Settings for a control plane that a real node joins (``devcluster.node``);
                None for the API server alone.
            apiserver_args: Further kube-apiserver flags (a benchmark's ``--watch-cache-sizes``).

        Returns:
            The running control plane; stop it with ``stop()`` or use it as a context manager.

        Raises:
            devcluster.binaries.BinaryMissing: etcd or kube-apiserver is not built.
            ControlPlaneError: A process failed or timed out; the message has its log tail.
        """
        etcd_bin = binaries.find("etcd")
        apiserver_bin = binaries.find("kube-apiserver")
        crd_files = operator_crds.crd_files() if crds else []
        cp = cls(Path(tempfile.mkdtemp(prefix="devcluster-")), node, apiserver_args)
        with processes.starting(
            "control plane", cp.timings, tails=cp._log_tails, stop=cp.stop, error=ControlPlaneError
        ) as mark:
            cp._write_pki()
            etcd_url = cp._start_etcd(etcd_bin)
            mark("etcd")
            cp._start_apiserver(apiserver_bin, etcd_url)
            mark("apiserver")
            if crd_files:
                cp.install_crds(crd_files)
                mark("crds")
        log.info("control plane ready at %s in %s", cp.server, cp.describe_timings())
        return cp

    def stop(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL) and remove the working directory.

        Idempotent; also runs at interpreter exit and on SIGTERM/SIGHUP.
        """
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        processes.cancel(self._cleanup_handle)
        self.close()
        # The apiserver first: stopped after etcd, it would spend its grace period retrying.
        for process in reversed(self.processes):
            process.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
        log.debug("control plane at %s stopped", self.server)

    # --- faults -------------------------------------------------------------------------------

    def kill_apiserver(self) -> processes.Process:
        """SIGKILL kube-apiserver, as a crash would (no graceful shutdown); returns its record.

        etcd keeps running, so :meth:`revive_apiserver` brings the same data back.
        """
        [apiserver] = [p for p in self.processes if p.name == "kube-apiserver"]
        os.killpg(apiserver.pid, signal.SIGKILL)
        processes.wait_until(
            lambda: apiserver.poll() is not None, timeout=10, what="the apiserver to die"
        )
        return apiserver

    def revive_apiserver(
        self, dead: processes.Process, *, poll: float = 0.5, timeout: float = 120
    ) -> None:
        """Start a killed kube-apiserver again (same arguments, port and etcd).

        Returns once it is ready and serves PyTorchJobs again (the CRDs' handlers come back
        with it), checking every ``poll`` seconds at most: a benchmark timing the outage
        passes a short one.
        """
        revived = processes.Process.start(dead.name, dead.argv, dead.log_path)
        self.processes[self.processes.index(dead)] = revived

        def serving() -> bool:
            ready = self.request("GET", "/readyz", expect=(200,)) is not None
            return ready and self.request("GET", "/apis/kubeflow.org/v1/pytorchjobs") is not None

        processes.wait_until(
            serving,
            timeout=timeout,
            what="the restarted apiserver to serve PyTorchJobs",
            interval=min(poll, 0.05),
            max_interval=poll,
            watch=[revived],
        )

    def describe_timings(self) -> str:
        """The start-up timings as one line, e.g. ``9.1s (etcd 0.4s, apiserver 6.2s, ...)``."""
        return processes.describe_timings(self.timings)

    def _log_tails(self) -> str:
        return processes.log_tails(self.processes, _LOG_TAIL_LINES)

    # --- start-up steps -----------------------------------------------------------------------

    def _write_pki(self) -> None:
        pki_dir = self.workdir / "pki"
        pki_dir.mkdir(mode=0o700)
        hosts = _SERVING_HOSTS + ([self.node.advertise_address] if self.node else [])
        serving = self._ca.serving_cert(hosts)
        sa_private, sa_public = pki.service_account_keys()
        files = {
            "ca.crt": self.ca_pem,
            "apiserver.crt": serving.cert_pem,
            "apiserver.key": serving.key_pem,
            "admin.crt": self._admin.cert_pem,
            "admin.key": self._admin.key_pem,
            "service-account.key": sa_private,
            "service-account.pub": sa_public,
        }
        for name, data in files.items():
            (pki_dir / name).write_bytes(data)
        audit.write_policy(self.workdir / "audit-policy.yaml")

    def _start_with_port_retry(
        self,
        name: str,
        argv_for: Callable[[int, int], list[str]],
        ready: Callable[[int, int], bool],
        timeout: float,
    ) -> tuple[int, int]:
        """Start a process on fresh free ports, retrying when a port was taken meanwhile."""
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            ports = (processes.free_port(), processes.free_port())
            log_path = self.workdir / "logs" / f"{name}.log"
            offset = log_path.stat().st_size if log_path.exists() else 0
            process = processes.Process.start(name, argv_for(*ports), log_path)
            self.processes.append(process)
            try:
                processes.wait_until(
                    functools.partial(ready, *ports),
                    timeout=timeout,
                    what=f"{name} to serve",
                    watch=[process],
                )
            except ChildProcessError:
                with log_path.open("rb") as f:
                    f.seek(offset)
                    this_attempt = f.read().decode("utf-8", "replace")
                if processes.ADDRESS_IN_USE not in this_attempt or attempt == _PORT_ATTEMPTS:
                    raise
                log.info("%s: a port was taken meanwhile (attempt %d); retrying", name, attempt)
                self.processes.remove(process)
                process.stop()
                continue
            return ports
        raise AssertionError("unreachable")  # pragma: no cover

    def _start_etcd(self, etcd_bin: Path) -> str:
        data_dir = self.workdir / "etcd"

        def argv(client_port: int, peer_port: int) -> list[str]:
            peer = f"http://127.0.0.1:{peer_port}"
            client = f"http://127.0.0.1:{client_port}"
            # A failed attempt may have left a half-initialised member behind.
            shutil.rmtree(data_dir, ignore_errors=True)
            return [
                str(etcd_bin),
                "--name=devcluster",
                f"--data-dir={data_dir}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=devcluster={peer}",
                # Durability is pointless for a throw-away store and fsync dominates on slow disks.
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ]

        def ready(client_port: int, _peer_port: int) -> bool:
            conn = http.client.HTTPConnection("127.0.0.1", client_port, timeout=2)
            try:
                conn.request("GET", "/health")
                body = conn.getresponse().read()
            finally:
                conn.close()
            return bool(json.loads(body).get("health") == "true")

        client_port, _ = self._start_with_port_retry("etcd", argv, ready, _ETCD_TIMEOUT)
        return f"http://127.0.0.1:{client_port}"

    def _mode_args(self) -> list[str]:
        if self.node is None:
            return [
                # Without it the apiserver looks for a default route, which a sandbox may lack.
                "--advertise-address=127.0.0.1",
                *_loopback_endpoint_args(binaries.version("kube-apiserver")),
                "--authorization-mode=RBAC",
                # No kube-controller-manager creates `default` ServiceAccounts for pods to use.
                "--disable-admission-plugins=ServiceAccount",
            ]
        return [
            # The kubernetes Service's endpoint: a relay in the node's network namespace
            # listens there and forwards to this loopback port.
            f"--advertise-address={self.node.advertise_address}",
            # Node: the kubelet reads only what its own pods need.
            "--authorization-mode=Node,RBAC",
            *self.node.apiserver_args,
        ]

    @property
    def ca(self) -> pki.CertificateAuthority:
        """The CA behind every certificate here, to issue the node's own (kubelet, proxy)."""
        return self._ca

    def _start_apiserver(self, apiserver_bin: Path, etcd_url: str) -> None:
        pki_dir = self.workdir / "pki"

        def argv(port: int, _unused: int) -> list[str]:
            return [
                str(apiserver_bin),
                f"--etcd-servers={etcd_url}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={pki_dir / 'apiserver.crt'}",
                f"--tls-private-key-file={pki_dir / 'apiserver.key'}",
                f"--client-ca-file={pki_dir / 'ca.crt'}",
                f"--secure-port={port}",
                "--bind-address=127.0.0.1",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--allow-privileged=true",
                *self._mode_args(),
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki_dir / 'service-account.pub'}",
                f"--service-account-signing-key-file={pki_dir / 'service-account.key'}",
                f"--audit-policy-file={self.workdir / 'audit-policy.yaml'}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                # One file for the control plane's life: readers keep byte offsets into it
                # (audit.end_offset), which the default rotation at 100 MB breaks (a 2-hour
                # soak lost the first part of its audit log, and once its report, to it).
                "--audit-log-maxsize=0",
                "--profiling=false",
                *self._apiserver_args,
            ]

        def ready(port: int, _unused: int) -> bool:
            self.port = port
            self.server = f"https://127.0.0.1:{port}"
            status, _ = self._raw("GET", "/readyz")
            return status == HTTPStatus.OK

        self._start_with_port_retry("kube-apiserver", argv, ready, _APISERVER_TIMEOUT)
        self.kubeconfig = kubeconfig.write(
            self.kubeconfig,
            kubeconfig.render(
                server=self.server, ca_pem=self.ca_pem, user=ADMIN_USER, client=self._admin
            ),
        )
        # The bootstrap controller creates it shortly after /readyz; most tests need it.
        processes.wait_until(
            lambda: self._raw("GET", "/api/v1/namespaces/default")[0] == HTTPStatus.OK,
            timeout=_APISERVER_TIMEOUT,
            what="namespace default",
            watch=self.processes,
        )


def _loopback_endpoint_args(version: str) -> list[str]:
    """What lets a kube-apiserver of ``version`` advertise 127.0.0.1 without a node.

    From 1.37 the endpoint reconciler refuses a loopback advertise address ("cannot use public
    IP 127.0.0.1 with endpoint reconciler"); without a node nothing reaches the ``kubernetes``
    Service's endpoints anyway, so 1.37 and later run without the reconciler. Earlier minors
    keep their default, the one the pinned 1.36 has always run with.
    """
    minor = int(version.lstrip("v").split(".")[1])
    return ["--endpoint-reconciler-type=none"] if minor >= 37 else []  # noqa: PLR2004
