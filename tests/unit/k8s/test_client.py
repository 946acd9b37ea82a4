"""sweeper.k8s.client against kubeconfigs in tmp_path and a loopback HTTP server.

No traffic leaves 127.0.0.1: the kubeconfigs point at a port that was bound and closed, and
the stream tests talk to an ``http.server`` started on port 0 inside the test.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from sweeper.config import Config
from sweeper.core.errors import ApiError, ConfigError, RequestRef, WatchStalled
from sweeper.k8s import client
from sweeper.k8s.transport import Response
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


def kubeconfig(tmp_path: Path, server: str, current: str = "dev") -> Path:
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
    path = kubeconfig(tmp_path, server)
    cluster = client.connect(Config(kubeconfig=str(path), context=context), stop=FakeStop())
    try:
        assert cluster.endpoint == f'server {server}, context "{named}"'
        assert cluster.home_namespace == namespace
    finally:
        cluster.close()


def test_close_closes_every_pool_and_clears_the_manager() -> None:
    """Pools are closed one by one: a clear() alone leaves their sockets to a finalizer."""
    closed: list[str] = []

    class Pool:
        def __init__(self, name: str) -> None:
            self.name = name

        def close(self) -> None:
            closed.append(self.name)

    class Manager:
        def __init__(self) -> None:
            self.pools: dict[str, Pool] = {"a": Pool("a"), "b": Pool("b")}
            self.cleared = False

        def clear(self) -> None:
            self.cleared = True

    class Rest:
        pool_manager = Manager()

    class Api:
        rest_client = Rest()
        api_closed = False

        def close(self) -> None:
            self.api_closed = True

    api = Api()
    client._close(api)
    assert api.api_closed
    assert sorted(closed) == ["a", "b"]
    assert Rest.pool_manager.cleared


def test_close_without_a_rest_client_only_closes_the_api() -> None:
    """An ApiClient without a pool manager (another generation) is closed, nothing more."""

    class Api:
        closes = 0

        def close(self) -> None:
            self.closes += 1

    api = Api()
    client._close(api)
    assert api.closes == 1


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
    """The client's multi-line exceptions become one line that starts with the file."""
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
    path = kubeconfig(tmp_path, f"https://127.0.0.1:{closed_port()}")
    path.chmod(0)
    try:
        with pytest.raises(ConfigError, match=f"^kubeconfig {path}: "):
            client.connect(Config(kubeconfig=str(path)), stop=FakeStop())
    finally:
        path.chmod(0o600)


def test_a_kubeconfig_list_with_no_existing_file_is_no_such_file(tmp_path: Path) -> None:
    """Every entry of a KUBECONFIG list is checked before the client sees it."""
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
    kubeconfig(tmp_path, server, current="prod").rename(tmp_path / ".kube" / "config")
    cluster = client.connect(Config(), stop=FakeStop())
    try:
        assert cluster.endpoint == f'server {server}, context "prod"'
        assert cluster.home_namespace == "team-b"
    finally:
        cluster.close()


def fake_incluster(host: str) -> Callable[..., None]:
    def load(client_configuration: Any) -> None:
        client_configuration.host = host

    return load


def test_in_cluster_reads_the_pod_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a pod the service account's namespace file is the home namespace."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    namespace = tmp_path / "namespace"
    namespace.write_text("kubeflow\n")
    monkeypatch.setattr(client, "SERVICE_ACCOUNT_NAMESPACE", namespace)
    server = f"https://127.0.0.1:{closed_port()}"
    monkeypatch.setattr(k8s_config, "load_incluster_config", fake_incluster(server))
    cluster = client.connect(Config(), stop=FakeStop())
    try:
        assert cluster.endpoint == f"server {server}, context in-cluster"
        assert cluster.home_namespace == "kubeflow"
    finally:
        cluster.close()


def test_a_failing_in_cluster_configuration_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the service account's files the client's error is reported on one line."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")

    def fail(client_configuration: Any) -> None:
        raise OSError("Service token file\n does not exist")

    monkeypatch.setattr(k8s_config, "load_incluster_config", fail)
    with pytest.raises(ConfigError) as raised:
        client.connect(Config(), stop=FakeStop())
    assert str(raised.value) == "in-cluster configuration: Service token file does not exist"


NAMESPACE_FILES = [
    pytest.param("team-x\n", "team-x", id="stripped"),
    pytest.param("  \n", "default", id="blank-is-default"),
    pytest.param(None, "default", id="absent-is-default"),
]


