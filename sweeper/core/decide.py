"""The decision core: pure functions from (jobs, now, policy) to a plan.

Nothing here reads a clock, the network or the environment, and nothing here raises on odd
input (``jobs.parse_job`` already turned it into a ``malformed`` view). The plan is data: every
judged job gets either an :class:`~sweeper.core.model.Action` or a
:class:`~sweeper.core.model.Skip`, each with its reason (:data:`RULES`, applied by
:func:`judge`, shown by :func:`explain`, timed by :func:`due_at`). The rule for "overdue" is the
operator's, plus the grace period (docs/operator.md, "When a job is past its deadline"). What a
pass makes of the judged entries (``--max-actions``, the execution order, the pods a clean-up
deletes) is :mod:`sweeper.core.plan`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sweeper.core.clock import human
from sweeper.core.jobs import Job, Owned
from sweeper.core.kinds import EXCLUDE_ANNOTATION, LEGACY_EXCLUDE_ANNOTATION, TRAINING_OPERATOR
from sweeper.core.model import (
    Action,
    ActionKind,
    ActionMode,
    Entry,
    Plan,
    PodsMode,
    Policy,
    Skip,
    SkipReason,
    Why,
    pods_mode,
)
from sweeper.core.plan import assemble


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
            :func:`~sweeper.core.plan.assemble`); ``None`` when not listed.

    Returns:
        The plan. With ``max_actions``, the most overdue actions are kept (touches and fails
        before pod clean-ups) and the rest become ``over-max-actions`` skips.
    """
    return assemble([judge(job, now, policy) for job in jobs], now, policy, pods)


def judge(job: Job, now: datetime, policy: Policy) -> Entry:
    """Decide for one job. Pure; the rules apply in the order the operator checks them.

    The rules are :data:`RULES`, applied in order; the first one that decides wins. ``sweeper
    --explain`` walks the same table (:func:`explain`). Every rule compares instants
    (``now`` against sums of the job's instants and the policy's spans); the seconds overdue
    are rounded to the millisecond only for the entry, as reported, never for a comparison.
    """
    overdue = _overdue_seconds(job, now)
    for rule in RULES:
        entry = rule.decide(job, now, policy, overdue)
        if entry is not None:
            return entry
    return _due(job, now, policy, overdue)


