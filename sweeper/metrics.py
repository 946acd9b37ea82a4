"""Prometheus metrics: their names in one place, and the push of a run to a Pushgateway.

The only module that imports prometheus_client. A CronJob run lives too briefly to be scraped:
with ``--pushgateway`` it pushes one fixed set of gauges when it ends, whatever the exit code.
Every label takes its values from a closed list and every combination is pushed, zeros
included, so a series never vanishes because nothing happened to it this time. The push is a
``pushadd``, which replaces only the metrics it carries: the last success timestamp is in the
set only when the run succeeded, so a failing run leaves the previous success for the alert.
The grouping key is the job label alone (an instance label would leave a group per run).

``--watch`` serves ``WatchMetrics`` on ``/metrics``, defined here too, so the names both modes
have are defined once (docs/metrics.md). No label carries a job's name.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client import Counter as PromCounter
from prometheus_client.exposition import CONTENT_TYPE_LATEST, pushadd_to_gateway

from sweeper.core.errors import EXIT_OK
from sweeper.core.families import FAMILIES, KINDS
from sweeper.core.held import HeldState
from sweeper.core.kinds import PODS
from sweeper.core.model import ActionKind, Outcome, Result, SkipReason
from sweeper.core.tally import FAILED_BY, HELD_GPU_REASONS, HELD_REASONS, MISCONFIGURATIONS, Tally
from sweeper.core.tally import RECLAIMED as RECLAIMED_WHAT

log = logging.getLogger(__name__)

PREFIX = "deadline_sweeper_"


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric's definition; each label has a closed set of values."""

    name: str
    help: str
    labels: tuple[str, ...] = ()


LAST_RUN = Metric(
    f"{PREFIX}last_run_timestamp_seconds",
    "When the last run ended (Unix time), whatever its exit code.",
)
LAST_SUCCESS = Metric(
    f"{PREFIX}last_success_timestamp_seconds", "When the last run that exited 0 ended (Unix time)."
)
LAST_EXIT_CODE = Metric(
    f"{PREFIX}last_exit_code",
    "Exit code of the last run (0 ok, 1 actions failed, 3 cluster "
    "unavailable, 4 interrupted, 5 timeout).",
)
DURATION = Metric(f"{PREFIX}last_run_duration_seconds", "How long the last run took.")
JOBS = Metric(
    f"{PREFIX}jobs", "Jobs listed by the last pass, by kind and decision.", ("kind", "decision")
)
SKIPPED = Metric(
    f"{PREFIX}skipped_jobs",
    "Jobs the last pass left alone, by kind and reason.",
    ("kind", "reason"),
)
ACTIONS = Metric(
    f"{PREFIX}actions",
    'Actions of the last pass, by kind, action, result and platform rule ("" without one).',
    ("kind", "action", "result", "rule"),
)
EXEMPTIONS = Metric(
    f"{PREFIX}exemptions_total",
    "Exclude annotations honoured by the last pass because the job's platform rule allows "
    "them, by rule.",
    ("rule",),
)
OVERDUE = Metric(
    f"{PREFIX}overdue_jobs",
    "Unfinished jobs past their deadline (and --grace) at the last pass, by kind.",
    ("kind",),
)
MAX_OVERDUE = Metric(
    f"{PREFIX}overdue_seconds_max",
    "How long past its deadline the most overdue unfinished job was at the "
    "last pass (0 when none).",
)
DEADLINE_FAILED = Metric(
    f"{PREFIX}deadline_failed_jobs",
    "Listed jobs failed by their deadline, by kind and by whom: the "
    "operator on its own, the operator after the sweeper's touch, or the "
    "sweeper.",
    ("kind", "by"),
)
RECLAIMED = Metric(
    f"{PREFIX}reclaimed",
    "What the last pass's clean-ups deleted of jobs failed by their deadline (pods, a "
    "TrainJob's JobSet), by family, kind and what: GPUs their controllers left held.",
    ("family", "kind", "what"),
)
WARNINGS = Metric(
    f"{PREFIX}warnings",
    "DeadlineApproaching Events the last pass recorded (or, in a dry run, would record), by "
    "family, kind and platform rule; one a pass finds already recorded is not counted again.",
    ("family", "kind", "rule"),
)
HELD_PODS = Metric(
    f"{PREFIX}held_pods",
    "Running and Pending pods that jobs failed by their deadline still control after the last "
    "pass (their GPUs held), by family, kind and why the sweeper leaves them (policy: "
    "--terminate-pods policy keeps what the operator keeps; else the job's skip reason).",
    ("family", "kind", "reason"),
)
HELD_GPUS = Metric(
    f"{PREFIX}held_gpus",
    "GPUs held for nothing at the last pass, by family, kind and reason: stuck-starting (a "
    "gang's placed pods while others wait past --stuck-after), finished-holding (the Running "
    "and Pending pods of a finished job); the pods are deadline_sweeper_held_pods'.",
    ("family", "kind", "reason"),
)
MISCONFIGURED = Metric(
    f"{PREFIX}misconfigured",
    "1 when the last pass found this misconfigured around the sweeper (the log says how and the "
    "fix), else 0; nothing is acted on because of it.",
    ("what",),
)

