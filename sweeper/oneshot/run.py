"""The run: connect once, then one pass (or one every ``--every`` seconds for ``--for``).

A pass discovers the served kinds, lists every job page by page (keeping only compact views;
the lists are read ahead on two threads, :mod:`sweeper.oneshot.readahead`), takes ``now`` once (from
the first page), judges each page as it comes (a skip is final there: only what the report
prints of it is kept, :class:`sweeper.oneshot.report.Ledger`), then executes the actions and
reports.
SIGTERM and SIGINT set a flag: the write in progress completes, no new one starts, the pass is
reported and the run exits 4. ``--timeout`` bounds the whole run the same way (exit 5).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from http import HTTPStatus
from typing import TYPE_CHECKING, Protocol, TextIO

from sweeper.act import Claim, Executor
from sweeper.cleanup import pods_by_owner
from sweeper.config import ClockMode, Config, OutputFormat
from sweeper.core import clock
from sweeper.core.decide import Action, Plan, Skip, assemble, judge
from sweeper.core.errors import (
    EXIT_ACTIONS_FAILED,
    EXIT_OK,
    ApiError,
    ClusterUnavailable,
    ConfigError,
    Gone,
    Interrupted,
    NotFound,
    RunTimeout,
    SweeperError,
)
from sweeper.core.jobs import Job
from sweeper.core.model import settled
from sweeper.k8s.cluster import Cluster, JobPage, ServedKind
from sweeper.oneshot import readahead, report
from sweeper.stop import StopFlag, signals_stop

if TYPE_CHECKING:
    from sweeper.metrics import PassValues

log = logging.getLogger(__name__)


def _monotonic() -> float:
    # Looked up at each call, like sweeper.k8s.kube does: a test that patches time.monotonic
    # (freezegun) then moves every deadline of the run together.
    return time.monotonic()


# Date headers have whole-second resolution: a skew below this is noise.
_SKEW_RESOLUTION_S = 1.0
# Lists read at once, and pages of each that may wait (sweeper.oneshot.readahead): two keep the API
# server busy while this process decodes and judges (docs/benchmarks.md).
_READERS = 2
_DEPTH = 2


class Connect(Protocol):
    """Builds the cluster for a run (``sweeper.k8s.kube.connect``, or a fake in tests)."""

    def __call__(self, config: Config, /, *, stop: StopFlag) -> Cluster:
        """Connect; ``stop`` bounds every request by the run's signal flag and ``--timeout``."""
        ...


def run(
    config: Config,
    connect: Connect,
    out: TextIO,
    *,
    monotonic: Callable[[], float] | None = None,
) -> int:
    """Run the sweeper: one pass, or repeated passes; then push its metrics if asked.

    Returns:
        The exit code (0, 1, 4 or 5; codes 2 and 3 are raised as errors).

    Raises:
        ConfigError: The configuration is unusable (exit 2).
        ClusterUnavailable: The cluster could not be listed (exit 3).
    """
    monotonic = monotonic or _monotonic
    started = monotonic()
    last: list[PassValues] = []  # the metric values of the last pass that decided
    try:
        code = _run(config, connect, out, monotonic=monotonic, started=started, last=last)
    except SweeperError as error:
        _push_metrics(config, last, error.exit_code, monotonic() - started)
        raise
    _push_metrics(config, last, code, monotonic() - started)
    return code


def _push_metrics(config: Config, last: list[PassValues], code: int, duration_s: float) -> None:
    if config.pushgateway is None:
        return
    # Imported only when pushing: prometheus_client adds 90 ms to every start.
    from sweeper import metrics  # noqa: PLC0415

    # Without a pass that decided, only the run's own metrics are pushed: the previous run's
    # job figures stay, rather than zeros that would silence the overdue alerts.
    figures = metrics.figures(
        last[-1] if last else None,
        exit_code=code,
        ended_at=clock.local_now(),
        duration_s=duration_s,
    )
    metrics.push(
        config.pushgateway, config.pushgateway_job, figures, timeout=config.request_timeout
    )


def _run(
    config: Config,
    connect: Connect,
    out: TextIO,
    *,
    monotonic: Callable[[], float],
    started: float,
    last: list[PassValues],
) -> int:
    flag = StopFlag(started + config.timeout, config.timeout, monotonic)
    with signals_stop(flag):
        cluster = connect(config, stop=flag)
        # The connections close with the run, not at process exit: a process that runs the
        # sweeper again (in-process tests, a long-lived caller) would otherwise leave every
        # run's keep-alive sockets to the garbage collector.
        with contextlib.closing(cluster):
            return _passes(
                config, cluster, flag, out, started=started, monotonic=monotonic, last=last
            )


