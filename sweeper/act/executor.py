"""The executor: applies a plan through ``Cluster``, one write at a time, each with its outcome.

A failure stays confined to its job; the run's stop is asked before every write. A ``fail``
reads and judges the job again, writes its status at the ``resourceVersion`` read (409: again),
then deletes what it left (docs/operator.md, "Ordering when failing a job by hand").
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from http import HTTPStatus

from sweeper.act.cleanup import Progress, Reclaimer, Writing
from sweeper.act.deadline import WRITE_ATTEMPTS, DeadlineWriter
from sweeper.act.held import StartDeadlineWriter, record_held_events
from sweeper.config import DryRun
from sweeper.core.clock import human
from sweeper.core.decide import judge
from sweeper.core.errors import ApiError, Conflict, Interrupted, NotFound, RunTimeout, SweeperError
from sweeper.core.families import family_of
from sweeper.core.held import Held
from sweeper.core.jobs import Job, parse_job
from sweeper.core.kinds import COMPONENT, Resource
from sweeper.core.model import (
    CLEAN_UPS,
    JSON,
    Action,
    ActionKind,
    ActionMode,
    Enforcement,
    Entry,
    Outcome,
    Plan,
    Result,
    Skip,
    Why,
    settled,
)
from sweeper.core.patches import touch_patch
from sweeper.core.plan import execution_order
from sweeper.core.warn import DeadlineWarning, Warned
from sweeper.k8s.cluster import Cluster
from sweeper.k8s.dryrun import RecordingCluster
from sweeper.stop import Stop


@dataclass(frozen=True, slots=True)
class Execution:
    """A plan's outcomes, one per entry in its order, and what stopped it early (``None``)."""

    outcomes: tuple[Outcome, ...]
    stopped_by: SweeperError | None = None


class _Stop(Exception):  # noqa: N818 - control flow: carries the reason out of a job's action
    def __init__(self, cause: SweeperError) -> None:
        super().__init__(str(cause))
        self.cause = cause


Claim = Callable[[Action], contextlib.AbstractContextManager[bool]]


class Executor:
    """Applies plans to one cluster; ``on_outcome`` hears each outcome as soon as it is known.

    ``claim`` holds a job during its action, ``False`` when another actor has it (the watch
    mode's timers, during a resync pass); ``view`` puts a job read again under its rule.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        dry_run: DryRun | None,
        stop: Stop,
        on_outcome: Callable[[Outcome], None] = lambda _outcome: None,
        claim: Claim | None = None,
        view: Callable[[Job], Job] = lambda job: job,
    ) -> None:
        writing = Writing(
            cluster=RecordingCluster(cluster) if dry_run is DryRun.CLIENT else cluster,
            server_dry_run=dry_run is DryRun.SERVER,
            done=_DONE[dry_run],
            stop_if_asked=self._stop_if_asked,
        )
        reclaimer = Reclaimer(writing)
        self._jobs = _JobWriter(writing, reclaimer, DeadlineWriter(writing, view), view)
        self._stuck = StartDeadlineWriter(writing, reclaimer, view)
        self._writing = writing
        self._done = writing.done
        self._stop = stop
        self._on_outcome = on_outcome
        self._claim: Claim = claim or (lambda _action: contextlib.nullcontext(True))

    def execute(self, plan: Plan) -> Execution:
        """Apply a plan's actions in ``execution_order``; a stop (not a failure) ends the rest."""
        outcomes: list[Outcome | None] = [None] * len(plan.entries)
        for index, entry in enumerate(plan.entries):
            if isinstance(entry, Skip):
                skipped = settled(entry)
                outcomes[index] = skipped
                self._on_outcome(skipped)
        stopped: SweeperError | None = None
        for index in execution_order(plan):
            entry = plan.entries[index]
            assert isinstance(entry, Action)  # noqa: S101 - the order holds actions only
            if stopped is None:
                stopped = self._stop.reason()
            if stopped is not None:
                outcomes[index] = Outcome(entry, Result.NOT_STARTED, str(stopped))
                continue
            with self._claim(entry) as ours:
                if ours:
                    outcome, stopped = self._apply(entry, plan.now, plan.enforcement)
                else:
                    outcome = Outcome(entry, Result.LEFT_ALONE, "in the hands of its timer")
            outcomes[index] = outcome
            self._on_outcome(outcome)
        return Execution(tuple(o for o in outcomes if o is not None), stopped)

    def warn(
        self, warnings: Sequence[DeadlineWarning], now: datetime
    ) -> tuple[tuple[Warned, ...], SweeperError | None]:
        """Record each ``DeadlineApproaching`` warning (no action: no slot, no claim); any stop."""
        warned: list[Warned] = []
        stopped: SweeperError | None = None
        for warning in warnings:
            if stopped is None:
                try:
                    warned.append(self._writing.record_warning(warning, now))
                    continue
                except _Stop as stop:
                    stopped = stop.cause
            warned.append(Warned(warning, Result.NOT_STARTED, str(stopped)))
        return tuple(warned), stopped

    def held(self, found: Sequence[Held], now: datetime) -> SweeperError | None:
        """Record each job's ``GPUsHeld`` Event (once per episode); what stopped them, if any."""
        try:
            record_held_events(self._writing, found, now)
        except _Stop as stop:
            return stop.cause
        return None

    def _apply(
        self, action: Action, now: datetime, enforcement: Enforcement
    ) -> tuple[Outcome, SweeperError | None]:
        progress = Progress()
        try:
            if action.kind is ActionKind.TOUCH:
                result = self._jobs.touch(action, now, enforcement, progress)
            elif action.why is Why.START_DEADLINE:
                result = self._stuck.end(action, now, enforcement, progress)
            elif action.kind is ActionKind.FAIL:
                result = self._jobs.fail(action, now, enforcement, progress)
            elif action.kind is ActionKind.SET_DEADLINE:
                written = self._jobs.deadlines.set_deadline(action, now, enforcement, progress)
                if isinstance(written, Action):  # no carrier (a gang with no launcher): fail it
                    progress.escalated = written
                    written = self._jobs.fail(written, now, enforcement, progress, also=action.kind)
                result = written
            else:
                result = self._jobs.cleaner.reclaim(action, now, enforcement, progress)
        except (_Stop, Interrupted, RunTimeout) as stop:
            # A write that already happened is reported as done; one stopped before it is not
            # started, one a request's retries were stopped in is an error.
            cause = stop.cause if isinstance(stop, _Stop) else stop
            unfinished = Result.NOT_STARTED if isinstance(stop, _Stop) else Result.ERROR
            result = self._done if progress.wrote else unfinished
            return self._outcome(action, result, progress, extra=f"stopped: {cause}"), cause
        except NotFound as gone:
            if progress.wrote:
                progress.errors.append(str(gone))
                return self._outcome(action, self._done, progress), None
            progress.detail = "job deleted meanwhile"
            return self._outcome(action, Result.LEFT_ALONE, progress), None
        except ApiError as error:
            progress.errors.append(str(error))
            result = self._done if progress.wrote else Result.ERROR
            return self._outcome(action, result, progress), None
        return self._outcome(action, result, progress), None

    @staticmethod
    def _outcome(action: Action, result: Result, progress: Progress, extra: str = "") -> Outcome:
        detail = "; ".join(part for part in (progress.detail, extra) if part)
        return Outcome(
            entry=progress.escalated or action,
            result=result,
            detail=detail,
            body=progress.body,
            reclaimed=tuple(progress.reclaimed),
            errors=tuple(progress.errors),
            touch_refused=progress.touch_refused,
        )

    def _stop_if_asked(self) -> None:
        cause = self._stop.reason()
        if cause is not None:
            raise _Stop(cause)


