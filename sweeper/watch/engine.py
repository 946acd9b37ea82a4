"""``sweeper --watch``: enforce each deadline the moment it passes, as a long-running process.

Threads, and what each owns:

- one **stream** per served kind and namespace (or cluster-wide): list, then watch from the
  list's resourceVersion with bookmarks; a closed stream resumes from the last resourceVersion
  seen, after a jittered backoff; 410 Gone lists again; a stream silent past
  ``--watch-timeout`` is reopened. It turns each object into the instant the job becomes due
  (:func:`sweeper.core.decide.due_at`) and queues that, never the object itself.
- the **lease** (with ``--leader-elect``, and never in a dry run: a dry run writes nothing, the
  Lease included, so each dry replica reports on its own): client-go's election
  (:mod:`sweeper.watch.elector`); only the leader writes to jobs, and the transport asks before
  every
  attempt of a write (retries included) whether it still leads, bounding each attempt to end
  before another replica may take over; a leader that cannot renew within the renew deadline
  stops writing at once and is a candidate again, its view kept warm: when the API server is
  back (an outage, a restart) it takes the Lease back at once if the record still names it, or
  waits for it like any follower.
- **SIGTERM or SIGINT** (how a Deployment stops its pods): no new write starts, the writes in
  flight finish, then the Lease is released and the process exits 0; a second signal gives up
  at once (exit 4), leaving the Lease to expire.
- the **resync**: a full pass of the one-shot code every ``--resync`` seconds, on the leader,
  as a safety net for anything a stream missed.
- the **main loop** owns the timers (:class:`sweeper.core.schedule.Schedule`): it applies queued
  events, and when a timer is due (and this replica leads) it reads the job again, judges it
  with the current time and lets the executor act, with the one-shot mode's guards. Followers
  keep their timers armed, so a takeover acts on every overdue job at once.

``now`` is read once per fired job: the local clock, or with ``--clock server`` the earliest
time the API server's clock can show (:mod:`sweeper.watch.servertime`), so nothing fires early.
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Protocol, TextIO

from sweeper.act import Executor
from sweeper.config import ClockMode, Config, WatchSettings
from sweeper.core import clock
from sweeper.core.decide import ALWAYS, due_at, judge
from sweeper.core.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    ApiError,
    ClusterUnavailable,
    Conflict,
    Gone,
    Interrupted,
    NotFound,
    RunTimeout,
    SweeperError,
    WatchStalled,
)
from sweeper.core.jobs import parse_job
from sweeper.core.model import JSON, Action, ActionKind, Outcome, Plan, Result
from sweeper.core.schedule import Schedule
from sweeper.core.scope import RunScope
from sweeper.k8s.cluster import ServedKind, WatchCluster
from sweeper.k8s.transport import RetryPolicy
from sweeper.metrics import WatchMetrics
from sweeper.oneshot import report
from sweeper.oneshot.run import sweep
from sweeper.stop import StopFlag, signals_stop
from sweeper.watch.elector import Create, Elector, Lease, Update, Wait, lease_body, parse_lease
from sweeper.watch.health import Health, serve
from sweeper.watch.servertime import ServerClock

log = logging.getLogger(__name__)

# The main loop turns at least this often, to notice a stepped local clock and leadership.
MAX_SLEEP_S = 1.0
# A watch request's server-side timeout, randomised as client-go's reflector does.
WATCH_TIMEOUT_RANGE_S = (300, 600)
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
# No answer at all (connection refused or reset: the API server is down or restarting):
# trying costs it nothing, and every second of backoff after it is back is a second of
# lateness for each job that came due meanwhile.
BACKOFF_UNREACHABLE_CAP_S = 1.0
# A fired job whose action failed is tried again about this much later (or at the next
# event), and twice as late after each further failure, up to the cap: an action that keeps
# failing (a webhook refusing every update, a 403) costs the API server one GET and one write
# per job every few minutes, not every few seconds. A success or a change of the job (its
# next event) starts the count over. The transport's backoff, with equal jitter.
RETRY_FAILED_S = 5.0
RETRY_FAILED_CAP_S = 300.0
_FIRE_BACKOFF = RetryPolicy(backoff_base_s=2 * RETRY_FAILED_S, backoff_cap_s=RETRY_FAILED_CAP_S)
# Failures counted at most (2**20 steps is far past the cap; no float overflow however long).
_FAILURES_COUNTED = 20
# ...and this much later when its read got no answer: the transport has just spent its own
# retries (about 2 s), so the job is tried again within about a second of the server's return.
RETRY_UNREACHABLE_S = 0.5
# A candidate whose Lease request got no answer tries again this soon (not a retry period).
LEASE_RETRY_UNREACHABLE_S = 0.5
# Jobs acted on at once: deadlines come in bursts (jobs submitted together with the same
# activeDeadlineSeconds), and each action is a few round trips that must not queue up.
FIRE_WORKERS = 8
# At shutdown, how much longer than one request the threads are waited for: past that, work
# is taken to be stuck and the Lease is left to expire rather than released.
DRAIN_MARGIN_S = 1.0


class WatchConnect(Protocol):
    """Builds the cluster for the watch mode (``sweeper.k8s.client.connect``)."""

    def __call__(self, config: Config, /, *, stop: StopFlag) -> WatchCluster:
        """Connect.

        Args:
            config: The run's settings.
            stop: The run's stop flag (no deadline in watch mode: it runs until a signal).
        """
        ...


@dataclass(frozen=True, slots=True)
class JobKey:
    """A job's identity in the timers: a name can be reused, the re-read checks the rest."""

    kind: str
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class _Scope:
    served: ServedKind
    namespace: str | None

    def holds(self, key: JobKey) -> bool:
        return key.kind == self.served.kind.name and (
            self.namespace is None or key.namespace == self.namespace
        )

    def __str__(self) -> str:
        return f"{self.served.kind.plural} in {self.namespace or 'all namespaces'}"


