"""Health and metrics of ``sweeper --watch``: the only module that imports prometheus-client.

``/healthz`` says the process is alive (its main loop turned recently), ``/readyz`` that every
watch completed its first list (its view of the jobs is whole), ``/metrics`` the Prometheus
text format. Metric names share the ``deadline_sweeper_`` prefix of the CronJob mode's; no
label carries a job's name (their number is bounded by kinds, actions and results).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

log = logging.getLogger(__name__)

PREFIX = "deadline_sweeper"
# Enforcement lateness: the point of the watch mode is the sub-second buckets.
LATENESS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
# /healthz fails when the main loop has not turned for this long (it turns at least every
# second, and a fire's requests are bounded by --request-timeout).
STALE_LOOP_S = 120.0


class Metrics:
    """The watch mode's metrics, in a registry of their own (not the process-wide default)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.actions = Counter(
            f"{PREFIX}_actions", "Actions taken on jobs, by kind, action and result.",
            ("kind", "action", "result"), registry=registry,
        )
        self.lateness = Histogram(
            f"{PREFIX}_lateness_seconds",
            "Seconds between the instant a job became due and the sweeper's decision to act.",
            buckets=LATENESS_BUCKETS, registry=registry,
        )
        self.tracked = Gauge(
            f"{PREFIX}_tracked_jobs", "Jobs with an armed timer.", registry=registry
        )
        self.overdue = Gauge(
            f"{PREFIX}_overdue_jobs", "Jobs whose timer is due and not yet handled.",
            registry=registry,
        )
        self.watch_restarts = Counter(
            f"{PREFIX}_watch_restarts", "Watch streams reopened, by reason.", ("reason",),
            registry=registry,
        )
        self.relists = Counter(
            f"{PREFIX}_watch_relists", "Lists after a 410 Gone (the view rebuilt).",
            registry=registry,
        )
        self.clock_offset = Gauge(
            f"{PREFIX}_clock_offset_seconds",
            "The API server's clock minus the local clock, estimated from Date headers.",
            ("bound",), registry=registry,
        )
        self.leader = Gauge(
            f"{PREFIX}_leader", "1 while this replica holds the Lease and may write.",
            registry=registry,
        )
        self.resyncs = Counter(
            f"{PREFIX}_resyncs", "Full passes run by --resync, by result.", ("result",),
            registry=registry,
        )

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric.

        Returns:
            The body of ``/metrics``.
        """
        return generate_latest(self.registry)


class Health:
    """What the probes report, updated by the watch loop's threads.

    Args:
        streams: How many watch streams must complete a first list before ``/readyz``.
        monotonic: The clock of the liveness check.
    """

    def __init__(self, streams: int, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._expected = streams
        self._listed: set[object] = set()
        self._beat = monotonic()

    def expect(self, streams: int) -> None:
        """Set the number of streams ``/readyz`` waits for (known after discovery).

        Args:
            streams: The number.
        """
        with self._lock:
            self._expected = streams

    def listed(self, stream: object) -> None:
        """Record that a stream completed its first list.

        Args:
            stream: The stream's identity.
        """
        with self._lock:
            self._listed.add(stream)

    def beat(self) -> None:
        """Record that the main loop turned."""
        self._beat = self._monotonic()

    @property
    def ready(self) -> bool:
        """Whether every watch completed its first list."""
        with self._lock:
            return len(self._listed) >= self._expected

    @property
    def alive(self) -> bool:
        """Whether the main loop turned recently."""
        return self._monotonic() - self._beat < STALE_LOOP_S


def serve(address: str, port: int, health: Health, metrics: Metrics) -> ThreadingHTTPServer:
    """Serve the probes and the metrics on a daemon thread.

    Args:
        address: The address to bind.
        port: The port (0 picks a free one: ``server.server_address`` says which).
        health: The probes' state.
        metrics: The metrics.

    Returns:
        The running server (``shutdown()`` stops it).
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(HTTPStatus.OK, metrics.render(), CONTENT_TYPE_LATEST)
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

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="health", daemon=True)
    thread.start()
    return server
