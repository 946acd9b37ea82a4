"""The sweeper's own Kubernetes client against kubectl: same kubeconfig, same wire, same user.

Each case of ``CASES`` is a kubeconfig (or a ``KUBECONFIG`` list), an environment and flags.
kubectl (``get --raw``, one request) and the sweeper (its real CLI, a dry run: discovery and a
list) each run it against the module's loopback ``recorder.Recorder`` (reached directly or
through ``recorder.TunnelProxy``), and what they presented must be the same: the tunnels
(CONNECT or SOCKS5 target and ``Proxy-Authorization``), and per request the ``Host``, the TLS
server name, ``Authorization``, the client certificate's subject, the ``Impersonate-*``
headers, every header beyond the ordinary ones, and what an exec plugin was handed in
``KUBERNETES_EXEC_INFO``. The paths differ (one request against several) and are not compared.
The cases marked ``identity`` run once more against the real kube-apiserver, whose audit log
is the second witness: the same user, groups and impersonated user for both clients.

Where the sweeper refuses a kubeconfig on purpose (a SOCKS5 proxy, the oidc auth-provider),
a test named for it checks the sweeper's exit code 2 and one-line reason, and records what
kubectl does with the same kubeconfig; so does the one known difference the other way (a CA
file beside CA data, which kubectl refuses).

The wire is compared for two kubectls: the e2e tier's (the pinned minor, or
``SWEEPER_TEST_KUBERNETES_VERSION``'s, with its own control plane) and ``OTHER_KUBECTL``, the
compat tier's newest minor, which ``scripts/test`` builds; the audit log for the first. The
kubeconfig's ``tokenFile`` is re-read by both within a minute at the earliest: the rotation
case shows that neither picks a new token mid-run before then.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane, binaries, pki
from tests.e2e import clusters
from tests.e2e.recorder import Recorder, Seen, Tunnel, TunnelProxy, running

pytestmark = pytest.mark.e2e

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
# A name no resolver knows: only the proxy, which dials 127.0.0.1 whatever the name, reaches it.
PROXIED = "apiserver.sweeper.test"
# Also on the recorder's certificate, as on the kube-apiserver's: the tls-server-name case.
SERVER_NAME = "kubernetes.default.svc"
# Headers that say who the client is and what it accepts, not whom it acts as.
ORDINARY = frozenset(
    {
        "host",
        "user-agent",
        "accept",
        "accept-encoding",
        "connection",
        "content-length",
        "content-type",
        "kubectl-command",
        "kubectl-session",
    }
)
RAW_PATH = "/apis/kubeflow.org/v1"


@dataclass(frozen=True)
class Kit:
    """What a case builds its kubeconfig from, at one site (the recorder or the kube-apiserver).

    ``port`` is the HTTPS server's, ``plain_port`` the recorder's plain HTTP one; ``token``,
    ``other_token`` and ``cert`` are accepted by the kube-apiserver (the recorder accepts
    anything), and ``ca_pem`` signed both servers' certificates.
    """

    folder: Path
    port: int
    plain_port: int
    proxy_port: int
    ca_pem: bytes
    token: str
    other_token: str
    cert: pki.KeyPair

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_data(self) -> str:
        return base64.b64encode(self.ca_pem).decode()

    def file(self, name: str, data: str | bytes) -> str:
        """Write a file beside the kubeconfig; its name, as a kubeconfig names it."""
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return name

    def config(self, name: str, document: dict[str, Any]) -> str:
        """Write one kubeconfig file; its path."""
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", **document}))
        return str(path)

    def single(self, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> str:
        """A kubeconfig of one cluster ``c``, one user ``u`` and context ``here``."""
        cluster = cluster or {"server": self.server, "certificate-authority-data": self.ca_data}
        return self.config(
            "config",
            {
                "current-context": "here",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "here", "context": {"cluster": "c", "user": "u"}}],
            },
        )

    def plugin(self, version: str, *, certificate: bool = False) -> dict[str, Any]:
        """An exec plugin (relative to the kubeconfig): ``token`` or ``cert``, valid a while.

        It appends the ``spec`` kubectl or the sweeper handed it to ``exec-runs.jsonl``.
        """
        script = self.folder / "bin" / "plugin"
        script.parent.mkdir(parents=True, exist_ok=True)
        body = f"""\
            import json, os, pathlib
            info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
            runs = pathlib.Path(__file__).parent.parent / "exec-runs.jsonl"
            with runs.open("a") as f:
                f.write(json.dumps(info["spec"], sort_keys=True) + "\\n")
            kind = {{"apiVersion": "{version}", "kind": "ExecCredential"}}
            print(json.dumps({{**kind, "status": json.loads(os.environ["STATUS"])}}))
            """
        script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
        script.chmod(0o755)
        status: dict[str, str] = {"expirationTimestamp": "2999-01-01T00:00:00Z"}
        if certificate:
            status["clientCertificateData"] = self.cert.cert_pem.decode()
            status["clientKeyData"] = self.cert.key_pem.decode()
        else:
            status["token"] = self.token
        return {
            "apiVersion": version,
            "command": "./bin/plugin",
            "env": [{"name": "STATUS", "value": json.dumps(status)}],
            "interactiveMode": "Never",
        }


@dataclass(frozen=True)
class Setup:
    """A case at one site: ``KUBECONFIG``, more environment, what runs after the first answer."""

    kubeconfig: str
    env: dict[str, str] = field(default_factory=dict)
    after_first: Callable[[], None] | None = None


@dataclass(frozen=True)
class Case:
    """One row of the corpus; ``identity``: also compare the kube-apiserver's audit log."""

    build: Callable[[Kit], Setup]
    flags: tuple[str, ...] = ()
    identity: bool = False