def _passes(
    config: Config,
    cluster: Cluster,
    flag: StopFlag,
    out: TextIO,
    *,
    started: float,
    monotonic: Callable[[], float],
    last: list[PassValues],
) -> int:
    code = EXIT_OK
    number = 0
    slot = 0  # passes start on a fixed grid: started + slot * every
    while True:
        number += 1
        outcome = sweep(number, config, cluster, flag, out, monotonic=monotonic)
        if outcome.values is not None:
            last[:] = [outcome.values]
        if outcome.errors:
            code = EXIT_ACTIONS_FAILED
        if outcome.stopped_by is not None:
            return outcome.stopped_by.exit_code
        if config.every is None or config.for_seconds is None:
            return code
        # A pass longer than --every skips the slots it overran rather than piling up.
        elapsed = monotonic() - started
        slot = max(slot + 1, math.ceil(elapsed / config.every))
        next_start = started + slot * config.every
        # No pass starts after --for, nor at or after --timeout (it could not finish).
        if slot * config.every >= config.for_seconds or next_start >= flag.deadline:
            return code
        delay = next_start - monotonic()
        if flag.event.wait(max(0.0, delay)):
            stopped = flag.reason() or Interrupted("interrupted")
            log.warning("stopped between passes: %s", stopped)
            return stopped.exit_code


class PassOutcome:
    """What the run loop needs from a pass.

    Args:
        errors: How many jobs had errors.
        stopped_by: What stopped the pass early, if anything.
        values: The pass's metric values, when the run pushes metrics and the pass decided.
    """

    def __init__(
        self, errors: int, stopped_by: SweeperError | None, values: PassValues | None = None
    ) -> None:
        self.errors = errors
        self.stopped_by = stopped_by
        self.values = values


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the duration of the block.

    Decoding a page of 500 jobs allocates some 10^5 dicts and lists that live until the page
    is done: they survive the young collections, and each time the survivors grow by a quarter
    a full collection walks every live container, the views kept so far included. At 10,000
    jobs that was a third of a pass's CPU time (docs/benchmarks.md). Decoded JSON and frozen
    views form no reference cycles, so reference counting frees them all the same; the
    collector resumes (with its usual thresholds) when the block ends.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def sweep(
    number: int,
    config: Config,
    cluster: Cluster,
    flag: StopFlag,
    out: TextIO,
    *,
    monotonic: Callable[[], float] | None = None,
    claim: Claim | None = None,
) -> PassOutcome:
    """Run one pass: discover, list, decide, act, report.

    ``claim`` holds each job while its action runs (see :class:`sweeper.act.Executor`).

    Returns:
        The pass's error count and what stopped it, if anything.

    Raises:
        ConfigError: The server rejected the label selector (exit 2).
        ClusterUnavailable: Discovery or a list failed for good (exit 3).
    """
    monotonic = monotonic or _monotonic
    began = monotonic()
    values, ledger, listing = _fresh(config, flag)
    stopped: SweeperError | None = None
    now: datetime | None = None
    unavailable: ClusterUnavailable | None = None
    try:
        with collector_paused():
            served = _discover(cluster, config, listing)
            try:
                listing.list_all(cluster, served)
            except _StartOver as cause:
                # A continue token expired (a very long list), or a kind vanished mid-list:
                # what was judged is dropped, and the pass lists everything again, once.
                log.warning("%s; listing every kind again", cause)
                discovery_date = listing.discovery_date
                values, ledger, listing = _fresh(config, flag)
                listing.discovery_date = discovery_date
                try:
                    listing.list_all(cluster, served)
                except _StartOver as again:
                    raise ClusterUnavailable(
                        f"{again} (the list expired again after starting over)"
                    ) from again.__cause__
        now = listing.now()
    except (Interrupted, RunTimeout) as cause:
        stopped = cause
    except ClusterUnavailable as error:
        # Nothing is decided on a partial listing; the pass is still reported, then exit 3.
        unavailable = error
    plan: Plan | None = None
    if now is not None and stopped is None:
        try:
            plan = _plan(cluster, config, listing, now)
        except (Interrupted, RunTimeout) as cause:
            stopped = cause
    if plan is not None:
        executor = Executor(
            cluster,
            dry_run=config.dry_run,
            stop_reason=flag.reason,
            on_outcome=lambda o: report.log_outcome(o, config.dry_run),
            claim=claim,
        )
        execution = executor.execute(plan)
        ledger.resolve(execution.outcomes)
        stopped = execution.stopped_by
    else:
        ledger = report.Ledger(config.output)  # a pass that decided nothing reports no job
    pass_report = report.PassReport(
        number=number,
        now=now,
        clock=config.clock,
        dry_run=config.dry_run,
        action=config.policy.action,
        outcomes=ledger.kept,
        duration_s=monotonic() - began,
        stopped_by=str(stopped or unavailable or "") or None,
    )
    counts = ledger.tally.summary(pass_report.duration_s, pass_report.stopped_by)
    if config.output is OutputFormat.JSON:
        report.write_json(out, pass_report, counts, ledger.records())
    else:
        report.write_text(out, pass_report, wide=config.output is OutputFormat.WIDE, counts=counts)
    report.log_summary(pass_report, counts)
    if unavailable is not None:
        raise unavailable
    return PassOutcome(counts.errors, stopped, values if plan is not None else None)