@pytest.mark.parametrize(("text", "expected"), NAMESPACE_FILES)
def test_home_namespace_in_a_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str | None, expected: str
) -> None:
    """The pod's namespace file decides, and a missing or blank one means default."""
    path = tmp_path / "namespace"
    if text is not None:
        path.write_text(text)
    monkeypatch.setattr(client, "SERVICE_ACCOUNT_NAMESPACE", path)
    assert client._home_namespace(None, None) == expected


def test_home_namespace_and_context_of_an_unreadable_kubeconfig_fall_back(
    tmp_path: Path,
) -> None:
    """These only name things in messages: a broken file gives defaults, not errors."""
    broken = tmp_path / "config"
    broken.write_text(": : :\n  - [")
    assert client._home_namespace(str(broken), None) == "default"
    assert client._current_context(str(broken)) == "?"


def test_home_namespace_of_an_unknown_context_is_default(tmp_path: Path) -> None:
    """A --context the file does not have (connect already refused it) gives default."""
    path = kubeconfig(tmp_path, "https://127.0.0.1:1")
    assert client._home_namespace(str(path), "elsewhere") == "default"
    assert client._current_context(str(path)) == "dev"


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


def legacy(status: int, body: Any, headers: Any) -> k8s_client.ApiException:
    error = k8s_client.ApiException(status=status, reason="x")
    error.body = body
    error.headers = headers
    return error


ANSWERS = [
    pytest.param(
        legacy(503, b"down", {"Date": DATE, "Retry-After": "3"}),
        Response(503, b"down", DATE, "3"),
        id="bytes-body",
    ),
    pytest.param(
        legacy(404, '{"message": "é"}', {}),
        Response(404, '{"message": "é"}'.encode(), None, None),
        id="str-body-utf8",
    ),
    pytest.param(legacy(500, None, None), Response(500, b"", None, None), id="nothing"),
]


@pytest.mark.parametrize(("error", "expected"), ANSWERS)
def test_answer_from_a_legacy_exception(error: Any, expected: Response) -> None:
    """The legacy client raises an HTTP answer; its body is bytes, str (35+) or None."""
    assert client._answer_from(error) == expected


# --- the loopback server -----------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    """Answers by path: /ok a watch event, /stall headers then silence, /cut a short body."""

    protocol_version = "HTTP/1.1"
    release: threading.Event

    def do_GET(self) -> None:
        """Answer one GET by its path."""
        if self.path.startswith("/ok"):
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
    handler = type("BoundHandler", (Handler,), {"release": release})
    with serving(handler, server=QuietServer, poll=0.01) as url:
        try:
            yield url, release
        finally:
            release.set()  # a stalled answer ends before the server shuts down


def api_for(host: str) -> k8s_client.ApiClient:
    configuration = k8s_client.Configuration()
    configuration.host = host
    configuration.retries = False
    return k8s_client.ApiClient(configuration)


def test_stream_reads_a_watch_event(server: tuple[str, threading.Event]) -> None:
    """A 2xx comes back as soon as its headers arrive, the body read as chunks."""
    api = api_for(server[0])
    try:
        raw = client.ClientStream(api, 1.0).open("/ok", REF, 1.0)
        assert raw.status == 200
        assert raw.headers["Date"] == DATE
        assert b"".join(raw.stream(64)) == b'{"type": "ADDED"}\n'
        raw.release_conn()
        raw.close()
    finally:
        client._close(api)


def test_stream_data_reads_the_whole_body(server: tuple[str, threading.Event]) -> None:
    """An answer that is not a stream is read whole through ``data``."""
    api = api_for(server[0])
    try:
        raw = client.ClientStream(api, 1.0).open("/ok", REF, 1.0)
        assert raw.data == b'{"type": "ADDED"}\n'
    finally:
        client._close(api)


def test_a_silent_stream_is_watch_stalled(server: tuple[str, threading.Event]) -> None:
    """Nothing within the read timeout is WatchStalled, which the watch reopens."""
    api = api_for(server[0])
    try:
        raw = client.ClientStream(api, 1.0).open("/stall", REF, 0.05)
        with pytest.raises(WatchStalled) as raised:
            b"".join(raw.stream(64))
        assert raised.value.status is None
        assert raised.value.detail == "nothing received for 0.05s"
    finally:
        server[1].set()
        client._close(api)