def _overdue_seconds(job: Job, now: datetime) -> float | None:
    # As reported (seconds_overdue, the text's "past its deadline"): rounded to the millisecond.
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
        premise: For a rule that decides whatever the clock, whether it decides for the job
            (its decision then depends on the job and the policy only); ``None`` for a rule
            that reads the clock. :func:`due_at` asks it instead of restating the rule.
    """

    name: str
    seen: Seer
    decide: Decider
    premise: Callable[[Job], bool] | None = None


def _skip_if(
    reason: SkipReason,
    seen: Seer,
    test: Callable[[Job], bool],
    detail: Callable[[Job], str] | None = None,
    *,
    with_overdue: bool = True,
) -> Rule:
    # A rule that skips the job, whatever the clock, when the test holds.
    def decide(job: Job, _now: datetime, _policy: Policy, overdue: float | None) -> Entry | None:
        if not test(job):
            return None
        return Skip(job, reason, overdue if with_overdue else None, detail(job) if detail else "")

    return Rule(reason.value, seen, decide, premise=test)


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


def current_touch(job: Job) -> datetime | None:
    """The sweeper's touch of the job's current deadline, if it has one. Pure.

    A touch from before the deadline (written before a suspend and resume reset
    ``startTime``) woke nothing for this deadline: it is stale, and counts as none.
    """
    touched, deadline = job.touched_at, job.deadline
    if touched is None or deadline is None or touched < deadline:
        return None
    return touched


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
    _skip_if(
        SkipReason.MALFORMED,
        lambda job, *_: f"unreadable {job.malformed}" if job.malformed else "every field readable",
        lambda job: job.malformed is not None,
        lambda job: job.malformed or "",
        with_overdue=False,
    ),
    _skip_if(
        SkipReason.OPERATOR_ENFORCED,
        lambda job, *_: f"apiVersion kubeflow.org/{job.version}",
        lambda job: job.operator_enforced,
        lambda job: f"{job.kind.name} {job.version} is enforced by mpi-operator",
    ),
    _skip_if(
        SkipReason.BEING_DELETED,
        lambda job, *_: "deletionTimestamp set" if job.deleting else "no deletionTimestamp",
        lambda job: job.deleting,
    ),
    _skip_if(
        SkipReason.OPTED_OUT,
        lambda job, *_: (
            f"{EXCLUDE_ANNOTATION} or the old {LEGACY_EXCLUDE_ANNOTATION}: "
            + ("true" if job.excluded else "not true")
        ),
        lambda job: job.excluded,
    ),
    _skip_if(
        SkipReason.MANAGED_ELSEWHERE,
        lambda job, *_: (
            f"managedBy {job.managed_by or 'unset'}"
            + ("" if job.kind.checks_managed_by else " (not used by this kind)")
        ),
        _managed_elsewhere,
        lambda job: job.managed_by or "",
    ),
    Rule(
        SkipReason.FINISHED.value,
        _seen_finished,
        _decide_finished,
        premise=lambda job: job.finished is not None,
    ),
    _skip_if(
        SkipReason.SUSPENDED,
        lambda job, *_: f"suspend {'true' if job.suspended else 'false'}",
        lambda job: job.suspended,
    ),
    # Resumed (e.g. re-admitted by Kueue) but not reconciled yet: the operator flips
    # Suspended to False and resets startTime to now before its deadline check, so the
    # startTime read here is stale and the job is not overdue.
    _skip_if(
        SkipReason.RESUMING,
        lambda job, *_: (
            "condition Suspended=True" if job.suspended_condition else "no Suspended=True condition"
        ),
        lambda job: job.suspended_condition,
        lambda _job: (
            "Suspended=True but suspend is not set: the operator restarts its clock on resume"
        ),
        with_overdue=False,
    ),
    _skip_if(
        SkipReason.NO_DEADLINE,
        lambda job, *_: (
            "activeDeadlineSeconds unset"
            if job.deadline_seconds is None
            else f"activeDeadlineSeconds {job.deadline_seconds} ({human(job.deadline_seconds)})"
        ),
        lambda job: job.deadline_seconds is None,
        with_overdue=False,
    ),
    _skip_if(
        SkipReason.NOT_STARTED,
        lambda job, *_: f"startTime {_stamp(job.start_time)}",
        lambda job: job.deadline is None,
        with_overdue=False,
    ),
    # The one rule that reads the clock, after every rule that does not (due_at relies on it).
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


def due_at(job: Job, policy: Policy) -> datetime | None:
    """Compute the instant from which :func:`judge` acts on the job, if the job stays as it is.

    Pure. This is what a long-running sweeper arms a timer for: for every ``now`` before the
    instant, ``judge(job, now, policy)`` is a skip; at it and after, an action (property tests
    hold the two functions to that). Any change to the job (a resume, a new deadline, a touch,
    a finish) gives a new instant, so the caller recomputes it on every change.

    The rules that do not read the clock are asked as they stand (:attr:`Rule.premise`); the
    instant is then the sums judge compares ``now`` against, so the boundary is the same
    instant to the microsecond.

    Args:
        job: The job.
        policy: The knobs (``max_actions`` is a per-pass cap and plays no part).

    Returns:
        ``startTime + activeDeadlineSeconds + grace``; for ``touch`` and ``auto`` on a job the
        sweeper touched after its deadline, the later of that and the touch plus
        ``escalate_after`` (or ``retouch_after`` while quick touches are left), and for
        ``auto`` no later than ``escalate_after`` past the deadline and grace; :data:`ALWAYS`
        when the only work left does not depend on time (the pods of a job failed by its
        deadline); ``None`` when judge never acts on it, an instant after ``datetime.max``
        included (sums saturate: a touched-at near the year 9999 or a huge ``--grace`` never
        raises).
    """
    for rule in RULES:
        if rule.premise is None:
            break  # not-yet-due and the overdue rule: the sums below
        if rule.premise(job):
            # This rule decides whatever the clock, so judge says the same at every instant.
            return ALWAYS if isinstance(rule.decide(job, ALWAYS, policy, None), Action) else None
    deadline = job.deadline
    if deadline is None:  # not reached: not-started's premise
        return None
    due = _later(deadline, policy.grace)
    if due is None or policy.action is ActionMode.FAIL:
        return due
    touched = current_touch(job)
    if touched is None:
        return due
    steps = [_later(touched, policy.escalate_after)]
    if _quick_retouch(touched, due, policy):
        steps.append(_later(touched, policy.retouch_after))
    if policy.action is ActionMode.AUTO:
        steps.append(_escalation(deadline, policy))
    first = min((step for step in steps if step is not None), default=None)
    return None if first is None else max(due, first)


def _later(moment: datetime, seconds: float) -> datetime | None:
    # moment + seconds (rounded to the microsecond, as timedelta does); None ("never") past
    # datetime.max or timedelta's range (a --grace of 1e15 s): no now reaches it.
    try:
        return moment + timedelta(seconds=seconds)
    except OverflowError:
        return None


def _reached(now: datetime, moment: datetime | None) -> bool:
    return moment is not None and now >= moment


def _escalation(deadline: datetime, policy: Policy) -> datetime | None:
    # auto fails a job escalate_after past its deadline and grace, touched or not.
    return _later(deadline, policy.grace + policy.escalate_after)


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
    touched = current_touch(job)
    since = None if touched is None else (now - touched).total_seconds()  # as reported
    if policy.action is ActionMode.AUTO:
        # Escalation never waits for a touch to have been written: while the operator is down
        # its webhooks refuse every update, so no touch annotation ever appears.
        past_grace = overdue - policy.grace
        if _reached(now, _escalation(deadline, policy)):
            return Action(
                job,
                ActionKind.FAIL,
                Why.ESCALATED,
                overdue,
                f"{late}, not failed {human(past_grace)} past its deadline and grace",
            )
        if touched is not None and _reached(now, _later(touched, policy.escalate_after)):
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
    escalated = _reached(now, _later(touched, policy.escalate_after))
    if escalated or (quick and _reached(now, _later(touched, policy.retouch_after))):
        why = "" if escalated else " (the operator judges with its own clock)"
        return Action(
            job,
            ActionKind.TOUCH,
            Why.RETOUCH,
            overdue,
            f"{late}, still running {human(since)} after the sweeper's touch{why}",
        )
    again = policy.retouch_after if quick else policy.escalate_after
    if policy.action is ActionMode.AUTO:
        # The overdue seconds are rounded as reported: within half a millisecond of the
        # escalation they may already say it is due; the text then says 0 s, never less.
        left = max(
            min(policy.escalate_after - since, policy.escalate_after - (overdue - policy.grace)),
            0.0,
        )
        follow_up = f"fails in {human(left)}"
        if quick and again - since < left:
            follow_up = f"touches again in {human(again - since)}, {follow_up}"
    else:
        follow_up = f"touches again in {human(again - since)}"
    return Skip(
        job, SkipReason.RECENTLY_TOUCHED, overdue, f"touched {human(since)} ago; {follow_up}"
    )
