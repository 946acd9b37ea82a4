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

from datetime import datetime

from sweeper.core.clock import human
from sweeper.core.jobs import DeadlineSource, Job
from sweeper.core.kinds import MPI_OPERATOR
from sweeper.core.model import Action, ActionKind, Entry, Policy, Skip, SkipReason, Why
from sweeper.core.rules import (
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
    reclaim_pods,
    stamp,
)

NAME = "mpi-operator"


def _finished(job: Job, _now: datetime, policy: Policy, overdue: float | None) -> Entry | None:
    if job.finished is None:
        return None
    if job.finished != "Failed" or not job.failed_by_deadline:
        return Skip(job, SkipReason.FINISHED, overdue, job.finished)
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


def _seen_finished(job: Job, *_: object) -> str:
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
    left = "never" if due is None else f"in {human((due - now).total_seconds())}"
    return Skip(job, SkipReason.NOT_YET_DUE, overdue, f"due {left}")


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
    MALFORMED,
    # mpi-operator checks managedBy before anything else (syncHandler).
    managed_elsewhere(MPI_OPERATOR),
    BEING_DELETED,
    OPTED_OUT,
    Rule(
        SkipReason.FINISHED.value,
        _seen_finished,
        _finished,
        premise=lambda job: job.finished is not None,
    ),
    SUSPENDED,
    RESUMING,
    NO_DEADLINE,
    DURATION_OVERFLOW,
    NOT_STARTED,
    Rule(SkipReason.NOT_YET_DUE.value, _seen_deadline, _not_yet_due),
    # The executor reads the launcher Job (act/deadline.py): it leaves alone one that carries
    # the deadline (the MPIJob's own as mpi-operator copied it, or a shorter one), writes it
    # into one that does not, and fails a gang that has none.
    Rule("launcher-deadline", _seen_launcher, _launcher_deadline),
)


def due_at(job: Job, policy: Policy) -> datetime | None:
    """``startTime`` + deadline + grace: its launcher Job is read then."""
    fixed, instant = premise_due(RULES, job, policy)
    return instant if fixed else _due_instant(job, policy)
