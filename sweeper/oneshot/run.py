"""The run: connect once, then one pass (or one every ``--every`` seconds for ``--for``).

A pass lists and judges (``sweeper.oneshot.listing``), then acts and reports. SIGTERM and
SIGINT set the run's ``Stop``: the write in progress completes, no new one starts, the pass is
reported and the run exits 4; ``--timeout`` the same way, exit 5.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TextIO

from sweeper.act.cleanup import leftovers_by_owner
from sweeper.act.executor import Claim, Executor
from sweeper.config import Config, OutputFormat
from sweeper.core.clock import SYSTEM_CLOCK, Clock
from sweeper.core.decide import assemble
from sweeper.core.errors import (
    EXIT_ACTIONS_FAILED,
    EXIT_OK,
    ClusterUnavailable,
    Interrupted,
    RunTimeout,
    SweeperError,
)
from sweeper.core.held import overrule
from sweeper.core.model import Action, Plan
from sweeper.core.platform import PlatformView
from sweeper.core.tally import Tally
from sweeper.core.warn import DeadlineWarning, Warned
from sweeper.k8s.cluster import Cluster
from sweeper.oneshot import holding, listing, notice, report
from sweeper.oneshot.ledger import Ledger
from sweeper.stop import Stop, signals_stop

log = logging.getLogger(__name__)

# The least the metrics push gets, --timeout reached or not: a run cut short by --timeout
# pushes its exit code 5 all the same. The chart's timing keeps this second between --timeout
# and the Job's activeDeadlineSeconds (chart/templates/_helpers.tpl, sweeper.timing).
PUSH_FLOOR_S = 1.0


class Connect(Protocol):
    """Builds the cluster for a run (``sweeper.k8s.connection.client.connect``, or a fake)."""

    def __call__(self, config: Config, /, *, stop: Stop) -> Cluster:
        """Connect; ``stop`` bounds every request by the run's signals and ``--timeout``."""


def run(config: Config, connect: Connect, out: TextIO, *, clock: Clock = SYSTEM_CLOCK) -> int:
    """Run one pass, or repeated passes, then push the metrics if asked; exit code 0, 1, 4 or 5.

    Raises ``ConfigError`` (2), ``ClusterUnavailable`` (3, also after acting on what RBAC let list).
    """
    started = clock.monotonic()
    last: list[Tally] = []  # the tally of the last pass that decided
    try:
        code = _run(config, connect, out, clock=clock, started=started, last=last)
    except SweeperError as error:
        _push_metrics(config, clock, last, error.exit_code, clock.monotonic() - started)
        raise
    _push_metrics(config, clock, last, code, clock.monotonic() - started)
    return code


def _push_metrics(
    config: Config, clock: Clock, last: list[Tally], code: int, duration_s: float
) -> None:
    # Within what is left of --timeout, at least PUSH_FLOOR_S.
    if config.pushgateway is None:
        return
    left = config.timeout - duration_s
    # Imported only when pushing: prometheus_client adds 90 ms to every start.
    from sweeper import metrics  # noqa: PLC0415

    # Without a pass that decided, only the run's own metrics are pushed: the previous run's
    # job figures stay, rather than zeros that would silence the overdue alerts.
    figures = metrics.figures(
        last[-1] if last else None, exit_code=code, ended_at=clock.now(), duration_s=duration_s
    )
    timeout = min(config.request_timeout, max(PUSH_FLOOR_S, left))
    metrics.push(config.pushgateway, config.pushgateway_job, figures, timeout=timeout)


def _run(
    config: Config,
    connect: Connect,
    out: TextIO,
    *,
    clock: Clock,
    started: float,
    last: list[Tally],
) -> int:
    stop = Stop(clock, deadline=started + config.timeout, timeout=config.timeout)
    with signals_stop(stop):
        cluster = connect(config, stop=stop)
        # With the run, not at exit: a process that runs the sweeper again (tests, a long-lived
        # caller) would otherwise leave every run's keep-alive sockets to the garbage collector.
        with contextlib.closing(cluster):
            return _passes(config, cluster, stop, out, started=started, clock=clock, last=last)


def _passes(
    config: Config,
    cluster: Cluster,
    stop: Stop,
    out: TextIO,
    *,
    started: float,
    clock: Clock,
    last: list[Tally],
) -> int:
    code = EXIT_OK
    unlisted: list[ClusterUnavailable] = []
    number = 0
    slot = 0  # passes start on a fixed grid: started + slot * every
    while True:
        number += 1
        # The collector pauses for the one-shot process's passes only: the watch mode's resync
        # calls sweep() from a thread, and a pause there would stop it for the whole process.
        with collector_paused():
            outcome = sweep(number, config, cluster, stop, out, clock=clock)
        if outcome.tally is not None:
            last[:] = [outcome.tally]
        if outcome.errors:
            code = EXIT_ACTIONS_FAILED
        unlisted += outcome.unlisted
        if outcome.stopped_by is not None:
            return outcome.stopped_by.exit_code
        if config.every is None or config.for_seconds is None:
            break
        # A pass longer than --every skips the slots it overran rather than piling up.
        elapsed = clock.monotonic() - started
        slot = max(slot + 1, math.ceil(elapsed / config.every))
        next_start = started + slot * config.every
        # No pass starts after --for, nor at or after --timeout (it could not finish).
        if slot * config.every >= config.for_seconds or next_start >= stop.deadline:
            break
        delay = next_start - clock.monotonic()
        if stop.wait(max(0.0, delay)):
            stopped = stop.reason() or Interrupted("interrupted")
            log.warning("stopped between passes: %s", stopped)
            return stopped.exit_code
    if unlisted:
        # Each refused list was logged as it came; the run's one error line names the first.
        more = len({str(u) for u in unlisted}) - 1
        raise ClusterUnavailable(
            f"{unlisted[0]}{f' (and {more} more lists refused, each logged)' if more else ''}"
        )
    return code


