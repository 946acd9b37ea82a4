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
"""

from __future__ import annotations

from datetime import datetime

from sweeper.core.clock import human
from sweeper.core.jobs import Job
from sweeper.core.kinds import TRAINER
from sweeper.core.model import Action, ActionKind, Entry, Policy, Skip, SkipReason, Why
from sweeper.core.rules import (
    ALWAYS,
    BEING_DELETED,
    MALFORMED,
    NO_DEADLINE,
    NOT_STARTED,
    OPTED_OUT,
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
    # A garbled lastTransitionTime gives no instant to wait from: the JobSet is due now.
    return ALWAYS if job.failed_at is None else later(job.failed_at, policy.reclaim_grace)


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
    NO_DEADLINE,
    NOT_STARTED,
    Rule("controller-enforced", _seen_deadline, _running),
)


def due_at(job: Job, policy: Policy) -> datetime | None:
    """When the JobSet of a TrainJob failed by its deadline is due; ``None`` for the others."""
    fixed, instant = premise_due(RULES, job, policy)
    if fixed:
        return instant
    return _reclaim_at(job, policy) if _deadline_failure(job) else None