def _merged_list(k: Kit) -> Setup:
    """Three files: missing, then a first that wins, then a second it overlaps."""
    first = k.config(
        "a/config",
        {
            "current-context": "merged",
            "users": [{"name": "u", "user": {"token": k.token}}],
            "contexts": [{"name": "merged", "context": {"cluster": "c", "user": "u"}}],
        },
    )
    second = k.config(
        "b/config",
        {
            "current-context": "later",
            "clusters": [
                {
                    "name": "c",
                    "cluster": {"server": k.server, "certificate-authority-data": k.ca_data},
                }
            ],
            "users": [
                {"name": "u", "user": {"token": "NOT-THE-FIRST-FILES"}},
                {"name": "other", "user": {"token": k.other_token}},
            ],
            "contexts": [{"name": "later", "context": {"cluster": "c", "user": "other"}}],
        },
    )
    return Setup(os.pathsep.join([str(k.folder / "missing"), first, second]))


def _token_file_rotated(k: Kit) -> Setup:
    """The file changes after the first answer: within a minute both keep what they read."""
    name = k.file("secrets/token", "TOKEN-BEFORE\n")

    def rotate() -> None:
        k.file(name, "TOKEN-AFTER\n")

    return Setup(k.single({"tokenFile": name}), after_first=rotate)


def _proxied(k: Kit, proxy_url: str | None = None) -> dict[str, Any]:
    cluster: dict[str, Any] = {
        "server": f"https://{PROXIED}:{k.port}",
        "certificate-authority-data": k.ca_data,
    }
    if proxy_url:
        cluster["proxy-url"] = proxy_url
    return cluster


def _exec_info(k: Kit, ca: str) -> Setup:
    cluster: dict[str, Any] = {"server": k.server, "tls-server-name": SERVER_NAME}
    if ca == "file":
        cluster["certificate-authority"] = k.file("ca.crt", k.ca_pem)
    else:
        cluster["certificate-authority-data"] = k.ca_data
    cluster["extensions"] = [
        {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "sweepers"}}
    ]
    return Setup(k.single({"exec": {**k.plugin(V1), "provideClusterInfo": True}}, cluster))


def _with(
    user: Callable[[Kit], dict[str, Any]],
    cluster: Callable[[Kit], dict[str, Any]] | None = None,
    env: Callable[[Kit], dict[str, str]] | None = None,
) -> Callable[[Kit], Setup]:
    """A builder of one kubeconfig file: the user's fields, the cluster's, the environment."""

    def build(k: Kit) -> Setup:
        return Setup(k.single(user(k), cluster(k) if cluster else None), env(k) if env else {})

    return build


def _token(k: Kit) -> dict[str, Any]:
    return {"token": k.token}


def _via_proxy(k: Kit) -> dict[str, str]:
    return {"HTTPS_PROXY": f"http://127.0.0.1:{k.proxy_port}"}


