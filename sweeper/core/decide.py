"""The decision core: pure functions from (jobs, now, policy) to a plan.

Nothing here reads a clock, the network or the environment, and nothing here raises on odd
input (``jobs.parse_job`` already turned it into a ``malformed`` view). The plan is data: every
job gets either an :class:`Action` or a :class:`Skip`, each with its reason. The rule for
"overdue" is the operator's, plus the grace period (docs/operator.md, "When a job is past its
deadline").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from sweeper.core.clock import human
from sweeper.core.jobs import Job, Owned
from sweeper.core.kinds import EXCLUDE_ANNOTATION, LEGACY_EXCLUDE_ANNOTATION, TRAINING_OPERATOR
from sweeper.core.releases import Release


class ActionMode(StrEnum):
    """``--action``: what to do with an overdue job."""

    TOUCH = "touch"
    FAIL = "fail"
    AUTO = "auto"


class PodsMode(StrEnum):
    """``--terminate-pods``: which of a failed job's pods to delete."""

    ACTIVE = "active"
    ALL = "all"
    POLICY = "policy"


class ActionKind(StrEnum):
    """What an action does (the ``decision`` of a report line)."""

    TOUCH = "touch"
    FAIL = "fail"
    TERMINATE_PODS = "terminate-pods"


class Why(StrEnum):
    """Why an action was planned."""

    OVERDUE = "overdue"
    ESCALATED = "escalated"
    RETOUCH = "touch-again"
    FAILED_BY_DEADLINE = "failed-by-deadline"
    TOUCH_REFUSED = "touch-refused"


class SkipReason(StrEnum):
    """Why a job is left alone."""

    MALFORMED = "malformed"
    OPERATOR_ENFORCED = "operator-enforced"
    BEING_DELETED = "being-deleted"
    OPTED_OUT = "opted-out"
    MANAGED_ELSEWHERE = "managed-elsewhere"
    FINISHED = "finished"
    SUSPENDED = "suspended"
    RESUMING = "resuming"
    NO_DEADLINE = "no-deadline"
    NOT_STARTED = "not-started"
    NOT_YET_DUE = "not-yet-due"
    RECENTLY_TOUCHED = "recently-touched"
    OVER_MAX_ACTIONS = "over-max-actions"


@dataclass(frozen=True, slots=True)
class Policy:
    """The knobs of the decision, from the command line.

    Attributes:
        action: ``--action``.
        grace: ``--grace``, seconds of tolerance past the deadline.
        escalate_after: ``--escalate-after``. ``auto`` fails a job this many seconds past
            its deadline and grace, or this long after the sweeper's touch, whichever comes
            first (a touch need not have been written: see :func:`judge`); ``touch`` touches
            again this long after its touch.
        max_actions: ``--max-actions``, ``None`` for no cap.
        terminate_pods: ``--terminate-pods``.
        retouch_after: ``--retouch-after``: ``touch`` and ``auto`` touch a job again this long
            after a touch that did not finish it, while the touch was written within
            ``retouch_limit`` times this of the job becoming due (the v1 operator judges the
            deadline with its own clock, which may not have reached it at the first touch).
        retouch_limit: ``--retouch-limit``: at most this many such quick touches per deadline;
            0 turns them off.
        operator_version: ``--operator-version``, the release the cluster runs; ``None`` when
            unknown. Only ``--terminate-pods policy`` reads it (:func:`pods_mode`).
    """

    action: ActionMode = ActionMode.TOUCH
    grace: float = 0.0
    escalate_after: float = 120.0
    max_actions: int | None = None
    terminate_pods: PodsMode = PodsMode.ACTIVE
    retouch_after: float = 5.0
    retouch_limit: int = 3
    operator_version: Release | None = None


