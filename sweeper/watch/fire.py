"""The fire pool's work: a job's timer came due, so read the job again, judge it now and act.

``now`` is read once per fired job: the local clock, or with ``--clock server`` the earliest
time the API server's clock can show (:mod:`sweeper.watch.servertime`), so nothing fires early.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from datetime import datetime

from sweeper.act.executor import Executor
from sweeper.config import ClockMode, Config
from sweeper.core.clock import Clock
from sweeper.core.decide import ALWAYS, due_at, judge
from sweeper.core.errors import ApiError, NotFound
from sweeper.core.families import family_of
from sweeper.core.jobs import parse_job
from sweeper.core.model import Action, ActionKind, Outcome, Plan, Result
from sweeper.core.platform import PlatformView
from sweeper.core.tally import RECLAIMED
from sweeper.core.warn import DeadlineWarning, warning_due
from sweeper.k8s.cluster import Cluster, ServedKind
from sweeper.metrics import WatchMetrics
from sweeper.oneshot import notice, report
from sweeper.stop import Stop
from sweeper.watch.inbox import Ending, Fired, Inbox, JobKey
from sweeper.watch.servertime import ServerClock

log = logging.getLogger(__name__)


class DecisionClock:
    """The run's clock as the judging parts read it: ``now`` is the instant a job is judged at.

    A ``Clock`` built on the run's one clock (its monotonic reading is that clock's), with
    the server clock estimate behind ``now`` under ``--clock server``.

    Args:
        mode: ``--clock``.
        clock: The run's clock; the requests are timed on its monotonic reading.
    """

    def __init__(self, mode: ClockMode, clock: Clock) -> None:
        self._mode = mode
        self._clock = clock
        self._server = ServerClock()
        self._lock = threading.Lock()
        self._said_local = False

    def saw_date(self, date: datetime | None, sent: float, received: float) -> None:
        """Feed one response's ``Date`` header to the server clock estimate.

        Args:
            date: The header, parsed.
            sent: Monotonic seconds before the request.
            received: Monotonic seconds after its answer.
        """
        if date is None:
            return
        with self._lock:
            self._server.observe(date, sent, received)

    def now(self) -> datetime:
        """The decision clock's reading.

        Returns:
            The local clock, or with ``--clock server`` the earliest time the server's clock
            can show (the local clock until a response has been seen).
        """
        if self._mode is ClockMode.LOCAL:
            return self._clock.now()
        with self._lock:
            estimate = self._server.now(self._clock.monotonic())
            if estimate is not None:
                return estimate
            said, self._said_local = self._said_local, True
        if not said:  # once: a proxy that strips Date headers strips them all
            log.warning("no Date header from the API server yet; using the local clock")
        return self._clock.now()

    def monotonic(self) -> float:
        """The run's clock's monotonic reading."""
        return self._clock.monotonic()

    def offset(self, bound: str) -> float:
        """The ``low`` or ``high`` bound of the server clock minus the local one, in seconds."""
        mono = self._clock.monotonic()
        with self._lock:
            bounds = self._server.bounds(mono)
        if bounds is None:
            return math.nan
        # server - local wall = (server - monotonic) - (wall - monotonic)
        wall_minus_mono = self._clock.now().timestamp() - mono
        return (bounds.low if bound == "low" else bounds.high) - wall_minus_mono


class Fire:
    """Acts on one job whose timer came due, with the one-shot mode's guards.

    Args:
        cluster: The cluster.
        config: The run's settings (the policy, dry run).
        inbox: Told how each fire ended (the main loop re-arms or backs off).
        served: A served kind by its name (known once discovery answered).
        metrics: The watch metrics (lateness, actions).
        clock: The decision clock (``DecisionClock``).
        stop: The run's stop, asked before every write: a signal, or no longer the leader.
        view: The latest view of every job under its platform rule.
    """

    def __init__(
        self,
        cluster: Cluster,
        config: Config,
        *,
        inbox: Inbox,
        served: Callable[[str], ServedKind],
        metrics: WatchMetrics,
        clock: Clock,
        stop: Stop,
        view: Callable[[], PlatformView] = PlatformView,
    ) -> None:
        self.cluster = cluster
        self.view = view
        self.config = config
        self.served = served
        self.inbox = inbox
        self.metrics = metrics
        self._clock = clock
        self._stop = stop

    def run(self, key: JobKey, due: datetime) -> None:
        """The pool's task: fire, and tell the inbox how it ended, whatever happened."""
        fired = Fired(key, None, Ending.FAILED)
        try:
            fired = self.fire(key, due)
        except Exception:  # a worker must never swallow a failure: log it, look again later
            log.exception("acting on %s %s/%s failed", key.kind, key.namespace, key.name)
        finally:
            self.inbox.put(fired)

    def fire(self, key: JobKey, due: datetime) -> Fired:
        """Read the job again, judge it now, act; say when to look at it again, if ever."""
        served = self.served(key.kind)
        try:
            raw = self.cluster.get(served.resource, key.namespace, key.name)
        except NotFound:
            return Fired(key, None)  # deleted meanwhile; its DELETED event is on its way
        except ApiError as error:
            log.warning(
                "cannot read %s %s/%s at its deadline: %s", key.kind, key.namespace, key.name, error
            )
            if error.status is None:  # no answer: looked at again in a moment (the agenda)
                return Fired(key, due, Ending.NOT_TRIED)
            return Fired(key, None, Ending.FAILED)
        view = self.view()
        job = view(parse_job(raw, served.kind, served.version))
        now = self._clock.now()  # the one reading for this job
        policy = self.config.policy  # never a cap: --watch refuses --max-actions
        executor = Executor(
            self.cluster,
            dry_run=self.config.dry_run,
            stop=self._stop,
            on_outcome=self._outcome,
            view=view,
        )
        entry = judge(job, now, policy)
        if not isinstance(entry, Action):
            # A warning never delays nor replaces an action: one due with it (a TrainJob's
            # deadline to write) comes with the job's next event, as at the next pass.
            warning = warning_due(job, now, policy)
            if warning is not None:
                return self._warn(key, due, executor, warning, now=now, then=due_at(job, policy))
            # Changed since the event, or the server clock is not surely there yet.
            return Fired(key, due_at(job, policy))
        if (
            entry.kind not in (ActionKind.TERMINATE_PODS, ActionKind.DELETE_JOBSET)
            and due != ALWAYS
        ):
            self.metrics.lateness.observe(max((now - due).total_seconds(), 0.0))
        execution = executor.execute(Plan(now=now, policy=policy, entries=(entry,)))
        outcome = execution.outcomes[0]
        return _ended(key, due, outcome)

    def _warn(
        self,
        key: JobKey,
        due: datetime,
        executor: Executor,
        warning: DeadlineWarning,
        *,
        now: datetime,
        then: datetime | None,
    ) -> Fired:
        """Record a job's warning (once: a second create of its name is refused), then wait.

        ``then`` is the job's due instant, the timer's next; a warning not tried (a stop,
        the Lease lost) keeps the timer where it was, a refused one backs off.
        """
        (warned,), _stopped = executor.warn((warning,), now)
        notice.log_warned(warned, now, self.config.dry_run)
        if warned.result is Result.NOT_STARTED:
            return Fired(key, due, Ending.NOT_TRIED)
        if warned.result is Result.ERROR:
            return Fired(key, None, Ending.FAILED)
        if warned.result is not Result.LEFT_ALONE:
            job = warning.job
            self.metrics.warnings.labels(warning.family, job.kind.name, job.rule or "").inc()
        return Fired(key, then, warned=warning.name)

    def _outcome(self, outcome: Outcome) -> None:
        report.log_outcome(outcome, self.config.dry_run)
        entry = outcome.entry
        if isinstance(entry, Action):
            job = entry.job
            self.metrics.actions.labels(
                job.kind.name, entry.kind.value, outcome.result.value, job.rule or ""
            ).inc()
            family = family_of(job.kind, job.version).NAME
            for what, _name in outcome.reclaimed:
                if what in RECLAIMED:  # a pod's service goes with it, uncounted
                    self.metrics.reclaimed.labels(family, job.kind.name, what).inc()


def _ended(key: JobKey, due: datetime, outcome: Outcome) -> Fired:
    if outcome.result is Result.NOT_STARTED:
        return Fired(key, due, Ending.NOT_TRIED)  # not this job's failure: no backoff
    if outcome.result is Result.ERROR or outcome.errors:
        # Tried again after the job's backoff (or by the next event, or by the resync); so is
        # an action done in part (some pods deleted, one refused): the re-read judges again.
        return Fired(key, None, Ending.FAILED)
    return Fired(key, None)  # done: the job's next event (our own write's, too) re-arms it
