"""A pass's outcomes counted by kind: the one count its summary and its metrics both read.

The one-shot report's summary (``-o json``'s ``summary``, the table's last line, the log's
summary line) sums the counts over the kinds; the ``--pushgateway`` gauges
(``sweeper.metrics``) read them kind by kind. Counting once, here, keeps the two from
drifting apart, and keeps ``prometheus_client`` out of a run that pushes nothing: this module
imports no metrics library. Pure: no I/O. Its size is fixed by the kinds, decisions, reasons and
results, whatever the number of jobs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from sweeper.core.decide import current_touch
from sweeper.core.families import family_of
from sweeper.core.jobs import Job
from sweeper.core.model import Action, Outcome, Result, SkipReason

# Who failed a job by its deadline: only "operator" for weeks, with no action, as the operator
# enforces deadlines by itself.
FAILED_BY = ("operator", "operator-after-touch", "sweeper")
# What a clean-up deletes: a job's pods, a TrainJob's JobSet.
RECLAIMED = ("pods", "jobsets")
# Overdue, not acted on this pass, and still the sweeper's to enforce.
_STILL_OVERDUE = (SkipReason.RECENTLY_TOUCHED, SkipReason.OVER_MAX_ACTIONS)


def has_errors(outcome: Outcome) -> bool:
    """Whether an outcome counts as an error (exit code 1): its action or a request failed."""
    return outcome.result is Result.ERROR or bool(outcome.errors)


class Tally:
    """One pass's outcomes, counted one at a time as each becomes final.

    Attributes:
        outcomes: By (kind name, decision, result value).
        skipped: Skips by (kind name, reason value).
        overdue: By kind name, the unfinished jobs past their deadline (and ``--grace``) that
            are acted on or still the sweeper's to enforce (recently touched, over
            ``--max-actions``).
        max_overdue_s: How long past its deadline the most overdue of those is (0 when none).
        deadline_failed: Jobs failed by their deadline, by (kind name, who: ``FAILED_BY``).
        reclaimed: What the clean-ups deleted (or, in a dry run, would delete), by (family,
            kind name, ``RECLAIMED``): what the jobs' controllers left holding GPUs.
        actions: Actions by (kind name, action, result value, platform rule name or ``""``).
        exemptions: Exemptions a platform rule allowed and the pass honoured, by rule name.
    """

    def __init__(self) -> None:
        self.jobs = 0
        self.errors = 0
        self.outcomes: Counter[tuple[str, str, str]] = Counter()
        self.skipped: Counter[tuple[str, str]] = Counter()
        self.overdue: Counter[str] = Counter()
        self.max_overdue_s = 0.0
        self.deadline_failed: Counter[tuple[str, str]] = Counter()
        self.reclaimed: Counter[tuple[str, str, str]] = Counter()
        self.actions: Counter[tuple[str, str, str, str]] = Counter()
        self.exemptions: Counter[str] = Counter()

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
        if job.finished is None and (acted or entry.why in _STILL_OVERDUE):
            self.overdue[kind] += 1
            self.max_overdue_s = max(self.max_overdue_s, entry.seconds_overdue or 0.0)
        if job.failed_by_deadline:
            self.deadline_failed[kind, failed_by(job)] += 1
        family = family_of(job.kind, job.version).name
        for what, names in (("pods", outcome.pods), ("jobsets", outcome.jobsets)):
            if names:
                self.reclaimed[family, kind, what] += len(names)
        self.errors += has_errors(outcome)

    def decisions(self) -> Counter[str]:
        """Outcomes by decision, every kind summed."""
        counts: Counter[str] = Counter()
        for (_, decision, _), n in self.outcomes.items():
            counts[decision] += n
        return counts

    def results(self) -> Counter[str]:
        """Outcomes by result value, every kind summed."""
        counts: Counter[str] = Counter()
        for (_, _, result), n in self.outcomes.items():
            counts[result] += n
        return counts

    def reasons(self) -> Counter[str]:
        """Skips by reason value, every kind summed."""
        counts: Counter[str] = Counter()
        for (_, reason), n in self.skipped.items():
            counts[reason] += n
        return counts


def failed_by(job: Job) -> str:
    """Who failed a job by its deadline (one of ``FAILED_BY``). Pure."""
    if job.failed_by_sweeper:
        return "sweeper"
    # A touch from before the deadline (before a suspend and resume) woke nothing.
    if current_touch(job) is not None:
        return "operator-after-touch"
    return "operator"