def pods_mode(policy: Policy) -> PodsMode:
    """What ``--terminate-pods`` selects for a job failed by its deadline, with the release.

    ``policy`` means what the operator keeps. v1.7.0 to v1.9.3 delete every pod at a deadline
    failure whatever ``cleanPodPolicy`` says, so with one of them it selects ``all``. v1.9.4
    follows ``cleanPodPolicy``; so does an unknown release, which never deletes a pod the
    operator might keep (the run's log says that older releases would delete them all).

    Returns:
        ``all`` for ``policy`` with a release before v1.9.4; otherwise ``policy.terminate_pods``.
    """
    release = policy.operator_version
    if (
        policy.terminate_pods is PodsMode.POLICY
        and release
        and release.deletes_every_pod_on_deadline
    ):
        return PodsMode.ALL
    return policy.terminate_pods


@dataclass(frozen=True, slots=True)
class Action:
    """A job the sweeper acts on.

    Attributes:
        job: The job.
        kind: What to do.
        why: Why.
        seconds_overdue: ``now - (startTime + activeDeadlineSeconds)``, ``None`` if unknown.
        detail: A short human explanation.
        targets: For a ``terminate-pods`` planned from a pass's pod listing (:func:`assemble`),
            the pods to delete; ``None`` when the executor lists them itself.
    """

    job: Job
    kind: ActionKind
    why: Why
    seconds_overdue: float | None
    detail: str = ""
    targets: tuple[Owned, ...] | None = None

    @property
    def decision(self) -> str:
        """The report's ``decision`` value."""
        return self.kind.value

    @property
    def reason(self) -> str:
        """The report's ``reason`` value."""
        return self.why.value


@dataclass(frozen=True, slots=True)
class Skip:
    """A job the sweeper leaves alone.

    Attributes:
        job: The job.
        why: The reason.
        seconds_overdue: ``now - (startTime + activeDeadlineSeconds)`` (negative before the
            deadline), ``None`` if unknown.
        detail: A short human explanation (the field of a malformed job, seconds left...).
    """

    job: Job
    why: SkipReason
    seconds_overdue: float | None = None
    detail: str = ""

    @property
    def decision(self) -> str:
        """The report's ``decision`` value."""
        return "skip"

    @property
    def reason(self) -> str:
        """The report's ``reason`` value."""
        return self.why.value


Entry = Action | Skip


@dataclass(frozen=True, slots=True)
class Plan:
    """Every listed job with its decision, in listing order.

    Attributes:
        now: The instant the plan was made for.
        policy: The policy it was made with.
        entries: One entry per job.
    """

    now: datetime
    policy: Policy
    entries: tuple[Entry, ...] = field(default=())

    @property
    def actions(self) -> tuple[Action, ...]:
        """The entries that are actions, in listing order."""
        return tuple(e for e in self.entries if isinstance(e, Action))


def decide(
    jobs: Iterable[Job],
    now: datetime,
    policy: Policy,
    pods: Mapping[str, Sequence[Owned]] | None = None,
) -> Plan:
    """Decide what to do with every job. Pure: no clock, no I/O, never raises.

    Args:
        jobs: The listed jobs.
        now: The instant.
        policy: The knobs.
        pods: The pods of the jobs failed by their deadline, by controller uid (see
            :func:`assemble`); ``None`` when not listed.

    Returns:
        The plan. With ``max_actions``, the most overdue actions are kept (touches and fails
        before pod clean-ups) and the rest become ``over-max-actions`` skips.
    """
    return assemble([judge(job, now, policy) for job in jobs], now, policy, pods)