METRICS = (
    LAST_RUN,
    LAST_SUCCESS,
    LAST_EXIT_CODE,
    DURATION,
    JOBS,
    SKIPPED,
    ACTIONS,
    OVERDUE,
    MAX_OVERDUE,
    DEADLINE_FAILED,
    RECLAIMED,
    EXEMPTIONS,
    WARNINGS,
    HELD_PODS,
    HELD_GPUS,
    MISCONFIGURED,
)

_SKIP = "skip"
_ACTION_NAMES = tuple(kind.value for kind in ActionKind)
DECISIONS = (*_ACTION_NAMES, _SKIP)
RESULTS = tuple(result.value for result in Result if result is not Result.SKIPPED)
_KIND_NAMES = tuple(kind.name for kind in KINDS)
# Every (family, kind) pair a family may list, each with its series from the start.
_FAMILY_KINDS = tuple((f.NAME, kind.name) for f in FAMILIES for kind, _ in f.SERVES)
# The families whose jobs' leftovers are pods: the held-pods series.
_HOLD_PODS = frozenset(f.NAME for f in FAMILIES if f.LEFTOVERS.resource is PODS)
_EVERY_FAMILY = frozenset(state.value for state in HeldState)

Labels = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RunFigures:
    """The values of every metric for one run, by name and label values (``()`` if none)."""

    values: Mapping[str, Mapping[Labels, float]]


def _zeros(*axes: Sequence[str]) -> Counter[Labels]:
    combos: list[Labels] = [()]
    for axis in axes:
        combos = [(*combo, value) for combo in combos for value in axis]
    return Counter(dict.fromkeys(combos, 0))


def figures(
    outcomes: Tally | Iterable[Outcome] | None,
    *,
    exit_code: int,
    ended_at: datetime,
    duration_s: float,
) -> RunFigures:
    """Compute every metric of a run from its last pass, every label combination present. Pure.

    ``outcomes`` is ``None`` when no pass got as far as deciding: then only the run's own
    metrics are there. ``ended_at`` is the local clock's: the alert compares it with
    Prometheus' ``time()``.
    """
    stamp = ended_at.timestamp()
    values: dict[str, Mapping[Labels, float]] = {
        LAST_RUN.name: {(): stamp},
        LAST_EXIT_CODE.name: {(): float(exit_code)},
        DURATION.name: {(): round(duration_s, 3)},
    }
    if exit_code == EXIT_OK:
        values[LAST_SUCCESS.name] = {(): stamp}
    if outcomes is not None:
        values.update(_pass_values(outcomes if isinstance(outcomes, Tally) else Tally.of(outcomes)))
    return RunFigures(values)


def _pass_values(tally: Tally) -> dict[str, Mapping[Labels, float]]:
    """The job metrics of one pass, by metric name: its tally, by kind, zeros filled in."""
    jobs = _zeros(_KIND_NAMES, DECISIONS)
    # Every series without a rule from the start; a rule's as its actions come.
    actions = _zeros(_KIND_NAMES, _ACTION_NAMES, RESULTS, ("",))
    actions.update(tally.actions)
    for (kind, decision, _result), n in tally.outcomes.items():
        jobs[kind, decision] += n
    skipped = _zeros(_KIND_NAMES, tuple(reason.value for reason in SkipReason))
    skipped.update(tally.skipped)
    overdue = _zeros(_KIND_NAMES)
    overdue.update({(kind,): n for kind, n in tally.overdue.items()})
    failed = _zeros(_KIND_NAMES, FAILED_BY)
    failed.update(tally.deadline_failed)
    reclaimed: Counter[Labels] = Counter(
        {(family, kind, what): 0 for family, kind in _FAMILY_KINDS for what in RECLAIMED_WHAT}
    )
    reclaimed.update(tally.reclaimed)
    return {
        HELD_PODS.name: _held(tally.held),
        HELD_GPUS.name: _held(tally.held_gpus, HELD_GPU_REASONS),
        MISCONFIGURED.name: _misconfigured(tally.misconfigured),
        JOBS.name: jobs,
        SKIPPED.name: skipped,
        ACTIONS.name: actions,
        OVERDUE.name: overdue,
        MAX_OVERDUE.name: {(): tally.max_overdue_s},
        DEADLINE_FAILED.name: failed,
        RECLAIMED.name: reclaimed,
        EXEMPTIONS.name: {(rule,): n for rule, n in tally.exemptions.items()},
        # Rules are the run's own names, not a closed list: only the series that counted.
        WARNINGS.name: {labels: float(n) for labels, n in tally.warnings.items()},
    }


