"""The fault proxy's own specification: it forwards faithfully, and injects exactly what it is told.

The fault tests trust the proxy's request log to count the sweeper's retries, so the proxy
itself is checked first against the real apiserver, with a plain HTTPS client and the
kubeconfig it writes.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane, processes
from tests.e2e.faultproxy import (
    PROXY_USER,
    SIGN_IN_PAGE,
    Before,
    FaultProxy,
    Garble,
    Hang,
    Reset,
    Respond,
    Rule,
    SwitchMode,
)

pytestmark = pytest.mark.e2e

NAMESPACES = "/api/v1/namespaces"


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy.for_control_plane(control_plane, lifetime=120) as p:
        yield p


_clients: list[http.client.HTTPSConnection] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.pop().close()


def client_for(proxy: FaultProxy, timeout: float = 5) -> http.client.HTTPSConnection:
    """An HTTPS client that trusts exactly what the proxy's kubeconfig says to trust."""
    config = yaml.safe_load(proxy.kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    ca = Path(tempfile.mkdtemp(prefix="faultproxy-test-")) / "ca.crt"
    ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    context = ssl.create_default_context(cafile=str(ca))
    port = int(cluster["server"].rsplit(":", 1)[1])
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=timeout)
    _clients.append(conn)
    return conn


def get(conn: http.client.HTTPSConnection, path: str) -> tuple[int, dict[str, str], Any]:
    conn.request("GET", path, headers={"Accept": "application/json"})
    response = conn.getresponse()
    body = response.read()
    return response.status, dict(response.getheaders()), json.loads(body) if body else None


def test_forwards_as_its_own_user_and_keeps_the_date_header(
    proxy: FaultProxy, control_plane: ControlPlane
) -> None:
    since = control_plane.audit_offset()

    status, headers, body = get(client_for(proxy), NAMESPACES)

    assert status == 200
    assert body["kind"] == "NamespaceList"
    assert "Date" in headers  # --clock server reads it
    [seen] = proxy.seen
    assert (seen.method, seen.path, seen.fault, seen.status, seen.upstream_status) == (
        "GET",
        NAMESPACES,
        None,
        200,
        200,
    )
    [event] = control_plane.audit_events(user=PROXY_USER, since=since)
    assert (event["verb"], event["requestURI"]) == ("list", NAMESPACES)


def test_keeps_one_client_connection_alive_across_requests(proxy: FaultProxy) -> None:
    conn = client_for(proxy)
    for _ in range(3):
        assert get(conn, NAMESPACES)[0] == 200

    assert {s.connection for s in proxy.seen} == {0}


@pytest.mark.parametrize(
    ("fault", "status", "reason"),
    [
        (Respond(429, retry_after=2), 429, "TooManyRequests"),
        (Respond(500), 500, "InternalError"),
        (Respond(503, retry_after=1), 503, "ServiceUnavailable"),
        (Respond(409), 409, "Conflict"),
        (Respond(404), 404, "NotFound"),
    ],
    ids=["429", "500", "503", "409", "404"],
)
def test_answers_a_canned_kubernetes_status(
    proxy: FaultProxy, fault: Respond, status: int, reason: str
) -> None:
    proxy.rules.append(Rule(fault, "GET", r"^/api/v1/namespaces$"))

    got, headers, body = get(client_for(proxy), NAMESPACES)

    assert got == status
    assert (body["kind"], body["reason"], body["code"]) == ("Status", reason, status)
    assert f"GET {NAMESPACES}" in body["message"]
    if fault.retry_after is not None:
        assert headers["Retry-After"] == str(fault.retry_after)
        assert body["details"]["retryAfterSeconds"] == fault.retry_after
    [seen] = proxy.seen
    assert (seen.fault, seen.status, seen.upstream_status) == (fault.describe(), status, None)


def test_faults_only_the_chosen_occurrences_of_the_chosen_method_and_path(
    proxy: FaultProxy,
) -> None:
    proxy.rules.append(Rule(Respond(503), "GET", r"^/api/v1/namespaces$", nth=2, times=2))
    conn = client_for(proxy)

    statuses = [get(conn, NAMESPACES)[0] for _ in range(5)]
    other = get(conn, f"{NAMESPACES}/default")[0]

    assert statuses == [200, 503, 503, 200, 200]
    assert other == 200
    assert proxy.count("GET", r"^/api/v1/namespaces$") == 5


def test_every_occurrence_when_times_is_none(proxy: FaultProxy) -> None:
    proxy.rules.append(Rule(Respond(500), None, r"namespaces", times=None))
    conn = client_for(proxy)

    assert [get(conn, NAMESPACES)[0] for _ in range(3)] == [500, 500, 500]


def test_a_response_lost_after_forwarding_still_reaches_the_apiserver(
    proxy: FaultProxy, control_plane: ControlPlane
) -> None:
    proxy.rules.append(Rule(Respond(500, forward_first=True), "POST", r"/configmaps$"))
    ns = control_plane.create_namespace("faultproxy")
    conn = client_for(proxy)
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "written"}})
    conn.request(
        "POST",
        f"{NAMESPACES}/{ns}/configmaps",
        body=body,
        headers={"Content-Type": "application/json"},
    )
    response = conn.getresponse()
    response.read()

    assert response.status == 500
    assert (
        control_plane.request("GET", f"{NAMESPACES}/{ns}/configmaps/written")["metadata"]["name"]
        == "written"
    )
    [seen] = proxy.seen
    assert (seen.status, seen.upstream_status) == (500, 201)
    assert seen.json() == json.loads(body)