def assemble(
    entries: Iterable[Entry],
    now: datetime,
    policy: Policy,
    pods: Mapping[str, Sequence[Owned]] | None = None,
) -> Plan:
    """Make the plan of entries judged one by one (:func:`judge`), as :func:`decide` does.

    For a caller that judges jobs as they arrive (a pass judges each page as it comes, and
    hands over only the actions, since a skip is final): ``assemble([judge(j, now, policy)
    for j in jobs], now, policy)`` is ``decide(jobs, now, policy)``. Pure.

    Args:
        entries: The judged entries, in listing order.
        now: The instant they were judged at.
        policy: The knobs they were judged with.
        pods: The pods that may belong to the jobs failed by their deadline, by controller
            uid, from one pod listing per namespace scope (:func:`sweeper.act.pods_by_owner`).
            A ``terminate-pods`` whose job's uid is a key gets its pods chosen here
            (:func:`pods_to_terminate`): with none to delete it is a ``finished`` skip, so a
            clean-up that can find nothing takes no ``--max-actions`` slot and no request. A
            uid that is not a key (its scope could not be listed) keeps the action, and the
            executor lists that job's pods itself.

    Returns:
        The plan, with ``max_actions`` applied over all the entries.
    """
    listed = list(entries)
    if pods is not None:
        listed = [_with_targets(entry, pods, policy) for entry in listed]
    if policy.max_actions is not None:
        listed = _cap(listed, policy.max_actions)
    return Plan(now=now, policy=policy, entries=tuple(listed))


def _with_targets(entry: Entry, pods: Mapping[str, Sequence[Owned]], policy: Policy) -> Entry:
    if not isinstance(entry, Action) or entry.kind is not ActionKind.TERMINATE_PODS:
        return entry
    found = pods.get(entry.job.uid)
    if found is None:
        return entry
    chosen = tuple(pods_to_terminate(found, entry.job, pods_mode(policy)))
    if not chosen:
        finished = entry.job.finished or "Failed"
        return Skip(
            entry.job,
            SkipReason.FINISHED,
            entry.seconds_overdue,
            f"{finished}; no pods left to terminate",
        )
    return replace(entry, targets=chosen)


def _priority(entries: Sequence[Entry], index: int) -> tuple[int, float, int]:
    # Touches and fails before pod clean-ups, then the most overdue first, then listing order.
    entry = entries[index]
    assert isinstance(entry, Action)  # noqa: S101 - only actions are ranked
    cleanup = 1 if entry.kind is ActionKind.TERMINATE_PODS else 0
    return (cleanup, -(entry.seconds_overdue or 0.0), index)


def _cap(entries: list[Entry], limit: int) -> list[Entry]:
    ranked = sorted(
        (i for i, e in enumerate(entries) if isinstance(e, Action)),
        key=lambda i: _priority(entries, i),
    )
    capped = list(entries)
    for index in ranked[max(limit, 0) :]:
        action = entries[index]
        assert isinstance(action, Action)  # noqa: S101 - ranked holds actions only
        capped[index] = Skip(
            action.job,
            SkipReason.OVER_MAX_ACTIONS,
            action.seconds_overdue,
            f"would {action.kind.value} ({action.why.value}); --max-actions {limit} reached",
        )
    return capped


def execution_order(plan: Plan) -> tuple[int, ...]:
    """The order in which to run a plan's actions: indices into ``plan.entries``. Pure.

    Touches and fails come first, the most overdue first, then pod clean-ups (most overdue
    first too): a pass stopped by a signal or ``--timeout`` leaves the least urgent actions
    ``not-started``, and the jobs still running never wait behind clean-ups. The same order
    ``--max-actions`` selects by. The report keeps the listing order whatever this order is.

    Returns:
        The indices of the actions, in execution order.
    """
    entries = plan.entries
    return tuple(
        sorted(
            (i for i, e in enumerate(entries) if isinstance(e, Action)),
            key=lambda i: _priority(entries, i),
        )
    )


def judge(job: Job, now: datetime, policy: Policy) -> Entry:
    """Decide for one job. Pure; the rules apply in the order the operator checks them.

    The rules are :data:`RULES`, applied in order; the first one that decides wins. ``sweeper
    --explain`` walks the same table (:func:`explain`).
    """
    overdue = _overdue_seconds(job, now)
    for rule in RULES:
        entry = rule.decide(job, now, policy, overdue)
        if entry is not None:
            return entry
    return _due(job, now, policy, overdue)


def _overdue_seconds(job: Job, now: datetime) -> float | None:
    deadline = job.deadline
    return None if deadline is None else round((now - deadline).total_seconds(), 3)


