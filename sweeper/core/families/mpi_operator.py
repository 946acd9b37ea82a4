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
- **Fail a gang with no launcher.** With ``launcherCreationPolicy: WaitForWorkersReady`` the
  launcher, and with it the deadline, exists only once every worker is ready. Past
  ``status.startTime + activeDeadlineSeconds`` such a job is failed as mpi-operator records a
  failure (``Failed=True``, reason ``DeadlineExceeded``, ``completionTime``), after the executor
  has made sure no launcher Job exists; its workers then go.
- **Enforce a platform deadline through the launcher.** A deadline the MPIJob does not carry
  (a platform rule's default or cap, docs/policy.md) is not in its launcher Job either, whose
  ``spec.activeDeadlineSeconds`` is mutable and which mpi-operator only ever updates for
  suspend and resume, from the launcher as it is (so it keeps what the sweeper wrote). At
  ``status.startTime`` + the effective deadline, the sweeper writes into the launcher the
  seconds that fall on that instant counted from the launcher's own ``startTime``: the Job
  controller re-syncs on the change and fails it at once (``DeadlineExceeded``), mpi-operator
  copies that failure with ``completionTime``, and the workers go as above. A gang with no
  launcher yet is failed as above.
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
    skip_if,
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


def _carried(job: Job) -> bool:
    # The launcher Job carries the MPIJob's own deadline only (newLauncherJob).
    return job.deadline_source is DeadlineSource.JOB


def _seen_platform(job: Job, *_: object) -> str:
    if _carried(job):
        return "the deadline is the MPIJob's own" + (
            "" if job.rule is None else f", within platform rule {job.rule}"
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


def _platform(job: Job, _now: datetime, _policy: Policy, overdue: float | None) -> Entry | None:
    if _carried(job):
        return None
    return Action(
        job,
        ActionKind.SET_DEADLINE,
        Why.PLATFORM_DEADLINE,
        overdue,
        f"{human(overdue or 0.0)} past the {job.deadline_source.value} of platform rule"
        f" {job.rule}: its launcher Job gets that deadline, or a gang with none is failed",
    )


def _fail(job: Job, _now: datetime, _policy: Policy, overdue: float | None) -> Entry:
    return Action(
        job,
        ActionKind.FAIL,
        Why.NO_LAUNCHER,
        overdue,
        f"{human(overdue or 0.0)} past its deadline with no launcher Job to enforce it",
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
    skip_if(
        SkipReason.OPERATOR_ENFORCED,
        lambda job, *_: (
            "launcherCreationPolicy WaitForWorkersReady"
            if job.launcher_waits
            else "launcherCreationPolicy AtStartup"
        ),
        lambda job: not job.launcher_waits and _carried(job),
        lambda _job: "its launcher Job carries the deadline; the Job controller enforces it",
    ),
    Rule(SkipReason.NOT_YET_DUE.value, _seen_deadline, _not_yet_due),
    Rule(Why.PLATFORM_DEADLINE.value, _seen_platform, _platform),
    Rule("no-launcher", lambda *_: "past its deadline; no launcher Job is expected yet", _fail),
)


def due_at(job: Job, policy: Policy) -> datetime | None:
    """``startTime`` + deadline + grace, for a gang or a deadline the launcher does not carry."""
    fixed, instant = premise_due(RULES, job, policy)
    return instant if fixed else _due_instant(job, policy)
