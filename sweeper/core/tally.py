"""A pass's outcomes counted by kind: the one count its summary and its metrics both read. Pure.

Counting once, here, keeps the report's summary and the ``--pushgateway`` gauges from drifting
apart, and ``prometheus_client`` out of a run that pushes nothing. Its size is fixed by the
kinds, decisions, reasons and results, whatever the number of jobs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from sweeper.core.families import family_of
from sweeper.core.families.pods import pods_mode
from sweeper.core.held import Held, HeldState
from sweeper.core.jobs import Job, Owned
from sweeper.core.kinds import PODS
from sweeper.core.model import (
    Action,
    Enforcement,
    Entry,
    Outcome,
    PodsMode,
    Result,
    Skip,
    SkipReason,
    Why,
)
from sweeper.core.rules import current_touch
from sweeper.core.warn import Warned

# Who failed a job by its deadline: only "operator" for weeks, with no action, as the operator
# enforces deadlines by itself.
FAILED_BY = ("operator", "operator-after-touch", "sweeper")
# What a clean-up deletes: a job's pods, a TrainJob's JobSet.
RECLAIMED = ("pods", "jobsets")
# Why the active pods of a job failed by its deadline are left: --terminate-pods policy, or the
# job's skip reason; those of a job holding GPUs for nothing (core.held), under their state.
HELD_REASONS = (
    "policy",
    *(reason.value for reason in SkipReason),
    *(state.value for state in HeldState),
)
# What holds GPUs for nothing: a gang stuck half-started, a finished job's pods.
HELD_GPU_REASONS = (HeldState.STUCK.value, HeldState.FINISHED.value)
# What a pass checks around the sweeper and reports, never acts on (sweeper.oneshot.misconfig):
# a Training Operator running its v1 MPIJob controller beside mpi-operator's v2beta1 CRD.
MPIJOB_SCHEME = "training-operator-mpijob-scheme"
MISCONFIGURATIONS = (MPIJOB_SCHEME,)
# Overdue, not acted on this pass, and still the sweeper's to enforce.
_STILL_OVERDUE = (SkipReason.RECENTLY_TOUCHED, SkipReason.OVER_MAX_ACTIONS)
_RECORDED = (Result.DONE, Result.PLANNED, Result.DRY_RUN)


def has_errors(outcome: Outcome) -> bool:
    """Whether an outcome counts as an error (exit code 1): its action or a request failed."""
    return outcome.result is Result.ERROR or bool(outcome.errors)


class Tally:
    """One pass's outcomes, counted one at a time as each becomes final (a dry run's too)."""

    def __init__(self) -> None:
        self.jobs = 0
        self.errors = 0
        self.outcomes: Counter[tuple[str, str, str]] = Counter()  # kind, decision, result
        self.skipped: Counter[tuple[str, str]] = Counter()  # kind, reason
        # The unfinished jobs past their deadline and --grace acted on or still the sweeper's
        # to enforce (recently touched, over --max-actions), by kind; the most overdue's.
        self.overdue: Counter[str] = Counter()
        self.max_overdue_s = 0.0
        self.deadline_failed: Counter[tuple[str, str]] = Counter()  # kind, FAILED_BY
        self.reclaimed: Counter[tuple[str, str, str]] = Counter()  # family, kind, RECLAIMED
        self.actions: Counter[tuple[str, str, str, str]] = Counter()  # ..., result, rule or ""
        self.exemptions: Counter[str] = Counter()  # honoured, by platform rule
        self.warnings: Counter[tuple[str, str, str]] = Counter()  # family, kind, rule
        # The active pods of jobs failed by their deadline that the pass leaves (hold), and of
        # the jobs it found holding GPUs for nothing (found), by family, kind, HELD_REASONS.
        self.held: Counter[tuple[str, str, str]] = Counter()
        self.held_gpus: Counter[tuple[str, str, str]] = Counter()  # family, kind, HeldState
        self.misconfigured: tuple[str, ...] = ()  # found around the sweeper, never acted on

    @classmethod
    def of(cls, outcomes: Iterable[Outcome]) -> Tally:
        """Count a pass's outcomes all at once."""
        tally = cls()
        for outcome in outcomes:
            tally.add(outcome)
        return tally

    def add(self, outcome: Outcome) -> None:
        """Count one outcome."""
        entry = outcome.entry
        job = entry.job
        kind = job.kind.name
        self.jobs += 1
        self.outcomes[kind, entry.decision, outcome.result.value] += 1
        acted = isinstance(entry, Action)
        if acted:
            self.actions[kind, entry.decision, outcome.result.value, job.rule or ""] += 1
        else:
            self.skipped[kind, entry.reason] += 1
            if entry.why is SkipReason.OPTED_OUT and job.rule is not None:
                self.exemptions[job.rule] += 1
        # A gang failed by its rule's startDeadline is past no deadline of its own.
        past = entry.why is not Why.START_DEADLINE if acted else entry.why in _STILL_OVERDUE
        if job.finished is None and past:
            self.overdue[kind] += 1
            self.max_overdue_s = max(self.max_overdue_s, entry.seconds_overdue or 0.0)
        if job.failed_by_deadline:
            self.deadline_failed[kind, failed_by(job)] += 1
        family = family_of(job.kind, job.version).NAME
        for what, _name in outcome.reclaimed:
            if what in RECLAIMED:  # a pod's service goes with it, uncounted
                self.reclaimed[family, kind, what] += 1
        self.errors += has_errors(outcome)

    def warned(self, warned: Warned) -> None:
        """Count a warning the pass recorded (an error or one already there counts nothing)."""
        if warned.result in _RECORDED:
            warning = warned.warning
            job = warning.job
            self.warnings[warning.family, job.kind.name, job.rule or ""] += 1

    def hold(
        self,
        holders: Mapping[str, tuple[str, str, str]],
        entries: Sequence[Entry],
        owned: Mapping[str, Sequence[Owned]],
    ) -> None:
        """Count the pods the jobs a pass leaves still hold, from its one pod list (``owned``).

        ``holders``: skipped jobs by uid (``held_reason``); also clean-ups ``--max-actions`` left.
        """
        capped = {
            entry.job.uid: (family_of(entry.job.kind, entry.job.version).NAME, entry.job.kind.name)
            for entry in entries
            if isinstance(entry, Skip)
            and entry.why is SkipReason.OVER_MAX_ACTIONS
            and entry.job.finished is not None
        }
        capped_reason = SkipReason.OVER_MAX_ACTIONS.value
        for uid, key in [*holders.items(), *((u, (*k, capped_reason)) for u, k in capped.items())]:
            self.held[key] += _active(owned.get(uid, ()), uid)

    def found(self, held: Held) -> None:
        """Count a job holding pods for nothing (or waiting for all of them)."""
        job = held.job
        key = (family_of(job.kind, job.version).NAME, job.kind.name, held.state.value)
        self.held[key] += held.pods
        self.held_gpus[key] += held.gpus

    def decisions(self) -> Counter[str]:
        """Outcomes by decision, every kind summed."""
        return _summed(self.outcomes.items(), 1)

    def results(self) -> Counter[str]:
        """Outcomes by result value, every kind summed."""
        return _summed(self.outcomes.items(), 2)

    def reasons(self) -> Counter[str]:
        """Skips by reason value, every kind summed."""
        return _summed(self.skipped.items(), 1)


