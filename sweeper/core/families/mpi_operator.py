"""mpi-operator's MPIJob (``kubeflow.org/v2beta1``, v0.8.x): the deadline is the launcher Job's.

mpi-operator never reads ``runPolicy.activeDeadlineSeconds`` itself: it copies it into the
launcher's batch/v1 Job, whose controller enforces it with a real timer, and then copies the
Job's ``DeadlineExceeded`` failure into the MPIJob with a ``completionTime``
(``pkg/controller/mpi_job_controller.go``, ``newLauncherJob``, ``updateMPIJobFailedStatus``). So
the sweeper never touches an MPIJob. What it does, as docs/decisions.md says:

- **Reclaim the workers.** Once Failed by its deadline *with* ``completionTime``, mpi-operator
  returns early from every sync and deletes workers only for ``cleanPodPolicy`` ``Running`` or
  ``All``; its default, ``None``, exists only in its memory (``default.go``). The workers keep
  their GPUs for good, so they are deleted (never before ``completionTime``: until then the
  sync re-creates them).
- **Put the deadline into the launcher.** mpi-operator copies the deadline only when it creates
  the launcher, and updates it only for suspend and resume, from the launcher as it is (so it
  keeps what the sweeper wrote). A deadline the launcher does not carry is enforced by nobody:
  the MPIJob's own, added or shortened after the launcher was created, or a platform rule's
  default or cap (docs/policy.md). So at ``status.startTime`` + the effective deadline (and
  ``--grace``) the executor reads the launcher Job: one that carries the MPIJob's own deadline
  as mpi-operator copied it (or a shorter one), or whose own comes first, is the Job
  controller's; otherwise it writes the seconds that fall on that instant counted from the
  launcher's own ``startTime`` (its ``activeDeadlineSeconds`` is mutable): the Job controller
  re-syncs on the change and fails it at once (``DeadlineExceeded``), mpi-operator copies that
  failure with ``completionTime``, and the workers go as above.
- **Fail a gang with no launcher.** With ``launcherCreationPolicy: WaitForWorkersReady`` the
  launcher, and with it the deadline, exists only once every worker is ready. When the
  executor finds no launcher Job, the MPIJob is failed as mpi-operator records a failure
  (``Failed=True``, reason ``DeadlineExceeded``, ``completionTime``); its workers then go.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from sweeper.core.clock import human, parse_rfc3339
from sweeper.core.jobs import DeadlineSource, Job, parse_owned
from sweeper.core.kinds import (
    BATCH_JOBS,
    COMPONENT,
    DEADLINE_EXCEEDED,
    DEADLINE_MESSAGE,
    MPI_OPERATOR,
    MPI_OPERATOR_VERSION,
    MPIJOB,
    OPERATOR_PODS,
    Kind,
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
from sweeper.core.patches import deadline_patch, failure_message, status_patch
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
    reclaim_pods,
    reclaim_pods_words,
    stamp,
    when,
)

NAME = "mpi-operator"
SERVES: tuple[tuple[Kind, str], ...] = ((MPIJOB, MPI_OPERATOR_VERSION),)
MANAGED_BY = MPI_OPERATOR
LEFTOVERS = OPERATOR_PODS


# Its workers, as --terminate-pods deletes them.
reclaim_words = reclaim_pods_words


def finished(job: Job, _now: datetime, policy: Policy, overdue: float | None) -> Entry:
    """Its workers are reclaimed once it is Failed by its deadline with completionTime."""
    if job.finished != "Failed" or not job.failed_by_deadline:
        return Skip(job, SkipReason.FINISHED, overdue, job.finished or "")
    if not job.completed:
        return Skip(
            job,
            SkipReason.FINISHED,
            overdue,
            "Failed without completionTime: mpi-operator may still re-create its workers",
        )
    if job.clean_pod_policy in ("Running", "All"):
        return Skip(
            job,
            SkipReason.FINISHED,
            overdue,
            f"Failed; cleanPodPolicy {job.clean_pod_policy}: mpi-operator deletes its workers",
        )
    return reclaim_pods(job, policy, overdue)


def finished_due(job: Job, policy: Policy) -> datetime | None:
    """At once for the workers of a job its deadline failed; never for any other end."""
    return at_once(finished(job, ALWAYS, policy, None))


def seen_finished(job: Job, *_: object) -> str:
    """The job's end, its completionTime and its cleanPodPolicy."""
    if job.finished is None:
        return "no Succeeded or Failed condition"
    how = ", reason DeadlineExceeded" if job.failed_by_deadline else ""
    done = "completionTime set" if job.completed else "no completionTime"
    policy = job.clean_pod_policy or "unset (mpi-operator's default: None)"
    return f"condition {job.finished}=True{how}, {done}, cleanPodPolicy {policy}"


