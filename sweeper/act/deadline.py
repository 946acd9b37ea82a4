"""``set-deadline``: a platform deadline handed to the controller that ends the job.

A deadline the job does not carry (a platform rule's default or cap, docs/policy.md) is
written where the job's own controller enforces it, on its own clock:

- a TrainJob gets ``spec.activeDeadlineSeconds``, which its CRD lets be added but never
  changed: the effective seconds, since the trainer counts them from the same instant as the
  sweeper (creation or the last resume);
- an MPIJob's launcher Job gets the seconds that fall on the effective instant counted from
  the launcher's own ``status.startTime`` (written at or after that instant, so the Job
  controller, which re-syncs on the change, fails it at once); a gang with no launcher is the
  executor's to fail (:meth:`DeadlineWriter.set_deadline` returns ``None``). So does an
  MPIJob's own deadline, which mpi-operator copies into the launcher only when it creates it:
  one added or shortened since is in no launcher. A launcher carrying the MPIJob's own deadline
  (or a shorter one) is left to the Job controller, which counts it from its own start.

Each is a read-modify-write: the job is read again and judged again under its rule,
the write carries the ``resourceVersion`` just read, and a 409 starts over, a few times at
most. Then an Event on the job.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from sweeper.act.cleanup import PodCleaner, Progress, Writing
from sweeper.core.clock import parse_rfc3339
from sweeper.core.decide import judge
from sweeper.core.errors import Conflict, NotFound
from sweeper.core.jobs import DeadlineSource, Job, parse_job, parse_owned
from sweeper.core.kinds import COMPONENT, TRAINJOB
from sweeper.core.model import JSON, Action, ActionKind, Entry, Policy, Result, Why
from sweeper.core.patches import (
    deadline_patch,
    status_patch,
    trainjob_failure_message,
    trainjob_status_patch,
)
from sweeper.core.platform import source_note
from sweeper.k8s.cluster import ServedKind

# A job or launcher that keeps changing under the write is left for the next pass after this.
WRITE_ATTEMPTS = 3
# mpi-operator names the launcher Job so and looks it up by that name alone (getLauncherJob).
LAUNCHER_SUFFIX = "-launcher"


def no_launcher(action: Action) -> Action:
    """The fail of an MPIJob whose deadline found no launcher Job to carry it."""
    return Action(
        action.job,
        ActionKind.FAIL,
        Why.NO_LAUNCHER,
        action.seconds_overdue,
        f"no launcher Job to carry its deadline ({_source(action.job)})",
    )


def _source(job: Job) -> str:
    # Where the deadline written comes from, in words: a platform rule's, or the job's own.
    return source_note(job) or f"its own activeDeadlineSeconds {job.deadline_seconds}"


def failed_patch(job: Job, raw: JSON, now: datetime) -> JSON:
    """The status patch that fails ``job`` (read as ``raw``) as its controller writes it."""
    if job.kind is TRAINJOB:
        return trainjob_status_patch(raw, now, source_note(job))
    return status_patch(job.kind, raw, now, job.version, source=source_note(job))


class DeadlineWriter:
    """Writes platform deadlines (``set-deadline`` actions), and ends a capped TrainJob's run."""

    def __init__(self, writing: Writing, cleaner: PodCleaner, view: Callable[[Job], Job]) -> None:
        self._w = writing
        self._cleaner = cleaner
        self._view = view

    def set_deadline(
        self, action: Action, now: datetime, policy: Policy, progress: Progress
    ) -> Result | None:
        """Carry out a ``set-deadline``: the write, then the Event.

        Returns:
            The write's result, ``left-alone`` when the re-read job or its launcher no longer
            needs it; ``None`` for an MPIJob with no launcher Job, which the executor fails as
            mpi-operator fails a job.
        """
        for _attempt in range(WRITE_ATTEMPTS):
            fresh = self._reread(action, now, policy)
            if isinstance(fresh, str):
                progress.detail = fresh
                return Result.LEFT_ALONE
            raw, job = fresh
            try:
                if job.kind is TRAINJOB:
                    return self._trainjob(raw, job, now, progress)
                return self._launcher(job, now, progress)
            except Conflict:
                continue
        progress.errors.append(
            f"cannot set the deadline of {action.job.kind.name} {action.job.name!r} in namespace"
            f' "{action.job.namespace}": conflict (409) on {WRITE_ATTEMPTS} attempts'
        )
        return Result.ERROR

    def _reread(self, action: Action, now: datetime, policy: Policy) -> tuple[JSON, Job] | str:
        # The job read again, or why it is left alone.
        listed = action.job
        served = ServedKind(listed.kind, listed.version)
        raw = self._w.cluster.get_job(served, listed.namespace, listed.name)
        job = self._view(parse_job(raw, listed.kind, listed.version))
        if job.uid != listed.uid:
            return "job replaced by a new one of the same name"
        entry: Entry = judge(job, now, replace(policy, max_actions=None))
        if not (isinstance(entry, Action) and entry.kind is ActionKind.SET_DEADLINE):
            return f"re-read: now {entry.decision} ({entry.reason})"
        return raw, job

    def trainjob_failed(self, job: Job, now: datetime, progress: Progress, late: str) -> Result:
        """After a TrainJob's Failed status went through at a platform cap: its JobSet, the Event.

        The JobSet goes at once, as the trainer deletes it at its own deadline; the trainer
        re-creates nothing for a finished TrainJob (trainjob_controller.go, ``Reconcile``).
        """
        self._cleaner.delete_jobsets(job, progress)
        self._w.record_event(
            job,
            progress,
            now,
            reason="DeadlineExceeded",
            warning=True,
            message=(
                f"{trainjob_failure_message(source_note(job))}: {late} past it; JobSet"
                f" deleted: {', '.join(progress.jobsets) or 'none left'}"
            ),
        )
        return self._w.done

    def _trainjob(self, raw: JSON, job: Job, now: datetime, progress: Progress) -> Result:
        # The CRD's minimum is 1; the rule's durations are whole seconds of at least 1 anyway.
        seconds = max(job.deadline_seconds or 1, 1)
        progress.body = deadline_patch(raw, seconds)
        self._w.stop_if_asked()
        self._w.cluster.patch_job(
            ServedKind(job.kind, job.version),
            job.namespace,
            job.name,
            progress.body,
            dry_run=self._w.server_dry_run,
        )
        progress.wrote = True
        deadline = job.deadline
        when = "" if deadline is None else f" at {deadline:%Y-%m-%dT%H:%M:%SZ}"
        self._w.record_event(
            job,
            progress,
            now,
            reason="DeadlineSet",
            warning=False,
            message=(
                f"Set spec.activeDeadlineSeconds to {seconds} ({source_note(job)}): the "
                f"trainer controller fails the TrainJob{when} ({COMPONENT})"
            ),
        )
        return self._w.done

    def _launcher(self, job: Job, now: datetime, progress: Progress) -> Result | None:
        name = f"{job.name}{LAUNCHER_SUFFIX}"
        try:
            raw = self._w.cluster.get_batch_job(job.namespace, name)
        except NotFound:
            return None
        left = _launcher_left_alone(raw, job)
        if left:
            progress.detail = left
            return Result.LEFT_ALONE
        status = raw.get("status") or {}
        started = parse_rfc3339(status.get("startTime"))
        instant = job.deadline
        if started is None or instant is None:
            progress.detail = f"its launcher Job {name} has not started"
            return Result.LEFT_ALONE
        # Rounded up: the Job controller fails it at startTime + seconds, never before the
        # effective instant; at least 1, a deadline the Job API and every release accept.
        seconds = max(math.ceil((instant - started).total_seconds()), 1)
        own = (raw.get("spec") or {}).get("activeDeadlineSeconds")
        if isinstance(own, int) and own <= seconds:
            progress.detail = f"its launcher Job's own activeDeadlineSeconds {own} comes first"
            return Result.LEFT_ALONE
        if (
            isinstance(own, int)
            and job.deadline_source is DeadlineSource.JOB
            and own <= (job.deadline_seconds or 0)
        ):
            # The MPIJob's own deadline as newLauncherJob copied it (or a shorter one): the Job
            # controller counts it from the launcher's start, as mpi-operator means it.
            progress.detail = (
                f"its launcher Job carries activeDeadlineSeconds {own}, the MPIJob's own or"
                " shorter: the Job controller enforces it"
            )
            return Result.LEFT_ALONE
        progress.body = deadline_patch(raw, seconds)
        self._w.stop_if_asked()
        self._w.cluster.patch_batch_job(
            job.namespace, name, progress.body, dry_run=self._w.server_dry_run
        )
        progress.wrote = True
        self._w.record_event(
            job,
            progress,
            now,
            reason="DeadlineSet",
            warning=True,
            message=(
                f"Set activeDeadlineSeconds {seconds} on launcher Job {name} ({_source(job)},"
                " counted from the launcher's own startTime): the Job controller fails it, then"
                f" mpi-operator the MPIJob ({COMPONENT})"
            ),
        )
        return self._w.done


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