CASES = [
    pytest.param(Case(_merged_list, identity=True), id="kubeconfig-list-first-file-wins"),
    pytest.param(
        Case(_merged_list, flags=("--context", "later"), identity=True), id="context-flag"
    ),
    pytest.param(
        Case(
            _with(
                _token,
                lambda k: {"server": k.server, "certificate-authority": k.file("ca.crt", k.ca_pem)},
            )
        ),
        id="ca-file",
    ),
    pytest.param(Case(_with(_token), identity=True), id="ca-data-and-token"),
    pytest.param(
        Case(_with(_token, lambda k: {"server": k.server, "insecure-skip-tls-verify": True})),
        id="insecure-skip-tls-verify",
    ),
    pytest.param(
        Case(
            _with(
                _token,
                lambda k: {
                    "server": k.server,
                    "certificate-authority-data": k.ca_data,
                    "tls-server-name": SERVER_NAME,
                },
            ),
            identity=True,
        ),
        id="tls-server-name",
    ),
    pytest.param(
        Case(
            _with(
                lambda k: {
                    "client-certificate": k.file("tls.crt", k.cert.cert_pem),
                    "client-key": k.file("tls.key", k.cert.key_pem),
                }
            ),
            identity=True,
        ),
        id="client-certificate-files",
    ),
    pytest.param(
        Case(
            _with(
                lambda k: {
                    "client-certificate-data": base64.b64encode(k.cert.cert_pem).decode(),
                    "client-key-data": base64.b64encode(k.cert.key_pem).decode(),
                }
            ),
            identity=True,
        ),
        id="client-certificate-data",
    ),
    pytest.param(Case(_token_file_rotated), id="token-file-rotated-during-the-run"),
    pytest.param(
        Case(
            _with(lambda k: {"token": "INLINE", "tokenFile": k.file("token", k.token + "\n")}),
            identity=True,
        ),
        id="token-file-wins-over-token",
    ),
    pytest.param(
        Case(_with(lambda k: {"username": "sweeper", "password": "pa:ss word"})),
        id="username-and-password",
    ),
    pytest.param(
        Case(_with(lambda k: {"exec": k.plugin(V1)}), identity=True), id="exec-v1-with-expiry"
    ),
    pytest.param(
        Case(_with(lambda k: {"exec": k.plugin(V1BETA1)}), identity=True),
        id="exec-v1beta1-with-expiry",
    ),
    pytest.param(
        Case(_with(lambda k: {"exec": k.plugin(V1, certificate=True)}), identity=True),
        id="exec-client-certificate",
    ),
    pytest.param(Case(lambda k: _exec_info(k, "data")), id="exec-provide-cluster-info-ca-data"),
    pytest.param(
        Case(lambda k: _exec_info(k, "file")),
        id="exec-provide-cluster-info-ca-file",
    ),
    pytest.param(
        Case(
            _with(
                lambda k: {
                    "token": k.token,
                    "as": "restricted-sweeper",
                    "as-uid": "1234",
                    "as-groups": ["system:masters", "sweepers"],
                    "as-user-extra": {"reason": ["differential test"], "scopes": ["a", "b"]},
                }
            ),
            identity=True,
        ),
        id="impersonation-with-groups-and-extra",
    ),
    pytest.param(
        Case(_with(_token, lambda k: _proxied(k, f"http://127.0.0.1:{k.proxy_port}"))),
        id="proxy-url",
    ),
    pytest.param(
        Case(
            _with(
                _token, lambda k: _proxied(k, f"http://sweeper:s3cr%40t@127.0.0.1:{k.proxy_port}")
            )
        ),
        id="proxy-url-with-credentials",
    ),
    pytest.param(
        Case(_with(_token, _proxied, _via_proxy)),
        id="https-proxy",
    ),
    pytest.param(
        Case(
            _with(
                _token,
                _proxied,
                lambda k: {"HTTPS_PROXY": f"http://sweeper:s3cr%40t@127.0.0.1:{k.proxy_port}"},
            )
        ),
        id="https-proxy-with-credentials",
    ),
    pytest.param(
        Case(
            _with(
                _token,
                _proxied,
                lambda k: {**_via_proxy(k), "NO_PROXY": "other.sweeper.test,.example,10.0.0.0/8"},
            )
        ),
        id="https-proxy-no-proxy-names-others",
    ),
    # Go's proxy rules never proxy a loopback address or localhost.
    pytest.param(
        Case(_with(_token, env=_via_proxy)), id="https-proxy-skipped-for-a-loopback-server"
    ),
    # NO_PROXY naming the server sends both to it directly: to a name only the proxy resolves,
    # that would be a question to the machine's resolver, so the name is localhost.
    pytest.param(
        Case(
            _with(
                _token,
                lambda k: {
                    "server": f"https://localhost:{k.port}",
                    "certificate-authority-data": k.ca_data,
                },
                lambda k: {**_via_proxy(k), "NO_PROXY": "localhost"},
            )
        ),
        id="no-proxy",
    ),
    pytest.param(
        Case(_with(_token, lambda k: {"server": f"http://127.0.0.1:{k.plain_port}"})),
        id="http-server-gets-no-credentials",
    ),
]


