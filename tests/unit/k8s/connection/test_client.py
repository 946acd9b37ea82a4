"""sweeper.k8s.connection.client against kubeconfigs in tmp_path and a loopback HTTP server.

No traffic leaves 127.0.0.1: the kubeconfigs point at a port that was bound and closed, and
the request and stream tests talk to an ``http.server`` started on port 0 inside the test
(plain HTTP: TLS and every credential are presented to the real kube-apiserver in
tests/e2e/test_sweeper_credentials.py).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml

from sweeper.config import Config
from sweeper.core.errors import ApiError, ConfigError, RequestRef, WatchStalled
from sweeper.core.kinds import NAMESPACES
from sweeper.k8s.connection import client, kubeconfig
from sweeper.k8s.connection.credentials import Auth, Credential
from sweeper.k8s.connection.kubeconfig import Target
from sweeper.k8s.transport import NoResponse, Response
from tests.unit.k8s.test_transport import FakeStop
from tests.unit.loopback import serving

REF = RequestRef("watch", "pytorchjobs.kubeflow.org", "a")
DATE = "Wed, 01 May 2024 12:00:00 GMT"


def closed_port() -> int:
    """A loopback port nothing listens on: bound by the OS, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def write_kubeconfig(tmp_path: Path, server: str, current: str = "dev") -> Path:
    path = tmp_path / "config"
    path.write_text(
        f"""apiVersion: v1
kind: Config
current-context: {current}
clusters:
- name: c
  cluster:
    server: {server}
users:
- name: u
  user:
    token: abc
contexts:
- name: dev
  context: {{cluster: c, user: u, namespace: team-a}}
- name: prod
  context: {{cluster: c, user: u, namespace: team-b}}
- name: bare
  context: {{cluster: c, user: u}}
"""
    )
    return path


# --- connect -----------------------------------------------------------------------------------

CONTEXTS = [
    pytest.param(None, "dev", "team-a", id="current-context"),
    pytest.param("prod", "prod", "team-b", id="context-flag-wins"),
    pytest.param("bare", "bare", "default", id="no-namespace-is-default"),
]


@pytest.mark.parametrize(("context", "named", "namespace"), CONTEXTS)
def test_connect_names_the_server_context_and_home_namespace(
    tmp_path: Path, context: str | None, named: str, namespace: str
) -> None:
    """The endpoint and home namespace are what error messages and the Lease rely on."""
    server = f"https://127.0.0.1:{closed_port()}"
    path = write_kubeconfig(tmp_path, server)
    cluster = client.connect(Config(kubeconfig=str(path), context=context), stop=FakeStop())
    try:
        assert cluster.endpoint == f'server {server}, context "{named}"'
        assert cluster.home_namespace == namespace
    finally:
        cluster.close()


BROKEN = [
    pytest.param(": : :\n  - [", "kubeconfig ", id="malformed-yaml"),
    pytest.param(
        "apiVersion: v1\nkind: Config\ncurrent-context: nowhere\ncontexts: []\n",
        "kubeconfig ",
        id="unknown-context",
    ),
]


@pytest.mark.parametrize(("text", "prefix"), BROKEN)
def test_a_broken_kubeconfig_is_one_line_naming_the_file(
    tmp_path: Path, text: str, prefix: str
) -> None:
    """A fault becomes one line that starts with the file (every fault: test_kubeconfig)."""
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        client.connect(Config(kubeconfig=str(path)), stop=FakeStop())
    message = str(raised.value)
    assert message.startswith(f"{prefix}{path}: ")
    assert "\n" not in message
    assert len(message) > len(f"{prefix}{path}: ")


def test_an_unreadable_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    """A file that exists but cannot be read is reported, not raised as PermissionError."""
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = write_kubeconfig(tmp_path, f"https://127.0.0.1:{closed_port()}")
    path.chmod(0)
    try:
        with pytest.raises(ConfigError, match=f"^kubeconfig {path}: "):
            client.connect(Config(kubeconfig=str(path)), stop=FakeStop())
    finally:
        path.chmod(0o600)


