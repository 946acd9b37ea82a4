"""Trainer v2's TrainJob (``trainer.kubeflow.org/v1alpha1``, v2.2.0 to v2.3.x).

The trainer enforces ``spec.activeDeadlineSeconds`` itself, from creation or the last resume,
and deletes the TrainJob's JobSet once, never retried (kubeflow/trainer#3833). So the sweeper
deletes the JobSet of a TrainJob failed by its deadline ``--reclaim-grace`` after the failure,
reports one still running that long past its deadline, writes a platform deadline the
TrainJob lacks into its spec (immutable once set), and fails at the cap one whose own is
longer, deleting its JobSet at once (docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sweeper.core.clock import format_rfc3339, human
from sweeper.core.jobs import DeadlineSource, Job, Owned
from sweeper.core.kinds import COMPONENT, DEADLINE_EXCEEDED, Kind, Leftovers, Reading, Resource
from sweeper.core.kinds import PODS as PODS_RESOURCE
from sweeper.core.model import JSON, Action, ActionKind, Enforcement, Entry, Skip, SkipReason, Why
from sweeper.core.patches import DeadlineWrite, deadline_patch, guarded
from sweeper.core.platform import rule_source, source_note
from sweeper.core.rules import (
    ALWAYS,
    Rule,
    due,
    later,
    own_deadline,
    reached,
    seen_deadline,
    stamp,
    when,
)

TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_VERSION = "v1alpha1"
# Its clock is creation or the last resume (trainjob_controller.go, reconcileDeadline); its own
# fields sit on spec, it ends Complete (copied from JobSet's Completed), and its deadline
# failure is a reason.
_READING = Reading(
    run_policy=False,
    succeeded="Complete",
    created_clock=True,
    failure_reason=True,
    clean_pod_policy=False,
    failed_at=True,
)
TRAINJOB = Kind(
    "TrainJob", "trainjobs", "", group=TRAINER_GROUP, readings=((TRAINER_VERSION, _READING),)
)

NAME = "trainer"
SERVES: tuple[tuple[Kind, str], ...] = ((TRAINJOB, TRAINER_VERSION),)
# The controller skips MultiKueue's TrainJobs (the only other value its CRD allows): the worker
# cluster's sweeper sees them.
MANAGED_BY = "trainer.kubeflow.org/trainjob-controller"
# A TrainJob's pods are its JobSet's Jobs': the sweeper reclaims the JobSet.
# The trainer gives its JobSets no label: every JobSet of a scope is listed.
JOBSET_GROUP, JOBSET_VERSION = "jobset.x-k8s.io", "v1alpha2"
LEFTOVERS = Leftovers(Resource(JOBSET_GROUP, JOBSET_VERSION, "jobsets"))
# The pods of its JobSet's Jobs, labelled with the JobSet's name (jobset v0.12,
# labelAndAnnotateObject), which is the TrainJob's.
PODS = Leftovers(PODS_RESOURCE, "jobset.sigs.k8s.io/jobset-name")


def reclaim_words(_enforcement: Enforcement) -> str:
    """Its JobSet, deleted."""
    return "then its JobSet is deleted, giving its GPUs back"


def _deadline_failure(job: Job) -> bool:
    return job.finished == "Failed" and job.failed_by_deadline


def _reclaim_at(job: Job, enforcement: Enforcement) -> datetime | None:
    # A garbled lastTransitionTime gives no instant to wait from: the JobSet is due now. A
    # failure the sweeper wrote (a platform cap) is never followed by the trainer's delete.
    if job.failed_at is None or job.failed_by_sweeper:
        return ALWAYS
    return later(job.failed_at, enforcement.reclaim_grace)


def _platform(
    job: Job, now: datetime, enforcement: Enforcement, overdue: float | None
) -> Entry | None:
    if job.deadline_source is DeadlineSource.JOB or job.deadline_seconds is None:
        return None
    seconds, source = job.deadline_seconds, rule_source(job)
    if job.declared_seconds is None:
        written = f"activeDeadlineSeconds {seconds} ({human(seconds)}, {source}) written"
        detail = f"{written} for the trainer controller to enforce"
        return Action(job, ActionKind.SET_DEADLINE, Why.PLATFORM_DEADLINE, overdue, detail)
    at = due(job, enforcement)
    if not reached(now, at):
        capped = f"capped at {human(seconds)} ({source})"
        return Skip(job, SkipReason.NOT_YET_DUE, overdue, f"{capped}; due {when(at, now)}")
    longer = f"its own activeDeadlineSeconds {job.declared_seconds} is longer and immutable"
    detail = f"{human(overdue or 0.0)} past {human(seconds)}, {source}; {longer}"
    return Action(job, ActionKind.FAIL, Why.PLATFORM_DEADLINE, overdue, detail)


def _seen_platform(job: Job, *_: object) -> str:
    if job.deadline_source is DeadlineSource.JOB:
        if job.rule is None:
            return "the deadline is the TrainJob's own"
        return f"the TrainJob's own deadline is within platform rule {job.rule}"
    effective = f"effective {human(job.deadline_seconds or 0)}, {rule_source(job)}"
    return f"{effective}; {own_deadline(job)}"


def finished(job: Job, now: datetime, enforcement: Enforcement, overdue: float | None) -> Entry:
    """The JobSet of a TrainJob its deadline failed, ``--reclaim-grace`` after the failure."""
    if not _deadline_failure(job):
        return Skip(job, SkipReason.FINISHED, overdue, job.finished or "")
    at = _reclaim_at(job, enforcement)
    if not reached(now, at):
        checked = f"its JobSet is checked {when(at, now)} (--reclaim-grace)"
        return Skip(job, SkipReason.RECLAIM_LATER, overdue, f"failed by its deadline; {checked}")
    left = f"failed by its deadline at {stamp(job.failed_at)}; its JobSet may still run"
    return Action(job, ActionKind.DELETE_JOBSET, Why.JOBSET_LEFT, overdue, left)


def finished_due(job: Job, enforcement: Enforcement) -> datetime | None:
    """``--reclaim-grace`` after its deadline failure (at once after the sweeper's); else never."""
    return _reclaim_at(job, enforcement) if _deadline_failure(job) else None


def seen_finished(
    job: Job, _now: datetime, enforcement: Enforcement, _overdue: float | None
) -> str:
    """The TrainJob's end, and when its JobSet is due to be checked."""
    if not _deadline_failure(job):
        return f"condition {job.finished}=True"
    return (
        f"condition Failed=True, reason DeadlineExceeded at {stamp(job.failed_at)},"
        f" --reclaim-grace {human(enforcement.reclaim_grace)}"
    )


def _running(job: Job, _now: datetime, enforcement: Enforcement, overdue: float | None) -> Entry:
    if overdue is None or overdue < 0:
        left = "no deadline instant" if overdue is None else f"due in {human(-overdue)}"
        return Skip(job, SkipReason.NOT_YET_DUE, overdue, left)
    late = f"{human(overdue)} past its deadline"
    if overdue >= enforcement.grace + enforcement.reclaim_grace:
        why = f"{late} and not failed: is the trainer controller running?"
        return Skip(job, SkipReason.CONTROLLER_LATE, overdue, why)
    return Skip(
        job, SkipReason.OPERATOR_ENFORCED, overdue, f"{late}; the trainer controller fails it"
    )


RULES: tuple[Rule, ...] = (
    # Reads the clock for a cap (due_at below times it).
    Rule(Why.PLATFORM_DEADLINE.value, _seen_platform, _platform),
    Rule(
        "controller-enforced", seen_deadline("created or resumed + activeDeadlineSeconds"), _running
    ),
)


def due_at(job: Job, _now: datetime, enforcement: Enforcement) -> datetime | None:
    """When the sweeper acts on a running TrainJob that stays as it is; ``None``: never.

    A platform deadline the TrainJob lacks, at once; a platform cap below its own deadline, at
    the cap and ``--grace``.
    """
    if job.deadline_source is DeadlineSource.JOB:
        return None
    return ALWAYS if job.declared_seconds is None else due(job, enforcement)


# --- its writes: the fail at a cap, its JobSet, the deadline written into its spec ----------

RECLAIM_REASON = "DeadlineJobSetDeleted"
NOTHING_LEFT = "its JobSet is gone"
# Trainer v2.3.0's message for its own deadline failure (pkg/constants/constants.go:88).
DEADLINE_FAILURE = "TrainJob exceeded its active deadline"


def leftovers(owned: Sequence[Owned], job: Job, _enforcement: Enforcement) -> list[Owned]:
    """The JobSet the TrainJob controls, unless it is being deleted already."""
    return [o for o in owned if o.controller_uid == job.uid and not o.deleting]


def recreates_pods(job: Job) -> bool:
    """The JobSet of a running TrainJob, or of one Failed otherwise than by its deadline.

    v2.3.0 drops a Failed condition of another reason at each reconcile (``Reconcile``,
    ``removeFailedCondition``), then applies the JobSet it misses.
    """
    return job.finished is None or (job.finished == "Failed" and not job.failed_by_deadline)


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
    ``completionTime``.
    """
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
    return guarded(raw, status={"conditions": conditions})


def failed_event(job: Job, late: str, deleted: Sequence[str]) -> str:
    """The Event's message once the sweeper failed it at a cap and deleted its JobSet at once.

    As the trainer deletes it at its own deadline (it re-creates nothing for a finished one).
    """
    deleted_jobsets = ", ".join(deleted) or "none left"
    return f"{_failure_message(job)}: {late} past it; JobSet deleted: {deleted_jobsets}"


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
    when = "" if deadline is None else f" at {format_rfc3339(deadline)}"
    return DeadlineWrite(
        deadline_patch(target, seconds),
        f"Set spec.activeDeadlineSeconds to {seconds} ({source_note(job)}): the "
        f"trainer controller fails the TrainJob{when} ({COMPONENT})",
        warning=False,
    )