def test_a_cut_stream_is_an_api_error(server: tuple[str, threading.Event]) -> None:
    """A body cut short is an ApiError without status, not the client's exception."""
    api = api_for(server[0])
    try:
        raw = client.ClientStream(api, 1.0).open("/cut", REF, 1.0)
        with pytest.raises(ApiError) as raised:
            b"".join(raw.stream(64))
        assert not isinstance(raised.value, WatchStalled)
        assert raised.value.status is None
        assert "IncompleteRead" in raised.value.detail
        assert isinstance(raised.value.__cause__, urllib3.exceptions.HTTPError)
    finally:
        client._close(api)


def test_a_refused_stream_is_an_api_error() -> None:
    """A closed port is ``connection refused`` in the sweeper's message."""
    api = api_for(f"http://127.0.0.1:{closed_port()}")
    try:
        with pytest.raises(ApiError) as raised:
            client.ClientStream(api, 1.0).open("/ok", REF, 1.0)
        assert (raised.value.status, raised.value.detail) == (None, "connection refused")
    finally:
        client._close(api)


def test_client_send_since_37_reads_the_answer(server: tuple[str, threading.Event]) -> None:
    """ClientSend on the installed client returns status, body and Date as they came."""
    api = api_for(server[0])
    try:
        response = client.ClientSend(api)("GET", "/ok", {}, body=None, timeout=1.0)
        assert response == Response(200, b'{"type": "ADDED"}\n', DATE, None)
    finally:
        client._close(api)


# --- the legacy (< 37) generation, through a stand-in ApiClient ----------------------------------


class LegacyRaw:
    """urllib3's response as a < 37 client returns it with ``_preload_content=False``."""

    status = 200
    headers: ClassVar[dict[str, str]] = {"Date": DATE, "Retry-After": "1"}
    data = None

    def read(self) -> bytes:
        return b"{}"


class LegacyApi:
    """An ApiClient of a < 37 generation: no ``param_serialize``; records the call."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((args, kwargs))
        if self.error is not None:
            raise self.error
        return LegacyRaw()


def test_legacy_send_asks_for_the_raw_answer() -> None:
    """Up to 36 the raw response needs ``_preload_content`` and ``_return_http_data_only``."""
    api = LegacyApi()
    response = client.ClientSend(api)("PATCH", "/x", {"A": "b"}, body={"k": 1}, timeout=2.0)
    assert response == Response(200, b"{}", DATE, "1")
    args, kwargs = api.calls[0]
    assert args == ("/x", "PATCH")
    assert kwargs["_preload_content"] is False
    assert kwargs["_return_http_data_only"] is True
    assert kwargs["_request_timeout"] == (2.0, 2.0)
    assert kwargs["body"] == {"k": 1}


def test_legacy_stream_opens_with_connect_and_read_timeouts() -> None:
    """The stream is opened unread, with the connect and read timeouts apart."""
    api = LegacyApi()
    raw = client.ClientStream(api, 3.0).open("/w", REF, 7.0)
    assert raw.status == 200
    assert raw.data == b""
    _args, kwargs = api.calls[0]
    assert kwargs["_request_timeout"] == (3.0, 7.0)
    assert kwargs["_preload_content"] is False
    # Without it, clients 31-35 return (response, status, headers) and the watch cannot read it.
    assert kwargs["_return_http_data_only"] is True


LEGACY_OPEN_FAILURES = [
    pytest.param(
        legacy(503, '{"message": "try later"}', {}),
        ApiError,
        503,
        'cannot watch pytorchjobs.kubeflow.org in namespace "a": service unavailable (503)',
        id="status-is-an-api-error",
    ),
    pytest.param(
        k8s_client.ApiException(status=0, reason="SSL:\n CERTIFICATE_VERIFY_FAILED"),
        ApiError,
        None,
        'cannot watch pytorchjobs.kubeflow.org in namespace "a": SSL: CERTIFICATE_VERIFY_FAILED',
        id="tls-without-status",
    ),
]


@pytest.mark.parametrize(("error", "kind", "status", "prefix"), LEGACY_OPEN_FAILURES)
def test_legacy_stream_errors_become_api_errors(
    error: BaseException, kind: type[ApiError], status: int | None, prefix: str
) -> None:
    """What the legacy client raises while opening names the request and the failure."""
    with pytest.raises(kind) as raised:
        client.ClientStream(LegacyApi(error)).open("/w", REF, 1.0)
    assert raised.value.status == status
    assert str(raised.value).startswith(prefix)
    assert raised.value.__cause__ is error