def test_a_kubeconfig_list_with_no_existing_file_is_no_such_file(tmp_path: Path) -> None:
    """Every entry of a KUBECONFIG list is looked for."""
    source = os.pathsep.join([str(tmp_path / "a"), "", str(tmp_path / "b")])
    with pytest.raises(ConfigError) as raised:
        client.connect(Config(kubeconfig=source), stop=FakeStop())
    assert str(raised.value) == f"kubeconfig {source}: no such file"


def test_the_default_kubeconfig_is_used_when_none_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """~/.kube/config is found without --kubeconfig."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".kube").mkdir()
    server = f"https://127.0.0.1:{closed_port()}"
    write_kubeconfig(tmp_path, server, current="prod").rename(tmp_path / ".kube" / "config")
    cluster = client.connect(Config(), stop=FakeStop())
    try:
        assert cluster.endpoint == f'server {server}, context "prod"'
        assert cluster.home_namespace == "team-b"
    finally:
        cluster.close()


@pytest.fixture
def account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pod's service account folder, and no kubeconfig in HOME."""
    monkeypatch.setenv("HOME", str(tmp_path))
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text("tok")
    (folder / "namespace").write_text("kubeflow\n")
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT", folder)
    return folder


def a_ca_bundle() -> bytes:
    """PEM certificates the ssl module loads: the host's bundle."""
    paths = ssl.get_default_verify_paths()
    for found in (paths.cafile, paths.openssl_cafile):
        if found and Path(found).is_file():
            return Path(found).read_bytes()
    pytest.skip("no CA bundle on this host")


def test_in_cluster_reads_the_pod_namespace(account: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a pod the service account's namespace file is the home namespace."""
    (account / "ca.crt").write_bytes(a_ca_bundle())
    port = closed_port()
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(port))
    cluster = client.connect(Config(), stop=FakeStop())
    try:
        assert cluster.endpoint == f"server https://127.0.0.1:{port}, context in-cluster"
        assert cluster.home_namespace == "kubeflow"
    finally:
        cluster.close()


def test_a_failing_in_cluster_configuration_is_a_config_error(
    account: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the service account's CA the error is one line."""
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ConfigError) as raised:
        client.connect(Config(), stop=FakeStop())
    assert str(raised.value) == f"in-cluster configuration: {account / 'ca.crt'} does not exist"


