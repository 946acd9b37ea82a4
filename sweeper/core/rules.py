"""How a family's rules are written, walked and timed; the rules every family shares. Pure.

A family judges a job with an ordered tuple of ``Rule``: the first that decides wins, the last
always decides. ``--explain`` walks the same tuple, and a watch timer is armed from it: a rule
with a ``premise`` decides the same whatever the clock, so only the rules after those read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sweeper.core.clock import format_rfc3339, human
from sweeper.core.jobs import MAX_DEADLINE_SECONDS, Job, overflows
from sweeper.core.kinds import EXCLUDE_ANNOTATION, LEGACY_EXCLUDE_ANNOTATION
from sweeper.core.model import Action, Enforcement, Entry, Skip, SkipReason

Decider = Callable[[Job, datetime, Enforcement, "float | None"], "Entry | None"]
Seer = Callable[[Job, datetime, Enforcement, "float | None"], str]

# The instant of a job that is due whatever the time (what a controller left behind once the
# job is finished): before every other instant.
ALWAYS = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of a family's decision: ``decide`` gives the entry, or ``None`` to let it by."""

    name: str  # the skip reason it gives, or the name of the family's last rule
    seen: Seer  # what it looks at, for --explain (never raises)
    decide: Decider
    # Whether it decides for the job at every instant; None for a rule that may let the job
    # by at some (premise_due relies on every premise rule coming before those).
    premise: Callable[[Job], bool] | None = None
    # For a premise rule that reads the clock, the instant from which it acts (None: never).
    acts_from: Callable[[Job, Enforcement], datetime | None] | None = None


def skip_if(
    reason: SkipReason,
    seen: Seer,
    test: Callable[[Job], bool],
    detail: Callable[[Job], str] | None = None,
    *,
    with_overdue: bool = True,
    name: str = "",
) -> Rule:
    """A rule that skips the job, whatever the clock, when ``test`` holds (named as ``reason``)."""

    def decide(
        job: Job, _now: datetime, _enforcement: Enforcement, overdue: float | None
    ) -> Entry | None:
        if not test(job):
            return None
        return Skip(job, reason, overdue if with_overdue else None, detail(job) if detail else "")

    return Rule(name or reason.value, seen, decide, premise=test)


def stamp(moment: datetime | None) -> str:
    """An instant as the API writes it, or ``unset``."""
    return "unset" if moment is None else format_rfc3339(moment)


def later(moment: datetime, seconds: float) -> datetime | None:
    """``moment + seconds``; ``None`` ("never") past ``datetime.max`` or timedelta's range."""
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        return None


def when(due: datetime | None, now: datetime) -> str:
    """How far ``due`` is from ``now``, in words: ``in 5m00s``, or ``never``."""
    return "never" if due is None else f"in {human((due - now).total_seconds())}"


def reached(now: datetime, moment: datetime | None) -> bool:
    """Whether ``now`` is at or after ``moment`` (never, for ``None``)."""
    return moment is not None and now >= moment


def due(job: Job, enforcement: Enforcement) -> datetime | None:
    """The deadline and ``--grace``: when a family's own rules may act (``None``: never)."""
    deadline = job.deadline
    return None if deadline is None else later(deadline, enforcement.grace)


def seen_deadline(what: str, *, grace: bool = False) -> Seer:
    """What ``--explain`` says of the deadline instant: ``what``, the instant, how far off."""

    def seen(job: Job, _now: datetime, enforcement: Enforcement, overdue: float | None) -> str:
        if job.deadline is None or overdue is None:
            return "no deadline instant"
        ago = f"{human(overdue)} ago" if overdue >= 0 else f"in {human(-overdue)}"
        also = f", grace {human(enforcement.grace)}" if grace else ""
        return f"{what} {stamp(job.deadline)} ({ago}){also}"

    return seen


def own_deadline(job: Job) -> str:
    """The job's own ``activeDeadlineSeconds``, in words, beside a platform rule's."""
    seconds = job.declared_seconds
    return "none of its own" if seconds is None else f"its own activeDeadlineSeconds {seconds}"


def current_touch(job: Job) -> datetime | None:
    """The sweeper's touch of the job's current deadline, if it has one. Pure.

    A touch from before the deadline (written before a suspend and resume reset
    ``startTime``) woke nothing for this deadline: it is stale, and counts as none.
    """
    touched, deadline = job.touched_at, job.deadline
    if touched is None or deadline is None or touched < deadline:
        return None
    return touched


def overdue_seconds(job: Job, now: datetime) -> float | None:
    """``now - deadline`` as reported: rounded to the millisecond, never for a comparison."""
    deadline = job.deadline
    return None if deadline is None else round((now - deadline).total_seconds(), 3)


# The rules that open every family's table: what no controller acts on either.
MALFORMED = skip_if(
    SkipReason.MALFORMED,
    lambda job, *_: f"unreadable {job.malformed}" if job.malformed else "every field readable",
    lambda job: job.malformed is not None,
    lambda job: job.malformed or "",
    with_overdue=False,
)
BEING_DELETED = skip_if(
    SkipReason.BEING_DELETED,
    lambda job, *_: "deletionTimestamp set" if job.deleting else "no deletionTimestamp",
    lambda job: job.deleting,
)
OPTED_OUT = skip_if(
    SkipReason.OPTED_OUT,
    lambda job, *_: (
        f"{EXCLUDE_ANNOTATION} or the old {LEGACY_EXCLUDE_ANNOTATION}: "
        + ("true" if job.excluded else "not true")
    ),
    lambda job: job.excluded,
)


