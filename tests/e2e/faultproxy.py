"""A small fault-injecting HTTPS proxy between the sweeper and the real kube-apiserver.

The fault tests put it in front of a ``devcluster.ControlPlane`` to show what the sweeper does
when the cluster misbehaves in ways a healthy test cluster never would. It:

- listens on loopback only and terminates TLS with its own serving certificate, signed by a
  CA of its own (``devcluster.pki``), so the sweeper's kubeconfig trusts the proxy, not the
  apiserver;
- forwards each request to the real apiserver over TLS with the admin client certificate
  (the sweeper's own credential, a dummy bearer token, is dropped on the way);
- applies the first matching ``Rule`` (HTTP method + regular expression on the request target
  + which occurrences) and injects its ``Fault``: a canned status (429 with ``Retry-After``,
  409, 404, 500, 503...), a hang past the client's timeout, a reset connection, or a switch
  of the whole proxy to refusing connections or presenting a certificate the client cannot
  verify; a fault can also run a callback (delete a job, remove a CRD, kill the apiserver)
  just before the request is forwarded;
- records every request it saw, with the fault it applied and the status it returned, so a
  test can count retries and their spacing without trusting the sweeper's own logs.

It is bounded: it stops by itself after ``lifetime`` seconds, caps concurrent connections and
request bodies, and every hang ends when the proxy stops. It is the tests' own code: nothing
in ``sweeper/`` knows about it.

    rules = [Rule(Respond(503), "GET", r"/pytorchjobs", times=2)]
    with FaultProxy.for_control_plane(cp, rules=rules) as proxy:
        run_sweeper(..., kubeconfig=proxy.kubeconfig)
        assert proxy.count("GET", r"/pytorchjobs") == 3
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import itertools
import json
import re
import select
import socket
import ssl
import struct
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import yaml

from devcluster import kubeconfig, pki
from devcluster.processes import StopsOnExit

if TYPE_CHECKING:
    from devcluster import ControlPlane

LOOPBACK = "127.0.0.1"
# The audit user of every request the proxy forwards.
PROXY_USER = "faultproxy"
# A whole e2e module fits in this; a forgotten proxy cannot outlive a test session by much.
DEFAULT_LIFETIME = 600.0
MAX_CONNECTIONS = 64
MAX_BODY = 32 * 1024 * 1024
_MAX_HEADER_LINES = 200
_UPSTREAM_TIMEOUT = 60.0
# Request headers that describe one hop, or the sweeper's own identity, never forwarded.
_HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "authorization",
        "content-length",
    }
)
_REASONS = {
    404: "NotFound",
    409: "Conflict",
    429: "TooManyRequests",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "Timeout",
}

Mode = Literal["serve", "refuse", "bad-tls"]


# --- faults -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Respond:
    """Answer with a canned Kubernetes ``Status`` instead of (or after) forwarding.

    Attributes:
        status: HTTP status, e.g. 429, 500, 503, 409, 404.
        retry_after: Seconds for a ``Retry-After`` header (429 and 503 carry one in real life).
        forward_first: Forward the request first, then lose the real answer: the write
            happened, but the client is told it failed.
    """

    status: int
    retry_after: int | None = None
    forward_first: bool = False

    def describe(self) -> str:
        """Short name of the fault for the request log."""
        return f"respond-{self.status}" + ("-after-forward" if self.forward_first else "")


@dataclass(frozen=True)
class Hang:
    """Hold the request without answering for ``seconds`` (or until the proxy stops), then close.

    Attributes:
        seconds: How long to hold; make it longer than the client's request timeout.
        forward_first: Forward first, then hang on the answer (the write happened).
    """

    seconds: float = 30.0
    forward_first: bool = False

    def describe(self) -> str:
        """Short name of the fault for the request log."""
        return "hang" + ("-after-forward" if self.forward_first else "")


@dataclass(frozen=True)
class Reset:
    """Drop the connection with a TCP reset and no answer (a crashed server mid-request)."""

    def describe(self) -> str:
        """Short name of the fault for the request log."""
        return "reset"


@dataclass(frozen=True)
class SwitchMode:
    """Reset this connection and switch the whole proxy to ``mode`` for every new connection.

    ``refuse`` closes the listening socket (new connections are refused by the kernel, as
    for a server that is down); ``bad-tls`` presents a certificate from a CA the client does
    not trust. ``FaultProxy.set_mode("serve")`` heals it.
    """

    mode: Mode

    def describe(self) -> str:
        """Short name of the fault for the request log."""
        return f"mode-{self.mode}"


@dataclass(frozen=True)
class Before:
    """Run ``action`` (e.g. delete the job the request is about), then forward the request.

    Attributes:
        action: Called with the request's ``Seen`` record, in the connection's thread.
        name: Name of the fault for the request log.
    """

    action: Callable[[Seen], None]
    name: str = "before"

    def describe(self) -> str:
        """Short name of the fault for the request log."""
        return self.name


@dataclass(frozen=True)
class Stall:
    """Relay a watch stream's headers and its first ``events`` lines, then go silent.

    The connection stays open and says nothing more (a stalled stream: a half-dead load
    balancer, a frozen apiserver connection) for ``seconds`` or until the proxy stops. Watch
    requests (``watch=1``) are otherwise relayed line by line as they come.

    Attributes:
        events: Lines relayed before the silence.
        seconds: How long the silence lasts before the connection is dropped.
    """

    events: int = 0
    seconds: float = 600.0

    def describe(self) -> str:
        """Short name of the fault for the request log."""
        return f"stall-after-{self.events}"


# What an auth proxy (oauth2-proxy, a corporate SSO gateway) answers in the apiserver's place.
SIGN_IN_PAGE = (
    b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>"
    b'<form action="/oauth2/start"><button>Sign in with your identity provider</button></form>'
    b"</body></html>"
)


@dataclass(frozen=True)
class Garble:
    """Answer with a body that is not the apiserver's JSON, or with its real answer cut short.

    Attributes:
        body: The body sent in the apiserver's place (an auth proxy's HTML sign-in page by
            default); unused with ``truncate``.
        content_type: Its ``Content-Type``.
        status: The status sent (200: the proxy says all is well).
        truncate: Forward the request first (the write happens), then send only this many
            bytes of the real answer, with a ``Content-Length`` that matches them.
    """

    body: bytes = SIGN_IN_PAGE
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    truncate: int | None = None

    def describe(self) -> str:
        """Short name of the fault for the request log."""
        if self.truncate is not None:
            return f"truncate-to-{self.truncate}"
        return f"garble-{self.status}"


Fault = Respond | Hang | Reset | SwitchMode | Before | Stall | Garble


@dataclass
class Rule:
    """Which requests get a fault: method, target pattern, and which occurrences.

    Occurrences are counted per rule, over requests that match its method and pattern, from 1.

    Attributes:
        fault: What to do to a matching request.
        method: HTTP method (``GET``, ``PATCH``, ``PUT``, ``DELETE``, ``POST``); None for any.
        path: Regular expression searched in the request target (path and query string).
        nth: First matching occurrence that gets the fault.
        times: How many occurrences from ``nth`` on get it; None for every one.
    """

    fault: Fault
    method: str | None = None
    path: str = ""
    nth: int = 1
    times: int | None = 1
    matched: int = field(default=0, init=False)

    def applies(self, method: str, target: str) -> bool:
        """Count a request that matches, and say whether this occurrence gets the fault."""
        if self.method is not None and method != self.method.upper():
            return False
        if not re.search(self.path, target):
            return False
        self.matched += 1
        if self.matched < self.nth:
            return False
        return self.times is None or self.matched < self.nth + self.times


@dataclass
class Seen:
    """One request the proxy received, and what became of it.

    Attributes:
        index: Order of arrival, from 0.
        connection: Number of the client connection it came on.
        method: HTTP method.
        target: Path and query string as sent.
        body: Request body (bytes; JSON for every write the sweeper sends).
        started: ``time.monotonic()`` when the request was read.
        fault: Name of the fault applied, or None when forwarded untouched.
        status: Status returned to the client; None when none was (hang, reset).
        upstream_status: Status the real apiserver returned, when the request was forwarded.
        ended: ``time.monotonic()`` when the proxy was done with it.
    """

    index: int
    connection: int
    method: str
    target: str
    body: bytes
    started: float
    fault: str | None = None
    status: int | None = None
    upstream_status: int | None = None
    ended: float | None = None

    @property
    def path(self) -> str:
        """The path without the query string."""
        return urllib.parse.urlsplit(self.target).path

    @property
    def query(self) -> dict[str, list[str]]:
        """The decoded query string."""
        return urllib.parse.parse_qs(urllib.parse.urlsplit(self.target).query)

    @property
    def is_write(self) -> bool:
        """Whether the request could change state."""
        return self.method not in {"GET", "HEAD", "OPTIONS"}

    def json(self) -> Any:
        """The request body, decoded as JSON (any JSON value: the test knows which)."""
        return json.loads(self.body)


# --- the proxy --------------------------------------------------------------------------------


class ProxyError(RuntimeError):
    """The proxy could not start."""


class FaultProxy(StopsOnExit):
    """A TLS-terminating, fault-injecting proxy to one kube-apiserver; see the module docstring.

    Attributes:
        upstream: ``https://127.0.0.1:<port>`` of the real apiserver; may be changed while
            running (e.g. after the apiserver was restarted on another port).
        rules: Rules, tried in order; the first that applies wins. May be changed while running.
        kubeconfig: A kubeconfig for the sweeper that points at the proxy.
        url: ``https://127.0.0.1:<port>`` of the proxy.
        connections: Client connections accepted so far.
        failed_handshakes: Connections whose TLS handshake failed (the client's retries of a
            certificate it rejects are counted here, since no request ever arrives).
    """

    def __init__(
        self,
        upstream: str,
        upstream_ca: Path,
        client_cert: Path,
        client_key: Path,
        *,
        rules: Sequence[Rule] = (),
        lifetime: float = DEFAULT_LIFETIME,
        workdir: Path | None = None,
    ) -> None:
        self.upstream = upstream
        self.rules = list(rules)
        self._upstream_ctx = ssl.create_default_context(cafile=str(upstream_ca))
        self._upstream_ctx.load_cert_chain(str(client_cert), str(client_key))
        self._lifetime = lifetime
        self._workdir = workdir or Path(tempfile.mkdtemp(prefix="faultproxy-"))
        self._ca = pki.CertificateAuthority("faultproxy-ca")
        # A second CA the client never heard of: its certificate is the "wrong" one.
        self._rogue_ca = pki.CertificateAuthority("faultproxy-rogue-ca")
        self._good_tls = self._server_context(self._ca)
        self._bad_tls = self._server_context(self._rogue_ca)
        self._mode: Mode = "serve"
        self._lock = threading.RLock()
        self._seen: list[Seen] = []
        self._connection_ids = itertools.count()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._port = 0
        self._open_sockets: set[socket.socket] = set()
        self._thread: threading.Thread | None = None
        self.url = ""
        self.kubeconfig = self._workdir / "kubeconfig"
        self.connections = 0
        self.failed_handshakes = 0

    @classmethod
    def for_control_plane(
        cls, cp: ControlPlane, *, user: str = PROXY_USER, **kwargs: Any
    ) -> FaultProxy:
        """A started proxy in front of ``cp``.

        Args:
            cp: The control plane to forward to.
            user: The identity the proxy forwards with (a client certificate in group
                ``system:masters``), so the audit log tells proxied requests from the test's
                own set-up: ``cp.audit_events(user=PROXY_USER)``.
            **kwargs: Passed to the constructor (``rules``, ``lifetime``).
        """
        config = yaml.safe_load(
            cp.user_kubeconfig(user, ["system:masters"]).read_text(encoding="utf-8")
        )
        credentials = config["users"][0]["user"]
        workdir = Path(tempfile.mkdtemp(prefix="faultproxy-"))
        cert, key = workdir / "upstream-client.crt", workdir / "upstream-client.key"
        cert.write_bytes(base64.b64decode(credentials["client-certificate-data"]))
        key.write_bytes(base64.b64decode(credentials["client-key-data"]))
        ca = workdir / "upstream-ca.crt"
        ca.write_bytes(cp.ca_pem)
        return cls(cp.server, ca, cert, key, workdir=workdir, **kwargs).start()

    def _server_context(self, ca: pki.CertificateAuthority) -> ssl.SSLContext:
        pair = ca.serving_cert([LOOPBACK, "localhost"])
        name = "good" if ca is self._ca else "rogue"
        cert, key = self._workdir / f"{name}.crt", self._workdir / f"{name}.key"
        cert.write_bytes(pair.cert_pem)
        key.write_bytes(pair.key_pem)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        return context

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Listen on a free loopback port, write the kubeconfig, and serve in a daemon thread."""
        self._listen()
        self.url = f"https://{LOOPBACK}:{self._port}"
        kubeconfig.write(
            self.kubeconfig,
            kubeconfig.render(
                server=self.url,
                ca_pem=self._ca.cert_pem,
                user="faultproxy-client",
                # The proxy authenticates upstream itself; this token only has to be present.
                token="faultproxy-ignores-this-token",  # noqa: S106 - not a secret
            ),
        )
        self._thread = threading.Thread(target=self._serve, name="faultproxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, end every hang, close every connection. Idempotent."""
        self._stopping.set()
        with self._lock:
            self._close_listener()
            for sock in list(self._open_sockets):
                _reset(sock)
            self._open_sockets.clear()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def set_mode(self, mode: Mode) -> None:
        """Serve normally, refuse connections (listener closed), or present an untrusted cert."""
        with self._lock:
            self._mode = mode
            if mode == "refuse":
                self._close_listener()
            elif self._listener is None and not self._stopping.is_set():
                self._listen()

    @property
    def mode(self) -> Mode:
        """The current connection mode."""
        return self._mode

    # --- what it saw --------------------------------------------------------------------------

    @property
    def seen(self) -> list[Seen]:
        """Every request received so far, in order (a snapshot)."""
        with self._lock:
            return list(self._seen)

    def matching(self, method: str | None = None, path: str = "") -> list[Seen]:
        """Requests received so far with this method and a target matching ``path``."""
        return [
            s
            for s in self.seen
            if (method is None or s.method == method.upper()) and re.search(path, s.target)
        ]

    def count(self, method: str | None = None, path: str = "") -> int:
        """How many requests matched ``method`` and ``path``."""
        return len(self.matching(method, path))

    def writes(self) -> list[Seen]:
        """Every request that could change state."""
        return [s for s in self.seen if s.is_write]

    def describe(self) -> str:
        """The request log as text, one line per request, for assertion messages."""
        lines = []
        base = self._seen[0].started if self._seen else 0.0
        for s in self.seen:
            lines.append(
                f"#{s.index} +{s.started - base:6.2f}s conn{s.connection} {s.method} {s.target}"
                f" -> {s.status} fault={s.fault} upstream={s.upstream_status}"
            )
        return "\n".join(lines) or "(no request)"

    # --- serving ------------------------------------------------------------------------------

    def _listen(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, self._port))
        except OSError as e:
            sock.close()
            raise ProxyError(f"cannot listen on {LOOPBACK}:{self._port}: {e}") from e
        sock.listen(16)
        self._port = sock.getsockname()[1]
        self._listener = sock

    def _close_listener(self) -> None:
        if self._listener is not None:
            # shutdown() first: it stops the listening at once even while the accept thread
            # is still inside select() on this socket, which a bare close() does not.
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None

    def _serve(self) -> None:
        deadline = time.monotonic() + self._lifetime
        while not self._stopping.is_set():
            if time.monotonic() > deadline:
                self.stop()
                return
            listener = self._listener
            if listener is None:  # refusing: nothing to accept until healed
                time.sleep(0.05)
                continue
            try:
                ready, _, _ = select.select([listener], [], [], 0.2)
                if not ready:
                    continue
                client, _ = listener.accept()
            except (OSError, ValueError):  # closed by set_mode("refuse") or stop()
                continue
            if not self._slots.acquire(blocking=False):
                _reset(client)
                continue
            connection = next(self._connection_ids)
            context = self._bad_tls if self._mode == "bad-tls" else self._good_tls
            threading.Thread(
                target=self._connection,
                args=(client, context, connection),
                name=f"faultproxy-conn{connection}",
                daemon=True,
            ).start()

    def _connection(self, raw: socket.socket, context: ssl.SSLContext, connection: int) -> None:
        current = raw  # the TLS socket takes the descriptor over once wrapped
        with self._lock:
            self._open_sockets.add(raw)
        upstream: http.client.HTTPSConnection | None = None
        try:
            raw.settimeout(_UPSTREAM_TIMEOUT)
            with self._lock:
                self.connections += 1
            try:
                current = context.wrap_socket(raw, server_side=True)
            except (OSError, ssl.SSLError):  # the client rejected our certificate, as intended
                with self._lock:
                    self.failed_handshakes += 1
                return
            with self._lock:
                self._open_sockets.discard(raw)
                self._open_sockets.add(current)
            reader = current.makefile("rb")
            while not self._stopping.is_set():
                request = _read_request(reader)
                if request is None:
                    return
                upstream, keep = self._handle(current, connection, request, upstream)
                if not keep:
                    return
        except (OSError, ValueError):
            return
        finally:
            if upstream is not None:
                upstream.close()
            with self._lock:
                self._open_sockets.discard(current)
            _reset(current)
            self._slots.release()

    def _handle(  # noqa: PLR0911 - one exit per kind of fault reads as the table it is
        self,
        sock: socket.socket,
        connection: int,
        request: _Request,
        upstream: http.client.HTTPSConnection | None,
    ) -> tuple[http.client.HTTPSConnection | None, bool]:
        """Apply the rules to one request; returns the upstream connection and keep-alive."""
        method, target, headers, body = request
        with self._lock:
            seen = Seen(len(self._seen), connection, method, target, body, time.monotonic())
            self._seen.append(seen)
            fault = next((r.fault for r in self.rules if r.applies(method, target)), None)
        seen.fault = fault.describe() if fault is not None else None
        try:
            if isinstance(fault, Reset):
                return upstream, False
            if isinstance(fault, SwitchMode):
                self.set_mode(fault.mode)
                return upstream, False
            if isinstance(fault, Hang) and not fault.forward_first:
                self._stopping.wait(fault.seconds)
                return upstream, False
            if isinstance(fault, Respond) and not fault.forward_first:
                seen.status = fault.status
                _send(sock, *_canned(fault, method, target))
                return upstream, True
            if isinstance(fault, Garble) and fault.truncate is None:
                seen.status = fault.status
                headers_sent = [("Content-Type", fault.content_type), ("Date", _http_date())]
                _send(sock, fault.status, headers_sent, fault.body)
                return upstream, True
            if isinstance(fault, Before):
                fault.action(seen)
            if "watch=1" in target or isinstance(fault, Stall):
                # On its own upstream connection; the kept-alive one is closed by the caller.
                self._relay_watch(sock, seen, method, target, headers, fault=fault)
                return upstream, False
            try:
                upstream, status, reply_headers, reply = self._forward(
                    upstream, method, target, headers, body
                )
            except (OSError, http.client.HTTPException):
                # The apiserver is gone (killed by a test): look like it, drop the client.
                seen.fault = (seen.fault + "+" if seen.fault else "") + "upstream-unreachable"
                return None, False
            seen.upstream_status = status
            if isinstance(fault, Hang):
                self._stopping.wait(fault.seconds)
                return upstream, False
            if isinstance(fault, Respond):
                seen.status = fault.status
                _send(sock, *_canned(fault, method, target))
                return upstream, True
            if isinstance(fault, Garble):
                seen.status = fault.status
                _send(sock, fault.status, reply_headers, reply[: fault.truncate])
                return upstream, True
            seen.status = status
            _send(sock, status, reply_headers, reply)
            return upstream, True
        finally:
            seen.ended = time.monotonic()

    def _relay_watch(
        self,
        sock: socket.socket,
        seen: Seen,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        *,
        fault: Fault | None,
    ) -> None:
        """Relay a watch response line by line as the apiserver writes it (or stall it)."""
        url = urllib.parse.urlsplit(self.upstream)
        upstream = http.client.HTTPSConnection(
            url.hostname or LOOPBACK,
            url.port,
            context=self._upstream_ctx,
            timeout=DEFAULT_LIFETIME,
        )
        response: http.client.HTTPResponse | None = None
        try:
            forwarded = {k: v for k, v in headers if k.lower() not in _HOP_HEADERS}
            try:
                upstream.request(method, target, headers=forwarded)
                with self._lock:
                    # stop() resets it, which ends a relay blocked on a quiet stream.
                    self._open_sockets.add(upstream.sock)
                response = upstream.getresponse()
            except (OSError, http.client.HTTPException):
                seen.fault = (seen.fault + "+" if seen.fault else "") + "upstream-unreachable"
                return
            seen.upstream_status = seen.status = response.status
            reply_headers = [
                (k, v) for k, v in response.getheaders() if k.lower() not in _HOP_HEADERS
            ]
            head = [f"HTTP/1.1 {response.status} {response.reason}"]
            head += [f"{k}: {v}" for k, v in reply_headers]
            head += ["Transfer-Encoding: chunked", "", ""]
            sock.sendall("\r\n".join(head).encode("latin-1"))
            relayed = 0
            while not self._stopping.is_set():
                if isinstance(fault, Stall) and relayed >= fault.events:
                    self._stopping.wait(fault.seconds)
                    return
                line = response.readline()
                if not line:
                    break
                sock.sendall(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                relayed += 1
            sock.sendall(b"0\r\n\r\n")
        except (OSError, http.client.HTTPException):
            return
        finally:
            if response is not None:
                response.close()
            with self._lock:
                self._open_sockets.discard(upstream.sock)
            upstream.close()

    def _forward(
        self,
        upstream: http.client.HTTPSConnection | None,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
    ) -> tuple[http.client.HTTPSConnection, int, list[tuple[str, str]], bytes]:
        url = urllib.parse.urlsplit(self.upstream)
        for _attempt in (1, 2):
            reused = upstream is not None and (upstream.host, upstream.port) == (
                url.hostname,
                url.port,
            )
            if not reused:
                if upstream is not None:
                    upstream.close()
                upstream = http.client.HTTPSConnection(
                    url.hostname or LOOPBACK,
                    url.port,
                    context=self._upstream_ctx,
                    timeout=_UPSTREAM_TIMEOUT,
                )
            assert upstream is not None  # for the type checker
            forwarded = {k: v for k, v in headers if k.lower() not in _HOP_HEADERS}
            try:
                upstream.request(
                    method,
                    target,
                    body=body if body or method not in {"GET", "HEAD"} else None,
                    headers=forwarded,
                )
                response = upstream.getresponse()
                reply = response.read()
            except (OSError, http.client.HTTPException) as error:
                upstream.close()
                upstream = None
                # Only a kept-alive connection that the apiserver closed while idle gets one
                # fresh try: the request cannot have been processed. Anything else is real.
                stale = isinstance(
                    error,
                    ConnectionError | http.client.RemoteDisconnected | http.client.BadStatusLine,
                )
                if reused and stale:
                    continue
                raise
            reply_headers = [
                (k, v) for k, v in response.getheaders() if k.lower() not in _HOP_HEADERS
            ]
            return upstream, response.status, reply_headers, reply
        raise AssertionError("unreachable")  # pragma: no cover


# --- HTTP/1.1 on a socket ---------------------------------------------------------------------


class _Request(NamedTuple):
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes


def _read_request(reader: object) -> _Request | None:
    """Read one request; None at end of stream. Only Content-Length bodies (what clients send)."""
    readline = reader.readline  # type: ignore[attr-defined]
    line = readline(65537)
    while line in (b"\r\n", b"\n"):
        line = readline(65537)
    if not line:
        return None
    method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: list[tuple[str, str]] = []
    for _ in range(_MAX_HEADER_LINES):
        header = readline(65537).decode("latin-1").rstrip("\r\n")
        if not header:
            break
        name, _, value = header.partition(":")
        headers.append((name.strip(), value.strip()))
    else:
        raise ValueError("too many header lines")
    length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
    if length > MAX_BODY:
        raise ValueError("request body too large")
    body = reader.read(length) if length else b""  # type: ignore[attr-defined]
    return _Request(method.upper(), target, headers, body)


def _send(sock: socket.socket, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
    reason = http.client.responses.get(status, "Status")
    head = [f"HTTP/1.1 {status} {reason}"]
    head += [f"{k}: {v}" for k, v in headers]
    head += [f"Content-Length: {len(body)}", "", ""]
    sock.sendall("\r\n".join(head).encode("latin-1") + body)


def _canned(fault: Respond, method: str, target: str) -> tuple[int, list[tuple[str, str]], bytes]:
    """A ``Status`` answer like the apiserver's own, with a message naming the fault."""
    reason = _REASONS.get(fault.status, "InternalError")
    status_doc = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"faultproxy: injected {fault.status} for {method} {target}",
        "reason": reason,
        "code": fault.status,
    }
    if fault.retry_after is not None:
        status_doc["details"] = {"retryAfterSeconds": fault.retry_after}
    headers = [
        ("Content-Type", "application/json"),
        ("Date", time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())),
    ]
    if fault.retry_after is not None:
        headers.append(("Retry-After", str(fault.retry_after)))
    return fault.status, headers, json.dumps(status_doc).encode()


def _http_date() -> str:
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())


def _reset(sock: socket.socket) -> None:
    """Close with RST rather than FIN, so the peer sees a reset connection at once."""
    with contextlib.suppress(OSError):
        # Wakes a thread of ours blocked reading this socket (stop() closes from outside).
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()