def test_in_cluster_refuses_a_context(account: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    with pytest.raises(ConfigError, match=r"^--context needs a kubeconfig; none was found$"):
        client.connect(Config(context="prod"), stop=FakeStop())


CERTIFICATE_FAULTS = [
    pytest.param(
        {"certificate-authority": "missing-ca.crt"},
        {},
        "certificate-authority {dir}/missing-ca.crt: No such file or directory",
        id="ca-file-missing",
    ),
    pytest.param(
        {"certificate-authority-data": "UEVN"}, {}, "certificate-authority-data: ", id="ca-not-pem"
    ),
    pytest.param(
        {},
        {"client-certificate": "tls.crt", "client-key": "tls.key"},
        "client-certificate {dir}/tls.crt, client-key {dir}/tls.key: No such file or directory",
        id="cert-file-missing",
    ),
    pytest.param(
        {},
        {"client-certificate-data": "Q0VSVA==", "client-key-data": "S0VZ"},
        "client-certificate and client-key: ",
        id="cert-not-pem",
    ),
]


@pytest.mark.parametrize(("cluster", "user", "named"), CERTIFICATE_FAULTS)
def test_certificates_that_cannot_be_loaded_are_one_config_error_line(
    tmp_path: Path, cluster: dict[str, str], user: dict[str, str], named: str
) -> None:
    path = tmp_path / "config"
    server = {"server": f"https://127.0.0.1:{closed_port()}", **cluster}
    path.write_text(
        yaml.safe_dump(
            {
                "current-context": "c",
                "clusters": [{"name": "c", "cluster": server}],
                "users": [{"name": "u", "user": {"token": "t", **user}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    with pytest.raises(ConfigError) as raised:
        client.connect(Config(kubeconfig=str(path)), stop=FakeStop())
    message = str(raised.value)
    assert message.startswith(f"kubeconfig {path}: {named.format(dir=tmp_path)}")
    assert "\n" not in message


# --- error translation -------------------------------------------------------------------------

DESCRIPTIONS = [
    pytest.param(
        urllib3.exceptions.NewConnectionError(
            urllib3.connection.HTTPConnection("127.0.0.1"),
            "Failed to establish a new connection: [Errno 111] Connection refused",
        ),
        "connection refused",
        id="refused",
    ),
    pytest.param(
        urllib3.exceptions.MaxRetryError(
            urllib3.HTTPConnectionPool("127.0.0.1"),
            "/x",
            reason=urllib3.exceptions.ConnectTimeoutError("Connect TIMED OUT"),
        ),
        "timed out (--request-timeout)",
        id="timeout-in-reason",
    ),
    pytest.param(OSError("name\n  unknown"), "name unknown", id="other-on-one-line"),
]


@pytest.mark.parametrize(("error", "expected"), DESCRIPTIONS)
def test_describe_connection_error(error: BaseException, expected: str) -> None:
    """The reason urllib3 wraps is what is described, in the sweeper's words."""
    assert client._describe_connection_error(error) == expected


# --- the loopback server -----------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    """Answers by path: /ok a watch event, /stall headers then silence, /cut a short body.

    /echo answers with what it was sent (method, path, headers, body), /auth with 401 unless
    the token is ``good``; every request's Authorization is kept in ``seen``.
    """

    protocol_version = "HTTP/1.1"
    release: threading.Event
    seen: list[str | None]

    def do_PATCH(self) -> None:
        """Echo the request."""
        self.do_GET()

    def do_GET(self) -> None:
        """Answer one request by its path."""
        self.seen.append(self.headers.get("Authorization"))
        length = int(self.headers.get("Content-Length") or 0)
        sent = self.rfile.read(length) if length else b""
        if self.path.startswith(("/echo", "http://")):
            self.answer(
                200,
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers.items()),
                    "body": sent.decode(),
                },
            )
        elif self.path.startswith("/auth"):
            good = self.headers.get("Authorization") == "Bearer good"
            self.answer(200 if good else 401, {"kind": "Status"})
        elif self.path.startswith("/ok"):
            body = b'{"type": "ADDED"}\n'
            self.send_response_only(200)  # no automatic Date: the test's own is checked
            self.send_header("Content-Type", "application/json")
            self.send_header("Date", DATE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path.startswith("/stall"):
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.flush()
            self.release.wait(2.0)
            self.close_connection = True
        else:
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"short")
            self.wfile.flush()
            self.close_connection = True

    def answer(self, status: int, document: Any) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""


class QuietServer(ThreadingHTTPServer):
    """A loopback server that does not print the resets the cut and stalled tests cause."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Drop the traceback of a connection the client closed."""


@pytest.fixture
def server() -> Iterator[tuple[str, threading.Event]]:
    release = threading.Event()
    handler = type("BoundHandler", (Handler,), {"release": release, "seen": []})
    with serving(handler, server=QuietServer, poll=0.01) as url:
        try:
            yield url, release
        finally:
            release.set()  # a stalled answer ends before the server shuts down


class Renewing(Auth):
    """A token source that gives ``bad`` until a 401 asks for a new one, then ``good``."""

    def __init__(self) -> None:
        super().__init__(Credential("Bearer bad"))
        self.renewals = 0

    def renew(self, used: Credential) -> bool:
        self.renewals += 1
        self._credential = Credential("Bearer good")
        return True


def http_for(url: str, auth: Auth | None = None, **target: Any) -> client.Http:
    return client.Http(Target(server=url, context="t", **target), auth or Auth())


def test_stream_reads_a_watch_event(server: tuple[str, threading.Event]) -> None:
    """A 2xx comes back as soon as its headers arrive, the body read as chunks."""
    http = http_for(server[0])
    try:
        raw = client.ClientStream(http, 1.0).open("/ok", REF, 1.0)
        assert raw.status == 200
        assert raw.headers["Date"] == DATE
        assert b"".join(raw.stream(64)) == b'{"type": "ADDED"}\n'
        raw.release_conn()
        raw.close()
    finally:
        http.close()


def test_stream_data_reads_the_whole_body(server: tuple[str, threading.Event]) -> None:
    """An answer that is not a stream is read whole through ``data``."""
    http = http_for(server[0])
    try:
        raw = client.ClientStream(http, 1.0).open("/ok", REF, 1.0)
        assert raw.data == b'{"type": "ADDED"}\n'
    finally:
        http.close()


def test_a_silent_stream_is_watch_stalled(server: tuple[str, threading.Event]) -> None:
    """Nothing within the read timeout is WatchStalled, which the watch reopens."""
    http = http_for(server[0])
    try:
        raw = client.ClientStream(http, 1.0).open("/stall", REF, 0.05)
        with pytest.raises(WatchStalled) as raised:
            b"".join(raw.stream(64))
        assert raised.value.status is None
        assert raised.value.detail == "nothing received for 0.05s"
    finally:
        server[1].set()
        http.close()


def test_a_cut_stream_is_an_api_error(server: tuple[str, threading.Event]) -> None:
    """A body cut short is an ApiError without status, not urllib3's exception."""
    http = http_for(server[0])
    try:
        raw = client.ClientStream(http, 1.0).open("/cut", REF, 1.0)
        with pytest.raises(ApiError) as raised:
            b"".join(raw.stream(64))
        assert not isinstance(raised.value, WatchStalled)
        assert raised.value.status is None
        assert "IncompleteRead" in raised.value.detail
        assert isinstance(raised.value.__cause__, urllib3.exceptions.HTTPError)
    finally:
        http.close()


def test_a_refused_stream_is_an_api_error() -> None:
    """A closed port is ``connection refused`` in the sweeper's message."""
    http = http_for(f"http://127.0.0.1:{closed_port()}")
    try:
        with pytest.raises(ApiError) as raised:
            client.ClientStream(http, 1.0).open("/ok", REF, 1.0)
        assert (raised.value.status, raised.value.detail) == (None, "connection refused")
    finally:
        http.close()


def test_send_reads_the_answer(server: tuple[str, threading.Event]) -> None:
    """ClientSend returns status, body and Date as they came."""
    http = http_for(server[0])
    try:
        response = client.ClientSend(http)("GET", "/ok", {}, body=None, timeout=1.0)
        assert response == Response(200, b'{"type": "ADDED"}\n', DATE, None)
    finally:
        http.close()


def test_send_puts_the_user_agent_the_credential_and_a_json_body(
    server: tuple[str, threading.Event],
) -> None:
    http = http_for(server[0], Auth(Credential("Basic YTpi")))
    try:
        response = client.ClientSend(http)(
            "PATCH",
            "/echo?dryRun=All",
            {"Content-Type": "application/merge-patch+json"},
            body={"k": [1, "é"]},
            timeout=1.0,
        )
    finally:
        http.close()
    echoed = json.loads(response.data)
    assert (echoed["method"], echoed["path"]) == ("PATCH", "/echo?dryRun=All")
    assert echoed["headers"]["User-Agent"] == client.USER_AGENT
    assert echoed["headers"]["Authorization"] == "Basic YTpi"
    assert echoed["headers"]["Content-Type"] == "application/merge-patch+json"
    assert json.loads(echoed["body"]) == {"k": [1, "é"]}


def test_a_401_is_sent_once_more_with_a_renewed_credential(
    server: tuple[str, threading.Event],
) -> None:
    """An exec plugin's token may be revoked before it expires: one new token, one new try."""
    auth = Renewing()
    http = http_for(server[0], auth)
    try:
        assert client.ClientSend(http)("GET", "/auth", {}, body=None, timeout=1.0).status == 200
        raw = client.ClientStream(http, 1.0).open("/auth", REF, 1.0)
        assert raw.status == 200
        raw.close()
    finally:
        http.close()
    assert auth.renewals == 1


def test_a_401_to_a_fixed_credential_is_the_answer(server: tuple[str, threading.Event]) -> None:
    http = http_for(server[0], Auth(Credential("Bearer bad")))
    try:
        assert client.ClientSend(http)("GET", "/auth", {}, body=None, timeout=1.0).status == 401
    finally:
        http.close()


def test_a_credential_that_fails_is_no_response_that_heals() -> None:
    class Failing(Auth):
        def current(self) -> Credential:
            raise ConfigError("exec plugin p: exit code 1")

    http = http_for(f"http://127.0.0.1:{closed_port()}", Failing())
    with pytest.raises(NoResponse) as raised:
        client.ClientSend(http)("GET", "/ok", {}, body=None, timeout=1.0)
    assert (raised.value.detail, raised.value.retryable) == ("exec plugin p: exit code 1", False)
    with pytest.raises(ApiError, match="exec plugin p: exit code 1"):
        client.ClientStream(http).open("/ok", REF, 1.0)


def test_a_proxy_url_sends_every_request_through_the_proxy(
    server: tuple[str, threading.Event],
) -> None:
    """The proxy (the loopback server) is asked for the API server's absolute URL."""
    behind = f"http://127.0.0.1:{closed_port()}"
    http = http_for(behind, proxy_url=server[0])
    try:
        response = client.ClientSend(http)("GET", "/echo", {}, body=None, timeout=1.0)
    finally:
        http.close()
    assert json.loads(response.data)["path"] == f"{behind}/echo"


def test_close_closes_every_pool_of_every_manager(server: tuple[str, threading.Event]) -> None:
    """Pools are closed one by one: a clear() alone leaves their sockets to a finalizer.

    An exec plugin's new client certificate gets a new manager, and the old one is closed then.
    """
    http = http_for(server[0])
    first = http.pool(Credential())
    first.request("GET", f"{server[0]}/ok", retries=False)
    (old,) = [first.pools.get(key) for key in first.pools.keys()]  # noqa: SIM118
    second = http.pool(Credential(None, (b"C", b"K")))
    assert second is not first
    assert old is not None and old.pool is None  # closed: its queue dropped
    with pytest.raises(urllib3.exceptions.ClosedPoolError):  # not a new pool nothing closes
        first.request("GET", f"{server[0]}/ok", retries=False)
    second.request("GET", f"{server[0]}/ok", retries=False)
    (new,) = [second.pools.get(key) for key in second.pools.keys()]  # noqa: SIM118
    http.close()
    assert new is not None and new.pool is None


# --- who the requests say the sweeper is -------------------------------------------------------


class Recorder(BaseHTTPRequestHandler):
    """Answers an object to every GET and keeps each request's headers as (name, value) pairs."""

    protocol_version = "HTTP/1.1"
    requests: list[list[tuple[str, str]]]
    live: list[int]  # connections open now, as the server sees them

    def setup(self) -> None:
        """Count the connection."""
        super().setup()
        self.live.append(1)

    def finish(self) -> None:
        """Count the connection's end."""
        self.live.pop()
        super().finish()

    def do_GET(self) -> None:
        """Record, then answer."""
        self.requests.append(list(self.headers.items()))
        body = b'{"metadata": {"name": "n", "uid": "u"}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""


@pytest.fixture
def recorder() -> Iterator[tuple[str, Any]]:
    handler = type("Recording", (Recorder,), {"requests": [], "live": []})
    with serving(handler, server=QuietServer, poll=0.01) as url:
        yield url, handler


def impersonation_sent(recorder: tuple[str, Any]) -> list[tuple[str, str]]:
    """The Impersonate-* headers of the one request the recorder got, in order."""
    (headers,) = recorder[1].requests
    return [(k, v) for k, v in headers if k.startswith("Impersonate-")]


def test_impersonation_sends_kubectls_headers(recorder: tuple[str, Any]) -> None:
    """One Impersonate-Group per group, one Impersonate-Extra-<key> per value, the key escaped."""
    impersonate = kubeconfig.Impersonation(
        user="restricted-sweeper",
        uid="1234",
        groups=("sweepers", "auditors"),
        extra=(("example.com/team x", ("ml",)), ("scopes", ("view", "list"))),
    )
    http = http_for(recorder[0], Auth(Credential("Bearer t")), impersonate=impersonate)
    try:
        assert client.ClientSend(http)("GET", "/api", {}, body=None, timeout=1.0).status == 200
    finally:
        http.close()
    assert impersonation_sent(recorder) == [
        ("Impersonate-User", "restricted-sweeper"),
        ("Impersonate-Uid", "1234"),
        ("Impersonate-Group", "sweepers"),
        ("Impersonate-Group", "auditors"),
        ("Impersonate-Extra-example.com%2Fteam%20x", "ml"),
        ("Impersonate-Extra-scopes", "view"),
        ("Impersonate-Extra-scopes", "list"),
    ]


def test_a_plain_http_server_gets_no_credential_and_one_warning(
    tmp_path: Path, recorder: tuple[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """client-go sends user credentials only over TLS: no token in clear, and say so once."""
    path = write_kubeconfig(tmp_path, recorder[0])  # its user has a token
    with caplog.at_level(logging.WARNING, logger="sweeper.k8s"):
        cluster = client.connect(Config(kubeconfig=str(path)), stop=FakeStop())
    try:
        cluster.get(NAMESPACES, None, "team-a")
        cluster.get(NAMESPACES, None, "team-b")
    finally:
        cluster.close()
    assert [k for headers in recorder[1].requests for k, _ in headers if k == "Authorization"] == []
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.getMessage() == (
        f"server {recorder[0]} is plain http: not sending the kubeconfig's token "
        "(kubectl sends credentials only over https)"
    )


def test_a_renewed_client_certificate_closes_the_superseded_pool(
    recorder: tuple[str, Any],
) -> None:
    """Each certificate an exec plugin renews gets a pool; the old one's socket is closed."""

    class Renewed(Auth):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def current(self) -> Credential:
            self.n += 1
            return Credential(None, (f"CERT {self.n}".encode(), b"KEY"))

    http = http_for(recorder[0], Renewed())
    try:
        for _ in range(20):
            assert client.ClientSend(http)("GET", "/api", {}, body=None, timeout=1.0).status == 200
        deadline = time.monotonic() + 5.0
        while len(recorder[1].live) > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(recorder[1].live) <= 1
    finally:
        http.close()


def test_a_superseded_pool_lets_an_open_stream_finish(server: tuple[str, threading.Event]) -> None:
    """A watch opened on the old certificate's pool reads on; its socket closes when released."""
    http = http_for(server[0])
    stream = client.ClientStream(http, 1.0).open("/ok", REF, 1.0)
    http.pool(Credential(None, (b"NEW CERT", b"KEY")))
    try:
        assert b"".join(stream.stream(64)) == b'{"type": "ADDED"}\n'
        stream.release_conn()
    finally:
        http.close()


def test_a_kubeconfig_impersonation_reaches_the_server(
    tmp_path: Path, recorder: tuple[str, Any]
) -> None:
    """The regression: ``as`` was ignored, and the sweeper acted as the token's own identity."""
    path = write_kubeconfig(tmp_path, recorder[0])
    document = yaml.safe_load(path.read_text())
    document["users"][0]["user"].update({"as": "restricted-sweeper", "as-groups": ["sweepers"]})
    path.write_text(yaml.safe_dump(document))
    cluster = client.connect(Config(kubeconfig=str(path)), stop=FakeStop())
    try:
        cluster.get(NAMESPACES, None, "team-a")
    finally:
        cluster.close()
    assert impersonation_sent(recorder) == [
        ("Impersonate-User", "restricted-sweeper"),
        ("Impersonate-Group", "sweepers"),
    ]
