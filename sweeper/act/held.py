"""A platform rule's ``startDeadline``: a job stuck starting failed, then its pods deleted.

The plan's ``fail`` (``start-deadline``) was decided from the pass's pod list
(``sweeper.core.held``). Here the job is read again, and its pods: only a job still running,
not suspended, with pods placed and others still waiting is failed, as the sweeper fails a job
(its controller's status, with the reason ``StartDeadlineExceeded`` and the plan's words, under
the ``resourceVersion`` just read), then its Running and Pending pods are deleted (each with
its uid as precondition) and a Warning Event says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from sweeper.act.cleanup import Progress, Reclaimer, Writing
from sweeper.core.errors import Conflict
from sweeper.core.held import (
    EVENT_REASON,
    START_WARNING_REASON,
    Held,
    HeldState,
    classify,
    event_message,
    event_name,
    load_of,
    pods_of,
)
from sweeper.core.jobs import Job, parse_job
from sweeper.core.kinds import COMPONENT
from sweeper.core.model import Action, Enforcement, Result
from sweeper.core.patches import failed_status
from sweeper.core.plan import reclaim_policy
from sweeper.k8s.cluster import list_all

log = logging.getLogger(__name__)

# The Failed condition's reason: not the deadline's, so nothing reads it as one.
REASON = "StartDeadlineExceeded"


class StartDeadlineWriter:
    """Ends jobs stuck starting past their rule's ``startDeadline``."""

    def __init__(self, writing: Writing, reclaimer: Reclaimer, view: Callable[[Job], Job]) -> None:
        self._w = writing
        self._reclaimer = reclaimer
        self._view = view

    def end(
        self, action: Action, now: datetime, enforcement: Enforcement, progress: Progress
    ) -> Result:
        """Fail the job if it is still stuck starting, then delete its active pods.

        Returns:
            The writes' result; ``left-alone`` when the job read again is no longer stuck
            (finished, suspended, replaced, or every pod placed or none).
        """
        listed = action.job
        resource = listed.kind.at(listed.version)
        raw = self._w.cluster.get(resource, listed.namespace, listed.name)
        job = self._view(parse_job(raw, listed.kind, listed.version))
        left = self._still_stuck(job, listed, now, enforcement)
        if left:
            progress.detail = left
            return Result.LEFT_ALONE
        meta = raw.get("metadata") or {}
        message = f"Job {job.name} {action.detail} (enforced by {COMPONENT})"
        progress.body = {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},
            "status": failed_status(
                job.kind,
                job.name,
                raw.get("status"),
                now,
                reason=REASON,
                message=message,
            ),
        }
        try:
            self._w.patch_status(resource, job, progress.body)
        except Conflict:
            progress.detail = "changed while being failed: judged again next pass"
            return Result.LEFT_ALONE
        progress.wrote = True
        self._reclaimer.delete_leftovers(job, reclaim_policy(action, enforcement), progress)
        self._w.record_event(job, progress, now, reason=REASON, message=message, warning=True)
        return self._w.done

    def _still_stuck(self, job: Job, listed: Job, now: datetime, enforcement: Enforcement) -> str:
        # Why the job read again is no longer to be failed; empty when it still is.
        if job.uid != listed.uid:
            return "job replaced by a new one of the same name"
        left, _ = pods_of(job)  # as the pass's pod list, which found it stuck
        pods = list_all(self._w.cluster, left.resource, job.namespace, left.of(job.name))
        load = load_of(job, pods, enforcement.gpu_resources)
        # Past its startDeadline when planned; only what the job and its pods are can change.
        held = classify(job, load, now, stuck_after=0.0, finished_after=0.0)
        if held is None or held.state is not HeldState.STUCK:
            state = job.finished or ("suspended" if job.suspended else "not stuck starting")
            return f"re-read: {state}"
        return ""


def record_held_events(writing: Writing, found: Sequence[Held], now: datetime) -> None:
    """Record each held job's ``GPUsHeld`` Event and its ``StartDeadlineApproaching`` warning.

    Each once per episode; a refusal is logged.
    """
    for held in found:
        if held.state is HeldState.WAITING:
            continue
        results = [record_held(writing, held, now)]
        if held.warning:
            name = event_name(held, "start-deadline-approaching")
            message = f"{held.warning} ({COMPONENT})"
            warned, _ = writing.record_once(
                held.job, now, reason=START_WARNING_REASON, message=message, name=name
            )
            results.append(warned)
        if Result.ERROR in results:
            job = held.job
            log.warning(
                "%s %s/%s: an Event of the GPUs it holds was refused",
                job.kind.name,
                job.namespace,
                job.name,
                extra={"kind": job.kind.name, "namespace": job.namespace, "job_name": job.name},
            )


def record_held(writing: Writing, held: Held, now: datetime) -> Result:
    """Record the job's ``GPUsHeld`` Warning Event, once per episode (``event_name``)."""
    message = f"{event_message(held)} ({COMPONENT})"
    result, _ = writing.record_once(
        held.job, now, reason=EVENT_REASON, message=message, name=event_name(held)
    )
    return result
