"""Proxies: Go's environment rules (``proxies``) and what a proxy sees (``client.Http``).

The proxies are the test's own loopback servers. The API servers behind them are named
``*.invalid``, which only the proxy is told of: a guard refuses to resolve any name that is not
loopback, so a request that skipped the proxy fails here instead of leaving the machine.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from sweeper.config import Config
from sweeper.core.errors import ConfigError
from sweeper.k8s.connection import client, proxies
from sweeper.k8s.connection.credentials import Auth
from sweeper.k8s.connection.kubeconfig import Target
from sweeper.k8s.transport import NoResponse
from tests.unit.k8s.connection.test_client import QuietServer, write_kubeconfig
from tests.unit.k8s.test_transport import FakeStop
from tests.unit.loopback import serving

BEHIND = "https://kubernetes.invalid:6443"
GO_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY")


# --- Go's rules (golang.org/x/net/http/httpproxy), pure ----------------------------------------

P = "http://p:1"


def proxied(**environ: str) -> dict[str, str]:
    return {"HTTPS_PROXY": P, **environ}


RULES = [
    pytest.param("https://k.example:6443", {"HTTPS_PROXY": P}, P, id="https"),
    pytest.param("https://k.example:6443", {"https_proxy": P}, P, id="lower"),
    pytest.param("https://k.example", proxied(https_proxy="http://b:1"), P, id="upper-first"),
    pytest.param("https://k.example", {"HTTP_PROXY": P}, None, id="http-proxy-not-for-https"),
    pytest.param("http://k.example", {"HTTP_PROXY": P}, P, id="http"),
    pytest.param("https://k.example", {"HTTPS_PROXY": "p:1"}, P, id="no-scheme-is-http"),
    pytest.param("https://k.example", {"HTTPS_PROXY": ""}, None, id="empty"),
    pytest.param("https://localhost:6443", proxied(), None, id="localhost"),
    pytest.param("https://127.0.0.9:6443", proxied(), None, id="loopback-v4"),
    pytest.param("https://[::1]:6443", proxied(), None, id="loopback-v6"),
    pytest.param("https://k.example", proxied(NO_PROXY="*"), None, id="star"),
    pytest.param("https://k.example", proxied(no_proxy="k.example"), None, id="host"),
    pytest.param("https://a.k.example", proxied(NO_PROXY="k.example"), None, id="domain-suffix"),
    pytest.param("https://k.example", proxied(NO_PROXY=".k.example"), P, id="dot-not-the-host"),
    pytest.param("https://a.k.example", proxied(NO_PROXY=".k.example"), None, id="dot"),
    pytest.param("https://a.k.example", proxied(NO_PROXY="*.k.example"), None, id="star-dot"),
    pytest.param("https://xk.example", proxied(NO_PROXY="k.example"), P, id="labels-not-chars"),
    pytest.param("https://k.example:6443", proxied(NO_PROXY="k.example:443"), P, id="other-port"),
    pytest.param("https://k.example", proxied(NO_PROXY="k.example:443"), None, id="default-port"),
    pytest.param("https://10.1.2.3", proxied(NO_PROXY=" x.example , 10.0.0.0/8"), None, id="cidr"),
    pytest.param("https://10.1.2.3:6443", proxied(NO_PROXY="10.1.2.3"), None, id="ip"),
    pytest.param("https://10.1.2.4:6443", proxied(NO_PROXY="10.1.2.3"), P, id="other-ip"),
    pytest.param("https://[fd00::1]:6443", proxied(NO_PROXY="[fd00::1]:6443"), None, id="ipv6"),
    pytest.param("https://[fd00::1]:6443", proxied(NO_PROXY="fd00::1"), None, id="ipv6-bare"),
    pytest.param("https://K.Example", proxied(NO_PROXY="k.EXAMPLE"), None, id="case"),
    pytest.param("https://k.example", proxied(NO_PROXY="bad/cidr"), P, id="bad-cidr-ignored"),
]


@pytest.mark.parametrize(("server", "environ", "expected"), RULES)
def test_go_proxy_rules(server: str, environ: dict[str, str], expected: str | None) -> None:
    assert proxies.from_environment(server, environ) == expected


def test_a_socks_proxy_in_the_environment_is_refused_without_its_password() -> None:
    with pytest.raises(ConfigError) as raised:
        proxies.from_environment("https://k.example", {"HTTPS_PROXY": "socks5://u:SECRET@p:1080"})
    assert str(raised.value) == (
        "HTTPS_PROXY socks5://p:1080: only http:// and https:// proxies are supported"
    )


# --- what the proxy sees -----------------------------------------------------------------------


@pytest.fixture(autouse=True)
def loopback_names_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolve loopback names only, so that no test can reach past the machine."""
    real = socket.getaddrinfo

    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        if str(host) not in ("127.0.0.1", "localhost", "::1"):
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: not resolved in the unit tests")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", guarded)
    for name in (*GO_PROXY_VARIABLES, "no_proxy"):
        monkeypatch.delenv(name, raising=False)


