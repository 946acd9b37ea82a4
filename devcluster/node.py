"""A real single-node Kubernetes: the control plane plus a kubelet that runs containers.

``Node.start()`` starts, beside etcd and kube-apiserver (``devcluster.controlplane``):
kube-controller-manager and kube-scheduler on the host's loopback, then a network namespace
of its own holding the node: containerd 2.x with runc, the CNI bridge (``cni0``, pods in
``POD_SUBNET``), the kubelet and kube-proxy. Images come from the OCI archives that
``scripts/build-image`` writes; they are imported into containerd under their full references,
so nothing is pulled. PodSecurity enforces ``restricted`` on ``SWEEPER_NAMESPACE``.

Networking never leaves the machine and gives no address to the host's namespace:

- host tools reach the API server on 127.0.0.1 as usual;
- the ``kubernetes`` Service's endpoint is ``NODE_IP:<apiserver port>`` (the advertise
  address); a relay listens there inside the namespace and forwards, through a Unix socket,
  to the API server's loopback port (``devcluster.relay``). The kubelet and kube-proxy use the
  same relay; pods reach it through the Service's virtual IP (kube-proxy's iptables rules);
- kube-apiserver reaches the kubelet (logs, exec) through its egress selector: an HTTP
  CONNECT proxy on a Unix socket that dials from inside the namespace.

``stop()`` (also at interpreter exit, on SIGTERM/SIGHUP and when ``start`` fails) stops the
node's processes, kills the containers' shims and processes, unmounts what the kubelet and
containerd mounted, deletes the namespace (its iptables rules go with it), removes the pods'
cgroups and the working directory, then stops the control plane.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devcluster import binaries, jobs, kubeconfig, pki, processes
from devcluster.controlplane import ControlPlane, NodeOptions

log = logging.getLogger(__name__)

NODE_NAME = "devcluster-node"
NODE_IP = "10.88.0.1"
POD_SUBNET = "10.88.0.0/16"
BRIDGE = "cni0"
SWEEPER_NAMESPACE = "kubeflow-deadline-sweeper"
CNI_BIN_DIR = Path("/usr/lib/cni")
NODE_BINARIES = (
    "kubelet",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "runc",
)
_HOST_TOOLS = ("ip", "nsenter", "iptables", "iptables-restore", "conntrack", "mount", "umount")
_CNI_PLUGINS = ("bridge", "host-local", "loopback")
IMAGE_SCRIPT = binaries.REPO_ROOT / "scripts" / "build-image"
_NODE_TIMEOUT = 180.0
# What a container must say about itself to pass PodSecurity "restricted".
RESTRICTED_SECURITY_CONTEXT: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
_RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


class NodeUnavailable(RuntimeError):  # noqa: N818 - names the condition, like BinaryMissing
    """This machine cannot run the node; the message says what is missing and how to get it."""


class NodeError(RuntimeError):
    """The node did not start; the message carries the relevant log tails."""


@dataclass(frozen=True)
class Image:
    """One image that ``scripts/build-image`` built.

    Attributes:
        reference: Its full name on the node, e.g. ``localhost/kubeflow-deadline-sweeper:0.1.0``.
        archive: The OCI archive it is imported from.
    """

    reference: str
    archive: Path

    @property
    def repository(self) -> str:
        """The reference without its tag (the chart's ``image.repository``)."""
        return self.reference.rpartition(":")[0]

    @property
    def tag(self) -> str:
        """The tag (the chart's ``image.tag``)."""
        return self.reference.rpartition(":")[2]


def image_dir() -> Path:
    """Where ``scripts/build-image`` writes its archives (``--print-dir``)."""
    out = subprocess.run(
        ["bash", str(IMAGE_SCRIPT), "--print-dir"], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip())


def images() -> dict[str, Image]:
    """The built images by role (``sweeper``, ``workload``, ``pause``).

    Raises:
        NodeUnavailable: They have not been built.
    """
    manifest = image_dir() / "images.json"
    try:
        raw: dict[str, Any] = json.loads(manifest.read_text(encoding="utf-8"))
        found = {
            k: Image(v["reference"], Path(v["archive"]))
            for k, v in raw.items()
            if isinstance(v, dict)  # beside them: "inputs", the digest of what was built
        }
    except (OSError, ValueError, KeyError) as e:
        raise NodeUnavailable(f"the images are not built ({e}); run scripts/build-image") from e
    missing = [str(i.archive) for i in found.values() if not i.archive.exists()]
    if missing or set(found) != {"sweeper", "workload", "pause"}:
        raise NodeUnavailable(f"image archives missing {missing}; run scripts/build-image")
    return found


def missing_prerequisites() -> list[str]:
    """Why this machine cannot run the node; empty when it can.

    Checked up front, so that a test can skip (or, in CI, fail) with the reason instead of a
    half-started node.
    """
    reasons: list[str] = []
    if os.geteuid() != 0:
        reasons.append("not root (network namespaces, mounts and containers need root)")
    tools = [t for t in _HOST_TOOLS if shutil.which(t) is None]
    plugins = [p for p in _CNI_PLUGINS if not (CNI_BIN_DIR / p).exists()]
    if tools or plugins:
        reasons.append(
            f"missing {', '.join(tools + [f'{CNI_BIN_DIR}/{p}' for p in plugins])}: "
            "run scripts/install-node-deps"
        )
    not_built = [n for n in NODE_BINARIES if not os.access(binaries.path(n), os.X_OK)]
    if not_built:
        reasons.append(f"not built: {', '.join(not_built)}: run scripts/build-binaries --node")
    try:
        images()
    except NodeUnavailable as e:
        reasons.append(str(e))
    return reasons


def _run(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NodeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


class Node(processes.StopsOnExit):
    """A running single-node cluster; build one with ``Node.start()``.

    Attributes:
        cp: The control plane (its ``kubeconfig`` is the admin's, on host loopback).
        workdir: The node's own temporary directory (containerd, kubelet, sockets, logs).
        netns: Name of the node's network namespace (``ip netns``).
        images: The images loaded on the node, by role.
        timings: Seconds per start-up phase.
        processes: The node's processes (beside ``cp.processes``), in start order.
    """

    def __init__(self, workdir: Path, netns: str, found: dict[str, Image]) -> None:
        self.workdir = workdir
        self.netns = netns
        self.images = found
        self.cp: ControlPlane | None = None
        self.timings: dict[str, float] = {}
        self.processes: list[processes.Process] = []
        self._ca = pki.CertificateAuthority("devcluster-node-ca")
        self._lock = threading.Lock()
        self._stopped = False
        self._netns_created = False
        self._cleanup_handle = processes.on_exit(self.stop)

    # --- lifecycle ----------------------------------------------------------------------------

    @classmethod
    def start(cls, crds: bool = True) -> Node:
        """Start the control plane and the node; return once the node is Ready.

        Args:
            crds: Install the Training Operator CRDs (as ``ControlPlane.start``).

        Raises:
            NodeUnavailable: The machine cannot run a node (see ``missing_prerequisites``).
            NodeError: Something failed to start; everything started is torn down first.
        """
        reasons = missing_prerequisites()
        if reasons:
            raise NodeUnavailable("cannot run a node here: " + "; ".join(reasons))
        # Short: Unix socket paths are limited to 107 bytes.
        workdir = Path(tempfile.mkdtemp(prefix="dcnode-", dir="/tmp"))
        node = cls(workdir, f"devcluster-{secrets.token_hex(4)}", images())
        with processes.starting(
            "node", node.timings, tails=node.log_tails, stop=node.stop, error=NodeError
        ) as mark:
            node._write_pki()
            node._create_netns()
            mark("netns")
            node.cp = ControlPlane.start(crds=crds, node=node._apiserver_options())
            mark("control plane")
            node._start_relays()
            node._start_controllers()
            node._start_containerd()
            node._import_images()
            mark("containerd+images")
            node._start_kubelet()
            node._start_kube_proxy()
            node._wait_ready()
            mark("node")
        log.info("node ready in %s", node.describe_timings())
        return node

    def stop(self) -> None:
        """Tear everything down (idempotent; see the module docstring for what that covers)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        processes.cancel(self._cleanup_handle)
        # kube-proxy and the kubelet first, the relays and controllers last.
        for process in reversed(self.processes):
            process.stop()
        clean_leftovers(self.workdir, self.netns if self._netns_created else None)
        if self.cp is not None:
            self.cp.stop()

    def describe_timings(self) -> str:
        """The start-up timings as one line."""
        return processes.describe_timings(self.timings)

    def log_tails(self, lines: int = 25) -> str:
        """The last lines of every node process's log, for failure messages."""
        return processes.log_tails(self.processes, lines)

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (host loopback)."""
        return self.control_plane.kubeconfig

    @property
    def control_plane(self) -> ControlPlane:
        """The control plane, once started (``cp`` is None before that)."""
        if self.cp is None:
            raise NodeError("the control plane is not running")
        return self.cp

    # --- the namespace, certificates, relays --------------------------------------------------

    def _in_netns(self, argv: list[str]) -> list[str]:
        # Only the network namespace: `ip netns exec` would also remount /sys in a private
        # mount namespace, hiding the cgroup mounts from the kubelet and runc.
        return ["nsenter", f"--net=/var/run/netns/{self.netns}", *argv]

    def _create_netns(self) -> None:
        _run(["ip", "netns", "add", self.netns])
        self._netns_created = True
        for argv in (
            ["ip", "link", "set", "lo", "up"],
            # The bridge exists before the first pod so that the node has its address (the
            # kubelet's node IP, where the relay listens); the CNI bridge plugin adopts it.
            ["ip", "link", "add", BRIDGE, "type", "bridge"],
            ["ip", "addr", "add", f"{NODE_IP}/16", "dev", BRIDGE],
            ["ip", "link", "set", BRIDGE, "up"],
            ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"],
        ):
            _run(self._in_netns(argv))

    def _write(self, name: str, data: bytes | str, mode: int = 0o600) -> Path:
        path = self.workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        path.chmod(mode)
        return path

    def _write_pki(self) -> None:
        # The kubelet's own CA: it signs the kubelet's serving certificate and the client
        # certificate kube-apiserver shows the kubelet.
        self._write("pki/node-ca.crt", self._ca.cert_pem)
        serving = self._ca.serving_cert([NODE_NAME, NODE_IP])
        self._write("pki/kubelet.crt", serving.cert_pem)
        self._write("pki/kubelet.key", serving.key_pem)
        client = self._ca.client_cert("kube-apiserver-kubelet-client", ["system:masters"])
        self._write("pki/apiserver-kubelet-client.crt", client.cert_pem)
        self._write("pki/apiserver-kubelet-client.key", client.key_pem)

    def _apiserver_options(self) -> NodeOptions:
        egress = self._write(
            "egress.yaml",
            "apiVersion: apiserver.k8s.io/v1beta1\n"
            "kind: EgressSelectorConfiguration\n"
            "egressSelections:\n"
            "- name: cluster\n"
            "  connection:\n"
            "    proxyProtocol: HTTPConnect\n"
            "    transport:\n"
            "      uds:\n"
            f"        udsName: {self.workdir / 'egress.sock'}\n",
        )
        pki_dir = self.workdir / "pki"
        return NodeOptions(
            advertise_address=NODE_IP,
            apiserver_args=(
                f"--kubelet-client-certificate={pki_dir / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki_dir / 'apiserver-kubelet-client.key'}",
                f"--kubelet-certificate-authority={pki_dir / 'node-ca.crt'}",
                # The node's name resolves nowhere; its address does, inside the namespace.
                "--kubelet-preferred-address-types=InternalIP",
                f"--egress-selector-config-file={egress}",
                "--enable-admission-plugins=NodeRestriction",
            ),
        )

    def _python(self, name: str, args: list[str], *, netns: bool) -> None:
        env = dict(os.environ, PYTHONPATH=str(binaries.REPO_ROOT))
        argv = [sys.executable, "-m", "devcluster.relay", *args]
        process = processes.Process.start(
            name, self._in_netns(argv) if netns else argv, self.workdir / f"logs/{name}.log", env
        )
        self.processes.append(process)

    def _start_relays(self) -> None:
        api_sock = str(self.workdir / "apiserver.sock")
        port = str(self.control_plane.port)
        self._python("relay-host", ["unix-to-tcp", api_sock, "127.0.0.1", port], netns=False)
        self._python("relay-node", ["tcp-to-unix", NODE_IP, port, api_sock], netns=True)
        egress = str(self.workdir / "egress.sock")
        self._python("egress-proxy", ["connect-proxy", egress], netns=True)
        processes.wait_until(
            lambda: Path(api_sock).exists() and (self.workdir / "egress.sock").exists(),
            timeout=30,
            what="the relays' sockets",
            watch=self.processes,
        )

    def _user_kubeconfig(self, name: str, user: str, groups: list[str], server: str) -> Path:
        cp = self.control_plane
        client = cp.ca.client_cert(user, groups)
        text = kubeconfig.render(server=server, ca_pem=cp.ca_pem, user=user, client=client)
        return kubeconfig.write(self.workdir / "kubeconfigs" / f"{name}.yaml", text)

    # --- controllers ----------------------------------------------------------------------------

    def _start_controllers(self) -> None:
        pki_dir = self.control_plane.workdir / "pki"
        self._start(
            "kube-controller-manager",
            [
                str(binaries.find("kube-controller-manager")),
                f"--kubeconfig={self.control_plane.kubeconfig}",
                f"--service-account-private-key-file={pki_dir / 'service-account.key'}",
                # Published as kube-root-ca.crt in every namespace: pods verify the API server.
                f"--root-ca-file={pki_dir / 'ca.crt'}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                "--secure-port=0",
                "--controllers=*",
            ],
            netns=False,
        )
        self._start(
            "kube-scheduler",
            [
                str(binaries.find("kube-scheduler")),
                f"--kubeconfig={self.control_plane.kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
            ],
            netns=False,
        )

    def _start(
        self, name: str, argv: list[str], *, netns: bool, env: dict[str, str] | None = None
    ) -> processes.Process:
        process = processes.Process.start(
            name,
            self._in_netns(argv) if netns else argv,
            self.workdir / "logs" / f"{name}.log",
            env,
        )
        self.processes.append(process)
        return process

    # --- containerd -----------------------------------------------------------------------------

    @property
    def containerd_socket(self) -> Path:
        """The gRPC socket of the node's containerd (for ``ctr -a``)."""
        return self.workdir / "containerd" / "containerd.sock"

    def _start_containerd(self) -> None:
        base = self.workdir / "containerd"
        cni_conf = base / "net.d"
        cni_conf.mkdir(parents=True)
        (cni_conf / "10-devcluster.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": "devcluster",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": BRIDGE,
                            "isGateway": True,
                            "ipMasq": False,
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                                "dataDir": str(base / "ipam"),
                            },
                        }
                    ],
                },
                indent=2,
            ),
            encoding="utf-8",
        )
        runc = binaries.find("runc")
        config = f"""version = 3
root = '{base / "root"}'
state = '{base / "state"}'

[grpc]
  address = '{self.containerd_socket}'

[ttrpc]
  address = '{base / "containerd.sock.ttrpc"}'

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '{self.images["pause"].reference}'

[plugins.'io.containerd.cri.v1.runtime']
  # Root here may not lower oom_score_adj (no CAP_SYS_RESOURCE): clamp what the kubelet asks.
  restrict_oom_score_adj = true
  # Pods' network namespaces under the state directory, not the machine's /var/run/netns.
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = '{runc}'
      Root = '{base / "runc"}'
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['{CNI_BIN_DIR}']
    conf_dir = '{cni_conf}'
"""
        config_path = self._write("containerd/config.toml", config)
        # The shim is found on PATH, next to containerd.
        path = os.pathsep.join(
            [str(binaries.find("containerd-shim-runc-v2").parent), os.environ.get("PATH", "")]
        )
        self._start(
            "containerd",
            [str(binaries.find("containerd")), f"--config={config_path}", "--log-level=warn"],
            netns=True,
            env=dict(os.environ, PATH=path),
        )
        processes.wait_until(
            lambda: self._ctr("version", check=False).returncode == 0,
            timeout=60,
            what="containerd to serve",
            watch=self.processes,
        )

    def _ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(binaries.find("ctr")), "--address", str(self.containerd_socket), "-n", "k8s.io"]
        return _run([*argv, *args], check=check)

    def _import_images(self) -> None:
        for image in self.images.values():
            self._ctr("images", "import", "--snapshotter", "overlayfs", str(image.archive))
        listed = set(self._ctr("images", "list", "--quiet").stdout.split())
        missing = [i.reference for i in self.images.values() if i.reference not in listed]
        if missing:
            raise NodeError(f"images not named as expected after import: {missing} not in {listed}")

    # --- kubelet, kube-proxy ----------------------------------------------------------------

    def _start_kubelet(self) -> None:
        kubelet_dir = self.workdir / "kubelet"
        kubelet_dir.mkdir()
        resolv = self._write("resolv.conf", f"nameserver {NODE_IP}\n", 0o644)
        server = f"https://{NODE_IP}:{self.control_plane.port}"
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # This machine mounts cgroup v1, which the kubelet refuses by default since 1.35.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupsPerQOS": False,
            "enforceNodeAllocatable": [],
            "failSwapOn": False,
            "evictionHard": {"memory.available": "1Mi"},
            # The preloaded images cannot be pulled again: never collect them.
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "resolvConf": str(resolv),
            "podLogsDir": str(self.workdir / "pod-logs"),
            "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
            "imageServiceEndpoint": f"unix://{self.containerd_socket}",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.workdir / "pki" / "node-ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "tlsCertFile": str(self.workdir / "pki" / "kubelet.crt"),
            "tlsPrivateKeyFile": str(self.workdir / "pki" / "kubelet.key"),
            "readOnlyPort": 0,
            "healthzPort": 0,
            "serializeImagePulls": False,
            "clusterDomain": "cluster.local",
            "protectKernelDefaults": False,
            "staticPodPath": "",
            "nodeStatusReportFrequency": "10s",
        }
        config_path = self._write("kubelet/config.json", json.dumps(config, indent=2))
        kubeconfig_path = self._user_kubeconfig(
            "kubelet", f"system:node:{NODE_NAME}", ["system:nodes"], server
        )
        self._start(
            "kubelet",
            [
                str(binaries.find("kubelet")),
                f"--config={config_path}",
                f"--kubeconfig={kubeconfig_path}",
                f"--root-dir={kubelet_dir}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={NODE_IP}",
                "--v=1",
            ],
            netns=True,
        )

    def _start_kube_proxy(self) -> None:
        server = f"https://{NODE_IP}:{self.control_plane.port}"
        kubeconfig_path = self._user_kubeconfig("kube-proxy", "system:kube-proxy", [], server)
        config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig_path)},
            "mode": "iptables",
            "clusterCIDR": POD_SUBNET,
            "hostnameOverride": NODE_NAME,
            "bindAddress": NODE_IP,
            "healthzBindAddress": "",
            "metricsBindAddress": "127.0.0.1:10249",  # inside the namespace: always free
            # Leave the kernel's conntrack settings alone (they are not per namespace).
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
            "iptables": {"localhostNodePorts": False},
        }
        config_path = self._write("kube-proxy.json", json.dumps(config, indent=2))
        self._start(
            "kube-proxy",
            [str(binaries.find("kube-proxy")), f"--config={config_path}", "--v=1"],
            netns=True,
        )

    def _wait_ready(self) -> None:
        cp = self.control_plane

        def ready() -> bool:
            status, node = cp._raw("GET", f"/api/v1/nodes/{NODE_NAME}")
            if status != 200:  # noqa: PLR2004 - HTTP OK
                return False
            conditions = node.get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        processes.wait_until(
            ready, timeout=_NODE_TIMEOUT, what=f"node {NODE_NAME} Ready", watch=self.processes
        )
        # The kubernetes Service's rules, so that pods reach the API server from their start.
        processes.wait_until(
            lambda: "default/kubernetes" in self.iptables_save(),
            timeout=_NODE_TIMEOUT,
            what="kube-proxy's rules for the kubernetes Service",
            watch=self.processes,
        )
        self.ensure_namespace(SWEEPER_NAMESPACE)

    def training_manifest(
        self, kind: str, name: str, *, deadline: int | None, workers: int = 1
    ) -> dict[str, Any]:
        """A Kubeflow job (``devcluster.jobs.manifest``) whose containers really run here.

        Each replica runs the workload image, which never finishes by itself, loaded on the
        node (never pulled), under the restricted profile, with a small request so that many
        fit on this node.
        """
        body = jobs.manifest(kind, name, active_deadline_seconds=deadline, workers=workers)
        for spec in body["spec"][jobs.KINDS[kind].replica_specs].values():
            spec["restartPolicy"] = "Never"
            (container,) = spec["template"]["spec"]["containers"]
            container.pop("command", None)
            container.update(
                image=self.images["workload"].reference,
                imagePullPolicy="Never",
                securityContext=RESTRICTED_SECURITY_CONTEXT,
                resources={"requests": {"cpu": "10m", "memory": "16Mi"}},
            )
        return body

    def iptables_save(self) -> str:
        """The node namespace's iptables rules (kube-proxy's), for diagnostics."""
        return _run(self._in_netns(["iptables-save"]), check=False).stdout

    def ensure_namespace(self, name: str, labels: dict[str, str] | None = None) -> str:
        """Create a namespace (PodSecurity ``restricted`` by default) and return its name.

        Waits for its ``default`` ServiceAccount, which pods need before they can be created.
        """
        cp = self.control_plane
        cp.request(
            "POST",
            "/api/v1/namespaces",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": labels if labels is not None else _RESTRICTED},
            },
            expect=(201, 409),
        )
        processes.wait_until(
            lambda: cp._raw("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")[0] == 200,  # noqa: PLR2004
            timeout=60,
            what=f"ServiceAccount default in {name}",
        )
        return name

    # --- teardown ---------------------------------------------------------------------------------


