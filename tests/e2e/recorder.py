"""A loopback API server that records what each client presents, and a proxy that records tunnels.

The client differential test (``test_client_differential.py``) points kubectl and the sweeper
at these, one after the other, and compares what they presented:

- ``Recorder``: an HTTPS (or plain HTTP) server on 127.0.0.1 that answers just enough of the
  Kubernetes API for ``kubectl get --raw`` and a sweeper dry run (the kubeflow.org group with
  one kind, an empty list), and records each request: method, path, ``Host``, the TLS server
  name (SNI), the client certificate's subject, and every header;
- ``TunnelProxy``: an HTTP CONNECT and SOCKS5 proxy on 127.0.0.1 that records each tunnel's
  kind, target and ``Proxy-Authorization``, and dials 127.0.0.1 at the target's port whatever
  name the target has, so a kubeconfig may name a server that no resolver knows.

Both are the tests' own code, started per module and reset between runs; nothing in
``sweeper/`` knows about them.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import struct
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import BaseRequestHandler, BaseServer, ThreadingTCPServer
from typing import Any, TypeVar

from devcluster.pki import KeyPair
from devcluster.relay import join

LOOPBACK = "127.0.0.1"
_GROUP = "/apis/kubeflow.org"
_MAX_HEADER = 16 * 1024
_Server = TypeVar("_Server", bound=BaseServer)


@dataclass(frozen=True)
class Seen:
    """One request as the recorder saw it; header names are lower case, in arrival order."""

    method: str
    path: str
    sni: str | None
    client_cert: str | None
    headers: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Tunnel:
    """One tunnel the proxy opened: ``connect`` or ``socks5``, its target, its credentials."""

    kind: str
    target: str
    authorization: str | None


def answer(path: str) -> tuple[int, dict[str, Any]]:
    """What the recorder answers: the kubeflow.org group serving PyTorchJobs, none of them."""
    route = path.split("?", 1)[0]
    if route == _GROUP:
        version = {"groupVersion": "kubeflow.org/v1", "version": "v1"}
        return 200, {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": "kubeflow.org",
            "versions": [version],
            "preferredVersion": version,
        }
    if route == f"{_GROUP}/v1":
        return 200, {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": "kubeflow.org/v1",
            "resources": [
                {"name": "pytorchjobs", "namespaced": True, "kind": "PyTorchJob", "verbs": ["list"]}
            ],
        }
    if route.startswith(f"{_GROUP}/v1/") and route.endswith("/pytorchjobs"):
        return 200, {
            "kind": "PyTorchJobList",
            "apiVersion": "kubeflow.org/v1",
            "metadata": {"resourceVersion": "1"},
            "items": [],
        }
    return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}


def _subject(cert: dict[str, Any] | None) -> str | None:
    if not cert:
        return None
    return ",".join(f"{key}={value}" for rdn in cert.get("subject", ()) for key, value in rdn)


class Recorder(ThreadingHTTPServer):
    """The recording API server; ``tls`` None serves plain HTTP.

    ``tls`` is the serving certificate, ``client_ca`` the CA whose client certificates it asks
    for (and records; a client without one is answered all the same). ``after_first`` runs once,
    after the first request's answer is sent (the tests rotate a token file there).
    """

    daemon_threads = True

    def __init__(self, tls: KeyPair | None = None, client_ca: bytes | None = None) -> None:
        super().__init__((LOOPBACK, 0), _Handler)
        self.seen: list[Seen] = []
        self.after_first: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            with tempfile.TemporaryDirectory(prefix="recorder-") as folder:
                cert, key = Path(folder, "tls.crt"), Path(folder, "tls.key")
                cert.write_bytes(tls.cert_pem)
                key.write_bytes(tls.key_pem)
                context.load_cert_chain(cert, key)
            if client_ca is not None:
                context.load_verify_locations(cadata=client_ca.decode("ascii"))
                context.verify_mode = ssl.CERT_OPTIONAL
            context.sni_callback = _remember_sni
            self._context = context

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self.server_address[1])

    def get_request(self) -> tuple[socket.socket, Any]:
        """Accept, wrapped in TLS whose handshake the handler's thread does."""
        sock, address = super().get_request()
        if self._context is None:
            return sock, address
        tls = self._context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return tls, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: a client that hangs up mid-handshake shows in ``seen`` as nothing."""

    def record(self, seen: Seen) -> bool:
        """Keep ``seen``; whether it is the first request since the last ``reset``."""
        with self._lock:
            self.seen.append(seen)
            return len(self.seen) == 1

    def reset(self) -> None:
        """Forget what was seen, and any ``after_first``."""
        with self._lock:
            self.seen = []
            self.after_first = None


def _remember_sni(sock: Any, name: str | None, context: ssl.SSLContext) -> None:
    del context
    sock.recorded_sni = name


class _Handler(BaseHTTPRequestHandler):
    server: Recorder
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(10)
            try:
                self.request.do_handshake()
            except (OSError, ssl.SSLError):
                self.request.close()
                raise
        super().setup()

    def handle(self) -> None:
        with contextlib.suppress(OSError):
            super().handle()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads ``seen``."""

    def _serve(self) -> None:
        tls = isinstance(self.connection, ssl.SSLSocket)
        first = self.server.record(
            Seen(
                method=self.command,
                path=self.path,
                sni=getattr(self.connection, "recorded_sni", None) if tls else None,
                client_cert=_subject(self.connection.getpeercert()) if tls else None,
                headers=tuple((k.lower(), v) for k, v in self.headers.items()),
            )
        )
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        status, body = answer(self.path)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        hook = self.server.after_first
        if first and hook is not None:
            hook()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve  # noqa: N815 - http.server's names


