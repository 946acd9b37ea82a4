"""``sweeper --watch``: the engine that starts the threads and runs the main loop (docs/watch.md).

The main loop applies what the threads queue in the inbox to the agenda and, while this replica
leads, hands each due job to the fire pool. Followers keep their timers armed, so a takeover
acts on every overdue job at once.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from typing import Protocol, TextIO

from sweeper.config import Config, WatchSettings
from sweeper.core.clock import SYSTEM_CLOCK, Clock
from sweeper.core.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    ApiError,
    ClusterUnavailable,
    Interrupted,
    SweeperError,
)
from sweeper.core.platform import PlatformView
from sweeper.core.scope import RunScope
from sweeper.k8s.cluster import Discovery, ServedKind, WatchCluster
from sweeper.oneshot import namespaces
from sweeper.stop import Stop, signals_stop
from sweeper.watch.agenda import Agenda
from sweeper.watch.context import WatchContext
from sweeper.watch.fire import Fire
from sweeper.watch.health import host_port, serve
from sweeper.watch.inbox import Listed, Message, Scope
from sweeper.watch.leader import Leader
from sweeper.watch.resync import Resync
from sweeper.watch.streams import Streams

log = logging.getLogger(__name__)

# The main loop turns at least this often, to notice a stepped local clock and leadership.
MAX_SLEEP_S = 1.0
# Jobs acted on at once: deadlines come in bursts (jobs submitted together with the same
# activeDeadlineSeconds), and each action is a few round trips that must not queue up.
FIRE_WORKERS = 8
# At shutdown, how much longer than one request the threads are waited for: past that, work
# is taken to be stuck and the Lease is left to expire rather than released.
DRAIN_MARGIN_S = 1.0


class WatchConnect(Protocol):
    """Builds the cluster for the watch mode (``sweeper.k8s.kube.connect``)."""

    def __call__(self, config: Config, /, *, stop: Stop) -> WatchCluster:
        """Connect; ``stop`` has no deadline in watch mode, which runs until a signal."""
        ...


def watch(
    config: Config, connect: WatchConnect, out: TextIO, *, clock: Clock = SYSTEM_CLOCK
) -> int:
    """Run the watch mode on ``clock`` until SIGTERM or SIGINT; the exit code is ``run``'s.

    Raises:
        ClusterUnavailable: Discovery failed for good at start-up (exit 3).
        ConfigError: The probes' port cannot be listened on (exit 2).
    """
    settings = config.watch or WatchSettings()
    stop = Stop(clock)  # no deadline: the watch runs until a signal
    with signals_stop(stop):
        cluster = connect(config, stop=stop)
        with contextlib.closing(cluster):
            return Watcher(config, settings, cluster, stop, out, clock=clock).run()


class Watcher:
    """The watch mode's main loop, timers, fire pool and resync, over one ``WatchContext``."""

    def __init__(
        self,
        config: Config,
        settings: WatchSettings,
        cluster: WatchCluster,
        stop: Stop,
        out: TextIO,
        *,
        clock: Clock,
    ) -> None:
        # Every job under its platform rule: the Namespaces' labels as read at start and at
        # each resync (late-bound: the streams, the fires and the pass read the latest).
        self.view = PlatformView()
        self.ctx = ctx = WatchContext.build(
            config, cluster, stop, clock, settings=settings, view=lambda: self.view
        )
        self.agenda = Agenda(ctx.decision)
        self.served: dict[str, ServedKind] = {}
        self.leader = Leader(ctx)
        # Every write of the run (a fire's, a pass's, through the transport too) stops when
        # this replica no longer leads, and is bounded by the Lease: its answer from now on.
        stop.fence(self.leader)
        self.streams = Streams(ctx)
        self._fire = Fire(ctx, self.served)
        self._pool = ThreadPoolExecutor(max_workers=FIRE_WORKERS, thread_name_prefix="fire")
        self._resync = Resync(
            ctx, out, agenda=self.agenda, rediscover=self._rediscover, leading=self.leader.leading
        )
        ctx.metrics.clock_offset.labels("low").set_function(lambda: ctx.decision.offset("low"))
        ctx.metrics.clock_offset.labels("high").set_function(lambda: ctx.decision.offset("high"))

    def run(self) -> int:
        """Start the threads and run the main loop until SIGTERM or SIGINT, then drain.

        A signal is how a Deployment stops its pods, so a clean stop exits 0; work still running
        after the wait for it (``_drain``), or a second signal, exits 4.
        """
        ctx = self.ctx
        try:
            discovery = ctx.cluster.discover()
        except Interrupted:
            # A signal during a retry wait at start-up: nothing is held, nothing in flight.
            log.info("stopped before watching")
            return EXIT_OK
        except ApiError as error:
            raise ClusterUnavailable(f"{error} ({ctx.cluster.endpoint})") from error
        self.view = namespaces.read_view(ctx.cluster, ctx.config)
        server = self._serve()
        threads = [threading.Thread(target=self._resync.run, name="resync", daemon=True)]
        if self.leader.elects:
            threads.append(threading.Thread(target=self.leader.run, name="lease", daemon=True))
        elif ctx.settings.leader_elect:
            log.info(
                "dry run: no leader election (a dry run writes nothing, the Lease included); "
                "this replica reports on its own",
                extra={"dry_run": str(ctx.config.dry_run)},
            )
        log.info("identity %s", ctx.settings.identity, extra={"identity": ctx.settings.identity})
        self._watch(discovery)
        for thread in threads:
            thread.start()
        gave_up = False
        try:
            self._loop()
        except KeyboardInterrupt:
            # A second signal before the loop saw the first gives up at once, as one during
            # the drain does: no drain, and the Lease is left to expire.
            gave_up = True
            raise
        finally:
            drained = not gave_up and self._drain(threads)
            if server is not None:
                server.shutdown()
                server.server_close()
        return EXIT_OK if drained else EXIT_INTERRUPTED

    def _watch(self, discovery: Discovery) -> None:
        """Watch what discovery found: a stream per served kind and namespace, and no other."""
        config = self.ctx.config
        covered = RunScope.of(
            discovery.served, config.kinds, config.namespaces, families=config.families
        )
        scopes = [Scope(served, namespace) for served, namespace in covered.lists]
        for scope in scopes:
            self.served[scope.served.kind.name] = scope.served
        self.streams.watch(scopes)

    def _rediscover(self) -> None:
        """Discover again and read the Namespaces' labels again (before each resync)."""
        ctx = self.ctx
        before, self.view = self.view, namespaces.read_view(ctx.cluster, ctx.config)
        try:
            discovery = ctx.cluster.discover()
        except SweeperError as error:  # a signal cutting its retries short, too
            log.warning("discovery failed: %s; the streams stay as they are", error)
        else:
            self._watch(discovery)
        self.streams.follow_rules(before, self.view)

    def _drain(self, threads: list[threading.Thread]) -> bool:
        """Let the work in flight finish, then release the Lease; whether everything finished.

        client-go's contract for releasing on cancel: whatever the Lease guards must have
        completed first, or two replicas act at once. No write starts any more, so each thread
        is waited for a bounded time.
        """
        request_timeout = self.ctx.config.request_timeout
        self._pool.shutdown(wait=True, cancel_futures=True)  # the fires in progress
        resync, *lease = threads
        resync.join(timeout=2 * request_timeout)
        for thread in lease:
            # Its own request in flight, if any (one attempt: the signal cuts retries).
            thread.join(timeout=request_timeout + DRAIN_MARGIN_S)
        busy = [thread.name for thread in threads if thread.is_alive()]
        return self.leader.finish(busy) if lease else not busy

    def _loop(self) -> None:
        ctx = self.ctx
        while not ctx.stop.is_set():
            ctx.health.beat()
            timeout = MAX_SLEEP_S
            next_due = self.agenda.next_due()
            if next_due is not None and self.leader.leading():
                timeout = min(timeout, max((next_due - ctx.decision.now()).total_seconds(), 0.0))
            with contextlib.suppress(queue.Empty):  # applied in order, until none is left
                message = ctx.inbox.get(timeout=timeout)
                while message is not None:
                    self._apply(message)
                    message = ctx.inbox.get_nowait()
            now = ctx.decision.now()
            leading = self.leader.leading()
            ctx.metrics.tracked.set(len(self.agenda))
            # A standby acts on nothing: the timers it keeps for a takeover (some due for as
            # long as their job exists) are not overdue work of its own.
            ctx.metrics.set_overdue(self.agenda.overdue(now) if leading else {})
            if leading:
                # A fire re-checks before its write: one whose replica stopped leading (or
                # was signalled) meanwhile writes nothing, and its timer is kept as it was.
                for key, due in self.agenda.take_due(now):
                    self._pool.submit(self._fire.run, key, due)

    def _apply(self, message: Message) -> None:
        gone = self.agenda.apply(message)
        if gone and isinstance(message, Listed):
            log.info("relisted %s: %d vanished job(s) dropped", message.scope, len(gone))

    def _serve(self) -> ThreadingHTTPServer | None:
        """Start the probes' and ``/metrics`` server, unless ``--health-port`` is 0."""
        settings = self.ctx.settings
        if not settings.health_port:
            return None
        server = serve(
            settings.health_address, settings.health_port, self.ctx.health, self.ctx.metrics
        )
        host, port = server.server_address[:2]
        log.info("serving /healthz, /readyz and /metrics on %s", host_port(str(host), int(port)))
        return server
