"""The Training Operator v1 family: TFJob, PyTorchJob, XGBoostJob, MPIJob v1, PaddleJob, JAXJob.

(MXJob too, up to v1.8.x.) The operator checks its deadline only while it reconciles a job
(docs/operator.md): an overdue job is **touched** (it then fails it) or **failed** by the
sweeper, as ``--action`` says; its pods are then reclaimed, which v1.9.4 keeps by default. A
deadline the job does not carry (a platform rule's) only the sweeper can enforce: it fails it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sweeper.core.clock import DATE_RESOLUTION_S, human
from sweeper.core.families import pods
from sweeper.core.jobs import DeadlineSource, Job
from sweeper.core.kinds import VERSION, Kind, Resource
from sweeper.core.model import (
    JSON,
    Action,
    ActionKind,
    ActionMode,
    Enforcement,
    Entry,
    Skip,
    SkipReason,
    Why,
)
from sweeper.core.patches import DeadlineWrite, failure_message, status_patch
from sweeper.core.platform import source_note
from sweeper.core.rules import (
    ALWAYS,
    Rule,
    at_once,
    current_touch,
    due,
    later,
    reached,
    seen_deadline,
    stamp,
)

TFJOB = Kind("TFJob", "tfjobs", "tfReplicaSpecs")
PYTORCHJOB = Kind("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs")
XGBOOSTJOB = Kind("XGBoostJob", "xgboostjobs", "xgbReplicaSpecs")
MPIJOB = Kind("MPIJob", "mpijobs", "mpiReplicaSpecs", legacy_clean_pod_policy=True)
PADDLEJOB = Kind("PaddleJob", "paddlejobs", "paddleReplicaSpecs")
JAXJOB = Kind("JAXJob", "jaxjobs", "jaxReplicaSpecs", checks_managed_by=False)
# Served up to v1.8.x only (v1.9.0 removed it, kubeflow/trainer#2150); discovery finds it where
# it is served. Its RunPolicy has no managedBy (added in v1.9.0, after MXJob was gone), so no
# release ever skipped an MXJob for it: like JAXJob, it is judged whatever managedBy says.
MXJOB = Kind("MXJob", "mxjobs", "mxReplicaSpecs", checks_managed_by=False)

NAME = "training-operator"
SERVES = tuple(
    (kind, VERSION) for kind in (TFJOB, PYTORCHJOB, XGBOOSTJOB, MPIJOB, PADDLEJOB, JAXJOB, MXJOB)
)
MANAGED_BY = "kubeflow.org/training-operator"
# The pods its deadline failure leaves, as --terminate-pods deletes them.
LEFTOVERS, RECLAIM_REASON, NOTHING_LEFT = pods.LEFTOVERS, pods.RECLAIM_REASON, pods.NOTHING_LEFT
PODS = LEFTOVERS
leftovers, reclaimed_event, reclaim_words = pods.leftovers, pods.reclaimed_event, pods.reclaim_words


def _decide_not_yet_due(
    job: Job, now: datetime, enforcement: Enforcement, overdue: float | None
) -> Entry | None:
    deadline = job.deadline
    if deadline is None:
        return None
    at = due(job, enforcement)
    if reached(now, at):
        return None
    # No due instant within datetime's range (a --grace of 1e15 s): never due.
    left = (
        enforcement.grace - (now - deadline).total_seconds()
        if at is None
        else (at - now).total_seconds()
    )
    return Skip(job, SkipReason.NOT_YET_DUE, overdue, f"due in {human(left)}")


def _due(job: Job, now: datetime, enforcement: Enforcement, overdue: float | None) -> Entry:
    # Reached only by a started job with a deadline (the rules before let nothing else by).
    deadline = job.deadline
    if deadline is None or overdue is None:
        return Skip(job, SkipReason.NOT_STARTED)
    if _platform(job):
        late = f"{human(overdue)} past its deadline ({source_note(job)})"
        return Action(job, ActionKind.FAIL, Why.PLATFORM_DEADLINE, overdue, late)
    return _overdue(job, now, deadline, enforcement, overdue)


def _ahead(touched: datetime | None, now: datetime, enforcement: Enforcement) -> bool:
    # A stamp later than now by more than the clock skew the sweeper tolerates (--grace, and
    # the Date header's whole second) is no touch of its own but a tenant's: counted, it would
    # stop every touch until then.
    horizon = later(now, enforcement.grace + DATE_RESOLUTION_S)
    return touched is not None and horizon is not None and touched > horizon


def _counted_touch(job: Job, now: datetime, enforcement: Enforcement) -> datetime | None:
    touched = current_touch(job)
    return None if _ahead(touched, now, enforcement) else touched


def seen_finished(job: Job, *_: object) -> str:
    """The job's end, and who failed it by its deadline."""
    seen = f"condition {job.finished}=True"
    if job.failed_by_deadline:
        who = "sweeper" if job.failed_by_sweeper else "operator"
        seen += f", failed by its deadline by the {who}"
    return seen


