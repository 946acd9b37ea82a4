"""Health endpoints of ``sweeper --watch``: ``/healthz``, ``/readyz`` and ``/metrics``.

``/healthz`` says the main loop turned recently, ``/readyz`` that every watch completed its
first list (its view of the jobs is whole), ``/metrics`` renders ``sweeper.metrics``.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol

from sweeper.core.clock import Clock
from sweeper.core.errors import ConfigError

log = logging.getLogger(__name__)

# /healthz fails when the main loop has not turned for this long (it turns at least every
# second, and a fire's requests are bounded by --request-timeout).
STALE_LOOP_S = 120.0


class Exposition(Protocol):
    """What ``/metrics`` serves: ``sweeper.metrics.WatchMetrics`` (or a test's)."""

    content_type: str

    def render(self) -> bytes:
        """The body of ``/metrics``."""
        ...


class Health:
    """What the probes report: ``streams`` first lists awaited, the main loop's beats."""

    def __init__(self, streams: int, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._expected = streams
        self._listed: set[object] = set()
        self._beat = clock.monotonic()

    def expect(self, streams: int) -> None:
        """Set the number of streams ``/readyz`` waits for (known after discovery)."""
        with self._lock:
            self._expected = streams

    def listed(self, stream: object) -> None:
        """Record that a stream completed its first list."""
        with self._lock:
            self._listed.add(stream)

    def beat(self) -> None:
        """Record that the main loop turned."""
        self._beat = self._clock.monotonic()

    @property
    def ready(self) -> bool:
        """Whether every watch completed its first list."""
        with self._lock:
            return len(self._listed) >= self._expected

    @property
    def alive(self) -> bool:
        """Whether the main loop turned recently."""
        return self._clock.monotonic() - self._beat < STALE_LOOP_S


def serve(address: str, port: int, health: Health, metrics: Exposition) -> ThreadingHTTPServer:
    """Serve the probes and the metrics on a daemon thread (port 0 picks a free one).

    Raises:
        ConfigError: The address and port cannot be listened on (a port already in use,
            another sweeper on the same host for instance, an address not on this host, a
            privileged port): a configuration error (exit 2), not a bug.
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(HTTPStatus.OK, metrics.render(), metrics.content_type)
            elif path == "/healthz":
                self._probe(health.alive)
            elif path == "/readyz":
                self._probe(health.ready)
            else:
                self._answer(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")

        def _probe(self, ok: bool) -> None:
            status = HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE
            self._answer(status, b"ok\n" if ok else b"not ready\n", "text/plain")

        def _answer(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("health: " + format, *args)

    kind = _IPv6Server if _is_ipv6(address) else ThreadingHTTPServer
    try:
        server = kind((address, port), Handler)
    except OSError as error:
        raise ConfigError(_cannot_listen(address, port, error)) from error
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="health", daemon=True)
    thread.start()
    return server


def host_port(address: str, port: int) -> str:
    """``address:port`` as a URL writes it: an IPv6 address in brackets (``[::1]:8080``)."""
    return f"[{address}]:{port}" if _is_ipv6(address) else f"{address}:{port}"


class _IPv6Server(ThreadingHTTPServer):
    """An IPv6 listener, dual-stack on ``::`` as a Go listener is (kubelet, kube-proxy).

    ``IPV6_V6ONLY`` is set off explicitly, whatever the host's ``net.ipv6.bindv6only``; a host
    without dual-stack sockets keeps an IPv6-only listener rather than none.
    """

    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        with contextlib.suppress(OSError, AttributeError):  # no IPV6_V6ONLY on this platform
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def _is_ipv6(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).version == 6  # noqa: PLR2004 - IP version 6
    except ValueError:
        return False  # an IPv4 address or a host name: IPv4, as before


def _cannot_listen(address: str, port: int, error: OSError) -> str:
    where, reason = host_port(address, port), error.strerror or str(error)
    said = f"cannot serve /healthz, /readyz and /metrics on {where}: {reason}"
    if error.errno == errno.EADDRINUSE:
        return (
            f"{said} (another process listens there); choose a free port with --health-port "
            "(SWEEPER_HEALTH_PORT), or 0 to serve none"
        )
    return f"{said} (--health-address/SWEEPER_HEALTH_ADDRESS, --health-port/SWEEPER_HEALTH_PORT)"