@dataclass(frozen=True, slots=True)
class _Listed:
    scope: _Scope
    due: dict[JobKey, datetime | None]
    relist: bool


@dataclass(frozen=True, slots=True)
class _Event:
    key: JobKey
    due: datetime | None  # None also for DELETED


@dataclass(frozen=True, slots=True)
class _Leadership:
    leading: bool


class _Ending(Enum):
    """How a fire (or a resync pass's action on a job) ended, for the job's retry backoff."""

    SETTLED = "settled"  # acted, or nothing to do: the backoff starts over
    FAILED = "failed"  # the action failed: tried again after the job's backoff
    # Not tried: the read got no answer, or the run stopped or lost the Lease first. Looked
    # at again soon (a follower keeps the timer until it leads), the count kept.
    NOT_TRIED = "not-tried"
    RELEASED = "released"  # a resync pass's action ended: the count kept


@dataclass(frozen=True, slots=True)
class _Fired:
    key: JobKey
    rearm: datetime | None  # when to look at the job again, if it still needs looking at
    ending: _Ending = _Ending.SETTLED


_Message = _Listed | _Event | _Leadership | _Fired


def watch(config: Config, connect: WatchConnect, out: TextIO) -> int:
    """Run the watch mode until SIGTERM or SIGINT.

    Args:
        config: The run's settings (``config.watch`` set).
        connect: Builds the cluster.
        out: Where the resync passes' reports go.

    Returns:
        The exit code: 0 after a signal once the work in flight finished and the Lease was
        released (see :meth:`Watcher.run`).

    Raises:
        ClusterUnavailable: Discovery failed for good at start-up (exit 3).
        ConfigError: The probes' port cannot be listened on (exit 2).
    """
    settings = config.watch or WatchSettings()
    flag = _WatchFlag(config.timeout)
    with signals_stop(flag):
        cluster = connect(config, stop=flag)
        with contextlib.closing(cluster):
            watcher = Watcher(config, settings, cluster, flag, out)
            # The transport asks the flag before every attempt of a write: from now on, the
            # Lease's answer.
            flag.window = watcher.write_window
            return watcher.run()


class _WatchFlag(StopFlag):
    """The watch's stop flag: signals only (no deadline), and the Lease's write window."""

    def __init__(self, timeout: float) -> None:
        super().__init__(math.inf, timeout)
        self.window: Callable[[], float] = lambda: math.inf

    def write_window(self) -> float:
        """Seconds a job write sent now may stay in flight (:meth:`Watcher.write_window`)."""
        return self.window()