def _summed(counts: Iterable[tuple[tuple[str, ...], int]], at: int) -> Counter[str]:
    summed: Counter[str] = Counter()
    for key, n in counts:
        summed[key[at]] += n
    return summed


def held_reason(entry: Skip, enforcement: Enforcement) -> str | None:
    """Why a skipped job failed by its deadline may still hold pods (``HELD_REASONS``). Pure.

    ``None`` for any other job (its pods are its own, or its controller's to clean, so a pass
    over finished jobs lists no pod more) and for a family whose leftovers are not pods.
    """
    job = entry.job
    if not job.failed_by_deadline or family_of(job.kind, job.version).LEFTOVERS.resource != PODS:
        return None
    if entry.why is SkipReason.FINISHED and pods_mode(enforcement) is PodsMode.POLICY:
        return "policy"
    return entry.why.value


def _active(pods: Iterable[Owned], uid: str) -> int:
    return sum(
        1
        for pod in pods
        if pod.controller_uid == uid and pod.phase in ("Running", "Pending") and not pod.deleting
    )


def failed_by(job: Job) -> str:
    """Who failed a job by its deadline (one of ``FAILED_BY``). Pure."""
    if job.failed_by_sweeper:
        return "sweeper"
    # A touch from before the deadline (before a suspend and resume) woke nothing.
    if current_touch(job) is not None:
        return "operator-after-touch"
    return "operator"