def _seen_touch(job: Job, now: datetime, enforcement: Enforcement, overdue: float | None) -> str:
    touched = "never touched" if job.touched_at is None else f"touched at {stamp(job.touched_at)}"
    if _ahead(job.touched_at, now, enforcement):
        touched += " (later than now: counts as none)"
    escalate = human(enforcement.escalate_after)
    if job.deadline_source is not DeadlineSource.JOB:
        return f"deadline {source_note(job)}: failed by the sweeper whatever --action"
    if enforcement.action is ActionMode.FAIL:
        return f"--action {enforcement.action.value}, {touched}"
    if enforcement.retouch_limit > 0 and enforcement.retouch_after < enforcement.escalate_after:
        limit = enforcement.retouch_limit
        quick = f"re-touch after {human(enforcement.retouch_after)} (up to {limit}x)"
    else:
        quick = "no quick re-touch"
    return f"--action {enforcement.action.value}, {touched}, {quick}, escalate after {escalate}"


RULES: tuple[Rule, ...] = (
    # The one rule that reads the clock, after every rule that does not (due_at relies on it).
    Rule(SkipReason.NOT_YET_DUE.value, seen_deadline("deadline", grace=True), _decide_not_yet_due),
    # The last rule: the job is overdue; touch, fail or wait for the escalation.
    Rule("overdue", _seen_touch, _due),
)


def due_at(job: Job, now: datetime, enforcement: Enforcement) -> datetime | None:
    """The instant from which the rules act on a started job with a deadline, from ``now`` on.

    Returns:
        ``startTime + activeDeadlineSeconds + grace``; for ``touch`` and ``auto`` on a job the
        sweeper touched after its deadline, the later of that and the touch plus
        ``escalate_after`` (or ``retouch_after`` while quick touches are left), and for
        ``auto`` no later than ``escalate_after`` past the deadline and grace. A touch stamp
        still ahead of the clock when the job falls due (or at ``now``, if later) is none.
    """
    deadline, at = job.deadline, due(job, enforcement)
    if deadline is None or at is None or enforcement.action is ActionMode.FAIL or _platform(job):
        return at
    # The first instant the rules could act at is where they read the stamp: one ahead of it
    # (a tenant's) counts as none there and before; one not ahead never is again.
    touched = _counted_touch(job, max(now, at), enforcement)
    if touched is None:
        return at
    steps = [later(touched, enforcement.escalate_after)]
    if _quick_retouch(touched, at, enforcement):
        steps.append(later(touched, enforcement.retouch_after))
    if enforcement.action is ActionMode.AUTO:
        steps.append(_escalation(deadline, enforcement))
    first = min((step for step in steps if step is not None), default=None)
    return None if first is None else max(at, first)


def _platform(job: Job) -> bool:
    # The operator never sees this deadline: a touch would wake it for nothing.
    return job.deadline_source is not DeadlineSource.JOB