def _plan(cluster: Cluster, config: Config, listing: _Listing, now: datetime) -> Plan:
    """The pass's plan, from the actions judged while listing.

    The skips are final and already in the ledger; the plan holds the actions alone
    (``--max-actions`` ranks only actions, so it ranks them as it would among all entries).
    The clean-ups' pods are listed first, once per namespace scope: a clean-up with nothing to
    delete is then no action at all (no ``--max-actions`` slot, no request of its own).

    Raises:
        Interrupted: A signal arrived while retrying the pod list.
        RunTimeout: ``--timeout`` ran out during it.
    """
    pods = pods_by_owner(cluster, listing.actions, config.namespaces)
    plan = assemble(listing.actions, now, config.policy, pods)
    listing.actions = []
    return plan


def _fresh(config: Config, flag: StopFlag) -> tuple[PassValues | None, report.Ledger, _Listing]:
    """A pass's metric tally, ledger and listing, empty."""
    values = _pass_values(config)
    ledger = report.Ledger(config.output, on_outcome=values.add if values else None)
    return values, ledger, _Listing(config, flag, ledger)


def _pass_values(config: Config) -> PassValues | None:
    """A pass's metric tally, when the run pushes metrics."""
    if config.pushgateway is None:
        return None
    # Imported only when pushing: prometheus_client adds 90 ms to every start.
    from sweeper.metrics import PassValues  # noqa: PLC0415

    return PassValues()


def _discover(cluster: Cluster, config: Config, listing: _Listing) -> list[ServedKind]:
    try:
        discovery = cluster.discover()
    except ApiError as error:
        raise ClusterUnavailable(f"{error} ({cluster.endpoint})") from error
    listing.discovery_date = discovery.server_date
    by_kind = {served.kind: served for served in discovery.served}
    if not by_kind:
        log.info("the cluster serves no Kubeflow job kinds (group kubeflow.org)")
    wanted = config.kinds or tuple(by_kind) or ()
    served: list[ServedKind] = []
    for kind in wanted:
        if kind in by_kind:
            served.append(by_kind[kind])
        else:
            log.info(
                "%s is not served by this cluster; skipped", kind.name, extra={"kind": kind.name}
            )
    return served


class _StartOver(Exception):  # noqa: N818 - a signal to the pass, not an error it reports
    """A list ended after some of its pages were judged: the pass must list again."""


