"""The Training Operator v1 family: TFJob, PyTorchJob, XGBoostJob, MPIJob v1, PaddleJob, JAXJob.

(MXJob too, up to v1.8.x.) What the operator does is in docs/operator.md: it checks
``spec.runPolicy.activeDeadlineSeconds`` against ``status.startTime`` only while it reconciles a
job, and nothing wakes it at the deadline. So an overdue job is **touched** (an annotation
patch: the operator reconciles and fails it itself) or **failed** by the sweeper (the status the
operator would write); ``auto`` touches, then fails. Once a job is failed by its deadline, the
pods it still runs are reclaimed whatever the action: v1.9.4 keeps them by default
(``cleanPodPolicy`` absent means ``None``). A deadline the job does not carry (a platform
rule's default or cap, ``sweeper.core.platform``) cannot be enforced by a touch, as the operator
reads the job's own field alone: the sweeper fails the job, whatever ``--action``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sweeper.core.clock import DATE_RESOLUTION_S, human
from sweeper.core.jobs import DeadlineSource, Job
from sweeper.core.kinds import (
    JAXJOB,
    MPIJOB,
    MXJOB,
    OPERATOR_PODS,
    PADDLEJOB,
    PYTORCHJOB,
    TFJOB,
    TRAINING_OPERATOR,
    VERSION,
    XGBOOSTJOB,
    Resource,
)
from sweeper.core.model import (
    JSON,
    Action,
    ActionKind,
    ActionMode,
    DeadlineWrite,
    Entry,
    Policy,
    Skip,
    SkipReason,
    Why,
)
from sweeper.core.patches import failure_message, status_patch
from sweeper.core.platform import source_note
from sweeper.core.rules import (
    ALWAYS,
    NO_PODS_LEFT,
    PODS_RECLAIMED,
    Rule,
    at_once,
    later,
    pods_left,
    pods_reclaimed,
    reached,
    reclaim_pods,
    reclaim_pods_words,
    stamp,
)

NAME = "training-operator"
SERVES = tuple(
    (kind, VERSION) for kind in (TFJOB, PYTORCHJOB, XGBOOSTJOB, MPIJOB, PADDLEJOB, JAXJOB, MXJOB)
)
MANAGED_BY = TRAINING_OPERATOR
LEFTOVERS = OPERATOR_PODS


# The pods its deadline failure leaves, as --terminate-pods deletes them.
reclaim_words = reclaim_pods_words


def _decide_not_yet_due(
    job: Job, now: datetime, policy: Policy, overdue: float | None
) -> Entry | None:
    deadline = job.deadline
    if deadline is None:
        return None
    due = later(deadline, policy.grace)
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
    if _platform(job):
        late = f"{human(overdue)} past its deadline ({source_note(job)})"
        return Action(job, ActionKind.FAIL, Why.PLATFORM_DEADLINE, overdue, late)
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


def _ahead(touched: datetime | None, now: datetime, policy: Policy) -> bool:
    # A stamp later than now by more than the clock skew the sweeper tolerates (--grace, and
    # the Date header's whole second) is no touch of its own but a tenant's: counted, it would
    # stop every touch until then.
    horizon = later(now, policy.grace + DATE_RESOLUTION_S)
    return touched is not None and horizon is not None and touched > horizon


def _counted_touch(job: Job, now: datetime, policy: Policy) -> datetime | None:
    touched = current_touch(job)
    return None if _ahead(touched, now, policy) else touched


def seen_finished(job: Job, *_: object) -> str:
    """The job's end, and who failed it by its deadline."""
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
    return f"deadline {stamp(job.deadline)} ({when}), grace {human(policy.grace)}"


def _seen_touch(job: Job, now: datetime, policy: Policy, overdue: float | None) -> str:
    touched = "never touched" if job.touched_at is None else f"touched at {stamp(job.touched_at)}"
    if _ahead(job.touched_at, now, policy):
        touched += " (later than now: counts as none)"
    escalate = human(policy.escalate_after)
    if job.deadline_source is not DeadlineSource.JOB:
        return f"deadline {source_note(job)}: failed by the sweeper whatever --action"
    if policy.action is ActionMode.FAIL:
        return f"--action {policy.action.value}, {touched}"
    if policy.retouch_limit > 0 and policy.retouch_after < policy.escalate_after:
        quick = f"re-touch after {human(policy.retouch_after)} (up to {policy.retouch_limit}x)"
    else:
        quick = "no quick re-touch"
    return f"--action {policy.action.value}, {touched}, {quick}, escalate after {escalate}"


RULES: tuple[Rule, ...] = (
    # The one rule that reads the clock, after every rule that does not (due_at relies on it).
    Rule(SkipReason.NOT_YET_DUE.value, _seen_deadline, _decide_not_yet_due),
    # The last rule: the job is overdue; touch, fail or wait for the escalation.
    Rule("overdue", _seen_touch, _due),
)