def _escalation(deadline: datetime, enforcement: Enforcement) -> datetime | None:
    # auto fails a job escalate_after past its deadline and grace, touched or not.
    return later(deadline, enforcement.grace + enforcement.escalate_after)


def _quick_retouch(touched: datetime, due: datetime, enforcement: Enforcement) -> bool:
    # A quick touch follows a touch written less than retouch_limit x retouch_after after the
    # job became due. Each touch is at least retouch_after after the previous one and the
    # first is at or after due, so touch number k+1 is at least k x retouch_after past due:
    # at most retouch_limit quick touches per deadline, counted from the one annotation the
    # sweeper already writes. A touch written long after due (the sweeper was down) gets none:
    # the operator's clock is not that far behind.
    if enforcement.retouch_limit <= 0 or enforcement.retouch_after >= enforcement.escalate_after:
        return False
    return (touched - due).total_seconds() < enforcement.retouch_limit * enforcement.retouch_after


def finished(job: Job, _now: datetime, enforcement: Enforcement, overdue: float | None) -> Entry:
    """The pods of a job its deadline failed are reclaimed; any other end is left alone."""
    if job.finished == "Failed" and job.failed_by_deadline:
        # v1.9.4 keeps the pods of a job its deadline failed unless cleanPodPolicy says
        # otherwise, and a sweeper interrupted between its status write and its deletes
        # leaves pods too: they are reclaimed whatever the action.
        return pods.reclaim(job, enforcement, overdue)
    return Skip(job, SkipReason.FINISHED, overdue, job.finished or "")


def finished_due(job: Job, enforcement: Enforcement) -> datetime | None:
    """At once for the pods of a job its deadline failed; never for any other end."""
    return at_once(finished(job, ALWAYS, enforcement, None))


def _overdue(
    job: Job, now: datetime, deadline: datetime, enforcement: Enforcement, overdue: float
) -> Entry:
    late = f"{human(overdue)} past its deadline"
    if enforcement.action is ActionMode.FAIL:
        return Action(job, ActionKind.FAIL, Why.OVERDUE, overdue, late)
    touched = _counted_touch(job, now, enforcement)
    since = None if touched is None else (now - touched).total_seconds()  # as reported
    running = "" if since is None else f"still running {human(since)}"
    after_touch = f"{late}, {running} after the sweeper's touch"
    if enforcement.action is ActionMode.AUTO:
        # Escalation never waits for a touch to have been written: while the operator is down
        # its webhooks refuse every update, so no touch annotation ever appears.
        if reached(now, _escalation(deadline, enforcement)):
            past_grace = (
                f"{late}, not failed {human(overdue - enforcement.grace)} past its deadline"
            )
            return Action(job, ActionKind.FAIL, Why.ESCALATED, overdue, f"{past_grace} and grace")
        if touched is not None and reached(now, later(touched, enforcement.escalate_after)):
            return Action(job, ActionKind.FAIL, Why.ESCALATED, overdue, after_touch)
    if touched is None or since is None:
        return Action(job, ActionKind.TOUCH, Why.OVERDUE, overdue, late)
    # The same sum _decide_not_yet_due and due_at use, so every boundary is the same instant.
    at = due(job, enforcement)
    quick = at is not None and _quick_retouch(touched, at, enforcement)
    escalated = reached(now, later(touched, enforcement.escalate_after))
    if escalated or (quick and reached(now, later(touched, enforcement.retouch_after))):
        why = "" if escalated else " (the operator judges with its own clock)"
        return Action(job, ActionKind.TOUCH, Why.RETOUCH, overdue, f"{after_touch}{why}")
    again = enforcement.retouch_after if quick else enforcement.escalate_after
    if enforcement.action is ActionMode.AUTO:
        # The overdue seconds are rounded as reported: within half a millisecond of the
        # escalation they may already say it is due; the text then says 0 s, never less.
        left = max(
            min(
                enforcement.escalate_after - since,
                enforcement.escalate_after - (overdue - enforcement.grace),
            ),
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
