"""mpi-operator's MPIJob (``kubeflow.org/v2beta1``, v0.8.x): the deadline is the launcher Job's.

mpi-operator copies ``runPolicy.activeDeadlineSeconds`` into the launcher's batch/v1 Job only
when it creates it, and copies the Job's ``DeadlineExceeded`` failure back with a
``completionTime``. So the sweeper never touches an MPIJob: past the effective deadline it
writes into the launcher a deadline it does not carry (the Job controller then fails it at
once), fails a gang that has no launcher as mpi-operator records a failure, and reclaims the
workers of one failed by its deadline once ``completionTime`` is set (docs/decisions.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from sweeper.core.clock import human, parse_rfc3339
from sweeper.core.families import pods
from sweeper.core.jobs import DeadlineSource, Job, parse_owned
from sweeper.core.kinds import (
    BATCH_JOBS,
    COMPONENT,
    DEADLINE_EXCEEDED,
    DEADLINE_MESSAGE,
    Kind,
    Reading,
    Resource,
)
from sweeper.core.model import JSON, Action, ActionKind, Enforcement, Entry, Skip, SkipReason, Why
from sweeper.core.patches import DeadlineWrite, deadline_patch, failure_message, status_patch
from sweeper.core.platform import rule_source, source_note
from sweeper.core.rules import (
    ALWAYS,
    Rule,
    at_once,
    due,
    own_deadline,
    reached,
    seen_deadline,
    when,
)

# The Training Operator's MPIJob (the same group, kind and plural) at this version. Only one
# mpijobs.kubeflow.org CRD can exist, so a cluster serves one or the other.
MPI_OPERATOR_VERSION = "v2beta1"
# mpi-operator copies its launcher's failure (its reason), and cleans up and stops re-creating
# workers only with a completionTime.
_READING = Reading(
    failure_reason=True, legacy_clean_pod_policy=False, completion=True, launcher_policy=True
)
_SERVED = ((MPI_OPERATOR_VERSION, _READING),)
MPIJOB = Kind(
    "MPIJob", "mpijobs", "mpiReplicaSpecs", legacy_clean_pod_policy=True, readings=_SERVED
)

NAME = "mpi-operator"
SERVES: tuple[tuple[Kind, str], ...] = ((MPIJOB, MPI_OPERATOR_VERSION),)
# v2beta1 types.go, KubeflowJobController.
MANAGED_BY = "kubeflow.org/mpi-operator"
# Its workers, as --terminate-pods deletes them.
LEFTOVERS, RECLAIM_REASON, NOTHING_LEFT = pods.LEFTOVERS, pods.RECLAIM_REASON, pods.NOTHING_LEFT
PODS = LEFTOVERS
leftovers, reclaimed_event, reclaim_words = pods.leftovers, pods.reclaimed_event, pods.reclaim_words


def finished(job: Job, _now: datetime, enforcement: Enforcement, overdue: float | None) -> Entry:
    """Its workers are reclaimed once it is Failed by its deadline with completionTime."""
    if job.finished != "Failed" or not job.failed_by_deadline:
        left = job.finished or ""
    elif not job.completed:
        left = "Failed without completionTime: mpi-operator may still re-create its workers"
    elif job.clean_pod_policy in ("Running", "All"):
        left = f"Failed; cleanPodPolicy {job.clean_pod_policy}: mpi-operator deletes its workers"
    else:
        return pods.reclaim(job, enforcement, overdue)
    return Skip(job, SkipReason.FINISHED, overdue, left)


def finished_due(job: Job, enforcement: Enforcement) -> datetime | None:
    """At once for the workers of a job its deadline failed; never for any other end."""
    return at_once(finished(job, ALWAYS, enforcement, None))


def seen_finished(job: Job, *_: object) -> str:
    """The job's end, its completionTime and its cleanPodPolicy."""
    how = ", reason DeadlineExceeded" if job.failed_by_deadline else ""
    done = "completionTime set" if job.completed else "no completionTime"
    enforcement = job.clean_pod_policy or "unset (mpi-operator's default: None)"
    return f"condition {job.finished}=True{how}, {done}, cleanPodPolicy {enforcement}"


def _not_yet_due(
    job: Job, now: datetime, enforcement: Enforcement, overdue: float | None
) -> Entry | None:
    at = due(job, enforcement)
    if reached(now, at):
        return None
    return Skip(job, SkipReason.NOT_YET_DUE, overdue, f"due {when(at, now)}")


def _seen_launcher(job: Job, *_: object) -> str:
    if job.deadline_source is DeadlineSource.JOB:
        within = "" if job.rule is None else f", within platform rule {job.rule}"
        return (
            f"the MPIJob's own activeDeadlineSeconds {job.deadline_seconds}{within}: in its"
            " launcher Job only if set when mpi-operator created it"
        )
    return f"effective {human(job.deadline_seconds or 0)}, {rule_source(job)}; {own_deadline(job)}"


def _launcher_deadline(
    job: Job, _now: datetime, _enforcement: Enforcement, overdue: float | None
) -> Entry:
    late, gang = f"{human(overdue or 0.0)} past", "or a gang with none is failed"
    if job.deadline_source is DeadlineSource.JOB:
        unless = "unless it carries it already (mpi-operator copies it only when it creates"
        detail = f"{late} its deadline: its launcher Job gets it {unless} the launcher), {gang}"
        return Action(job, ActionKind.SET_DEADLINE, Why.OVERDUE, overdue, detail)
    detail = f"{late} {rule_source(job)}: its launcher Job gets that deadline, {gang}"
    return Action(job, ActionKind.SET_DEADLINE, Why.PLATFORM_DEADLINE, overdue, detail)


