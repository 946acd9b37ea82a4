"""``sweeper --watch``: enforce each deadline the moment it passes, as a long-running process.

The engine (``Watcher``) starts the threads and runs the main loop; the threads speak to
it only through its inbox (``sweeper.watch.inbox``):

- one **stream** per served kind and namespace (``sweeper.watch.streams``): list, then
  watch, queueing the instant each job becomes due; the served kinds are discovered again
  before every resync, and the streams follow;
- the **lease** (``sweeper.watch.leader``): with ``--leader-elect``, only the leader writes
  to jobs;
- **SIGTERM or SIGINT** (how a Deployment stops its pods): no new write starts, the writes in
  flight finish, then the Lease is released and the process exits 0; a second signal gives up
  at once (exit 4), leaving the Lease to expire.
- the **resync** (``sweeper.watch.resync``): a full pass of the one-shot code every
  ``--resync`` seconds, on the leader, as a safety net for anything a stream missed.
- the **main loop** keeps the book of jobs (``sweeper.watch.agenda``: each job's timer, who
  acts on it, its failures): it applies queued messages, and when a timer is due (and this
  replica leads) hands the job to the **fire pool**
  (``sweeper.watch.fire``), which reads the job again, judges it with the current time and
  lets the executor act, with the one-shot mode's guards. Followers keep their timers armed,
  so a takeover acts on every overdue job at once.

``now`` is read once per fired job: the local clock, or with ``--clock server`` the earliest
time the API server's clock can show (``sweeper.watch.servertime``), so nothing fires early.
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
from sweeper.metrics import WatchMetrics
from sweeper.oneshot import namespaces
from sweeper.stop import Stop, signals_stop
from sweeper.watch.agenda import Agenda
from sweeper.watch.elector import Elector
from sweeper.watch.fire import DecisionClock, Fire
from sweeper.watch.health import Health, host_port, serve
from sweeper.watch.inbox import Inbox, Listed, Message, Scope
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
    """Run the watch mode until SIGTERM or SIGINT; the exit code is ``Watcher.run``'s.

    ``clock`` is the one clock every part of the run reads; the run's one ``Stop`` is built
    on it here, and handed to every part with it.

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
    """The watch mode's main loop, timers, fire pool and resync (see the module docstring).

    ``clock`` is the run's one clock, handed to every part: the Lease, the streams, the resync
    and the probes read it as it is; the timers, the fires and the main loop read it through
    the decision clock built on it (``sweeper.watch.fire.DecisionClock``). ``stop`` is the
    run's one stop, handed to every part too; the Lease fences it (``Stop.fence``).
    """

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
        self.config = config
        self.settings = settings
        self.cluster = cluster
        self.stop = stop
        self.out = out
        self.clock = clock
        self.metrics = WatchMetrics()
        self.health = Health(streams=1, clock=clock)
        self.decision = DecisionClock(config.clock, clock)
        self.agenda = Agenda(self.decision)
        self.served: dict[str, ServedKind] = {}
        self.inbox: Inbox = queue.Queue()
        # Every job under its platform rule: the Namespaces' labels as read at start and at
        # each resync (late-bound below: the streams, the fires and the pass read the latest).
        self.view = PlatformView()
        # A dry run writes nothing, the Lease included: every dry replica reports on its own.
        self.elects = settings.leader_elect and config.dry_run is None
        self.leader = Leader(
            cluster,
            settings,
            self.inbox,
            elects=self.elects,
            saw_date=self.decision.saw_date,
            stop=stop,
            metrics=self.metrics,
            clock=clock,
        )
        # Every write of the run (a fire's, a pass's, through the transport too) stops when
        # this replica no longer leads, and is bounded by the Lease: its answer from now on.
        stop.fence(self.leader)
        self.streams = Streams(
            cluster,
            config,
            settings,
            self.inbox,
            saw_date=self.decision.saw_date,
            stop=stop,
            metrics=self.metrics,
            health=self.health,
            clock=clock,
            view=lambda: self.view,
        )
        self._fire = Fire(
            cluster,
            config,
            inbox=self.inbox,
            metrics=self.metrics,
            # Late-bound: the served kinds as they are when a timer fires.
            served=lambda kind: self.served[kind],
            clock=self.decision,
            stop=stop,
            view=lambda: self.view,
        )
        self._pool = ThreadPoolExecutor(max_workers=FIRE_WORKERS, thread_name_prefix="fire")
        self._resync = Resync(
            config,
            settings,
            cluster,
            out,
            rediscover=self._rediscover,
            agenda=self.agenda,
            inbox=self.inbox,
            leading=self.leading,
            stop=stop,
            metrics=self.metrics,
            clock=clock,
            view=lambda: self.view,
        )
        self.metrics.clock_offset.labels("low").set_function(lambda: self.decision.offset("low"))
        self.metrics.clock_offset.labels("high").set_function(lambda: self.decision.offset("high"))

    @property
    def elector(self) -> Elector:
        """The Lease's state machine (``Leader.elector``)."""
        return self.leader.elector

    def leading(self) -> bool:
        """Whether this replica may write to jobs now (``Leader.leading``)."""
        return self.leader.leading()

    def write_window(self) -> float:
        """Seconds a job write sent now may stay in flight (``Leader.write_window``)."""
        return self.leader.write_window()

    # --- the run ---------------------------------------------------------------------------

    def run(self) -> int:
        """Start the threads and run the main loop until SIGTERM or SIGINT, then drain.

        A signal is how a Deployment stops its pods (a rollout, a drain, a scale-down), so a
        clean stop is not an error, as for any controller: the exit code is 0 once the work in
        flight has finished and the Lease is released; 4 when work was still running after
        the wait for it (``_drain``).

        Raises:
            ClusterUnavailable: Discovery failed for good.
            ConfigError: The probes' address and port cannot be listened on.
        """
        try:
            discovery = self.cluster.discover()
        except Interrupted:
            # A signal during a retry wait at start-up: nothing is held, nothing in flight.
            log.info("stopped before watching")
            return EXIT_OK
        except ApiError as error:
            raise ClusterUnavailable(f"{error} ({self.cluster.endpoint})") from error
        self.view = namespaces.read_view(self.cluster, self.config)
        server = _serve(self.settings, self.health, self.metrics)
        threads = []
        if self.elects:
            threads.append(threading.Thread(target=self.leader.run, name="lease", daemon=True))
        elif self.settings.leader_elect:
            log.info(
                "dry run: no leader election (a dry run writes nothing, the Lease included); "
                "this replica reports on its own",
                extra={"dry_run": str(self.config.dry_run)},
            )
        threads.append(threading.Thread(target=self._resync.run, name="resync", daemon=True))
        log.info("identity %s", self.settings.identity, extra={"identity": self.settings.identity})
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
        scopes = _scopes(self.config, discovery)
        for scope in scopes:
            self.served[scope.served.kind.name] = scope.served
        self.streams.watch(scopes)

    def _rediscover(self) -> None:
        """Discover again (before each resync): start or end streams as the kinds changed.

        The Namespaces' labels are read again too, on every replica: a relabelled Namespace
        takes effect from this resync on, its jobs' timers armed under its new rule
        (docs/watch.md).
        """
        before, self.view = self.view, namespaces.read_view(self.cluster, self.config)
        try:
            discovery = self.cluster.discover()
        except SweeperError as error:  # a signal cutting its retries short, too
            log.warning("discovery failed: %s; the streams stay as they are", error)
        else:
            self._watch(discovery)
        self.streams.follow_rules(before, self.view)

    def _drain(self, threads: list[threading.Thread]) -> bool:
        """Let the work in flight finish, then release the Lease, in that order.

        client-go's contract for releasing on cancel: whatever the Lease guards must have
        completed first, or two replicas act at once. No write starts any more (every write
        asks ``Stop.reason``, and the signal cuts every retry wait short), so the fires in
        progress end within a request each, and the resync pass (its report included) and the
        Lease thread are waited for a bounded time.

        Returns whether everything finished: only then is the Lease released. Otherwise it is
        left to expire (``--lease-duration``), so that the next leader's first write cannot
        overlap one of ours still on its way.
        """
        self._pool.shutdown(wait=True, cancel_futures=True)  # the fires in progress
        resync = next(t for t in threads if t.name == "resync")
        resync.join(timeout=2 * self.config.request_timeout)
        lease = next((t for t in threads if t.name == "lease"), None)
        if lease is not None:
            # Its own request in flight, if any (one attempt: the signal cuts retries).
            lease.join(timeout=self.config.request_timeout + DRAIN_MARGIN_S)
        busy = [t.name for t in (resync, lease) if t is not None and t.is_alive()]
        if lease is None:
            return not busy
        return self.leader.finish(busy)

    def _loop(self) -> None:
        while not self.stop.is_set():
            self.health.beat()
            timeout = MAX_SLEEP_S
            next_due = self.agenda.next_due()
            if next_due is not None and self.leading():
                timeout = min(timeout, max((next_due - self.decision.now()).total_seconds(), 0.0))
            try:
                message = self.inbox.get(timeout=timeout)
            except queue.Empty:
                message = None
            while message is not None:
                self._apply(message)
                try:
                    message = self.inbox.get_nowait()
                except queue.Empty:
                    message = None
            now = self.decision.now()
            leading = self.leading()
            self.metrics.tracked.set(len(self.agenda))
            # What this replica would act on and has not: a standby acts on nothing, and the
            # timers it keeps for a takeover (some due for as long as their job exists) are
            # not overdue work of its own.
            self.metrics.set_overdue(self.agenda.overdue(now) if leading else {})
            if leading:
                # A fire re-checks before its write: one whose replica stopped leading (or
                # was signalled) meanwhile writes nothing, and its timer is kept as it was.
                for key, due in self.agenda.take_due(now):
                    self._pool.submit(self._fire.run, key, due)

    def _apply(self, message: Message) -> None:
        gone = self.agenda.apply(message)
        if gone and isinstance(message, Listed):
            log.info("relisted %s: %d vanished job(s) dropped", message.scope, len(gone))


def _scopes(config: Config, discovery: Discovery) -> list[Scope]:
    """The streams a run watches: each wanted kind the cluster serves, in each namespace."""
    covered = RunScope.of(
        discovery.served, config.kinds, config.namespaces, families=config.families
    )
    return [Scope(served, namespace) for served, namespace in covered.lists]


def _serve(
    settings: WatchSettings, health: Health, metrics: WatchMetrics
) -> ThreadingHTTPServer | None:
    """Start the probes' and ``/metrics`` server, unless ``--health-port`` is 0."""
    if not settings.health_port:
        return None
    server = serve(settings.health_address, settings.health_port, health, metrics)
    host, port = server.server_address[:2]
    log.info("serving /healthz, /readyz and /metrics on %s", host_port(str(host), int(port)))
    return server