class _Listing:
    """Lists every job of a pass, judges each page as it comes, and keeps the clocks.

    The lists (one per kind and namespace) are read ahead (:mod:`sweeper.oneshot.readahead`): while
    this thread judges one page, the API server answers the next request. Each page's jobs
    are judged with the pass's one instant (taken from the first page). A skip is final there
    and then: its outcome goes to the ledger, and the job is not kept. An action is kept for
    the plan, its place held in the ledger. So nothing of a page outlives it but its actions,
    and a pass's memory does not grow with the fleet.

    A list that cannot be finished after some of its pages were judged (its ``continue``
    token expired, or its kind vanished) raises :class:`_StartOver`: the pass then lists
    everything again, once, on a fresh ledger (:func:`sweep`).
    """

    def __init__(self, config: Config, flag: StopFlag, ledger: report.Ledger) -> None:
        self.config = config
        self.flag = flag
        self.ledger = ledger
        self.actions: list[Action] = []
        self.discovery_date: datetime | None = None
        self.server_date: datetime | None = None
        self.local_date: datetime | None = None
        self._now: datetime | None = None

    def list_all(self, cluster: Cluster, served: Sequence[ServedKind]) -> None:
        """List and judge every job of the served kinds, in order (kind, then namespace)."""
        config = self.config
        lists = [(kind, namespace) for kind in served for namespace in config.namespaces or (None,)]
        with readahead.ReadAhead[JobPage](workers=_READERS, depth=_DEPTH, name="list") as ahead:
            for kind, namespace in lists:
                ahead.submit(
                    (kind, namespace),
                    functools.partial(
                        cluster.list_job_views, kind, namespace, config.selector, config.page_size
                    ),
                )
            for kind, namespace in lists:
                self._list_one(cluster, kind, ahead.pages((kind, namespace)))

    def _list_one(self, cluster: Cluster, served: ServedKind, pages: Iterator[JobPage]) -> None:
        config = self.config
        excluded = frozenset(config.exclude_namespaces)
        judged = False
        try:
            for page in pages:
                if self.server_date is None:
                    self._saw(page.server_date)
                jobs = page.jobs
                if excluded:
                    # The list API cannot leave a namespace out; the jobs are dropped here,
                    # before any decision: an excluded namespace is never acted on nor reported.
                    jobs = [job for job in jobs if job.namespace not in excluded]
                self._judge(jobs)
                judged = True
                cause = self.flag.reason()
                if cause is not None:
                    raise cause
        except NotFound as error:
            if judged:
                # The kind vanished after some of its pages were judged: the pass lists again,
                # and the kind is then skipped as a whole, as when it is gone from the start.
                raise _StartOver(str(error)) from error
            log.warning(
                "%s is no longer served; skipped (%s)",
                served.kind.name,
                error,
                extra={"kind": served.kind.name},
            )
        except Gone as error:
            raise _StartOver(str(error)) from error
        except ApiError as error:
            if error.status == HTTPStatus.BAD_REQUEST and config.selector:
                raise ConfigError(
                    f"invalid label selector {config.selector!r} (--selector): "
                    f"{error.detail or 'rejected by the API server'}"
                ) from error
            raise ClusterUnavailable(f"{error} ({cluster.endpoint})") from error

    def _judge(self, jobs: list[Job]) -> None:
        # A skip's line (debug level) is logged here: with --log-level debug, a pass whose
        # later list then fails has logged the skips before it, though it acts on nothing and
        # reports no job.
        now, config, ledger = self.now(), self.config, self.ledger
        for job in jobs:
            entry = judge(job, now, config.policy)
            if isinstance(entry, Skip):
                outcome = settled(entry)
                report.log_outcome(outcome, config.dry_run)
                ledger.settle(outcome)
            else:
                self.actions.append(entry)
                ledger.expect()

    def _saw(self, server_date: datetime | None) -> None:
        # One local reading, as close as possible to the server's answer.
        self.local_date = clock.local_now()
        self.server_date = server_date

    def now(self) -> datetime:
        """Choose the pass's one instant, and warn about clock skew.

        Returns:
            The server's ``Date`` (``--clock server``) or the local clock (``--clock local``);
            the same instant at every call.
        """
        if self._now is None:
            self._now = self._choose_now()
        return self._now

    def _choose_now(self) -> datetime:
        if self.local_date is None:
            self._saw(self.discovery_date)
        local = self.local_date or clock.local_now()
        server = self.server_date
        if server is None:
            if self.config.clock is ClockMode.SERVER:
                log.warning("the API server sent no Date header; using the local clock")
            return local
        skew = (local - server).total_seconds()
        if self.config.clock is ClockMode.LOCAL:
            if abs(skew) > self.config.policy.grace + _SKEW_RESOLUTION_S:
                log.warning(
                    "the local clock is %s %s the API server's; --clock local decides by it",
                    clock.human(abs(skew)),
                    "ahead of" if skew > 0 else "behind",
                    extra={"skew_s": round(skew, 3), "clock": "local"},
                )
            return local
        log.debug("clock skew (local - server): %.3fs", skew, extra={"skew_s": round(skew, 3)})
        return server