def managed_elsewhere(own: str, *, checked: Callable[[Job], bool] = lambda _job: True) -> Rule:
    """Skip a job whose ``managedBy`` names another controller than ``own``, if ``checked``."""

    def test(job: Job) -> bool:
        return checked(job) and job.managed_by is not None and job.managed_by != own

    return skip_if(
        SkipReason.MANAGED_ELSEWHERE,
        lambda job, *_: (
            f"managedBy {job.managed_by or 'unset'}"
            + ("" if checked(job) else " (not used by this kind)")
        ),
        test,
        lambda job: job.managed_by or "",
    )


SUSPENDED = skip_if(
    SkipReason.SUSPENDED,
    lambda job, *_: f"suspend {'true' if job.suspended else 'false'}",
    lambda job: job.suspended,
)
# Resumed (re-admitted by Kueue) but not reconciled yet: every family's controller restarts its
# clock (startTime; a TrainJob's Suspended=False) before its deadline check: not overdue.
RESUMING = skip_if(
    SkipReason.RESUMING,
    lambda job, *_: (
        "condition Suspended=True" if job.suspended_condition else "no Suspended=True condition"
    ),
    lambda job: job.suspended_condition,
    lambda _job: (
        "Suspended=True but suspend is not set: its controller restarts its clock on resume"
    ),
    with_overdue=False,
)
NO_DEADLINE = skip_if(
    SkipReason.NO_DEADLINE,
    lambda job, *_: (
        "activeDeadlineSeconds unset"
        if job.deadline_seconds is None
        else f"activeDeadlineSeconds {job.deadline_seconds} ({human(job.deadline_seconds)})"
    ),
    lambda job: job.deadline_seconds is None,
    with_overdue=False,
)
# A deadline beyond what Go's time.Duration holds wraps around in every controller: none enforces
# what it says. Longer than any cap (a rule's cap has replaced it: platform.terms), so uncapped
# it is never due: a skip the pass also logs as a warning (oneshot.listing).
DURATION_OVERFLOW = skip_if(
    SkipReason.NOT_YET_DUE,
    lambda job, *_: (
        f"activeDeadlineSeconds {job.deadline_seconds} overflows Go's time.Duration"
        f" (beyond {MAX_DEADLINE_SECONDS} s either way)"
        if overflows(job.deadline_seconds)
        else "activeDeadlineSeconds within Go's time.Duration"
    ),
    lambda job: overflows(job.deadline_seconds),
    lambda job: (
        f"due never: activeDeadlineSeconds {job.deadline_seconds} overflows its controller's"
        f" time.Duration (beyond {MAX_DEADLINE_SECONDS} s either way), and no platform rule caps it"
    ),
    with_overdue=False,
    name="duration-overflow",
)
NOT_STARTED = skip_if(
    SkipReason.NOT_STARTED,
    lambda job, *_: f"startTime {stamp(job.start_time)}",
    lambda job: job.deadline is None,
    with_overdue=False,
)


def at_once(entry: Entry | None) -> datetime | None:
    """The instant of a rule's entry that does not read the clock: now for an action, or never."""
    return ALWAYS if isinstance(entry, Action) else None


@dataclass(frozen=True, slots=True)
class Step:
    """One rule as ``--explain`` shows it (``entry``: ``None`` when it let the job by)."""

    rule: str
    seen: str
    entry: Entry | None
    reached: bool


def judge_by(rules: tuple[Rule, ...], job: Job, now: datetime, enforcement: Enforcement) -> Entry:
    """The entry of the first rule that decides (the last rule always does)."""
    overdue = overdue_seconds(job, now)
    for rule in rules:
        entry = rule.decide(job, now, enforcement, overdue)
        if entry is not None:
            return entry
    raise AssertionError(f"the last rule ({rules[-1].name}) did not decide")  # pragma: no cover


def walk(
    rules: tuple[Rule, ...], job: Job, now: datetime, enforcement: Enforcement
) -> tuple[tuple[Step, ...], Entry]:
    """Every rule in order with what it saw; those after the deciding one are not evaluated."""
    overdue = overdue_seconds(job, now)
    steps: list[Step] = []
    decided: Entry | None = None
    for rule in rules:
        seen = rule.seen(job, now, enforcement, overdue)
        if decided is not None:
            steps.append(Step(rule.name, seen, None, reached=False))
            continue
        decided = rule.decide(job, now, enforcement, overdue)
        steps.append(Step(rule.name, seen, decided, reached=True))
    assert decided is not None  # noqa: S101 - the last rule always decides
    return tuple(steps), decided


def premise_due(
    rules: tuple[Rule, ...], job: Job, enforcement: Enforcement
) -> tuple[bool, datetime | None]:
    """``(True, due instant or None)`` when a clock-free rule decides, else ``(False, None)``."""
    for rule in rules:
        if rule.premise is None:
            break
        if rule.premise(job):
            if rule.acts_from is not None:
                return True, rule.acts_from(job, enforcement)
            return True, at_once(rule.decide(job, ALWAYS, enforcement, None))
    return False, None
