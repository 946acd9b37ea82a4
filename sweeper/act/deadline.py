"""``set-deadline``: a platform deadline handed to the controller that ends the job.

Written where the job's controller enforces it on its own clock: its family names the carrier
and what to write into it as read, or the fail to do instead, or why it is left alone. A
read-modify-write like a fail (the job read and judged again, the write guarded by the
``resourceVersion`` read, 409 starts over a few times), then an Event on the job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from sweeper.act.cleanup import Progress, Writing
from sweeper.core.decide import judge
from sweeper.core.errors import Conflict, NotFound
from sweeper.core.families import family_of
from sweeper.core.jobs import Job, parse_job
from sweeper.core.model import JSON, Action, ActionKind, Enforcement, Entry, Result

# A job or carrier that keeps changing under a write (a fail's too) is left after this many.
WRITE_ATTEMPTS = 3


class DeadlineWriter:
    """Writes platform deadlines (``set-deadline`` actions) into their carriers."""

    def __init__(self, writing: Writing, view: Callable[[Job], Job]) -> None:
        self._w = writing
        self._view = view

    def set_deadline(
        self, action: Action, now: datetime, enforcement: Enforcement, progress: Progress
    ) -> Result | Action:
        """Carry out a ``set-deadline``: the write, then the Event; or the action to do instead."""
        for _attempt in range(WRITE_ATTEMPTS):
            fresh = self._reread(action, now, enforcement)
            if isinstance(fresh, str):
                progress.detail = fresh
                return Result.LEFT_ALONE
            raw, job = fresh
            family = family_of(job.kind, job.version)
            resource, name = family.carrier(job)
            target: JSON | None = raw
            if (resource, name) != (job.kind.at(job.version), job.name):
                try:
                    target = self._w.cluster.get(resource, job.namespace, name)
                except NotFound:
                    target = None
            write = family.deadline_write(replace(action, job=job), target)
            if isinstance(write, Action):
                return write
            if isinstance(write, str):
                progress.detail = write
                return Result.LEFT_ALONE
            progress.body = write.patch
            try:
                self._w.patch(resource, job, write.patch, name=name)
            except Conflict:
                continue
            progress.wrote = True
            self._w.record_event(
                job, progress, now, "DeadlineSet", write.event, warning=write.warning
            )
            return self._w.done
        progress.errors.append(
            f"cannot set the deadline of {action.job.kind.name} {action.job.name!r} in namespace"
            f' "{action.job.namespace}": conflict (409) on {WRITE_ATTEMPTS} attempts'
        )
        return Result.ERROR

    def _reread(
        self, action: Action, now: datetime, enforcement: Enforcement
    ) -> tuple[JSON, Job] | str:
        listed = action.job
        raw = self._w.cluster.get(listed.kind.at(listed.version), listed.namespace, listed.name)
        job = self._view(parse_job(raw, listed.kind, listed.version))
        if job.uid != listed.uid:
            return "job replaced by a new one of the same name"
        entry: Entry = judge(job, now, replace(enforcement, max_actions=None))
        if not (isinstance(entry, Action) and entry.kind is ActionKind.SET_DEADLINE):
            return f"re-read: now {entry.decision} ({entry.reason})"
        return raw, job