# --- the sites and the runs ---------------------------------------------------------------------


@dataclass(frozen=True)
class Sites:
    """The module's recorders, proxy and credentials."""

    cp: ControlPlane
    recorder: Recorder
    plain: Recorder
    proxy: TunnelProxy
    token: str
    other_token: str
    cert: pki.KeyPair

    def kit(self, folder: Path, port: int) -> Kit:
        return Kit(
            folder,
            port,
            self.plain.port,
            self.proxy.port,
            self.cp.ca_pem,
            self.token,
            self.other_token,
            self.cert,
        )

    def reset(self) -> None:
        for server in (self.recorder, self.plain):
            server.reset()
        self.proxy.reset()


@pytest.fixture(scope="module")
def sites(control_plane: ControlPlane) -> Iterator[Sites]:
    """The recorders and the proxy on loopback; two cluster-admin tokens and a certificate."""
    clusters.require_binaries("kubectl")
    namespace = control_plane.create_namespace("client-differential")
    serving = control_plane.ca.serving_cert(["127.0.0.1", "localhost", PROXIED, SERVER_NAME])
    with (
        running(Recorder(serving, client_ca=control_plane.ca_pem)) as recorder,
        running(Recorder()) as plain,
        running(TunnelProxy()) as proxy,
    ):
        yield Sites(
            control_plane,
            recorder,
            plain,
            proxy,
            clusters.admin_account_token(control_plane, namespace, "first"),
            clusters.admin_account_token(control_plane, namespace, "other"),
            control_plane.ca.client_cert("differential-cert", ["system:masters"]),
        )
    control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}", expect=(200, 202))