def test_a_hang_outlasts_the_client_timeout(proxy: FaultProxy) -> None:
    proxy.rules.append(Rule(Hang(30), "GET", r"^/api/v1/namespaces$"))
    conn = client_for(proxy, timeout=0.5)

    with pytest.raises(TimeoutError):
        get(conn, NAMESPACES)
    assert proxy.seen[0].fault == "hang"
    assert proxy.seen[0].status is None


def test_stop_ends_a_hang(control_plane: ControlPlane) -> None:
    proxy = FaultProxy.for_control_plane(control_plane, rules=[Rule(Hang(300), "GET", "")])
    conn = client_for(proxy, timeout=60)
    began = time.monotonic()
    conn.connect()
    conn.request("GET", NAMESPACES)
    time.sleep(0.3)
    proxy.stop()

    with pytest.raises((ConnectionError, http.client.RemoteDisconnected)):
        conn.getresponse()
    # Not a timing assertion about the sweeper: it shows the hang did not run its 300 s.
    assert time.monotonic() - began < 60


def test_a_reset_drops_the_connection_without_an_answer(proxy: FaultProxy) -> None:
    proxy.rules.append(Rule(Reset(), "GET", r"^/api/v1/namespaces$"))

    with pytest.raises((ConnectionError, http.client.RemoteDisconnected)):
        get(client_for(proxy), NAMESPACES)
    assert get(client_for(proxy), NAMESPACES)[0] == 200


def test_refuse_mode_closes_the_port_until_healed(proxy: FaultProxy) -> None:
    proxy.rules.append(Rule(SwitchMode("refuse"), "GET", r"^/api/v1/namespaces$"))

    with pytest.raises((ConnectionError, http.client.RemoteDisconnected)):
        get(client_for(proxy), NAMESPACES)
    with pytest.raises(ConnectionRefusedError):
        get(client_for(proxy), NAMESPACES)
    proxy.set_mode("serve")
    assert get(client_for(proxy), NAMESPACES)[0] == 200


def test_bad_tls_mode_presents_a_certificate_the_client_cannot_verify(proxy: FaultProxy) -> None:
    proxy.set_mode("bad-tls")

    with pytest.raises(ssl.SSLCertVerificationError):
        get(client_for(proxy), NAMESPACES)
    assert proxy.seen == []
    # The proxy's side of the handshake ends a moment after the client gave up.
    processes.wait_until(
        lambda: proxy.failed_handshakes == 1, timeout=10, what="the handshake failure"
    )
    proxy.set_mode("serve")
    assert get(client_for(proxy), NAMESPACES)[0] == 200


def test_before_runs_its_action_then_forwards(
    proxy: FaultProxy, control_plane: ControlPlane
) -> None:
    ns = control_plane.create_namespace("faultproxy")
    control_plane.request(
        "POST",
        f"{NAMESPACES}/{ns}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "doomed"}},
    )

    def delete(_seen: object) -> None:
        control_plane.request("DELETE", f"{NAMESPACES}/{ns}/configmaps/doomed")

    proxy.rules.append(Rule(Before(delete, "delete-first"), "GET", r"/configmaps/doomed$"))

    status, _, body = get(client_for(proxy), f"{NAMESPACES}/{ns}/configmaps/doomed")

    assert (status, body["reason"]) == (404, "NotFound")  # the real apiserver's answer
    assert proxy.seen[0].fault == "delete-first"


def test_an_unreachable_upstream_looks_like_a_dead_server(proxy: FaultProxy) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    proxy.upstream = f"https://127.0.0.1:{dead_port}"

    with pytest.raises((ConnectionError, http.client.RemoteDisconnected)):
        get(client_for(proxy), NAMESPACES)
    assert proxy.seen[0].fault == "upstream-unreachable"


def test_listens_on_loopback_only(proxy: FaultProxy) -> None:
    assert proxy.url.startswith("https://127.0.0.1:")


def test_stops_by_itself_after_its_lifetime(control_plane: ControlPlane) -> None:
    proxy = FaultProxy.for_control_plane(control_plane, lifetime=0.5)
    time.sleep(1.5)

    with pytest.raises(ConnectionRefusedError):
        get(client_for(proxy), NAMESPACES)


def raw_get(conn: http.client.HTTPSConnection, path: str) -> tuple[int, dict[str, str], bytes]:
    conn.request("GET", path, headers={"Accept": "application/json"})
    response = conn.getresponse()
    return response.status, dict(response.getheaders()), response.read()


def test_garble_answers_a_sign_in_page_in_the_apiservers_place(proxy: FaultProxy) -> None:
    proxy.rules.append(Rule(Garble(), "GET", r"^/api/v1/namespaces$"))

    status, headers, body = raw_get(client_for(proxy), NAMESPACES)

    assert (status, body) == (200, SIGN_IN_PAGE)
    assert headers["Content-Type"].startswith("text/html")
    [seen] = proxy.seen
    assert (seen.fault, seen.status, seen.upstream_status) == ("garble-200", 200, None)


def test_garble_truncate_forwards_then_cuts_the_real_answer(proxy: FaultProxy) -> None:
    proxy.rules.append(Rule(Garble(truncate=30), "GET", r"^/api/v1/namespaces$"))

    status, headers, body = raw_get(client_for(proxy), NAMESPACES)

    assert (status, len(body)) == (200, 30)
    assert body.startswith(b'{"kind":"NamespaceList"')
    assert headers["Content-Type"] == "application/json"
    [seen] = proxy.seen
    assert (seen.fault, seen.upstream_status) == ("truncate-to-30", 200)