def clean_leftovers(workdir: Path, netns: str | None) -> None:
    """Remove what a node leaves behind once its processes are stopped (or gone).

    ``Node.stop`` calls it, and so does ``scripts/devcluster down`` when the supervisor that
    owned the node died without cleaning up.

    Args:
        workdir: The node's working directory.
        netns: Its network namespace, or None if it was never created.
    """
    ids = _container_ids(workdir / "containerd" / "state")
    _kill_containers(workdir)
    _unmount_all(workdir)
    _remove_cgroups(ids)
    if netns is not None:
        _run(["ip", "netns", "delete", netns], check=False)
    shutil.rmtree(workdir, ignore_errors=True)


def _kill_containers(workdir: Path) -> None:
    # The shims outlive containerd (they run in their own sessions): find them by the
    # socket they were given, then kill them with every process below them (the
    # containers, pause included).
    marker = str(workdir)
    parents: dict[int, int] = {}
    roots: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(stat.rpartition(")")[2].split()[1])
        if "containerd-shim" in cmdline and marker in cmdline:
            roots.append(pid)
    doomed = set(roots)
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in doomed and pid not in doomed:
                doomed.add(pid)
                grew = True
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in doomed) and time.monotonic() < deadline:
        time.sleep(0.1)


def _unmount_all(workdir: Path) -> None:
    # The kubelet's volumes, containerd's snapshots and the pods' network namespaces, in
    # reverse mount order so that nested mounts go first.
    prefix = str(workdir) + "/"
    for _ in range(3):
        mounts = [
            line.split()[4]
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(prefix)
        ]
        if not mounts:
            return
        for mount in reversed(mounts):
            _run(["umount", "--lazy", mount], check=False)