@dataclass(frozen=True)
class Client:
    """A command that makes requests: kubectl's ``get --raw`` or the sweeper's dry run."""

    name: str
    command: str
    args: tuple[str, ...]
    agent: str  # how its User-Agent starts, in the audit log

    def run(
        self, setup: Setup, flags: tuple[str, ...], home: Path
    ) -> subprocess.CompletedProcess[str]:
        """Run it in an environment of only PATH, HOME and the case's own."""
        home.mkdir(parents=True, exist_ok=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
        env |= {"KUBECONFIG": setup.kubeconfig, **setup.env}
        return subprocess.run(
            [self.command, *flags, *self.args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )

    def said(self, done: subprocess.CompletedProcess[str]) -> str:
        """What a run printed, for a failed expectation."""
        return f"{self.name} exit {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}"


SWEEPER = Client(
    "sweeper",
    str(clusters.sweeper_executable()),
    ("--dry-run", "-o", "json", "-n", "differential"),
    "kubeflow-deadline-sweeper/",
)
# The e2e tier's kubectl (the pinned one, or SWEEPER_TEST_KUBERNETES_VERSION's), and the newest
# minor of the compat tier (tests/compat/conftest.py's NEWEST), which scripts/test builds.
OTHER_KUBECTL = "v1.37.2"
KUBECTLS = sorted({binaries.version("kubectl"), OTHER_KUBECTL})


def kubectl(version: str) -> Client:
    """kubectl of ``version``; skips the test (locally) or fails it (CI) if it is not built."""
    command = binaries.cache_dir() / f"kubectl-{version}" / "kubectl"
    if not os.access(command, os.X_OK):
        reason = (
            f"kubectl {version} is not built: scripts/build-binaries --kubernetes-version "
            f"{version} kubectl (needs Go 1.26)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return Client(
        f"kubectl {version}",
        str(command),
        ("--request-timeout=20s", "get", "--raw", RAW_PATH),
        "kubectl/",
    )


@dataclass(frozen=True)
class Presented:
    """What one request presented beyond its path."""

    host: str | None
    sni: str | None
    authorization: str | None
    client_cert: str | None
    impersonation: tuple[tuple[str, str], ...]
    other_headers: tuple[tuple[str, str], ...]


def _short(value: str | None) -> str | None:
    """A long credential as its start and a digest: as good for equality, and readable."""
    if value is None or len(value) <= 40:
        return value
    return f"{value[:16]}...sha256:{hashlib.sha256(value.encode()).hexdigest()[:16]}"


def presented(seen: Seen) -> Presented:
    headers = dict(seen.headers)
    return Presented(
        host=headers.get("host"),
        sni=seen.sni,
        authorization=_short(headers.get("authorization")),
        client_cert=seen.client_cert,
        impersonation=tuple(
            sorted((k, v) for k, v in seen.headers if k.startswith("impersonate-"))
        ),
        other_headers=tuple(
            sorted(
                (k, v)
                for k, v in seen.headers
                if k not in ORDINARY and k != "authorization" and not k.startswith("impersonate-")
            )
        ),
    )


@dataclass(frozen=True)
class Wire:
    """What one client's run put on the wire, as the recorders and the plugin saw it."""

    exit_ok: bool
    tunnels: frozenset[Tunnel]
    requests: frozenset[Presented]
    # One entry per run of the plugin: a credential kept until it expires is fetched once.
    exec_specs: tuple[str, ...]


def on_the_wire(
    sites: Sites, case: Case, client: Client, folder: Path
) -> tuple[Wire, subprocess.CompletedProcess[str]]:
    """Run one client against the recorder; what reached the recorders, the proxy and a plugin."""
    setup = case.build(sites.kit(folder, sites.recorder.port))
    sites.reset()
    sites.recorder.after_first = sites.plain.after_first = setup.after_first
    done = client.run(setup, case.flags, folder / "home")
    runs = folder / "exec-runs.jsonl"
    wire = Wire(
        done.returncode == 0,
        frozenset(sites.proxy.tunnels),
        frozenset(presented(s) for s in [*sites.recorder.seen, *sites.plain.seen]),
        tuple(sorted(runs.read_text().splitlines())) if runs.exists() else (),
    )
    return wire, done


def identity(event: dict[str, Any]) -> tuple[Any, ...]:
    """Who the audit log says made a request, and whom it impersonated."""
    user, impersonated = event.get("user", {}), event.get("impersonatedUser") or {}

    def person(p: dict[str, Any]) -> tuple[Any, ...]:
        extra = tuple(sorted((k, tuple(v)) for k, v in (p.get("extra") or {}).items()))
        return (p.get("username"), tuple(sorted(p.get("groups") or ())), p.get("uid"), extra)

    return person(user), person(impersonated) if impersonated else None


def audited(sites: Sites, case: Case, client: Client, folder: Path) -> tuple[frozenset[Any], str]:
    """Run one client against the kube-apiserver; who its audit events say it was."""
    setup = case.build(sites.kit(folder, sites.cp.port))
    since = sites.cp.audit_offset()
    done = client.run(setup, case.flags, folder / "home")
    events = sites.cp.audit_events(since=since)
    mine = [e for e in events if e.get("userAgent", "").startswith(client.agent)]
    return frozenset(identity(e) for e in mine), client.said(done)


# --- the tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", KUBECTLS, ids=lambda v: f"kubectl-{v}")
@pytest.mark.parametrize("case", CASES)
def test_the_sweeper_presents_what_kubectl_presents(
    sites: Sites, case: Case, version: str, tmp_path: Path
) -> None:
    reference = kubectl(version)
    wire, done = on_the_wire(sites, case, reference, tmp_path / "kubectl")
    assert wire.requests, f"kubectl reached nothing: {reference.said(done)}"
    sweeper, sweeper_done = on_the_wire(sites, case, SWEEPER, tmp_path / "sweeper")
    assert sweeper == wire, (
        f"{wire}\n{reference.said(done)}\n{sweeper}\n{SWEEPER.said(sweeper_done)}"
    )


@pytest.mark.parametrize(
    "case", [c for c in CASES if isinstance(c.values[0], Case) and c.values[0].identity]
)
def test_the_api_server_sees_the_same_user(sites: Sites, case: Case, tmp_path: Path) -> None:
    reference = kubectl(binaries.version("kubectl"))
    users, said = audited(sites, case, reference, tmp_path / "kubectl")
    assert users, f"the audit log has no request of kubectl's: {said}"
    sweeper_users, sweeper_said = audited(sites, case, SWEEPER, tmp_path / "sweeper")
    assert sweeper_users == users, f"{users}\n{said}\n{sweeper_users}\n{sweeper_said}"


def _refused(sites: Sites, build: Callable[[Kit], Setup], folder: Path) -> tuple[Wire, str]:
    """Run the sweeper on a kubeconfig it refuses: exit 2, nothing sent; its one line."""
    sweeper, done = on_the_wire(sites, Case(build), SWEEPER, folder / "sweeper")
    assert done.returncode == 2, SWEEPER.said(done)
    assert sweeper.tunnels == frozenset() and sweeper.requests == frozenset(), sweeper
    reference = kubectl(binaries.version("kubectl"))
    wire, kubectl_done = on_the_wire(sites, Case(build), reference, folder / "kubectl")
    assert kubectl_done.returncode == 0, reference.said(kubectl_done)
    return wire, done.stderr.strip().splitlines()[-1]


def test_a_socks5_proxy_is_refused_on_purpose(sites: Sites, tmp_path: Path) -> None:
    """kubectl tunnels through SOCKS5; the sweeper has no SOCKS client and says so."""

    def build(k: Kit) -> Setup:
        return Setup(k.single(_token(k), _proxied(k, f"socks5://127.0.0.1:{k.proxy_port}")))

    kubectl, line = _refused(sites, build, tmp_path)
    assert kubectl.tunnels == {Tunnel("socks5", f"{PROXIED}:{sites.recorder.port}", None)}
    assert {r.authorization for r in kubectl.requests} == {_short(f"Bearer {sites.token}")}
    assert line.startswith("sweeper: error: kubeconfig ")
    assert "socks5://" in line and "only http:// and https:// proxies are supported" in line


def test_the_oidc_auth_provider_is_refused_on_purpose(sites: Sites, tmp_path: Path) -> None:
    """kubectl presents a valid id-token as is; the sweeper points to kubelogin instead."""
    claims = base64.urlsafe_b64encode(json.dumps({"exp": 32503680000}).encode()).rstrip(b"=")
    id_token = f"eyJhbGciOiJub25lIn0.{claims.decode()}.c2lnbmF0dXJl"

    def build(k: Kit) -> Setup:
        provider = {
            "name": "oidc",
            "config": {
                "idp-issuer-url": f"https://issuer.{PROXIED}",
                "client-id": "sweeper",
                "id-token": id_token,
            },
        }
        return Setup(k.single({"auth-provider": provider}))

    kubectl, line = _refused(sites, build, tmp_path)
    assert kubectl.tunnels == frozenset()
    assert {r.authorization for r in kubectl.requests} == {_short(f"Bearer {id_token}")}
    assert line.startswith("sweeper: error: kubeconfig ")
    assert "auth-provider oidc" in line and "kubelogin" in line


def test_a_ca_file_beside_ca_data_kubectl_refuses_and_the_sweeper_trusts_the_file(
    sites: Sites, tmp_path: Path
) -> None:
    """A known difference: kubectl's validation refuses both; the sweeper takes the file."""
    stray = pki.CertificateAuthority("stray-ca").cert_pem

    def build(k: Kit) -> Setup:
        cluster = {
            "server": k.server,
            "certificate-authority": k.file("ca.crt", k.ca_pem),
            "certificate-authority-data": base64.b64encode(stray).decode(),
        }
        return Setup(k.single(_token(k), cluster))

    reference = kubectl(binaries.version("kubectl"))
    wire, done = on_the_wire(sites, Case(build), reference, tmp_path / "kubectl")
    assert done.returncode != 0 and not wire.requests, reference.said(done)
    assert "are both specified" in done.stderr
    sweeper, sweeper_done = on_the_wire(sites, Case(build), SWEEPER, tmp_path / "sweeper")
    assert sweeper_done.returncode == 0, SWEEPER.said(sweeper_done)
    assert {r.authorization for r in sweeper.requests} == {_short(f"Bearer {sites.token}")}
