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

from datetime import datetime

from sweeper.core.clock import human
from sweeper.core.jobs import DeadlineSource, Job
from sweeper.core.kinds import TRAINER
from sweeper.core.model import Action, ActionKind, Entry, Policy, Skip, SkipReason, Why
from sweeper.core.rules import (
    ALWAYS,
    BEING_DELETED,
    DURATION_OVERFLOW,
    MALFORMED,
    NO_DEADLINE,
    NOT_STARTED,
    OPTED_OUT,
    RESUMING,
    SUSPENDED,
    Rule,
    later,
    managed_elsewhere,
    premise_due,
    stamp,
)

NAME = "trainer"


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
        left = "never" if due is None else f"in {human((due - now).total_seconds())}"
        return Skip(
            job,
            SkipReason.NOT_YET_DUE,
            overdue,
            f"capped at {human(seconds)} ({_platform_source(job)}); due {left}",
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


def _finished(job: Job, now: datetime, policy: Policy, overdue: float | None) -> Entry | None:
    if job.finished is None:
        return None
    if not _deadline_failure(job):
        return Skip(job, SkipReason.FINISHED, overdue, job.finished)
    due = _reclaim_at(job, policy)
    if due is None or now < due:
        left = "never" if due is None else f"in {human((due - now).total_seconds())}"
        return Skip(
            job,
            SkipReason.RECLAIM_LATER,
            overdue,
            f"failed by its deadline; its JobSet is checked {left} (--reclaim-grace)",
        )
    return Action(
        job,
        ActionKind.DELETE_JOBSET,
        Why.JOBSET_LEFT,
        overdue,
        f"failed by its deadline at {stamp(job.failed_at)}; its JobSet may still run",
    )


def _seen_finished(job: Job, _now: datetime, policy: Policy, _overdue: float | None) -> str:
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
    MALFORMED,
    # The controller skips MultiKueue's TrainJobs: the worker cluster's sweeper sees them.
    managed_elsewhere(TRAINER),
    BEING_DELETED,
    OPTED_OUT,
    # Reads the clock (--reclaim-grace): due_at below times it.
    Rule(SkipReason.FINISHED.value, _seen_finished, _finished),
    SUSPENDED,
    # setSuspendedCondition flips Suspended to False, restarting the clock, before
    # reconcileDeadline reads it: until then creation + a cap reads as long past.
    RESUMING,
    NO_DEADLINE,
    DURATION_OVERFLOW,
    NOT_STARTED,
    # Reads the clock for a cap (due_at below times it).
    Rule(Why.PLATFORM_DEADLINE.value, _seen_platform, _platform),
    Rule("controller-enforced", _seen_deadline, _running),
)


def due_at(job: Job, policy: Policy) -> datetime | None:
    """When the sweeper acts on a TrainJob that stays as it is; ``None`` when it never does.

    The JobSet of a TrainJob failed by its deadline, ``--reclaim-grace`` after the failure (at
    once after the sweeper's); a platform deadline the TrainJob lacks, at once; a platform cap
    below its own deadline, at the cap and ``--grace``.
    """
    fixed, instant = premise_due(RULES, job, policy)
    if fixed:
        return instant
    if job.finished is not None:
        return _reclaim_at(job, policy) if _deadline_failure(job) else None
    if (
        job.suspended
        or job.suspended_condition
        or job.deadline is None
        or job.deadline_source is DeadlineSource.JOB
    ):
        return None
    return ALWAYS if job.declared_seconds is None else _cap_due(job, policy)