Decider = Callable[[Job, datetime, Policy, "float | None"], "Entry | None"]
Seer = Callable[[Job, datetime, Policy, "float | None"], str]


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of the decision.

    Attributes:
        name: Its name: the skip reason it gives, or ``overdue`` for the last one.
        seen: What the rule looks at, rendered for ``--explain`` (never raises).
        decide: The entry when the rule decides, ``None`` to let the job through.
    """

    name: str
    seen: Seer
    decide: Decider


def _skip_if(
    test: Callable[[Job], bool],
    reason: SkipReason,
    detail: Callable[[Job], str] | None = None,
    *,
    with_overdue: bool = True,
) -> Decider:
    def decide(job: Job, _now: datetime, _policy: Policy, overdue: float | None) -> Entry | None:
        if not test(job):
            return None
        return Skip(job, reason, overdue if with_overdue else None, detail(job) if detail else "")

    return decide


def _managed_elsewhere(job: Job) -> bool:
    return (
        job.kind.checks_managed_by
        and job.managed_by is not None
        and job.managed_by != TRAINING_OPERATOR
    )


def _decide_finished(
    job: Job, _now: datetime, policy: Policy, overdue: float | None
) -> Entry | None:
    return None if job.finished is None else _finished(job, policy, overdue)


def _decide_not_started(
    job: Job, _now: datetime, _policy: Policy, overdue: float | None
) -> Entry | None:
    return Skip(job, SkipReason.NOT_STARTED) if job.deadline is None or overdue is None else None


def _decide_not_yet_due(
    job: Job, now: datetime, policy: Policy, overdue: float | None
) -> Entry | None:
    deadline = job.deadline
    if deadline is None:
        return None
    due = _later(deadline, policy.grace)
    if due is None or now < due:
        # No due instant within datetime's range (a --grace of 1e15 s): never due.
        if due is not None:
            left = (due - now).total_seconds()
        else:
            left = policy.grace - (now - deadline).total_seconds()
        return Skip(job, SkipReason.NOT_YET_DUE, overdue, f"due in {human(left)}")
    return None


def _due(job: Job, now: datetime, policy: Policy, overdue: float | None) -> Entry:
    # Reached only by a started job with a deadline (the rules before let nothing else by).
    deadline = job.deadline
    if deadline is None or overdue is None:
        return Skip(job, SkipReason.NOT_STARTED)
    return _overdue(job, now, deadline, policy, overdue)


def _stamp(moment: datetime | None) -> str:
    return "unset" if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _seen_finished(job: Job, *_: object) -> str:
    if job.finished is None:
        return "no Succeeded or Failed condition"
    seen = f"condition {job.finished}=True"
    if job.failed_by_deadline:
        who = "sweeper" if job.failed_by_sweeper else "operator"
        seen += f", failed by its deadline by the {who}"
    return seen


def _seen_deadline(job: Job, now: datetime, policy: Policy, overdue: float | None) -> str:
    if job.deadline is None or overdue is None:
        return "no deadline instant"
    when = f"{human(overdue)} ago" if overdue >= 0 else f"in {human(-overdue)}"
    return f"deadline {_stamp(job.deadline)} ({when}), grace {human(policy.grace)}"


def _seen_touch(job: Job, now: datetime, policy: Policy, overdue: float | None) -> str:
    touched = "never touched" if job.touched_at is None else f"touched at {_stamp(job.touched_at)}"
    escalate = human(policy.escalate_after)
    if policy.action is ActionMode.FAIL:
        return f"--action {policy.action.value}, {touched}"
    if policy.retouch_limit > 0 and policy.retouch_after < policy.escalate_after:
        quick = f"re-touch after {human(policy.retouch_after)} (up to {policy.retouch_limit}x)"
    else:
        quick = "no quick re-touch"
    return f"--action {policy.action.value}, {touched}, {quick}, escalate after {escalate}"


RULES: tuple[Rule, ...] = (
    Rule(
        SkipReason.MALFORMED.value,
        lambda job, *_: f"unreadable {job.malformed}" if job.malformed else "every field readable",
        _skip_if(
            lambda job: job.malformed is not None,
            SkipReason.MALFORMED,
            lambda job: job.malformed or "",
            with_overdue=False,
        ),
    ),
    Rule(
        SkipReason.OPERATOR_ENFORCED.value,
        lambda job, *_: f"apiVersion kubeflow.org/{job.version}",
        _skip_if(
            lambda job: job.operator_enforced,
            SkipReason.OPERATOR_ENFORCED,
            lambda job: f"{job.kind.name} {job.version} is enforced by mpi-operator",
        ),
    ),
    Rule(
        SkipReason.BEING_DELETED.value,
        lambda job, *_: "deletionTimestamp set" if job.deleting else "no deletionTimestamp",
        _skip_if(lambda job: job.deleting, SkipReason.BEING_DELETED),
    ),
    Rule(
        SkipReason.OPTED_OUT.value,
        lambda job, *_: (
            f"{EXCLUDE_ANNOTATION} or the old {LEGACY_EXCLUDE_ANNOTATION}: "
            + ("true" if job.excluded else "not true")
        ),
        _skip_if(lambda job: job.excluded, SkipReason.OPTED_OUT),
    ),
    Rule(
        SkipReason.MANAGED_ELSEWHERE.value,
        lambda job, *_: (
            f"managedBy {job.managed_by or 'unset'}"
            + ("" if job.kind.checks_managed_by else " (not used by this kind)")
        ),
        _skip_if(
            _managed_elsewhere, SkipReason.MANAGED_ELSEWHERE, lambda job: job.managed_by or ""
        ),
    ),
    Rule(SkipReason.FINISHED.value, _seen_finished, _decide_finished),
    Rule(
        SkipReason.SUSPENDED.value,
        lambda job, *_: f"suspend {'true' if job.suspended else 'false'}",
        _skip_if(lambda job: job.suspended, SkipReason.SUSPENDED),
    ),
    Rule(
        SkipReason.RESUMING.value,
        lambda job, *_: (
            "condition Suspended=True" if job.suspended_condition else "no Suspended=True condition"
        ),
        # Resumed (e.g. re-admitted by Kueue) but not reconciled yet: the operator flips
        # Suspended to False and resets startTime to now before its deadline check, so the
        # startTime read here is stale and the job is not overdue.
        _skip_if(
            lambda job: job.suspended_condition,
            SkipReason.RESUMING,
            lambda _job: (
                "Suspended=True but suspend is not set: the operator restarts its clock on resume"
            ),
            with_overdue=False,
        ),
    ),
    Rule(
        SkipReason.NO_DEADLINE.value,
        lambda job, *_: (
            "activeDeadlineSeconds unset"
            if job.deadline_seconds is None
            else f"activeDeadlineSeconds {job.deadline_seconds} ({human(job.deadline_seconds)})"
        ),
        _skip_if(
            lambda job: job.deadline_seconds is None, SkipReason.NO_DEADLINE, with_overdue=False
        ),
    ),
    Rule(
        SkipReason.NOT_STARTED.value,
        lambda job, *_: f"startTime {_stamp(job.start_time)}",
        _decide_not_started,
    ),
    Rule(SkipReason.NOT_YET_DUE.value, _seen_deadline, _decide_not_yet_due),
)
# The last rule, after RULES: the job is overdue; touch, fail or wait for the escalation.
DUE = Rule("overdue", _seen_touch, _due)


@dataclass(frozen=True, slots=True)
class Step:
    """One rule as ``--explain`` shows it.

    Attributes:
        rule: The rule's name.
        seen: What it looked at.
        entry: What it decided; ``None`` when it let the job through or was not reached.
        reached: Whether an earlier rule had already decided.
    """

    rule: str
    seen: str
    entry: Entry | None
    reached: bool


def explain(job: Job, now: datetime, policy: Policy) -> tuple[tuple[Step, ...], Entry]:
    """Walk every rule in order for one job, as :func:`judge` does, keeping what each saw. Pure.

    Rules after the deciding one are not evaluated (their premises may not hold), only shown.

    Args:
        job: The job.
        now: The instant.
        policy: The knobs (``--max-actions`` does not apply to one job alone).

    Returns:
        The steps, and the entry :func:`judge` returns.
    """
    overdue = _overdue_seconds(job, now)
    steps: list[Step] = []
    decided: Entry | None = None
    for rule in (*RULES, DUE):
        seen = rule.seen(job, now, policy, overdue)
        if decided is not None:
            steps.append(Step(rule.name, seen, None, reached=False))
            continue
        decided = rule.decide(job, now, policy, overdue)
        steps.append(Step(rule.name, seen, decided, reached=True))
    assert decided is not None  # noqa: S101 - DUE always decides
    return tuple(steps), decided


# The instant of a job that is due whatever the time (pods of a job already failed by its
# deadline): before every other instant.
ALWAYS = datetime.min.replace(tzinfo=UTC)
# The last instant a datetime holds: sums of instants saturate here (due_at says None, never).
NEVER = datetime.max.replace(tzinfo=UTC)
# Spans from here on exceed any distance between two datetimes (and timedelta.max near it).
_LONGEST_SPAN_S = (NEVER - ALWAYS).total_seconds()


def due_at(job: Job, policy: Policy) -> datetime | None:
    """Compute the instant from which :func:`judge` acts on the job, if the job stays as it is.

    Pure. This is what a long-running sweeper arms a timer for: for every ``now`` before the
    instant, ``judge(job, now, policy)`` is a skip; at it and after, an action (property tests
    hold the two functions to that). Any change to the job (a resume, a new deadline, a touch,
    a finish) gives a new instant, so the caller recomputes it on every change.

    Args:
        job: The job.
        policy: The knobs (``max_actions`` is a per-pass cap and plays no part).

    Returns:
        ``startTime + activeDeadlineSeconds + grace``; for ``touch`` and ``auto`` on a job the
        sweeper touched after its deadline, the later of that and the touch plus
        ``escalate_after`` (or ``retouch_after`` while quick touches are left); :data:`ALWAYS`
        when the only work left does not depend on time (the pods of a job failed by its
        deadline); ``None`` when judge never acts on it, an instant after ``datetime.max``
        included (sums saturate: a touched-at near the year 9999 or a huge ``--grace`` never
        raises).
    """
    if (
        job.malformed is not None
        or job.operator_enforced
        or job.deleting
        or job.excluded
        or (
            job.kind.checks_managed_by
            and job.managed_by is not None
            and job.managed_by != TRAINING_OPERATOR
        )
    ):
        return None
    if job.finished is not None:
        return ALWAYS if isinstance(_finished(job, policy, None), Action) else None
    deadline = job.deadline
    if job.suspended or job.suspended_condition or deadline is None:
        return None
    # The same sum judge compares against (now < due), so the boundary is the same instant.
    # Every sum below saturates: an instant after datetime.max (a touched-at near the year
    # 9999, a --grace of 1e15 s) is None, "never" (judge cannot act at any later now either).
    due = _later(deadline, policy.grace)
    if due is None or policy.action is ActionMode.FAIL:
        return due
    touched = job.touched_at if job.touched_at is not None and job.touched_at >= deadline else None
    if touched is None:
        return due
    next_step = _plus(touched, _at_least(policy.escalate_after))
    if _quick_retouch(touched, due, policy):
        next_step = _earliest(next_step, _plus(touched, _at_least(policy.retouch_after)))
    if policy.action is ActionMode.AUTO:
        # auto also escalates escalate_after past the deadline and grace, touch or not.
        next_step = _earliest(next_step, _escalation(deadline, policy))
    return None if next_step is None else max(due, next_step)


def _later(moment: datetime, seconds: float) -> datetime | None:
    # moment + seconds (rounded to the microsecond, as timedelta does), None past datetime.max.
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        return None


def _plus(moment: datetime, span: timedelta | None) -> datetime | None:
    # moment + span, None ("never") for an endless span or one past datetime.max.
    if span is None:
        return None
    try:
        return moment + span
    except OverflowError:
        return None


def _earliest(first: datetime | None, second: datetime | None) -> datetime | None:
    # The earlier of two instants, None being "never".
    if first is None or second is None:
        return second if first is None else first
    return min(first, second)


def _clamp(moment: datetime, span: timedelta) -> datetime:
    # moment + span, held within datetime's range.
    try:
        return moment + span
    except OverflowError:
        return ALWAYS if span < timedelta(0) else NEVER


def _escalation(deadline: datetime, policy: Policy) -> datetime | None:
    # The first microsecond at which judge's escalation test holds: it compares the overdue
    # seconds *rounded to the millisecond* (as reported), so the instant may fall up to half
    # a millisecond before deadline + grace + escalate_after. A bisection over microseconds,
    # within datetime's range: None when the test holds at no instant up to datetime.max.
    def holds(moment: datetime) -> bool:
        overdue = round((moment - deadline).total_seconds(), 3)
        return overdue - policy.grace >= policy.escalate_after

    step = timedelta(milliseconds=2)
    target = _later(deadline, policy.grace + policy.escalate_after) or NEVER
    low, high = _clamp(target, -step), _clamp(target, step)
    while not holds(high):  # float edge cases: widen until the bracket holds the boundary
        if high == NEVER:
            return None
        high = _clamp(high, step)
    while holds(low):
        if low == ALWAYS:
            return ALWAYS
        low = _clamp(low, -step)
    while high - low > timedelta(microseconds=1):
        middle = low + (high - low) / 2  # timedelta arithmetic stays on the microsecond grid
        if holds(middle):
            high = middle
        else:
            low = middle
    return high


def _quick_retouch(touched: datetime, due: datetime, policy: Policy) -> bool:
    # A quick touch follows a touch written less than retouch_limit x retouch_after after the
    # job became due. Each touch is at least retouch_after after the previous one and the
    # first is at or after due, so touch number k+1 is at least k x retouch_after past due:
    # at most retouch_limit quick touches per deadline, counted from the one annotation the
    # sweeper already writes. A touch written long after due (the sweeper was down) gets none:
    # the operator's clock is not that far behind.
    if policy.retouch_limit <= 0 or policy.retouch_after >= policy.escalate_after:
        return False
    return (touched - due).total_seconds() < policy.retouch_limit * policy.retouch_after


def _at_least(seconds: float) -> timedelta | None:
    # The shortest timedelta whose total_seconds() reaches `seconds`: judge compares floats
    # (since >= escalate_after), and timedelta(seconds=x) rounds to the nearest microsecond,
    # which may fall short of x. None when no timedelta is that long (--escalate-after 1e15).
    if seconds > _LONGEST_SPAN_S:
        return None
    step = timedelta(microseconds=1)
    span = timedelta(microseconds=math.ceil(seconds * 1e6))
    while span.total_seconds() < seconds:
        span += step
    while span > timedelta(0) and (span - step).total_seconds() >= seconds:
        span -= step
    return span


def _finished(job: Job, policy: Policy, overdue: float | None) -> Entry:
    if (
        job.finished == "Failed"
        and job.failed_by_deadline
        and policy.action in (ActionMode.FAIL, ActionMode.AUTO)
        and pods_mode(policy) is not PodsMode.POLICY
    ):
        # The v1.9.4 operator keeps the pods of a job it failed (cleanPodPolicy None), and a
        # sweeper interrupted between its status write and its deletes leaves pods too.
        return Action(
            job,
            ActionKind.TERMINATE_PODS,
            Why.FAILED_BY_DEADLINE,
            overdue,
            f"failed by its deadline; {pods_mode(policy).value} pods to terminate",
        )
    return Skip(job, SkipReason.FINISHED, overdue, job.finished or "")


def _overdue(job: Job, now: datetime, deadline: datetime, policy: Policy, overdue: float) -> Entry:
    late = f"{human(overdue)} past its deadline"
    if policy.action is ActionMode.FAIL:
        return Action(job, ActionKind.FAIL, Why.OVERDUE, overdue, late)
    # A touch from before this deadline (before a suspend/resume reset startTime) is stale.
    touched = job.touched_at if job.touched_at is not None and job.touched_at >= deadline else None
    since = None if touched is None else (now - touched).total_seconds()
    if policy.action is ActionMode.AUTO:
        # Escalation never waits for a touch to have been written: while the operator is down
        # its webhooks refuse every update, so no touch annotation ever appears.
        past_grace = overdue - policy.grace
        if past_grace >= policy.escalate_after:
            return Action(
                job,
                ActionKind.FAIL,
                Why.ESCALATED,
                overdue,
                f"{late}, not failed {human(past_grace)} past its deadline and grace",
            )
        if since is not None and since >= policy.escalate_after:
            return Action(
                job,
                ActionKind.FAIL,
                Why.ESCALATED,
                overdue,
                f"{late}, still running {human(since)} after the sweeper's touch",
            )
    if touched is None or since is None:
        return Action(job, ActionKind.TOUCH, Why.OVERDUE, overdue, late)
    # The same sum _decide_not_yet_due and due_at use, so every boundary is the same instant.
    due = _later(deadline, policy.grace)
    quick = due is not None and _quick_retouch(touched, due, policy)
    if since >= policy.escalate_after or (quick and since >= policy.retouch_after):
        why = "" if since >= policy.escalate_after else " (the operator judges with its own clock)"
        return Action(
            job,
            ActionKind.TOUCH,
            Why.RETOUCH,
            overdue,
            f"{late}, still running {human(since)} after the sweeper's touch{why}",
        )
    again = policy.retouch_after if quick else policy.escalate_after
    if policy.action is ActionMode.AUTO:
        left = min(policy.escalate_after - since, policy.escalate_after - (overdue - policy.grace))
        follow_up = f"fails in {human(left)}"
        if quick and again - since < left:
            follow_up = f"touches again in {human(again - since)}, {follow_up}"
    else:
        follow_up = f"touches again in {human(again - since)}"
    return Skip(
        job, SkipReason.RECENTLY_TOUCHED, overdue, f"touched {human(since)} ago; {follow_up}"
    )


def pods_to_terminate(pods: Iterable[Owned], job: Job, mode: PodsMode) -> list[Owned]:
    """Choose the pods of a failed job to delete. Pure.

    Args:
        pods: The pods carrying the job's name label.
        job: The job.
        mode: ``active`` (Running and Pending), ``all``, or ``policy``: the job's
            ``cleanPodPolicy`` read as the v1.9.4 operator reads it. It special-cases two
            values, ``None`` (keep every pod) and ``Running`` (Running and Pending); any other
            value deletes every pod (the CRD has no enum: ``""`` and ``"all"`` included). An
            absent field is ``None``: the defaulter fills in only a missing field.

    Returns:
        Those whose controller ``ownerReference`` is the job (same uid), that are not being
        deleted already (``deletionTimestamp`` set: deleting one again changes nothing, and
        the operator's own ``DeletePod`` skips it), and that the mode selects.
    """
    if mode is PodsMode.POLICY:
        policy = "None" if job.clean_pod_policy is None else job.clean_pod_policy
        if policy == "None":
            return []
        mode = PodsMode.ACTIVE if policy == "Running" else PodsMode.ALL
    owned = [pod for pod in pods if pod.controller_uid == job.uid and not pod.deleting]
    if mode is PodsMode.ALL:
        return owned
    return [pod for pod in owned if pod.phase in ("Running", "Pending")]


def services_to_delete(
    services: Iterable[Owned], job: Job, pod_names: Sequence[str]
) -> list[Owned]:
    """Choose the services to delete with their pods (same names, same owner). Pure.

    Args:
        services: The services carrying the job's name label.
        job: The job.
        pod_names: The names of the pods being deleted.

    Returns:
        The services named like one of those pods and controlled by the job.
    """
    names = set(pod_names)
    return [s for s in services if s.name in names and s.controller_uid == job.uid]