def _not_yet_due(job: Job, now: datetime, policy: Policy, overdue: float | None) -> Entry | None:
    due = _due_instant(job, policy)
    if due is not None and now >= due:
        return None
    return Skip(job, SkipReason.NOT_YET_DUE, overdue, f"due {when(due, now)}")


def _due_instant(job: Job, policy: Policy) -> datetime | None:
    deadline = job.deadline
    return None if deadline is None else later(deadline, policy.grace)


def _seen_deadline(job: Job, _now: datetime, policy: Policy, overdue: float | None) -> str:
    if job.deadline is None or overdue is None:
        return "no deadline instant"
    when = f"{human(overdue)} ago" if overdue >= 0 else f"in {human(-overdue)}"
    return f"startTime + activeDeadlineSeconds {stamp(job.deadline)} ({when})"


def _seen_launcher(job: Job, *_: object) -> str:
    if job.deadline_source is DeadlineSource.JOB:
        within = "" if job.rule is None else f", within platform rule {job.rule}"
        return (
            f"the MPIJob's own activeDeadlineSeconds {job.deadline_seconds}{within}: in its"
            " launcher Job only if set when mpi-operator created it"
        )
    own = (
        "none of its own"
        if job.declared_seconds is None
        else f"its own activeDeadlineSeconds {job.declared_seconds}"
    )
    return (
        f"effective {human(job.deadline_seconds or 0)}, the {job.deadline_source.value} of"
        f" platform rule {job.rule}; {own}"
    )


def _launcher_deadline(job: Job, _now: datetime, _policy: Policy, overdue: float | None) -> Entry:
    late = f"{human(overdue or 0.0)} past"
    if job.deadline_source is DeadlineSource.JOB:
        return Action(
            job,
            ActionKind.SET_DEADLINE,
            Why.OVERDUE,
            overdue,
            f"{late} its deadline: its launcher Job gets it unless it carries it already"
            " (mpi-operator copies it only when it creates the launcher), or a gang with none"
            " is failed",
        )
    return Action(
        job,
        ActionKind.SET_DEADLINE,
        Why.PLATFORM_DEADLINE,
        overdue,
        f"{late} the {job.deadline_source.value} of platform rule {job.rule}: its launcher Job"
        " gets that deadline, or a gang with none is failed",
    )


RULES: tuple[Rule, ...] = (
    Rule(SkipReason.NOT_YET_DUE.value, _seen_deadline, _not_yet_due),
    # The executor reads the launcher Job (its carrier): it leaves alone one that carries the
    # deadline (the MPIJob's own as mpi-operator copied it, or a shorter one), writes it into
    # one that does not, and fails a gang that has none.
    Rule("launcher-deadline", _seen_launcher, _launcher_deadline),
)


def due_at(job: Job, _now: datetime, policy: Policy) -> datetime | None:
    """``startTime`` + deadline + grace: its launcher Job is read then."""
    return _due_instant(job, policy)


# --- its writes: the fail, what it leaves, the launcher's deadline --------------------------

RECLAIM_REASON = PODS_RECLAIMED
NOTHING_LEFT = NO_PODS_LEFT
leftovers = pods_left
reclaimed_event = pods_reclaimed


def recreates_pods(job: Job) -> bool:
    """Until it writes ``completionTime``, mpi-operator re-creates a finished job's workers."""
    return not job.completed


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
    """The platform deadline written into the launcher Job, counted from its own start.

    The seconds that fall on the effective instant counted from the launcher's
    ``status.startTime`` (written at or after that instant, so the Job controller, which
    re-syncs on the change, fails it at once). A gang with no launcher is failed as
    mpi-operator records a failure; why the launcher is left alone, else.
    """
    job = action.job
    if target is None:
        return Action(
            job,
            ActionKind.FAIL,
            Why.NO_LAUNCHER,
            action.seconds_overdue,
            f"no launcher Job to carry its deadline ({_source(job)})",
        )
    name = f"{job.name}{LAUNCHER_SUFFIX}"
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
    if (
        isinstance(own, int)
        and job.deadline_source is DeadlineSource.JOB
        and own <= (job.deadline_seconds or 0)
    ):
        # The MPIJob's own deadline as newLauncherJob copied it (or a shorter one): the Job
        # controller counts it from the launcher's start, as mpi-operator means it.
        return (
            f"its launcher Job carries activeDeadlineSeconds {own}, the MPIJob's own or"
            " shorter: the Job controller enforces it"
        )
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