class Proxy(BaseHTTPRequestHandler):
    """Records each request; a CONNECT is refused (403), or 407 without ``user:p@ss``."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, str | None]]

    def do_CONNECT(self) -> None:
        """Record the tunnel asked for; open none."""
        auth = self.headers.get("Proxy-Authorization")
        self.seen.append((self.command, self.path, auth))
        wanted = "Basic " + base64.b64encode(b"user:p@ss").decode()
        self.send_response(407 if "@" in self.path or (auth and auth != wanted) else 403)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.close_connection = True

    def do_GET(self) -> None:
        """Answer a plain-http request through the proxy with what was asked."""
        self.seen.append((self.command, self.path, self.headers.get("Proxy-Authorization")))
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    seen: list[tuple[str, str, str | None]] = []
    handler = type("Recording", (Proxy,), {"seen": seen})
    with serving(handler, server=QuietServer, poll=0.01) as url:
        yield url, seen


def get(server: str, **target: Any) -> None:
    http = client.Http(Target(server=server, context="t", **target), Auth())
    try:
        client.ClientSend(http)("GET", "/api", {}, body=None, timeout=2.0)
    finally:
        http.close()


def test_https_proxy_from_the_environment_carries_the_tunnel(
    proxy: tuple[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The regression: the environment's proxy was ignored and the server dialled directly."""
    monkeypatch.setenv("HTTPS_PROXY", proxy[0])
    with pytest.raises(NoResponse):
        get(BEHIND)
    assert proxy[1] == [("CONNECT", "kubernetes.invalid:6443", None)]


def test_no_proxy_and_loopback_go_direct(
    proxy: tuple[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", proxy[0])
    monkeypatch.setenv("HTTP_PROXY", proxy[0])
    monkeypatch.setenv("NO_PROXY", ".invalid")
    with pytest.raises(NoResponse, match="not resolved in the unit tests"):
        get(BEHIND)
    get(proxy[0])  # loopback: never through a proxy, so the proxy answers it itself
    assert proxy[1] == [("GET", "/api", None)]


def test_a_kubeconfig_proxy_url_wins_over_the_environment(
    proxy: tuple[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # discard: nothing listens
    with pytest.raises(NoResponse):
        get(BEHIND, proxy_url=proxy[0])
    assert [command for command, _, _ in proxy[1]] == ["CONNECT"]


def test_proxy_credentials_go_in_proxy_authorization(proxy: tuple[str, list[Any]]) -> None:
    """``user:pass@`` in proxy-url, percent-decoded as Go does, never in the CONNECT line."""
    with_auth = proxy[0].replace("http://", "http://user:p%40ss@")
    with pytest.raises(NoResponse) as raised:
        get(BEHIND, proxy_url=with_auth)
    wanted = "Basic " + base64.b64encode(b"user:p@ss").decode()
    assert proxy[1] == [("CONNECT", "kubernetes.invalid:6443", wanted)]
    assert "403" in raised.value.detail  # the proxy took the credentials (else 407)
    assert "p@ss" not in raised.value.detail
    assert "p%40ss" not in raised.value.detail


def test_proxy_credentials_reach_a_plain_http_proxy_request(
    proxy: tuple[str, list[Any]],
) -> None:
    with_auth = proxy[0].replace("http://", "http://user:p%40ss@")
    get("http://kubernetes.invalid:8080", proxy_url=with_auth)
    wanted = "Basic " + base64.b64encode(b"user:p@ss").decode()
    assert proxy[1] == [("GET", "http://kubernetes.invalid:8080/api", wanted)]


def test_connect_refuses_a_socks_proxy_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal is a configuration error at the start (exit 2), naming the variable."""
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    path = write_kubeconfig(tmp_path, BEHIND)
    with pytest.raises(ConfigError, match=r"HTTPS_PROXY socks5://127\.0\.0\.1:1080: only http"):
        client.connect(Config(kubeconfig=str(path)), stop=FakeStop())
