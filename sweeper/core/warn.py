"""The ``DeadlineApproaching`` warning a platform rule's ``warnBefore`` asks for. Pure.

A rule with ``warnBefore`` gives its jobs' owners notice: one Warning Event on the job at
``deadline - warnBefore``, saying when the deadline falls, where it comes from and what will
happen then. Only for a job its family's rules would end at its deadline, judged by those very
rules at that instant (so a finished, suspended, resuming, excluded, foreign or malformed job
gets none, and a job whose controller ends it is said to be ended by its controller), and
never once the deadline is reached: the action itself speaks then.

"Once per deadline" needs no memory shared between passes or replicas: the Event's name is
derived from the job's uid and its deadline instant (:func:`event_name`), so a second create
of it is answered 409 and records nothing. A new deadline (a resume, a new rule) gets a new
name, hence a new warning.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from sweeper.core.clock import format_rfc3339, human
from sweeper.core.families import TRAINER, family_of
from sweeper.core.jobs import DeadlineSource, Job
from sweeper.core.model import (
    Action,
    ActionKind,
    ActionMode,
    Entry,
    PodsMode,
    Policy,
    Result,
    SkipReason,
    pods_mode,
)
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
    """A job's warning, due from ``at`` until ``deadline`` (excluded).

    Attributes:
        name: The Event's name: the same for every pass and replica that warns of this
            deadline of this job.
        family: The job's family's name (the metric's label).
        ends: What happens at the deadline, as the Event says it.
    """

    job: Job
    at: datetime
    deadline: datetime
    name: str
    family: str
    ends: str

    def due(self, now: datetime) -> bool:
        """Whether the warning is to be recorded at ``now``: its instant came, its deadline not."""
        return self.at <= now < self.deadline


def warning_of(job: Job, policy: Policy) -> DeadlineWarning | None:
    """The warning the job's rule asks for, due or not; ``None`` when there is none to give.

    The job's family's rules are judged at the instant they would act (the deadline and
    ``--grace``), on the job as it is now: a warning is given only if they would then act
    on it, or leave it to its controller to end.
    """
    warn_before, deadline = job.warn_before, job.deadline
    if warn_before is None or deadline is None:
        return None
    family = family_of(job.kind, job.version)
    entry = judge_by(family.rules, job, later(deadline, policy.grace) or deadline, policy)
    ends = _what_ends(entry, family.name, policy)
    if ends is None:
        return None
    at = _instant(deadline, warn_before)
    return DeadlineWarning(job, at, deadline, event_name(job, deadline), family.name, ends)


def warning_due(job: Job, now: datetime, policy: Policy) -> DeadlineWarning | None:
    """The job's warning if it is to be recorded at ``now`` (see :meth:`DeadlineWarning.due`).

    Outside its window (most jobs of a pass) it costs two comparisons: the rules are judged
    only for a job inside it.
    """
    warn_before = job.warn_before
    if warn_before is None:  # every job without a rule's warnBefore: before any arithmetic
        return None
    deadline = job.deadline
    if deadline is None or now >= deadline or now < _instant(deadline, warn_before):
        return None
    return warning_of(job, policy)


def _instant(deadline: datetime, warn_before: float) -> datetime:
    try:
        return deadline - timedelta(seconds=warn_before)
    except OverflowError:  # a warnBefore longer than the calendar: due from the start
        return ALWAYS


def explain_warning(job: Job, now: datetime, policy: Policy) -> str:
    """What ``--explain``'s ``deadline-approaching`` step saw (a job with ``warnBefore``)."""
    ahead = f"warnBefore {human(job.warn_before)}"
    warning = warning_of(job, policy)
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
    """The Event's name for this deadline of this job: ``<job>.deadline-approaching.<hash>``.

    The hash is of the job's uid (a namesake created since is another job) and the deadline
    instant, so every pass and replica names the same warning alike.
    """
    digest = hashlib.sha256(f"{job.uid}/{deadline.isoformat()}".encode()).hexdigest()
    suffix = f"{_SUFFIX}{digest[:_HASH_CHARS]}"
    # A cut name must still end its DNS label with a letter or digit.
    stem = job.name[: _NAME_MAX - len(suffix)].rstrip("-.")
    return f"{stem}{suffix}"


def source(job: Job) -> str:
    """Where the job's deadline comes from, as the Event and the report say it."""
    if job.deadline_source is DeadlineSource.DEFAULT:
        return f"the default of platform rule {job.rule}"
    if job.deadline_source is DeadlineSource.CAP:
        return f"the cap of platform rule {job.rule}"
    own = "its own activeDeadlineSeconds"
    return own if job.rule is None else f"{own} (platform rule {job.rule})"


def message(warning: DeadlineWarning, now: datetime) -> str:
    """The Event's message: the deadline, when, where it comes from, and what then happens."""
    left = human((warning.deadline - now).total_seconds())
    return (
        f"deadline {format_rfc3339(warning.deadline)} (in {left}), set by "
        f"{source(warning.job)}: {warning.ends}"
    )


def _what_ends(entry: Entry, family: str, policy: Policy) -> str | None:
    if isinstance(entry, Action):
        if entry.kind is ActionKind.TOUCH:
            ends = "the sweeper touches it so that the Training Operator fails it"
            if policy.action is ActionMode.AUTO:
                ends += f" (and fails it itself {human(policy.escalate_after)} later at most)"
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
    return f"{ends}; {_reclaim(family, policy)}"


def _reclaim(family: str, policy: Policy) -> str:
    if family == TRAINER.name:
        return "then its JobSet is deleted, giving its GPUs back"
    mode = pods_mode(policy)
    if mode is PodsMode.POLICY:
        return "then its pods are kept or deleted as its cleanPodPolicy says"
    which = "all its pods" if mode is PodsMode.ALL else "its Running and Pending pods"
    return f"then {which} are deleted, giving their GPUs back"


@dataclass(frozen=True, slots=True)
class Warned:
    """What became of a warning: ``left-alone`` when its Event was already recorded."""

    warning: DeadlineWarning
    result: Result
    detail: str = ""