RULES: tuple[Rule, ...] = (
    Rule(
        SkipReason.NOT_YET_DUE.value,
        seen_deadline("startTime + activeDeadlineSeconds"),
        _not_yet_due,
    ),
    # The executor reads the launcher Job (its carrier): it leaves alone one that carries the
    # deadline (the MPIJob's own as mpi-operator copied it, or a shorter one), writes it into
    # one that does not, and fails a gang that has none.
    Rule("launcher-deadline", _seen_launcher, _launcher_deadline),
)


def due_at(job: Job, _now: datetime, enforcement: Enforcement) -> datetime | None:
    """``startTime`` + deadline + grace: its launcher Job is read then."""
    return due(job, enforcement)


# --- its writes: the fail, what it leaves, the launcher's deadline --------------------------


def recreates_pods(job: Job) -> bool:
    """A finished job's workers, until it writes ``completionTime`` (as the sweeper's fail does)."""
    return job.finished is not None and not job.completed


# mpi-operator names the launcher Job so and looks it up by that name alone (getLauncherJob).
LAUNCHER_SUFFIX = "-launcher"


def _failure_message(job: Job) -> str:
    source = source_note(job)
    if source:
        return failure_message(job.name, source)
    return (
        f"MPIJob {job.name} {DEADLINE_MESSAGE}, with no launcher Job to enforce it "
        f"(enforced by {COMPONENT})"
    )


def fail_patch(job: Job, raw: JSON, now: datetime) -> JSON:
    """A failure as mpi-operator records its launcher's: reason ``DeadlineExceeded``."""
    return status_patch(job.kind, raw, now, reason=DEADLINE_EXCEEDED, message=_failure_message(job))


def failed_event(job: Job, late: str, _deleted: Sequence[str]) -> str:
    """The Event's message once the sweeper failed the MPIJob."""
    return f"{_failure_message(job)}: {late} past its deadline"


def carrier(job: Job) -> tuple[Resource, str]:
    """Its launcher Job, whose controller enforces the deadline mpi-operator copied there."""
    return BATCH_JOBS, f"{job.name}{LAUNCHER_SUFFIX}"


def deadline_write(action: Action, target: JSON | None) -> DeadlineWrite | Action | str:
    """The deadline written into the launcher Job, or a gang with no launcher failed instead.

    The seconds from the launcher's ``startTime`` to the effective instant, already past: the
    Job controller, which re-syncs on the change, fails it at once.
    """
    job = action.job
    if target is None:
        none = f"no launcher Job to carry its deadline ({_source(job)})"
        return Action(job, ActionKind.FAIL, Why.NO_LAUNCHER, action.seconds_overdue, none)
    _, name = carrier(job)
    left = _launcher_left_alone(target, job)
    if left:
        return left
    status = target.get("status") or {}
    started = parse_rfc3339(status.get("startTime"))
    instant = job.deadline
    if started is None or instant is None:
        return f"its launcher Job {name} has not started"
    # Rounded up: the Job controller fails it at startTime + seconds, never before the
    # effective instant; at least 1, a deadline the Job API and every release accept.
    seconds = max(math.ceil((instant - started).total_seconds()), 1)
    own = (target.get("spec") or {}).get("activeDeadlineSeconds")
    if isinstance(own, int) and own <= seconds:
        return f"its launcher Job's own activeDeadlineSeconds {own} comes first"
    # The MPIJob's own deadline as newLauncherJob copied it (or a shorter one): the Job
    # controller counts it from the launcher's start, as mpi-operator means it.
    copied = isinstance(own, int) and own <= (job.deadline_seconds or 0)
    if copied and job.deadline_source is DeadlineSource.JOB:
        carried = f"its launcher Job carries activeDeadlineSeconds {own}, the MPIJob's own"
        return f"{carried} or shorter: the Job controller enforces it"
    return DeadlineWrite(
        deadline_patch(target, seconds),
        f"Set activeDeadlineSeconds {seconds} on launcher Job {name} ({_source(job)},"
        " counted from the launcher's own startTime): the Job controller fails it, then"
        f" mpi-operator the MPIJob ({COMPONENT})",
        warning=True,
    )


def _source(job: Job) -> str:
    # Where the deadline written comes from, in words: a platform rule's, or the job's own.
    return source_note(job) or f"its own activeDeadlineSeconds {job.deadline_seconds}"


def _launcher_left_alone(raw: JSON, job: Job) -> str:
    # Why the launcher Job read is not to be given the deadline; empty when it is.
    view = parse_owned(raw)
    if view is None or view.controller_uid != job.uid:
        return "its launcher Job is not controlled by this MPIJob"
    if view.deleting:
        return "its launcher Job is being deleted"
    status = raw.get("status") or {}
    for condition in status.get("conditions") or ():
        if (
            isinstance(condition, dict)
            and condition.get("type") in ("Complete", "Failed")
            and condition.get("status") == "True"
        ):
            return f"its launcher Job is {condition['type']}: mpi-operator records it"
    return ""
