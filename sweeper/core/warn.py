"""The ``DeadlineApproaching`` warning a platform rule's ``warnBefore`` asks for. Pure.

One Warning Event at ``deadline - warnBefore`` for a job its rules would end at its deadline;
none once it is reached. "Once per deadline" needs no memory: the Event's name comes from the
job's uid and deadline, so a second create is refused (409); a new deadline, a new name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from sweeper.core.clock import format_rfc3339, human
from sweeper.core.families import Family, family_of, table
from sweeper.core.jobs import DeadlineSource, Job
from sweeper.core.model import (
    Action,
    ActionKind,
    ActionMode,
    Enforcement,
    Entry,
    Result,
    SkipReason,
)
from sweeper.core.platform import rule_source
from sweeper.core.rules import ALWAYS, judge_by, later

REASON = "DeadlineApproaching"
# Event names are DNS subdomains (at most 253 characters); the suffix takes 32 of them.
_SUFFIX = ".deadline-approaching."
_HASH_CHARS = 10
_NAME_MAX = 253
# A job whose controller ends it at its deadline: judged there, its rules leave it to it.
_CONTROLLER_ENDS = (SkipReason.OPERATOR_ENFORCED, SkipReason.CONTROLLER_LATE)


@dataclass(frozen=True, slots=True)
class DeadlineWarning:
    """A job's warning, due from ``at`` until ``deadline`` (excluded); ``ends``: what then."""

    job: Job
    at: datetime
    deadline: datetime
    name: str
    family: str
    ends: str

    def due(self, now: datetime) -> bool:
        """Whether its instant came at ``now``, and its deadline not."""
        return self.at <= now < self.deadline


def warning_of(job: Job, enforcement: Enforcement) -> DeadlineWarning | None:
    """The warning the job's rule asks for, due or not, by its rules judged at its deadline."""
    warn_before, deadline = job.warn_before, job.deadline
    if warn_before is None or deadline is None:
        return None
    family = family_of(job.kind, job.version)
    entry = judge_by(
        table(family), job, later(deadline, enforcement.grace) or deadline, enforcement
    )
    ends = _what_ends(entry, family, enforcement)
    if ends is None:
        return None
    at = _instant(deadline, warn_before)
    return DeadlineWarning(job, at, deadline, event_name(job, deadline), family.NAME, ends)


def warning_due(job: Job, now: datetime, enforcement: Enforcement) -> DeadlineWarning | None:
    """The job's warning if it is due at ``now``: outside its window, two comparisons."""
    warn_before = job.warn_before
    if warn_before is None:  # every job without a rule's warnBefore: before any arithmetic
        return None
    deadline = job.deadline
    if deadline is None or now >= deadline or now < _instant(deadline, warn_before):
        return None
    return warning_of(job, enforcement)


def _instant(deadline: datetime, warn_before: float) -> datetime:
    try:
        return deadline - timedelta(seconds=warn_before)
    except OverflowError:  # a warnBefore longer than the calendar: due from the start
        return ALWAYS


def explain_warning(job: Job, now: datetime, enforcement: Enforcement) -> str:
    """What ``--explain``'s ``deadline-approaching`` step saw (a job with ``warnBefore``)."""
    ahead = f"warnBefore {human(job.warn_before)}"
    warning = warning_of(job, enforcement)
    if warning is None:
        return f"{ahead}: no warning, its rules would not end it at a deadline"
    if now >= warning.deadline:
        return f"{ahead}: none once the deadline is reached"
    if now < warning.at:
        when = f"at {format_rfc3339(warning.at)} (in {human((warning.at - now).total_seconds())})"
    else:
        when = f"due since {format_rfc3339(warning.at)}"
    return f"{ahead}: DeadlineApproaching {when}, Event {warning.name}"


def event_name(job: Job, deadline: datetime) -> str:
    """``<job>.deadline-approaching.<hash of its uid and this deadline>``, alike in every pass."""
    digest = hashlib.sha256(f"{job.uid}/{deadline.isoformat()}".encode()).hexdigest()
    suffix = f"{_SUFFIX}{digest[:_HASH_CHARS]}"
    # A cut name must still end its DNS label with a letter or digit.
    stem = job.name[: _NAME_MAX - len(suffix)].rstrip("-.")
    return f"{stem}{suffix}"


def source(job: Job) -> str:
    """Where the job's deadline comes from, as the Event and the report say it."""
    if job.deadline_source is not DeadlineSource.JOB:
        return rule_source(job)
    own = "its own activeDeadlineSeconds"
    return own if job.rule is None else f"{own} (platform rule {job.rule})"


def message(warning: DeadlineWarning, now: datetime) -> str:
    """The Event's message: the deadline, when, where it comes from, and what then happens."""
    left = human((warning.deadline - now).total_seconds())
    return (
        f"deadline {format_rfc3339(warning.deadline)} (in {left}), set by "
        f"{source(warning.job)}: {warning.ends}"
    )


def _what_ends(entry: Entry, family: Family, enforcement: Enforcement) -> str | None:
    if isinstance(entry, Action):
        if entry.kind is ActionKind.TOUCH:
            ends = "the sweeper touches it so that the Training Operator fails it"
            if enforcement.action is ActionMode.AUTO:
                ends += f" (and fails it itself {human(enforcement.escalate_after)} later at most)"
        elif entry.kind is ActionKind.FAIL:
            ends = "the sweeper fails it"
        elif entry.kind in (ActionKind.TERMINATE_PODS, ActionKind.DELETE_JOBSET):
            return None  # a clean-up: the job is already finished
        else:  # the deadline written where its controller enforces it (a TrainJob's spec...)
            ends = "its controller fails it"
            if entry.job.launcher_waits:  # a gang with no launcher Job: failed by the sweeper
                ends += " (the sweeper, if it has no launcher Job by then)"
    elif entry.why in _CONTROLLER_ENDS:
        ends = "its controller fails it"
    else:
        return None
    return f"{ends}; {family.reclaim_words(enforcement)}"


@dataclass(frozen=True, slots=True)
class Warned:
    """What became of a warning: ``left-alone`` when its Event was already recorded."""

    warning: DeadlineWarning
    result: Result
    detail: str = ""