def due_at(job: Job, now: datetime, policy: Policy) -> datetime | None:
    """The instant from which the rules act on a started job with a deadline, from ``now`` on.

    Returns:
        ``startTime + activeDeadlineSeconds + grace``; for ``touch`` and ``auto`` on a job the
        sweeper touched after its deadline, the later of that and the touch plus
        ``escalate_after`` (or ``retouch_after`` while quick touches are left), and for
        ``auto`` no later than ``escalate_after`` past the deadline and grace. A touch stamp
        still ahead of the clock when the job falls due (or at ``now``, if later) is none.
    """
    deadline = job.deadline
    if deadline is None:  # not reached: not-started's premise
        return None
    due = later(deadline, policy.grace)
    if due is None or policy.action is ActionMode.FAIL or _platform(job):
        return due
    # The first instant the rules could act at is where they read the stamp: one ahead of it
    # (a tenant's) counts as none there and before; one not ahead never is again.
    touched = _counted_touch(job, max(now, due), policy)
    if touched is None:
        return due
    steps = [later(touched, policy.escalate_after)]
    if _quick_retouch(touched, due, policy):
        steps.append(later(touched, policy.retouch_after))
    if policy.action is ActionMode.AUTO:
        steps.append(_escalation(deadline, policy))
    first = min((step for step in steps if step is not None), default=None)
    return None if first is None else max(due, first)


def _platform(job: Job) -> bool:
    # The operator never sees this deadline: a touch would wake it for nothing.
    return job.deadline_source is not DeadlineSource.JOB


def _escalation(deadline: datetime, policy: Policy) -> datetime | None:
    # auto fails a job escalate_after past its deadline and grace, touched or not.
    return later(deadline, policy.grace + policy.escalate_after)


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


def finished(job: Job, _now: datetime, policy: Policy, overdue: float | None) -> Entry:
    """The pods of a job its deadline failed are reclaimed; any other end is left alone."""
    if job.finished == "Failed" and job.failed_by_deadline:
        # v1.9.4 keeps the pods of a job its deadline failed unless cleanPodPolicy says
        # otherwise, and a sweeper interrupted between its status write and its deletes
        # leaves pods too: they are reclaimed whatever the action.
        return reclaim_pods(job, policy, overdue)
    return Skip(job, SkipReason.FINISHED, overdue, job.finished or "")


def finished_due(job: Job, policy: Policy) -> datetime | None:
    """At once for the pods of a job its deadline failed; never for any other end."""
    return at_once(finished(job, ALWAYS, policy, None))


def _overdue(job: Job, now: datetime, deadline: datetime, policy: Policy, overdue: float) -> Entry:
    late = f"{human(overdue)} past its deadline"
    if policy.action is ActionMode.FAIL:
        return Action(job, ActionKind.FAIL, Why.OVERDUE, overdue, late)
    touched = _counted_touch(job, now, policy)
    since = None if touched is None else (now - touched).total_seconds()  # as reported
    if policy.action is ActionMode.AUTO:
        # Escalation never waits for a touch to have been written: while the operator is down
        # its webhooks refuse every update, so no touch annotation ever appears.
        past_grace = overdue - policy.grace
        if reached(now, _escalation(deadline, policy)):
            return Action(
                job,
                ActionKind.FAIL,
                Why.ESCALATED,
                overdue,
                f"{late}, not failed {human(past_grace)} past its deadline and grace",
            )
        if touched is not None and reached(now, later(touched, policy.escalate_after)):
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
    due = later(deadline, policy.grace)
    quick = due is not None and _quick_retouch(touched, due, policy)
    escalated = reached(now, later(touched, policy.escalate_after))
    if escalated or (quick and reached(now, later(touched, policy.retouch_after))):
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


# --- its writes: the fail, what it leaves, and the deadline it never takes ---------------------

RECLAIM_REASON = PODS_RECLAIMED
NOTHING_LEFT = NO_PODS_LEFT
leftovers = pods_left
reclaimed_event = pods_reclaimed


def recreates_pods(_job: Job) -> bool:
    """The operator re-creates no pod of a finished job."""
    return False


def fail_patch(job: Job, raw: JSON, now: datetime) -> JSON:
    """The status the operator writes at a deadline (``sweeper.core.patches.status_patch``)."""
    return status_patch(job.kind, raw, now, source=source_note(job))


def failed_event(job: Job, late: str, _deleted: Sequence[str]) -> str:
    """The Event's message once the sweeper failed the job."""
    return f"{failure_message(job.name, source_note(job))}: {late} past its deadline"


def carrier(job: Job) -> tuple[Resource, str]:
    """The job itself: the operator reads no deadline but the job's own, so none is written."""
    return job.kind.at(job.version), job.name


def deadline_write(_action: Action, _target: JSON | None) -> DeadlineWrite | Action | str:
    """Never: a platform deadline of this family is the sweeper's to enforce (it fails)."""
    return "the Training Operator enforces the job's own deadline only"