class _JobWriter:
    """Touches and fails jobs: the writes to the job itself, each followed by its event."""

    def __init__(
        self,
        writing: Writing,
        cleaner: Reclaimer,
        deadlines: DeadlineWriter,
        view: Callable[[Job], Job],
    ) -> None:
        self._w = writing
        self.cleaner = cleaner
        self.deadlines = deadlines
        self._view = view

    def touch(
        self, action: Action, now: datetime, enforcement: Enforcement, progress: Progress
    ) -> Result:
        job = action.job
        progress.body = touch_patch(now)
        try:
            self._w.patch(_resource(job), job, progress.body)
        except (NotFound, Conflict):
            raise
        except ApiError as error:
            if not refused(error):
                # No answer, throttling (429) or an overloaded server (503, 504): the touch
                # may get through at the next attempt, and the operator's clock may not be
                # at the deadline yet. An error of this touch, never a reason to fail the job.
                raise
            # Admission refused the update (the operator's webhooks, with failurePolicy Fail,
            # reject every update while it is down), or RBAC did. Nothing will make the
            # operator look: auto fails it now.
            if enforcement.action is not ActionMode.AUTO:
                progress.errors.append(f"touch refused: {error}")
                return Result.ERROR
            return self._escalate(action, now, enforcement, progress, refusal=str(error))
        progress.wrote = True
        message = (
            f"{job.kind.name} is {_late(action)} past its activeDeadlineSeconds "
            f"({job.deadline_seconds}s); touched by {COMPONENT} so that the training "
            "operator enforces it"
        )
        self._w.record_event(job, progress, now, "DeadlineTouched", message, warning=False)
        return self._w.done

    def _escalate(
        self,
        action: Action,
        now: datetime,
        enforcement: Enforcement,
        progress: Progress,
        *,
        refusal: str,
    ) -> Result:
        late, refused = action.seconds_overdue, f"touch refused: {refusal}"
        escalated = Action(action.job, ActionKind.FAIL, Why.TOUCH_REFUSED, late, refused)
        progress.escalated = escalated
        progress.touch_refused = refusal
        progress.body = None
        result = self.fail(escalated, now, enforcement, progress, touch_refused=True)
        progress.detail = "; ".join(
            part for part in (f"touch refused ({refusal}), failed instead", progress.detail) if part
        )
        return result

    def fail(
        self,
        action: Action,
        now: datetime,
        enforcement: Enforcement,
        progress: Progress,
        *,
        touch_refused: bool = False,
        also: ActionKind | None = None,
    ) -> Result:
        listed = action.job
        resource = _resource(listed)
        sent: JSON | None = None  # the Failed condition of the last status write that got 409
        for _attempt in range(WRITE_ATTEMPTS):
            raw = self._w.cluster.get(resource, listed.namespace, listed.name)
            job = self._view(parse_job(raw, listed.kind, listed.version))
            if job.uid != listed.uid:
                progress.detail = "job replaced by a new one of the same name"
                return Result.LEFT_ALONE
            if sent is not None and _failed_condition(raw) == sent:
                # The 409 answered a retry of our own write: the first attempt went through
                # and its answer was lost (a timeout, a 5xx after the write). The condition
                # is this run's to the second (the sweeper's message, this pass's instant).
                return self._failed_by_us(action, job, now, enforcement, progress)
            # Same policy, same instant, no cap: only the job's own state may have changed.
            fresh = judge(job, now, replace(enforcement, max_actions=None))
            if isinstance(fresh, Action) and fresh.kind in CLEAN_UPS:
                # Failed by its deadline meanwhile (the operator, or our own write whose
                # answer was lost): what is left to do is the pods, or the JobSet.
                result = self.cleaner.reclaim(fresh, now, enforcement, progress)
                progress.detail = "; ".join(
                    part for part in ("already failed by its deadline", progress.detail) if part
                )
                return result
            left = _left_alone(fresh, touch_refused=touch_refused, also=also)
            if left:
                progress.detail = left
                return Result.LEFT_ALONE
            progress.body = family_of(job.kind, job.version).fail_patch(job, raw, now)
            try:
                self._w.patch_status(resource, job, progress.body)
            except Conflict:
                sent = _failed_condition(progress.body)
                continue
            return self._failed_by_us(action, job, now, enforcement, progress)
        progress.errors.append(
            f"cannot patch {listed.kind.resource}/status {listed.name!r} in namespace "
            f'"{listed.namespace}": conflict (409) on {WRITE_ATTEMPTS} attempts'
        )
        return Result.ERROR

    def _failed_by_us(
        self, action: Action, job: Job, now: datetime, enforcement: Enforcement, progress: Progress
    ) -> Result:
        # The status write went through: then what it left, then the event (docs/operator.md,
        # "Ordering when failing a job by hand"); a TrainJob's JobSet goes at once, as the
        # trainer deletes it at its own deadline.
        progress.wrote = True
        deleted, _ = self.cleaner.delete_leftovers(job, enforcement, progress)
        message = family_of(job.kind, job.version).failed_event(job, _late(action), deleted)
        self._w.record_event(job, progress, now, "DeadlineExceeded", message)
        return self._w.done