def _remove_cgroups(ids: list[str]) -> None:
    # runc created one cgroup per container under each v1 hierarchy, named after the
    # container; they are empty once the processes are gone. The pods' own cgroups are
    # named after the pod UID ("pod<uid>") when the kubelet makes them.
    if not ids:
        return
    pattern = re.compile("|".join(re.escape(i) for i in ids))
    root = Path("/sys/fs/cgroup")
    for hierarchy in root.iterdir():
        for directory in sorted(hierarchy.rglob("*"), key=lambda p: -len(p.parts)):
            if directory.is_dir() and pattern.search(directory.name):
                try:
                    directory.rmdir()
                except OSError:
                    log.debug("cgroup %s not removed", directory)


def _container_ids(state: Path) -> list[str]:
    # containerd's state directory holds one directory per task, named by its id.
    tasks = state / "io.containerd.runtime.v2.task" / "k8s.io"
    try:
        return [p.name for p in tasks.iterdir()]
    except OSError:
        return []


def describe(node: Node) -> dict[str, Any]:
    """What ``scripts/devcluster`` records about a running node (and prints as exports)."""
    return {
        "netns": node.netns,
        "workdir": str(node.workdir),
        "containerd_socket": str(node.containerd_socket),
        "images": {k: v.reference for k, v in node.images.items()},
        "timings": node.timings,
    }