class TunnelProxy(ThreadingTCPServer):
    """The recording CONNECT and SOCKS5 proxy; every tunnel ends at 127.0.0.1."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__((LOOPBACK, 0), _TunnelHandler)
        self.tunnels: list[Tunnel] = []
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self.server_address[1])

    def record(self, tunnel: Tunnel) -> None:
        """Keep one tunnel."""
        with self._lock:
            self.tunnels.append(tunnel)

    def reset(self) -> None:
        """Forget the tunnels seen."""
        with self._lock:
            self.tunnels = []


@contextlib.contextmanager
def running(server: _Server) -> Iterator[_Server]:
    """Serve ``server`` on a daemon thread for the block, then close it."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class _TunnelHandler(BaseRequestHandler):
    server: TunnelProxy
    request: socket.socket

    def handle(self) -> None:
        client = self.request
        client.settimeout(10)
        try:
            first = client.recv(1, socket.MSG_PEEK)
            port = self._socks5(client) if first == b"\x05" else self._connect(client)
            if port is None:
                return
            upstream = socket.create_connection((LOOPBACK, port), timeout=10)
        except (OSError, ValueError, struct.error):
            return
        client.settimeout(None)
        upstream.settimeout(None)
        join(client, upstream)

    def _connect(self, client: socket.socket) -> int | None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(1024)
            if not chunk or len(head) > _MAX_HEADER:
                return None
            head += chunk
        lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        fields = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:])
        }
        self.server.record(Tunnel(method.lower(), target, fields.get("proxy-authorization")))
        if method != "CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return None
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        return int(target.rpartition(":")[2])

    def _socks5(self, client: socket.socket) -> int | None:
        # RFC 1928, no authentication, CONNECT only: all that kubectl's socks5 dialer asks.
        _version, methods = _exactly(client, 2)
        _exactly(client, methods)
        client.sendall(b"\x05\x00")
        _version, command, _reserved, kind = _exactly(client, 4)
        if kind == 1:
            host = socket.inet_ntoa(_exactly(client, 4))
        elif kind == 3:
            host = _exactly(client, _exactly(client, 1)[0]).decode("ascii", "replace")
        else:
            host = f"[{socket.inet_ntop(socket.AF_INET6, _exactly(client, 16))}]"
        (port,) = struct.unpack("!H", _exactly(client, 2))
        self.server.record(Tunnel("socks5", f"{host}:{port}", None))
        if command != 1:
            client.sendall(b"\x05\x07\x00\x01\x00\x00\x00\x00\x00\x00")
            return None
        client.sendall(b"\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00")
        return int(port)


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ValueError("the client closed the connection")
        data += chunk
    return data