def _misconfigured(found: Iterable[str]) -> dict[Labels, float]:
    """Every misconfiguration the sweeper checks, 1 for those found, 0 for the others."""
    return {(what,): float(what in found) for what in MISCONFIGURATIONS}


def _held(
    held: Mapping[tuple[str, str, str], int], reasons: Sequence[str] = HELD_REASONS
) -> Counter[Labels]:
    """What every (family, kind) holds, by every reason, zeros included.

    Held for nothing (``HELD_GPU_REASONS``, waiting): every family; a deadline failure's
    leftovers: the families whose leftovers are pods.
    """
    series: Counter[Labels] = Counter(
        {
            (family, kind, reason): 0
            for family, kind in _FAMILY_KINDS
            for reason in reasons
            if family in _HOLD_PODS or reason in _EVERY_FAMILY
        }
    )
    series.update(held)
    return series


def register(registry: CollectorRegistry, names: Iterable[str] | None = None) -> dict[str, Gauge]:
    """Create the sweeper's gauges, by name, in a registry (all of them, or those named)."""
    wanted = None if names is None else set(names)
    return {
        metric.name: Gauge(metric.name, metric.help, metric.labels, registry=registry)
        for metric in METRICS
        if wanted is None or metric.name in wanted
    }


def registry_of(run: RunFigures) -> CollectorRegistry:
    """A new registry holding exactly the metrics of a run (never the global one)."""
    registry = CollectorRegistry(auto_describe=True)
    gauges = register(registry, run.values)
    for name, series in run.values.items():
        gauge = gauges[name]
        for labels, value in series.items():
            (gauge.labels(*labels) if labels else gauge).set(value)
    return registry


def push(url: str, job: str, run: RunFigures, *, timeout: float) -> bool:
    """Push a run's metrics to a Pushgateway; whether it accepted them (a failure is logged).

    A run that did its work must not exit non-zero because monitoring is down; the alert on
    the last success timestamp notices a Pushgateway that stays unreachable.
    """
    began = time.monotonic()
    try:
        pushadd_to_gateway(url, job=job, registry=registry_of(run), timeout=timeout)
    except Exception as error:  # noqa: BLE001 - urllib raises OSError, HTTPError, ValueError...
        fields = {"pushgateway": url, "error": str(error)}
        log.warning("cannot push metrics to the Pushgateway %s: %s", url, error, extra=fields)
        return False
    took = time.monotonic() - began
    log.debug("pushed metrics to %s in %.3fs", url, took, extra={"pushgateway": url, "job": job})
    return True


# --- sweeper --watch: served on /metrics --------------------------------------------------

# Enforcement lateness: the point of the watch mode is the sub-second buckets.
LATENESS_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)