class Watcher:
    """The watch mode's state and threads (see the module docstring).

    Args:
        config: The run's settings.
        settings: The watch settings.
        cluster: The cluster.
        flag: The stop flag (signals).
        out: Where resync reports go.
        monotonic: The clock of timers and leadership (injected by tests).
    """

    def __init__(
        self,
        config: Config,
        settings: WatchSettings,
        cluster: WatchCluster,
        flag: StopFlag,
        out: TextIO,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.settings = settings
        self.cluster = cluster
        self.flag = flag
        self.out = out
        self.monotonic = monotonic
        self.metrics = WatchMetrics()
        self.health = Health(streams=1)
        self.timers: Schedule[JobKey] = Schedule()
        self.served: dict[str, ServedKind] = {}
        self.inbox: queue.Queue[_Message] = queue.Queue()
        self.server_clock = ServerClock()
        self._clock_lock = threading.Lock()
        self.elector = Elector(settings.identity, settings.timing)
        # A dry run writes nothing, the Lease included: every dry replica reports on its own.
        self.elects = settings.leader_elect and config.dry_run is None
        self._elector_lock = threading.Lock()
        self._listing = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=FIRE_WORKERS, thread_name_prefix="fire")
        # Jobs being acted on, by a timer or by a resync pass: one actor per job at a time.
        self._in_flight: set[JobKey] = set()
        self._in_flight_lock = threading.Lock()
        # During a resync pass, the jobs its timers took since the pass began listing: the
        # pass's view of them is older than the timer's, so the pass leaves them alone.
        self._fired_in_pass: set[JobKey] | None = None
        self._deferred: dict[JobKey, datetime] = {}
        self._failures: dict[JobKey, int] = {}  # consecutive failed fires, per job
        self.metrics.clock_offset.labels("low").set_function(lambda: self._offset("low"))
        self.metrics.clock_offset.labels("high").set_function(lambda: self._offset("high"))

    # --- the clock -------------------------------------------------------------------------

    def saw_date(self, date: datetime | None, sent: float, received: float) -> None:
        """Feed one response's ``Date`` header to the server clock estimate.

        Args:
            date: The header, parsed.
            sent: Monotonic seconds before the request.
            received: Monotonic seconds after its answer.
        """
        if date is None:
            return
        with self._clock_lock:
            self.server_clock.observe(date, sent, received)

    def now(self) -> datetime:
        """The decision clock's reading (one per fired job).

        Returns:
            The local clock, or with ``--clock server`` the earliest time the server's clock
            can show (the local clock until a response has been seen).
        """
        if self.config.clock is ClockMode.LOCAL:
            return clock.local_now()
        with self._clock_lock:
            estimate = self.server_clock.now(self.monotonic())
        return estimate or clock.local_now()

    def _offset(self, bound: str) -> float:
        mono = self.monotonic()
        with self._clock_lock:
            bounds = self.server_clock.bounds(mono)
        if bounds is None:
            return math.nan
        # server - local wall = (server - monotonic) - (wall - monotonic)
        wall_minus_mono = clock.local_now().timestamp() - mono
        return (bounds.low if bound == "low" else bounds.high) - wall_minus_mono

    # --- leadership --------------------------------------------------------------------------

    def leading(self) -> bool:
        """Whether this replica may write to jobs now."""
        if not self.elects:
            return True
        with self._elector_lock:
            return self.elector.leading(self.monotonic())

    def write_window(self) -> float:
        """Seconds a job write sent now may stay in flight; 0 when none may be sent.

        Asked by the transport before every attempt of a write, retries included: no attempt
        is sent once the renew deadline passed, and each ends before another replica may take
        the Lease (:meth:`sweeper.watch.elector.Elector.write_window`). Unbounded without election.
        """
        if not self.elects:
            return math.inf
        with self._elector_lock:
            return self.elector.write_window(self.monotonic())

    def stop_reason(self) -> SweeperError | None:
        """Say whether writes must stop: a signal, or this replica no longer leads.

        Returns:
            The reason, or ``None`` to go on.
        """
        cause = self.flag.reason()
        if cause is not None:
            return cause
        if not self.leading():
            return Interrupted("no longer the leader")
        return None

    # --- the run ---------------------------------------------------------------------------

    def run(self) -> int:
        """Start the threads and run the main loop until SIGTERM or SIGINT, then drain.

        A signal is how a Deployment stops its pods (a rollout, a drain, a scale-down), so a
        clean stop is not an error, as for any controller: the exit code is 0 once the work in
        flight has finished and the Lease is released.

        Returns:
            The exit code: 0 after a clean stop; 4 when work was still running after the
            wait for it (see :meth:`_drain`).

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
        covered = RunScope.of(discovery.served, self.config.kinds, self.config.namespaces)
        scopes = [_Scope(served, namespace) for served, namespace in covered.lists]
        for scope in scopes:
            self.served[scope.served.kind.name] = scope.served
        self.health.expect(len(scopes))
        server = None
        if self.settings.health_port:
            server = serve(
                self.settings.health_address, self.settings.health_port, self.health, self.metrics
            )
            log.info("serving /healthz, /readyz and /metrics on %s:%d", *server.server_address[:2])
        threads = [
            threading.Thread(target=self._stream, args=(scope,), name=f"watch {scope}", daemon=True)
            for scope in scopes
        ]
        if self.elects:
            threads.append(threading.Thread(target=self._lead, name="lease", daemon=True))
        elif self.settings.leader_elect:
            log.info(
                "dry run: no leader election (a dry run writes nothing, the Lease included); "
                "this replica reports on its own",
                extra={"dry_run": str(self.config.dry_run)},
            )
        threads.append(threading.Thread(target=self._resync, name="resync", daemon=True))
        log.info(
            "watching %d stream(s); identity %s",
            len(scopes),
            self.settings.identity,
            extra={"identity": self.settings.identity, "streams": len(scopes)},
        )
        for thread in threads:
            thread.start()
        try:
            self._loop()
        finally:
            drained = self._drain(threads)
            if server is not None:
                server.shutdown()
                server.server_close()
        return EXIT_OK if drained else EXIT_INTERRUPTED

    def _drain(self, threads: list[threading.Thread]) -> bool:
        """Let the work in flight finish, then release the Lease, in that order.

        client-go's contract for releasing on cancel: whatever the Lease guards must have
        completed first, or two replicas act at once. No write starts any more (every write
        asks :meth:`stop_reason`, and the signal cuts every retry wait short), so the fires in
        progress end within a request each, and the resync pass (its report included) and the
        Lease thread are waited for a bounded time.

        Args:
            threads: The threads :meth:`run` started.

        Returns:
            Whether everything finished: only then is the Lease released. Otherwise it is left
            to expire (``--lease-duration``), so that the next leader's first write cannot
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
        namespace, name = self._lease_namespace(), self.settings.lease_name
        if busy:
            with self._elector_lock:
                self.elector.step_down()
            self.metrics.leader.set(0)
            log.warning(
                "stopping with work in flight (%s): the Lease %s/%s is left to expire",
                ", ".join(busy),
                namespace,
                name,
            )
            return False
        self._release(namespace, name)
        return True

    def _loop(self) -> None:
        while not self.flag.event.is_set():
            self.health.beat()
            timeout = MAX_SLEEP_S
            next_due = self.timers.next_due()
            leading = self.leading()
            if next_due is not None and leading:
                timeout = min(timeout, max((next_due - self.now()).total_seconds(), 0.0))
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
            now = self.now()
            self.metrics.tracked.set(len(self.timers))
            self.metrics.set_overdue(Counter(key.kind for key in self.timers.due_keys(now)))
            if self.leading():
                for key, due in self.timers.pop_due(now):
                    if self.flag.event.is_set() or not self.leading():
                        self.timers.arm(key, due)  # not ours to handle any more: keep it
                    elif not self._take(key):
                        self._deferred[key] = due  # looked at again once the fire ends
                    else:
                        self._pool.submit(self._fire_reporting, key, due)

    def _take(self, key: JobKey) -> bool:
        with self._in_flight_lock:
            if key in self._in_flight:
                return False
            self._in_flight.add(key)
            if self._fired_in_pass is not None:
                self._fired_in_pass.add(key)
            return True

    def _apply(self, message: _Message) -> None:
        if isinstance(message, _Event):
            self._failures.pop(message.key, None)  # the job changed: its backoff starts over
            self.timers.arm(message.key, message.due)
        elif isinstance(message, _Listed):
            for key, due in message.due.items():
                self.timers.arm(key, due)
            if message.relist:
                vanished = [
                    key
                    for key in self.timers
                    if message.scope.holds(key) and key not in message.due
                ]
                for key in vanished:
                    self.timers.drop(key)
                    self._failures.pop(key, None)
                if vanished:
                    log.info(
                        "relisted %s: %d vanished job(s) dropped", message.scope, len(vanished)
                    )
        elif isinstance(message, _Fired):
            with self._in_flight_lock:
                self._in_flight.discard(message.key)
            retry = self._retry(message)
            for rearm in (retry, self._deferred.pop(message.key, None)):
                current = self.timers.when(message.key)
                # The earlier wins: an extra look re-reads and judges again; a missed one
                # would be a deadline not enforced.
                if rearm is not None and (current is None or rearm < current):
                    self.timers.arm(message.key, rearm)
        # _Leadership only wakes the loop up.

    def _retry(self, fired: _Fired) -> datetime | None:
        """When to look at a fired job again: its backoff after a failure, else as it said."""
        if fired.ending is _Ending.SETTLED:
            self._failures.pop(fired.key, None)
        if fired.ending is not _Ending.FAILED:
            return fired.rearm
        failures = min(self._failures.get(fired.key, 0) + 1, _FAILURES_COUNTED)
        self._failures[fired.key] = failures
        delay = _FIRE_BACKOFF.backoff(failures, random.uniform)
        return self.now() + _seconds(delay)

    # --- firing ------------------------------------------------------------------------------

    def _fire_reporting(self, key: JobKey, due: datetime) -> None:
        fired = _Fired(key, None, _Ending.FAILED)
        try:
            fired = self._fire(key, due)
        except Exception:  # a worker must never swallow a failure: log it, look again later
            log.exception("acting on %s %s/%s failed", key.kind, key.namespace, key.name)
        finally:
            self.inbox.put(fired)

    def _fire(self, key: JobKey, due: datetime) -> _Fired:
        """Read the job again, judge it now, act; say when to look at it again, if ever."""
        served = self.served[key.kind]
        try:
            raw = self.cluster.get_job(served, key.namespace, key.name)
        except NotFound:
            return _Fired(key, None)  # deleted meanwhile; its DELETED event is on its way
        except ApiError as error:
            log.warning(
                "cannot read %s %s/%s at its deadline: %s", key.kind, key.namespace, key.name, error
            )
            if error.status is None:
                return _Fired(key, self.now() + _seconds(RETRY_UNREACHABLE_S), _Ending.NOT_TRIED)
            return _Fired(key, None, _Ending.FAILED)
        job = parse_job(raw, served.kind, served.version)
        now = self.now()  # the one reading for this job
        policy = self.config.policy  # never a cap: --watch refuses --max-actions
        entry = judge(job, now, policy)
        if not isinstance(entry, Action):
            # Changed since the event, or the server clock is not surely there yet.
            return _Fired(key, due_at(job, policy))
        if entry.kind is not ActionKind.TERMINATE_PODS and due != ALWAYS:
            self.metrics.lateness.observe(max((now - due).total_seconds(), 0.0))
        executor = Executor(
            self.cluster,
            dry_run=self.config.dry_run,
            stop_reason=self.stop_reason,
            on_outcome=self._outcome,
        )
        execution = executor.execute(Plan(now=now, policy=policy, entries=(entry,)))
        outcome = execution.outcomes[0]
        return _ended(key, due, outcome.result)

    def _outcome(self, outcome: Outcome) -> None:
        report.log_outcome(outcome, self.config.dry_run)
        entry = outcome.entry
        if isinstance(entry, Action):
            self.metrics.actions.labels(
                entry.job.kind.name, entry.kind.value, outcome.result.value
            ).inc()

    # --- streams -----------------------------------------------------------------------------

    def _stream(self, scope: _Scope) -> None:
        version: str | None = None
        failures = 0
        refused = False  # the last failure got no answer at all
        listed_once = False
        while not self.flag.event.is_set():
            try:
                if version is None:
                    version = self._list(scope, relist=listed_once)
                    if not listed_once:
                        self.health.listed(scope)
                    listed_once = True
                version = self._follow(scope, version)
                failures, refused = 0, False
                self.metrics.watch_restarts.labels("closed").inc()
            except Gone:
                log.info("watch of %s: resourceVersion too old (410); listing again", scope)
                self.metrics.relists.inc()
                version = None
                failures, refused = 0, False
            except WatchStalled as error:
                log.warning("watch of %s stalled (%s); reopening", scope, error.detail)
                self.metrics.watch_restarts.labels("stalled").inc()
                failures += 1
                self._backoff(failures)
            except ApiError as error:
                log.warning("watch of %s failed: %s", scope, error)
                self.metrics.watch_restarts.labels("error").inc()
                unreachable = error.status is None
                if not unreachable and refused:
                    # The server answers again (a restarted one says 429 or 503 while its
                    # caches fill): back off from the start, not from the outage's count.
                    failures = 0
                refused = unreachable
                failures += 1
                self._backoff(failures, unreachable=unreachable)
            except Exception:  # a stream thread must never die silently
                log.exception("watch of %s: unexpected error", scope)
                self.metrics.watch_restarts.labels("error").inc()
                failures += 1
                self._backoff(failures)

    def _backoff(self, failures: int, *, unreachable: bool = False) -> None:
        cap = BACKOFF_UNREACHABLE_CAP_S if unreachable else BACKOFF_CAP_S
        ceiling = min(cap, BACKOFF_BASE_S * 2 ** min(failures - 1, 16))
        self.flag.event.wait(ceiling / 2 + random.uniform(0, ceiling / 2))  # noqa: S311 - jitter

    def _list(self, scope: _Scope, *, relist: bool) -> str:
        # One list at a time: each holds a decoded page (500 jobs) while it runs, and six
        # streams listing together at start-up would hold six (the peak memory at 10k jobs).
        with self._listing:
            return self._list_one(scope, relist=relist)

    def _list_one(self, scope: _Scope, *, relist: bool) -> str:
        due: dict[JobKey, datetime | None] = {}
        version = ""
        policy = self.config.policy
        excluded = frozenset(self.config.exclude_namespaces)
        pages = iter(
            self.cluster.list_jobs(
                scope.served, scope.namespace, self.config.selector, self.config.page_size
            )
        )
        while True:
            sent = self.monotonic()
            page = next(pages, None)
            if page is None:
                break
            self.saw_date(page.server_date, sent, self.monotonic())
            for item in page.items:
                try:
                    job = parse_job(item, scope.served.kind, scope.served.version)
                    if job.namespace in excluded:
                        continue  # --exclude-namespace: never tracked, so never acted on
                    due[JobKey(job.kind.name, job.namespace, job.name)] = due_at(job, policy)
                except Exception:  # noqa: BLE001 - one object never stops a kind's listing
                    _unreadable(scope, item, "list")
            version = page.resource_version or version
        self.inbox.put(_Listed(scope, due, relist))
        log.info("listed %s: %d job(s)", scope, len(due))
        return version

    def _follow(self, scope: _Scope, version: str) -> str:
        policy = self.config.policy
        excluded = frozenset(self.config.exclude_namespaces)
        sent = self.monotonic()
        with self.cluster.watch_jobs(
            scope.served,
            scope.namespace,
            self.config.selector,
            version,
            timeout_s=random.randint(*WATCH_TIMEOUT_RANGE_S),  # noqa: S311 - spread, not crypto
            read_timeout_s=self.settings.watch_timeout,
        ) as stream:
            self.saw_date(stream.server_date, sent, self.monotonic())
            for event in stream:
                if self.flag.event.is_set():
                    break
                obj = event.object
                version = _resource_version(obj) or version
                if event.type == "BOOKMARK":
                    continue
                try:
                    job = parse_job(obj, scope.served.kind, scope.served.version)
                    if job.namespace in excluded:
                        continue  # the watch API cannot leave a namespace out either
                    key = JobKey(job.kind.name, job.namespace, job.name)
                    due = None if event.type == "DELETED" else due_at(job, policy)
                except Exception:  # noqa: BLE001 - one object never stops a stream
                    # The resourceVersion has moved past it: the stream is never replayed
                    # from before it. Its timer (if any) stays as it was; the resync judges it.
                    _unreadable(scope, obj, event.type)
                    continue
                self.inbox.put(_Event(key, due))
        return version

    # --- the lease -----------------------------------------------------------------------------

    def _lease_namespace(self) -> str:
        return self.settings.lease_namespace or self.cluster.home_namespace

    def _lead(self) -> None:
        namespace, name = self._lease_namespace(), self.settings.lease_name
        timing = self.settings.timing
        was_leading = False
        holder = ""
        read_first = False
        while not self.flag.event.is_set():
            now = self.monotonic()
            with self._elector_lock:
                if self.elector.lost(now):
                    # No write since the renew deadline passed (leading() says so). Exiting
                    # would cost a container restart and a relist once the API server is
                    # back; a candidate keeps its timers and, if the record still names it,
                    # takes the Lease back at the first answer (client-go lets the holder
                    # renew), or waits for it like any follower if another replica took it.
                    log.error(
                        "lost the Lease %s/%s: could not renew within %gs; stopped writing, "
                        "trying to take it back",
                        namespace,
                        name,
                        timing.renew_deadline,
                    )
                    self.elector.step_down()
                    self.metrics.leader.set(0)
                    was_leading = False
                    self.inbox.put(_Leadership(leading=False))
            unreachable = False
            try:
                self._lease_round(namespace, name, read_first=read_first)
                read_first = False
            except Conflict:
                read_first = True  # someone else wrote it: read before the next try
                continue
            except Interrupted:
                continue  # a signal cut a retry wait short: stopping (the loop ends)
            except ApiError as error:
                log.warning("Lease %s/%s: %s", namespace, name, error)
                unreachable = error.status is None
            leading = self.leading()
            if leading != was_leading:
                self.metrics.leader.set(1 if leading else 0)
                log.info(
                    "%s the Lease %s/%s",
                    "acquired" if leading else "do not hold",
                    namespace,
                    name,
                    extra={"identity": self.settings.identity},
                )
                was_leading = leading
                self.inbox.put(_Leadership(leading))
            if not leading and self.elector.holder and self.elector.holder != holder:
                holder = self.elector.holder
                log.info("the leader is %s", holder, extra={"leader": holder})
            delay = timing.retry_period
            if not leading:
                with self._elector_lock:
                    left = self.elector.expires_in(self.monotonic())
                if left is not None:
                    # A standby polls every retry period (so it sees a renewal at most that
                    # late) and tries again the moment the Lease it saw expires, rather than on
                    # client-go's jittered grid: the takeover comes within the lease duration
                    # plus one retry period of the leader's last renewal.
                    delay = min(delay, left + 0.01)
                elif self.elector.holder != self.settings.identity:
                    delay *= 1 + 1.2 * random.random()  # noqa: S311 - client-go's jitter
            if unreachable and not leading:
                # The API server is down: the first attempt after it is back takes the Lease
                # (or learns who has it) sooner; a refused connection costs the server nothing.
                delay = min(delay, LEASE_RETRY_UNREACHABLE_S)
            self.flag.event.wait(delay)
        # Released by _drain, once the work the Lease guards has finished.

    def _lease_round(self, namespace: str, name: str, *, read_first: bool) -> None:
        wall = clock.local_now()
        with self._elector_lock:
            step: Create | Update | Wait | None = None if read_first else self.elector.renewal(wall)
        if step is None:
            sent = self.monotonic()
            try:
                answer = self.cluster.get_lease(namespace, name)
                current: Lease | None = parse_lease(answer.object)
                self.saw_date(answer.server_date, sent, self.monotonic())
            except NotFound:
                current = None
            with self._elector_lock:
                step = self.elector.attempt(current, self.monotonic(), wall)
        if isinstance(step, Wait):
            return
        sent = self.monotonic()
        if isinstance(step, Create):
            answer = self.cluster.create_lease(namespace, lease_body(namespace, name, step.record))
        else:
            answer = self.cluster.update_lease(
                namespace, name, lease_body(namespace, name, step.record, step.resource_version)
            )
        received = self.monotonic()
        self.saw_date(answer.server_date, sent, received)
        with self._elector_lock:
            self.elector.succeeded(parse_lease(answer.object), sent, received)

    def _release(self, namespace: str, name: str) -> None:
        with self._elector_lock:
            step = self.elector.release(clock.local_now())
            self.elector.step_down()
        self.metrics.leader.set(0)
        if step is None:
            return
        try:
            self.cluster.update_lease(
                namespace, name, lease_body(namespace, name, step.record, step.resource_version)
            )
            log.info("released the Lease %s/%s", namespace, name)
        except ApiError as error:
            log.warning("could not release the Lease %s/%s: %s", namespace, name, error)

    # --- the resync --------------------------------------------------------------------------

    def _resync(self) -> None:
        number = 0
        while not self.flag.event.wait(self.settings.resync):
            if not self.leading():
                continue
            number += 1
            self._resync_pass(number)

    def _resync_pass(self, number: int) -> None:
        flag = _LeaderFlag(self)
        with self._in_flight_lock:
            self._fired_in_pass = set()
        try:
            outcome = sweep(
                number, self.config, self.cluster, flag, self.out, claim=self._claim_for_pass
            )
            result = "stopped" if outcome.stopped_by else ("errors" if outcome.errors else "ok")
        except SweeperError as error:
            log.warning("resync pass %d failed: %s", number, error)
            result = "failed"
        finally:
            with self._in_flight_lock:
                self._fired_in_pass = None
        self.metrics.resyncs.labels(result).inc()

    @contextlib.contextmanager
    def _claim_for_pass(self, action: Action) -> Iterator[bool]:
        """Hold a job for a resync pass's action, unless its timer has it or had it.

        A job its timer took since the pass began listing was judged by the timer on a newer
        read than the pass's: the pass leaves it alone (its touch would move the annotation
        back to the pass's older instant). While the pass acts, the job's timer waits.
        """
        job = action.job
        key = JobKey(job.kind.name, job.namespace, job.name)
        with self._in_flight_lock:
            seen = self._fired_in_pass is not None and key in self._fired_in_pass
            ours = not seen and key not in self._in_flight
            if ours:
                self._in_flight.add(key)
        try:
            yield ours
        finally:
            if ours:
                # Through the main loop, which re-arms a timer that came due meanwhile.
                self.inbox.put(_Fired(key, None, _Ending.RELEASED))


