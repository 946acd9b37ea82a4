"""Trainer v2's TrainJob (``trainer.kubeflow.org/v1alpha1``, v2.2.0 to v2.3.x).

The trainer controller enforces ``spec.activeDeadlineSeconds`` itself, with a real requeue at
the deadline, counted from creation or the last resume (``trainjob_controller.go``,
``reconcileDeadline``): it sets ``Failed=True`` with reason ``DeadlineExceeded`` and deletes the
TrainJob's JobSet **once**. When that delete fails (a transient error, an admission webhook or
policy, a terminating namespace) it is never retried (kubeflow/trainer#3833; the fix is in no
release): the TrainJob says Failed while its pods keep their GPUs. So the sweeper:

- deletes the JobSet of a TrainJob failed by its deadline, ``--reclaim-grace`` after the
  failure (the executor checks that the JobSet is still there, not being deleted, and
  controlled by that TrainJob);
- never for another Failed reason (v2.3.0 re-creates the JobSet of such a TrainJob), never
  while it runs (the controller re-applies it), never for a MultiKueue-managed one;
- reports a running TrainJob still not failed ``--reclaim-grace`` past its deadline: its
  controller's to fail, so only a sign that the controller is down.

Under a platform rule (docs/policy.md), a deadline the TrainJob does not carry is enforced on
the trainer's own clock. ``spec.activeDeadlineSeconds`` may be added when absent but never
changed once set (the CRD's CEL rule ``self == oldSelf``, a transition rule that only applies
when both values exist): a TrainJob without one gets the effective deadline written
(``set-deadline``), the same seconds since the trainer counts them from the same instant, and
the trainer then fails it itself. A TrainJob whose own deadline is longer than the cap is
failed at the cap by the sweeper, as the trainer writes its deadline failure, and its JobSet
deleted at once: the trainer neither deletes it (only its own deadline check does) nor
re-creates it (it skips every object of a finished TrainJob).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sweeper.core.clock import format_rfc3339, human
from sweeper.core.jobs import DeadlineSource, Job, Owned
from sweeper.core.kinds import (
    COMPONENT,
    DEADLINE_EXCEEDED,
    JOBSET_GROUP,
    JOBSET_VERSION,
    TRAINER,
    TRAINER_VERSION,
    TRAINJOB,
    Kind,
    Leftovers,
    Resource,
)
from sweeper.core.model import (
    JSON,
    Action,
    ActionKind,
    DeadlineWrite,
    Entry,
    Policy,
    Skip,
    SkipReason,
    Why,
)
from sweeper.core.patches import deadline_patch
from sweeper.core.platform import source_note
from sweeper.core.rules import ALWAYS, Rule, later, stamp, when

NAME = "trainer"
SERVES: tuple[tuple[Kind, str], ...] = ((TRAINJOB, TRAINER_VERSION),)
# The controller skips MultiKueue's TrainJobs: the worker cluster's sweeper sees them.
MANAGED_BY = TRAINER
# A TrainJob's pods are its JobSet's Jobs': the sweeper reclaims the JobSet.
# The trainer gives its JobSets no label: every JobSet of a scope is listed.
LEFTOVERS = Leftovers(Resource(JOBSET_GROUP, JOBSET_VERSION, "jobsets"))


def reclaim_words(_policy: Policy) -> str:
    """Its JobSet, deleted."""
    return "then its JobSet is deleted, giving its GPUs back"


def _deadline_failure(job: Job) -> bool:
    return job.finished == "Failed" and job.failed_by_deadline


def _reclaim_at(job: Job, policy: Policy) -> datetime | None:
    # A garbled lastTransitionTime gives no instant to wait from: the JobSet is due now. A
    # failure the sweeper wrote (a platform cap) is never followed by the trainer's delete.
    if job.failed_at is None or job.failed_by_sweeper:
        return ALWAYS
    return later(job.failed_at, policy.reclaim_grace)


def _platform_source(job: Job) -> str:
    rule = f"rule {job.rule}" if job.rule else "no rule"
    return f"the {job.deadline_source.value} of platform {rule}"


def _platform(job: Job, now: datetime, policy: Policy, overdue: float | None) -> Entry | None:
    if job.deadline_source is DeadlineSource.JOB or job.deadline_seconds is None:
        return None
    seconds = job.deadline_seconds
    if job.declared_seconds is None:
        return Action(
            job,
            ActionKind.SET_DEADLINE,
            Why.PLATFORM_DEADLINE,
            overdue,
            f"activeDeadlineSeconds {seconds} ({human(seconds)}, {_platform_source(job)})"
            " written for the trainer controller to enforce",
        )
    due = _cap_due(job, policy)
    if due is None or now < due:
        return Skip(
            job,
            SkipReason.NOT_YET_DUE,
            overdue,
            f"capped at {human(seconds)} ({_platform_source(job)}); due {when(due, now)}",
        )
    return Action(
        job,
        ActionKind.FAIL,
        Why.PLATFORM_DEADLINE,
        overdue,
        f"{human(overdue or 0.0)} past {human(seconds)}, {_platform_source(job)}; its own"
        f" activeDeadlineSeconds {job.declared_seconds} is longer and immutable",
    )


def _cap_due(job: Job, policy: Policy) -> datetime | None:
    deadline = job.deadline
    return None if deadline is None else later(deadline, policy.grace)


def _seen_platform(job: Job, *_: object) -> str:
    if job.deadline_source is DeadlineSource.JOB:
        return (
            "the deadline is the TrainJob's own"
            if job.rule is None
            else (f"the TrainJob's own deadline is within platform rule {job.rule}")
        )
    own = (
        "none of its own"
        if job.declared_seconds is None
        else f"its own activeDeadlineSeconds {job.declared_seconds}"
    )
    return f"effective {human(job.deadline_seconds or 0)}, {_platform_source(job)}; {own}"


def finished(job: Job, now: datetime, policy: Policy, overdue: float | None) -> Entry:
    """The JobSet of a TrainJob its deadline failed, ``--reclaim-grace`` after the failure."""
    if not _deadline_failure(job):
        return Skip(job, SkipReason.FINISHED, overdue, job.finished or "")
    due = _reclaim_at(job, policy)
    if due is None or now < due:
        return Skip(
            job,
            SkipReason.RECLAIM_LATER,
            overdue,
            f"failed by its deadline; its JobSet is checked {when(due, now)} (--reclaim-grace)",
        )
    return Action(
        job,
        ActionKind.DELETE_JOBSET,
        Why.JOBSET_LEFT,
        overdue,
        f"failed by its deadline at {stamp(job.failed_at)}; its JobSet may still run",
    )


def finished_due(job: Job, policy: Policy) -> datetime | None:
    """``--reclaim-grace`` after its deadline failure (at once after the sweeper's); else never."""
    return _reclaim_at(job, policy) if _deadline_failure(job) else None


def seen_finished(job: Job, _now: datetime, policy: Policy, _overdue: float | None) -> str:
    """The TrainJob's end, and when its JobSet is due to be checked."""
    if job.finished is None:
        return "no Succeeded or Failed condition"
    if not _deadline_failure(job):
        return f"condition {job.finished}=True"
    return (
        f"condition Failed=True, reason DeadlineExceeded at {stamp(job.failed_at)},"
        f" --reclaim-grace {human(policy.reclaim_grace)}"
    )


def _running(job: Job, _now: datetime, policy: Policy, overdue: float | None) -> Entry:
    if overdue is None or overdue < 0:
        left = "no deadline instant" if overdue is None else f"due in {human(-overdue)}"
        return Skip(job, SkipReason.NOT_YET_DUE, overdue, left)
    if overdue >= policy.grace + policy.reclaim_grace:
        return Skip(
            job,
            SkipReason.CONTROLLER_LATE,
            overdue,
            f"{human(overdue)} past its deadline and not failed: is the trainer controller"
            " running?",
        )
    return Skip(
        job,
        SkipReason.OPERATOR_ENFORCED,
        overdue,
        f"{human(overdue)} past its deadline; the trainer controller fails it",
    )


def _seen_deadline(job: Job, _now: datetime, _policy: Policy, overdue: float | None) -> str:
    if job.deadline is None or overdue is None:
        return "no deadline instant"
    when = f"{human(overdue)} ago" if overdue >= 0 else f"in {human(-overdue)}"
    return f"created or resumed + activeDeadlineSeconds {stamp(job.deadline)} ({when})"


RULES: tuple[Rule, ...] = (
    # Reads the clock for a cap (due_at below times it).
    Rule(Why.PLATFORM_DEADLINE.value, _seen_platform, _platform),
    Rule("controller-enforced", _seen_deadline, _running),
)


def due_at(job: Job, _now: datetime, policy: Policy) -> datetime | None:
    """When the sweeper acts on a running TrainJob that stays as it is; ``None``: never.

    A platform deadline the TrainJob lacks, at once; a platform cap below its own deadline, at
    the cap and ``--grace``.
    """
    if job.deadline_source is DeadlineSource.JOB:
        return None
    return ALWAYS if job.declared_seconds is None else _cap_due(job, policy)


# --- its writes: the fail at a cap, its JobSet, the deadline written into its spec ----------

RECLAIM_REASON = "DeadlineJobSetDeleted"
NOTHING_LEFT = "its JobSet is gone"
# Trainer v2.3.0's message for its own deadline failure (pkg/constants/constants.go:88).
DEADLINE_FAILURE = "TrainJob exceeded its active deadline"


def leftovers(owned: Sequence[Owned], job: Job, _policy: Policy) -> list[Owned]:
    """The JobSet the TrainJob controls, unless it is being deleted already."""
    return [o for o in owned if o.controller_uid == job.uid and not o.deleting]


def recreates_pods(_job: Job) -> bool:
    """Its pods are its JobSet's Jobs', never re-created once the TrainJob finished."""
    return False


def reclaimed_event(_job: Job, deleted: Sequence[str], _companions: Sequence[str]) -> str:
    """The Event's message after its JobSet was deleted."""
    return (
        f"Deleted JobSet {', '.join(deleted)} of a TrainJob failed by its "
        f"deadline, which the trainer controller left running ({COMPONENT})"
    )


def _failure_message(job: Job) -> str:
    return f"{DEADLINE_FAILURE} ({source_note(job)}) (enforced by {COMPONENT})"


def fail_patch(job: Job, raw: JSON, now: datetime) -> JSON:
    """Fail a TrainJob as the trainer does at its deadline.

    The trainer sets ``Failed=True``, reason ``DeadlineExceeded`` and its message with
    ``meta.SetStatusCondition`` (trainjob_controller.go, ``setFailedCondition``): a
    ``metav1.Condition``, replaced in place when one of that type exists (with a new
    ``lastTransitionTime`` when its status changes), else appended. A TrainJob has no
    ``completionTime``. ``raw``'s ``resourceVersion`` guards the write.
    """
    meta = raw.get("metadata") or {}
    status = raw.get("status") or {}
    failed = {
        "type": "Failed",
        "status": "True",
        "reason": DEADLINE_EXCEEDED,
        "message": _failure_message(job),
        "lastTransitionTime": format_rfc3339(now),
    }
    conditions: list[JSON] = []
    for condition in status.get("conditions") or ():
        if condition.get("type") == "Failed":
            conditions.append(failed)
            failed = {}
        else:
            conditions.append(dict(condition))
    if failed:
        conditions.append(failed)
    return {
        "metadata": {"resourceVersion": meta.get("resourceVersion")},
        "status": {"conditions": conditions},
    }


def failed_event(job: Job, late: str, deleted: Sequence[str]) -> str:
    """The Event's message once the sweeper failed it at a cap and deleted its JobSet.

    The JobSet goes at once, as the trainer deletes it at its own deadline; the trainer
    re-creates nothing for a finished TrainJob (trainjob_controller.go, ``Reconcile``).
    """
    return (
        f"{_failure_message(job)}: {late} past it; JobSet"
        f" deleted: {', '.join(deleted) or 'none left'}"
    )


def carrier(job: Job) -> tuple[Resource, str]:
    """The TrainJob itself: the trainer enforces its own ``spec.activeDeadlineSeconds``."""
    return job.kind.at(job.version), job.name


def deadline_write(action: Action, target: JSON | None) -> DeadlineWrite | Action | str:
    """The effective deadline written into the TrainJob's spec (the trainer's own clock)."""
    job = action.job
    if target is None:  # pragma: no cover - the job itself, just read
        return "the TrainJob is gone"
    # The CRD's minimum is 1; the rule's durations are whole seconds of at least 1 anyway.
    seconds = max(job.deadline_seconds or 1, 1)
    deadline = job.deadline
    when = "" if deadline is None else f" at {deadline:%Y-%m-%dT%H:%M:%SZ}"
    return DeadlineWrite(
        deadline_patch(target, seconds),
        f"Set spec.activeDeadlineSeconds to {seconds} ({source_note(job)}): the "
        f"trainer controller fails the TrainJob{when} ({COMPONENT})",
        warning=False,
    )