@dataclass(frozen=True, slots=True)
class PassOutcome:
    """What the run loop needs from a pass; ``tally`` (the metrics') when the pass decided."""

    errors: int
    stopped_by: SweeperError | None
    tally: Tally | None = None
    unlisted: Sequence[ClusterUnavailable] = ()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block (a one-shot pass).

    Its full collections walked every view kept: a third of a 10,000-job pass's CPU time
    (docs/benchmarks.md); decoded JSON and frozen views form no cycles.
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
    stop: Stop,
    out: TextIO,
    *,
    clock: Clock,
    claim: Claim | None = None,
    view: PlatformView | None = None,
    warned: Callable[[DeadlineWarning], bool] = lambda _warning: False,
) -> PassOutcome:
    """Run one pass: discover, list, decide, act, report.

    ``claim`` as ``Executor``'s; ``view`` is read for the pass when not given; ``warned`` says
    which due warnings the watch's timers recorded already.
    """
    began = clock.monotonic()
    stopped: SweeperError | None = None
    unavailable: ClusterUnavailable | None = None
    listed: listing.Listing | None = None
    now: datetime | None = None
    plan: Plan | None = None
    recorded: tuple[Warned, ...] = ()
    try:
        listed = listing.list_pass(
            cluster, config, clock, stop, lambda: Ledger(config.output), view=view
        )
        now = listed.now()
        plan = _plan(cluster, config, listed, now)
    except (Interrupted, RunTimeout) as cause:
        stopped = cause
    except ClusterUnavailable as error:
        # Nothing is decided on a partial listing; the pass is still reported, then exit 3.
        unavailable = error
    ledger = Ledger(config.output)  # a pass that decided nothing reports no job
    misconfigured = listed.misconfigured if listed is not None else ()
    if plan is not None and listed is not None:
        ledger = listed.ledger
        executor = Executor(
            cluster,
            dry_run=config.dry_run,
            stop=stop,
            on_outcome=lambda o: report.log_outcome(o, config.dry_run),
            claim=claim,
            view=listed.view,
        )
        execution = executor.execute(plan)
        ledger.resolve(execution.outcomes)
        stopped = execution.stopped_by
        if stopped is None and listed.found.jobs:
            stopped = executor.held(listed.found.jobs, plan.now)
        warnings = [w for w in listed.warnings if not warned(w)]
        if stopped is None and warnings:
            recorded, stopped = executor.warn(warnings, plan.now)
            for each in recorded:
                notice.log_warned(each, plan.now, config.dry_run)
                ledger.tally.warned(each)
    ledger.tally.misconfigured = misconfigured
    unlisted = listed.unlisted if listed is not None else []
    pass_report = report.PassReport(
        number=number,
        now=now,
        clock=config.clock,
        dry_run=config.dry_run,
        action=config.enforcement.action,
        outcomes=ledger.kept,
        duration_s=clock.monotonic() - began,
        stopped_by=str(stopped or unavailable or "") or None,
        unlisted=tuple(str(u) for u in unlisted),
        warnings=recorded,
        held=listed.found if listed is not None and plan is not None else holding.Found(),
    )
    counts = _report(config, out, pass_report, ledger)
    if unavailable is not None:
        raise unavailable
    tally = ledger.tally if plan is not None else None
    return PassOutcome(counts.errors, stopped, tally, unlisted)


def _report(
    config: Config, out: TextIO, pass_report: report.PassReport, ledger: Ledger
) -> report.Summary:
    """Write the pass's report (stdout) and its summary line (the log); give its counts."""
    counts = report.Summary.of(
        ledger.tally, pass_report.duration_s, pass_report.stopped_by, pass_report.unlisted
    )
    if config.output is OutputFormat.JSON:
        report.write_json(out, pass_report, counts, ledger.records())
    else:
        report.write_text(out, pass_report, wide=config.output is OutputFormat.WIDE, counts=counts)
    report.log_summary(pass_report, counts)
    return counts


def _plan(cluster: Cluster, config: Config, listed: listing.Listing, now: datetime) -> Plan:
    """The pass's plan, from the actions judged while listing (the skips are in the ledger).

    The pods are listed first, once per namespace scope: a clean-up with nothing to delete is
    no action (no ``--max-actions`` slot), and the same list counts the pods still held.
    """
    holders = listed.holders
    scopes = {uid: namespace for uid, (namespace, *_) in holders.items()}
    actions = [entry for entry in listed.actions if isinstance(entry, Action)]
    loads = holding.Loads(listed.watched, config.enforcement.gpu_resources)
    pods = leftovers_by_owner(cluster, actions, config.namespaces, scopes, loads)
    listed.found = found = loads.find(now, config.enforcement, listed.view.rule)
    by_uid = {held.job.uid: held for held in found.jobs}
    for held in found.jobs:
        listed.ledger.tally.found(held)
    rule = listed.view.rule
    entries = [  # the skips held back for a rule's keys, now that the pods are known
        overrule(entry, by_uid.get(entry.job.uid), rule(entry.job.namespace, entry.job.kind.name))
        for entry in listed.actions
    ]
    plan = assemble(entries, now, config.enforcement, pods)
    held_by = {uid: (family, kind, why) for uid, (_, family, kind, why) in holders.items()}
    listed.ledger.tally.hold(held_by, plan.entries, pods)
    listed.actions = []
    listed.holders = {}
    listed.watched = {}
    return plan