# A counter since start in watch mode (exposed as ..._total); the push's is the last pass's.
WATCH_ACTIONS = Metric(
    ACTIONS.name,
    "Actions taken on jobs, by kind, action, result and platform rule.",
    ACTIONS.labels,
)
WATCH_EXEMPTIONS = Metric(
    f"{PREFIX}exemptions",
    "Exclude annotations honoured because the job's platform rule allows them, by rule "
    "(counted once per resync pass).",
    EXEMPTIONS.labels,
)
# The pushed gauge's name and label (issue 14: one name whichever the mode), so one alert or
# dashboard reads both; here it counts the timers that are due and not yet handled.
WATCH_OVERDUE = Metric(
    OVERDUE.name, "Jobs whose timer is due and not yet handled, by kind.", OVERDUE.labels
)
WATCH_RECLAIMED = Metric(
    RECLAIMED.name,
    "What the clean-ups deleted of jobs failed by their deadline, by family, kind and what.",
    RECLAIMED.labels,
)
WATCH_WARNINGS = Metric(
    WARNINGS.name,
    "DeadlineApproaching Events recorded, by family, kind and platform rule.",
    WARNINGS.labels,
)
WATCH_HELD_PODS = Metric(
    HELD_PODS.name,
    "Running and Pending pods that jobs failed by their deadline still control at the last "
    "--resync pass, by family, kind and why the sweeper leaves them.",
    HELD_PODS.labels,
)
WATCH_HELD_GPUS = Metric(
    HELD_GPUS.name,
    "GPUs held for nothing at the last --resync pass (stuck-starting, finished-holding), by "
    "family, kind and reason.",
    HELD_GPUS.labels,
)
WATCH_MISCONFIGURED = Metric(
    MISCONFIGURED.name,
    "1 when the last --resync pass found this misconfigured around the sweeper (the log says "
    "how and the fix), else 0; nothing is acted on because of it.",
    MISCONFIGURED.labels,
)
LATENESS = Metric(
    f"{PREFIX}lateness_seconds",
    "Seconds between the instant a job became due and the sweeper's decision to act.",
)
TRACKED = Metric(f"{PREFIX}tracked_jobs", "Jobs with an armed timer.")
WATCH_RESTARTS = Metric(
    f"{PREFIX}watch_restarts", "Watch streams reopened, by reason.", ("reason",)
)
RELISTS = Metric(f"{PREFIX}watch_relists", "Lists after a 410 Gone (the view rebuilt).")
CLOCK_OFFSET = Metric(
    f"{PREFIX}clock_offset_seconds",
    "The API server's clock minus the local clock, estimated from Date headers.",
    ("bound",),
)
LEADER = Metric(f"{PREFIX}leader", "1 while this replica holds the Lease and may write.")
RESYNCS = Metric(f"{PREFIX}resyncs", "Full passes run by --resync, by result.", ("result",))


class WatchMetrics:
    """The watch mode's metrics, in a registry of their own (not the process-wide default)."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry = self.registry

        def counter(metric: Metric) -> PromCounter:
            return PromCounter(metric.name, metric.help, metric.labels, registry=registry)

        def gauge(metric: Metric) -> Gauge:
            return Gauge(metric.name, metric.help, metric.labels, registry=registry)

        self.actions = counter(WATCH_ACTIONS)
        self.reclaimed = counter(WATCH_RECLAIMED)
        self.exemptions = counter(WATCH_EXEMPTIONS)
        self.warnings = counter(WATCH_WARNINGS)
        self.lateness = Histogram(
            LATENESS.name, LATENESS.help, buckets=LATENESS_BUCKETS, registry=registry
        )
        self.tracked = gauge(TRACKED)
        self.overdue = gauge(WATCH_OVERDUE)
        self.watch_restarts = counter(WATCH_RESTARTS)
        self.relists = counter(RELISTS)
        self.clock_offset = gauge(CLOCK_OFFSET)
        self.leader = gauge(LEADER)
        self.resyncs = counter(RESYNCS)
        self.held_pods = gauge(WATCH_HELD_PODS)
        self.held_gpus = gauge(WATCH_HELD_GPUS)
        self.set_held_pods({})
        self.misconfigured = gauge(WATCH_MISCONFIGURED)
        self.set_misconfigured(())

    def set_overdue(self, by_kind: Mapping[str, int]) -> None:
        """Set the overdue gauge of every kind, 0 for those not given (no empty vector)."""
        for kind in _KIND_NAMES:
            self.overdue.labels(kind).set(by_kind.get(kind, 0))

    def set_held_pods(
        self,
        held: Mapping[tuple[str, str, str], int],
        gpus: Mapping[tuple[str, str, str], int] | None = None,
    ) -> None:
        """Set the held pods and GPUs of every series from a resync pass's (0 for the others)."""
        for labels, value in _held(held).items():
            self.held_pods.labels(*labels).set(value)
        for labels, value in _held(gpus or {}, HELD_GPU_REASONS).items():
            self.held_gpus.labels(*labels).set(value)

    def set_misconfigured(self, found: Iterable[str]) -> None:
        """Set each misconfiguration's series from a resync pass's (0 for those not found)."""
        for labels, value in _misconfigured(found).items():
            self.misconfigured.labels(*labels).set(value)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric: the body of ``/metrics``."""
        return generate_latest(self.registry)