def _left_alone(fresh: Entry, *, touch_refused: bool, also: ActionKind | None) -> str:
    # Why the re-read job is no longer to be failed; empty when it still is. After a refused
    # touch, one still due for a touch is failed; one whose carrier is gone, ``also``.
    wanted = {ActionKind.FAIL, also, ActionKind.TOUCH if touch_refused else None}
    if not (isinstance(fresh, Action) and fresh.kind in wanted):
        return f"re-read: now {fresh.decision} ({fresh.reason})"
    return ""


def _failed_condition(document: object) -> JSON | None:
    # The Failed=True condition of a job (or of a status patch), as written.
    status = document.get("status") if isinstance(document, dict) else None
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if (
            isinstance(condition, dict)
            and condition.get("type") == "Failed"
            and condition.get("status") == "True"
        ):
            return {key: condition.get(key) for key in _WRITTEN}
    return None


# The fields of the Failed condition the sweeper writes (sweeper.core.patches.failed_status).
_WRITTEN = ("type", "status", "reason", "message", "lastUpdateTime", "lastTransitionTime")


# kube-apiserver's refusals: a webhook's denial (its code, controller-runtime's 403), a
# ValidatingAdmissionPolicy's 422, RBAC's 403, a bad request's 400; a webhook not called under
# failurePolicy Fail is a 500 that names it ('failed calling webhook "...'; k8s.io/apiserver).
_REFUSALS = frozenset({400, 403, 422})
_WEBHOOK = re.compile(r'(failed calling|admission) webhook "')


def refused(error: ApiError) -> bool:
    """Whether the API server refused a write for good (admission or RBAC), not for load. Pure."""
    if error.status in _REFUSALS:
        return True
    return error.status == HTTPStatus.INTERNAL_SERVER_ERROR and bool(_WEBHOOK.search(error.detail))


# What a write that went through makes of an action, by --dry-run mode.
_DONE = {None: Result.DONE, DryRun.SERVER: Result.DRY_RUN, DryRun.CLIENT: Result.PLANNED}


def _late(action: Action) -> str:
    return "?" if action.seconds_overdue is None else human(action.seconds_overdue)


def _resource(job: Job) -> Resource:
    return job.kind.at(job.version)