class _LeaderFlag(StopFlag):
    """A resync pass's stop flag: a signal, this replica no longer leading, or ``--timeout``.

    ``--timeout`` bounds each pass from its start, as it bounds a one-shot run: no page is
    judged and no write starts once it is reached (the request in flight completes, within
    ``--request-timeout``); the pass is reported as stopped, and the next one comes a
    ``--resync`` later. Timer fires are not passes: ``--request-timeout`` bounds theirs.
    """

    def __init__(self, watcher: Watcher) -> None:
        timeout = watcher.config.timeout
        super().__init__(watcher.monotonic() + timeout, timeout, watcher.monotonic)
        self.event = watcher.flag.event
        self._watcher = watcher

    def reason(self) -> SweeperError | None:
        """Say whether the pass must stop: the watch's reasons first, then ``--timeout``."""
        cause = self._watcher.stop_reason()
        if cause is not None:
            return cause
        if self._monotonic() >= self.deadline:
            return RunTimeout(f"--timeout ({self._timeout:g}s) reached in resync pass")
        return None


def _ended(key: JobKey, due: datetime, result: Result) -> _Fired:
    if result is Result.NOT_STARTED:
        return _Fired(key, due, _Ending.NOT_TRIED)  # not this job's failure: no backoff
    if result is Result.ERROR:
        # Tried again after the job's backoff (or by the next event, or by the resync).
        return _Fired(key, None, _Ending.FAILED)
    return _Fired(key, None)  # done: the job's next event (our own write's, too) re-arms it


def _resource_version(obj: JSON) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return version if isinstance(version, str) and version else None


def _unreadable(scope: _Scope, obj: object, seen_in: str) -> None:
    """Log an object that could not be turned into a timer (a bug: parsing never raises)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    namespace, name = (
        (meta.get("namespace"), meta.get("name")) if isinstance(meta, dict) else (None, None)
    )
    log.error(
        "watch of %s: cannot read %s/%s (%s); left to the resync",
        scope,
        namespace,
        name,
        seen_in,
        exc_info=True,
        extra={
            "kind": scope.served.kind.name,
            "namespace": str(namespace),
            "job_name": str(name),
            "reason": "malformed",
        },
    )


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)
