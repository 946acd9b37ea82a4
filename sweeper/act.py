"""The executor: applies a plan through the :class:`~sweeper.k8s.cluster.Cluster` interface.

Thin on purpose: what to do was decided in :mod:`sweeper.core.decide`; here each action is carried
out, its outcome recorded, and a failure stays confined to its job. A
``fail`` is a read-modify-write: the job is read again, judged again with the same policy and
instant, and its status written with the ``resourceVersion`` just read; on 409 Conflict the
cycle starts over, a few times at most. Pods (and their same-named services) are deleted only
after the Failed status is written (docs/operator.md, "Ordering when failing a job by hand").

Before every write the executor checks whether the run must stop (signal or ``--timeout``):
the current write completes, no new one starts.

Every mode runs the same code. ``--dry-run`` (client) wraps the cluster in a
:class:`~sweeper.k8s.cluster.RecordingCluster`, whose writes go to a list, so it writes nothing by
construction; ``--dry-run=server`` sends each write with ``dryRun=All``.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from http import HTTPStatus
from typing import Any

from sweeper.config import DryRun
from sweeper.core.clock import format_rfc3339, human
from sweeper.core.decide import (
    Action,
    ActionKind,
    ActionMode,
    Plan,
    Policy,
    Skip,
    Why,
    execution_order,
    judge,
    pods_mode,
    pods_to_terminate,
    services_to_delete,
)
from sweeper.core.errors import ApiError, Conflict, Interrupted, NotFound, RunTimeout, SweeperError
from sweeper.core.jobs import Job, Owned, parse_job, parse_owned
from sweeper.core.kinds import COMPONENT, GROUP, JOB_NAME_LABEL
from sweeper.core.model import JSON, Outcome, Result, settled
from sweeper.core.patches import failure_message, status_patch, touch_patch
from sweeper.k8s.cluster import Cluster, RecordingCluster, ServedKind

log = logging.getLogger(__name__)

# A job that keeps changing under a status write is left for the next pass after this many.
STATUS_WRITE_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Execution:
    """Every outcome of a plan, and what stopped the executor early, if anything.

    Attributes:
        outcomes: One per entry, in the plan's order.
        stopped_by: :class:`~sweeper.core.errors.Interrupted` or
            :class:`~sweeper.core.errors.RunTimeout`, ``None`` when the plan ran to its end.
    """

    outcomes: tuple[Outcome, ...]
    stopped_by: SweeperError | None = None


class _Stop(Exception):  # noqa: N818 - control flow: carries the reason out of a job's action
    def __init__(self, cause: SweeperError) -> None:
        super().__init__(str(cause))
        self.cause = cause


@dataclass(slots=True)
class _Progress:
    """What one action has done so far, so an interruption still reports it."""

    body: JSON | None = None
    wrote: bool = False
    pods: list[str] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    detail: str = ""
    # Set when a refused touch escalated to a fail: the outcome reports that action.
    escalated: Action | None = None
    touch_refused: str = ""


def event_body(job: Job, *, reason: str, message: str, warning: bool, now: datetime) -> JSON:
    """Build the core/v1 Event recorded on a job. Pure.

    Args:
        job: The job the event is about.
        reason: A CamelCase reason (``DeadlineTouched``...).
        message: The human explanation.
        warning: ``Warning`` type rather than ``Normal``.
        now: The instant of the pass.

    Returns:
        The Event object to create in the job's namespace.
    """
    stamp = format_rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        # A generated name: two kinds may have jobs of the same name in one namespace.
        "metadata": {"generateName": f"{job.name[:200]}.", "namespace": job.namespace},
        "involvedObject": {
            "apiVersion": f"{GROUP}/{job.version}",
            "kind": job.kind.name,
            "namespace": job.namespace,
            "name": job.name,
            "uid": job.uid,
        },
        "type": "Warning" if warning else "Normal",
        "reason": reason,
        "message": message,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


Claim = Callable[[Action], contextlib.AbstractContextManager[bool]]


class Executor:
    """Applies plans to one cluster.

    Args:
        cluster: The cluster.
        dry_run: ``None`` to write, ``client`` to send nothing (the cluster is then wrapped
            in a :class:`~sweeper.k8s.cluster.RecordingCluster`), ``server`` for dryRun=All.
        should_stop: Returns the reason to stop (a signal, ``--timeout``), or ``None``.
        on_outcome: Called with each outcome as soon as it is known (for logs).
        claim: Holds a job for the time of its action; entered with the action, it yields
            ``False`` when another actor has the job (the watch mode's timers, during a
            resync pass): the action is then left alone, so one job is acted on by one
            actor at a time. By default every job is ours.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        dry_run: DryRun | None,
        should_stop: Callable[[], SweeperError | None] = lambda: None,
        on_outcome: Callable[[Outcome], None] = lambda _outcome: None,
        claim: Claim | None = None,
    ) -> None:
        # Client dry run by construction: the same code runs, the writes go to a list.
        writing = _Writing(
            cluster=RecordingCluster(cluster) if dry_run is DryRun.CLIENT else cluster,
            server_dry_run=dry_run is DryRun.SERVER,
            done=_DONE[dry_run],
            checkpoint=self._checkpoint,
        )
        self._jobs = _JobWriter(writing, _PodCleaner(writing))
        self._done = writing.done
        self._should_stop = should_stop
        self._on_outcome = on_outcome
        self._claim: Claim = claim or (lambda _action: contextlib.nullcontext(True))

    def execute(self, plan: Plan) -> Execution:
        """Apply every action of a plan, in :func:`~sweeper.core.decide.execution_order`.

        Touches and fails run before pod clean-ups, the most overdue first; the outcomes keep
        the plan's order (the report's).

        Returns:
            One outcome per entry, in the plan's order. A failing job never stops the others;
            a signal or ``--timeout`` does (the remaining actions are ``not-started``).
        """
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
                stopped = self._should_stop()
            if stopped is not None:
                outcomes[index] = Outcome(entry, Result.NOT_STARTED, str(stopped))
                continue
            with self._claim(entry) as ours:
                if ours:
                    outcome, stopped = self._apply(entry, plan.now, plan.policy)
                else:
                    outcome = Outcome(entry, Result.LEFT_ALONE, "in the hands of its timer")
            outcomes[index] = outcome
            self._on_outcome(outcome)
        return Execution(tuple(o for o in outcomes if o is not None), stopped)

    def _apply(
        self, action: Action, now: datetime, policy: Policy
    ) -> tuple[Outcome, SweeperError | None]:
        progress = _Progress()
        try:
            if action.kind is ActionKind.TOUCH:
                result = self._jobs.touch(action, now, policy, progress)
            elif action.kind is ActionKind.FAIL:
                result = self._jobs.fail(action, now, policy, progress)
            else:
                result = self._jobs.cleaner.terminate_pods(action, now, policy, progress)
        except _Stop as stop:
            # A write that already happened is reported as done; the rest is not started.
            return self._outcome(
                action,
                self._done if progress.wrote else Result.NOT_STARTED,
                progress,
                extra=f"stopped: {stop.cause}",
            ), stop.cause
        except (Interrupted, RunTimeout) as cause:
            return self._outcome(
                action,
                self._done if progress.wrote else Result.ERROR,
                progress,
                extra=f"stopped: {cause}",
            ), cause
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
    def _outcome(action: Action, result: Result, progress: _Progress, extra: str = "") -> Outcome:
        detail = "; ".join(part for part in (progress.detail, extra) if part)
        return Outcome(
            entry=progress.escalated or action,
            result=result,
            detail=detail,
            body=progress.body,
            pods=tuple(progress.pods),
            services=tuple(progress.services),
            errors=tuple(progress.errors),
            touch_refused=progress.touch_refused,
        )

    def _checkpoint(self) -> None:
        cause = self._should_stop()
        if cause is not None:
            raise _Stop(cause)


@dataclass(frozen=True, slots=True)
class _Writing:
    """How an executor writes: to which cluster, with ``dryRun=All`` or not, and what then.

    Attributes:
        cluster: The cluster, or the recording wrapper of a client dry run.
        server_dry_run: Send writes with ``dryRun=All``.
        done: The result of an action whose writes went through.
        checkpoint: Raises when the run must stop; called before every write.
    """

    cluster: Cluster
    server_dry_run: bool
    done: Result
    checkpoint: Callable[[], None]


class _JobWriter:
    """Touches and fails jobs: the writes to the job itself, each followed by its event."""

    def __init__(self, writing: _Writing, cleaner: _PodCleaner) -> None:
        self._w = writing
        self.cleaner = cleaner

    def touch(self, action: Action, now: datetime, policy: Policy, progress: _Progress) -> Result:
        job = action.job
        progress.body = touch_patch(now)
        self._w.checkpoint()
        try:
            self._w.cluster.patch_job(
                _served(job),
                job.namespace,
                job.name,
                progress.body,
                dry_run=self._w.server_dry_run,
            )
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
            if policy.action is not ActionMode.AUTO:
                progress.errors.append(f"touch refused: {error}")
                return Result.ERROR
            return self._escalate(action, now, policy, progress, refusal=str(error))
        progress.wrote = True
        late = _late(action)
        self.cleaner.event(
            job,
            progress,
            now,
            reason="DeadlineTouched",
            warning=False,
            message=(
                f"{job.kind.name} is {late} past its activeDeadlineSeconds "
                f"({job.deadline_seconds}s); touched by {COMPONENT} so that the training "
                "operator enforces it"
            ),
        )
        return self._w.done

    def _escalate(
        self,
        action: Action,
        now: datetime,
        policy: Policy,
        progress: _Progress,
        *,
        refusal: str,
    ) -> Result:
        escalated = Action(
            action.job,
            ActionKind.FAIL,
            Why.TOUCH_REFUSED,
            action.seconds_overdue,
            f"touch refused: {refusal}",
        )
        progress.escalated = escalated
        progress.touch_refused = refusal
        progress.body = None
        result = self.fail(escalated, now, policy, progress, touch_refused=True)
        progress.detail = "; ".join(
            part for part in (f"touch refused ({refusal}), failed instead", progress.detail) if part
        )
        return result

    def fail(
        self,
        action: Action,
        now: datetime,
        policy: Policy,
        progress: _Progress,
        *,
        touch_refused: bool = False,
    ) -> Result:
        listed = action.job
        served = _served(listed)
        sent: JSON | None = None  # the Failed condition of the last status write that got 409
        for _attempt in range(STATUS_WRITE_ATTEMPTS):
            raw = self._w.cluster.get_job(served, listed.namespace, listed.name)
            job = parse_job(raw, listed.kind, listed.version)
            if job.uid != listed.uid:
                progress.detail = "job replaced by a new one of the same name"
                return Result.LEFT_ALONE
            if sent is not None and _failed_condition(raw) == sent:
                # The 409 answered a retry of our own write: the first attempt went through
                # and its answer was lost (a timeout, a 5xx after the write). The condition
                # is this run's to the second (the sweeper's message, this pass's instant).
                return self._failed_by_us(action, job, now, policy, progress)
            # Same policy, same instant, no cap: only the job's own state may have changed.
            fresh = judge(job, now, replace(policy, max_actions=None))
            if isinstance(fresh, Action) and fresh.kind is ActionKind.TERMINATE_PODS:
                # Failed by its deadline meanwhile (the operator, or our own write whose
                # answer was lost): what is left to do is the pods.
                result = self.cleaner.terminate_pods(fresh, now, policy, progress)
                progress.detail = "; ".join(
                    part for part in ("already failed by its deadline", progress.detail) if part
                )
                return result
            # After a refused touch, a job the re-read still finds due for a touch is failed.
            wanted = (ActionKind.FAIL, ActionKind.TOUCH) if touch_refused else (ActionKind.FAIL,)
            if not (isinstance(fresh, Action) and fresh.kind in wanted):
                progress.detail = f"re-read: now {fresh.decision} ({fresh.reason})"
                return Result.LEFT_ALONE
            progress.body = status_patch(job.kind, raw, now)
            self._w.checkpoint()
            try:
                self._w.cluster.patch_job_status(
                    served,
                    job.namespace,
                    job.name,
                    progress.body,
                    dry_run=self._w.server_dry_run,
                )
            except Conflict:
                sent = _failed_condition(progress.body)
                continue
            return self._failed_by_us(action, job, now, policy, progress)
        progress.errors.append(
            f"cannot patch {listed.kind.resource}/status {listed.name!r} in namespace "
            f'"{listed.namespace}": conflict (409) on {STATUS_WRITE_ATTEMPTS} attempts'
        )
        return Result.ERROR

    def _failed_by_us(
        self, action: Action, job: Job, now: datetime, policy: Policy, progress: _Progress
    ) -> Result:
        # The status write went through: then the pods, then the event (docs/operator.md,
        # "Ordering when failing a job by hand").
        progress.wrote = True
        self.cleaner.delete_pods(job, policy, progress)
        self.cleaner.event(
            job,
            progress,
            now,
            reason="DeadlineExceeded",
            warning=True,
            message=f"{failure_message(job.name)}: {_late(action)} past its deadline",
        )
        return self._w.done


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


class _PodCleaner:
    """Deletes a failed job's pods and services, and records the events of every action."""

    def __init__(self, writing: _Writing) -> None:
        self._w = writing

    def terminate_pods(
        self, action: Action, now: datetime, policy: Policy, progress: _Progress
    ) -> Result:
        job = action.job
        self.delete_pods(job, policy, progress, action.targets)
        if not progress.pods:
            if progress.errors:
                return Result.ERROR
            progress.detail = "no pods left to terminate"
            return Result.LEFT_ALONE
        self.event(
            job,
            progress,
            now,
            reason="DeadlinePodsTerminated",
            warning=True,
            message=(
                f"Deleted {len(progress.pods)} pod(s) and {len(progress.services)} service(s) "
                f"of a job failed by its deadline ({COMPONENT})"
            ),
        )
        return self._w.done

    def delete_pods(
        self,
        job: Job,
        policy: Policy,
        progress: _Progress,
        chosen: Sequence[Owned] | None = None,
    ) -> None:
        """Delete the pods (and same-named services) of a failed job.

        Args:
            job: The job.
            policy: The knobs (``--terminate-pods``).
            progress: Where the deletes are recorded.
            chosen: The pods to delete, chosen from the pass's pod listing; ``None`` to list
                the job's pods now (after a fail's status write, or in watch mode).
        """
        selector = f"{JOB_NAME_LABEL}={job.name}"
        if chosen is None:
            listed = _views(self._w.cluster.list_pods(job.namespace, selector))
            chosen = pods_to_terminate(listed, job, pods_mode(policy))
        pods = list(chosen)
        if not pods:
            return
        services = services_to_delete(
            _views(self._w.cluster.list_services(job.namespace, selector)),
            job,
            [pod.name for pod in pods],
        )
        by_name = {service.name: service for service in services}
        for pod in pods:
            self._w.checkpoint()
            if not self._delete(self._w.cluster.delete_pod, job, pod, progress):
                continue
            progress.pods.append(pod.name)
            service = by_name.get(pod.name)
            if service is None:
                continue
            self._w.checkpoint()
            if not self._delete(self._w.cluster.delete_service, job, service, progress):
                continue
            progress.services.append(service.name)

    def _delete(
        self,
        delete: Callable[..., None],
        job: Job,
        target: Owned,
        progress: _Progress,
    ) -> bool:
        try:
            delete(job.namespace, target.name, target.uid, dry_run=self._w.server_dry_run)
            progress.wrote = True
        except (NotFound, Conflict):
            # Gone already, or replaced by an object with another uid: not ours to delete.
            return False
        except ApiError as error:
            progress.errors.append(str(error))
            return False
        return True

    def event(
        self,
        job: Job,
        progress: _Progress,
        now: datetime,
        *,
        reason: str,
        message: str,
        warning: bool,
    ) -> None:
        self._w.checkpoint()
        body = event_body(job, reason=reason, message=message, warning=warning, now=now)
        try:
            self._w.cluster.create_event(job.namespace, body, dry_run=self._w.server_dry_run)
        except ApiError as error:
            progress.errors.append(str(error))


# What kube-apiserver answers when admission or RBAC refuses a request: a validating webhook's
# denial carries the code the webhook chose (at least 400; controller-runtime's is 403), a
# ValidatingAdmissionPolicy's is 422 by default, RBAC's 403, a bad request 400. A webhook that
# cannot be called under failurePolicy Fail is a 500 whose message names it ("Internal error
# occurred: failed calling webhook \"...\"": k8s.io/apiserver's validating and mutating
# dispatchers, apierrors.NewInternalError).
_REFUSALS = frozenset({400, 403, 422})
_WEBHOOK = re.compile(r'(failed calling|admission) webhook "')


def refused(error: ApiError) -> bool:
    """Whether the API server refused a write for good: admission or RBAC, not load. Pure.

    Returns:
        ``True`` for 400, 403 and 422, and for a 500 whose message names an admission
        webhook; ``False`` for no answer, 429, any other 5xx (after the transport's retries)
        and every other status: those may heal by the next attempt.
    """
    if error.status in _REFUSALS:
        return True
    return error.status == HTTPStatus.INTERNAL_SERVER_ERROR and bool(_WEBHOOK.search(error.detail))


def pods_by_owner(
    cluster: Cluster, actions: Iterable[Action], namespaces: Sequence[str]
) -> dict[str, tuple[Owned, ...]]:
    """List the pods of the jobs a pass would clean up: one LIST per scope, not one per job.

    A job failed by its deadline stays ``terminate-pods`` for as long as it is kept, most of
    them with no pod left (the operator deletes none of a Failed job's pods under
    ``cleanPodPolicy: None``, the default, and never recreates any). Listing the operator's
    pods (label ``training.kubeflow.org/job-name``) once per namespace scope, cluster-wide
    for a cluster-wide pass and per namespace with ``--namespace`` (the RBAC each grants),
    lets :func:`sweeper.core.decide.assemble` plan only the clean-ups that have something to delete.

    Args:
        cluster: The cluster (a read: a client dry run sends it too).
        actions: The pass's actions; only ``terminate-pods`` ones are looked at.
        namespaces: ``--namespace``; empty for a cluster-wide pass.

    Returns:
        For each such job whose scope was listed, the pods (views) whose controller
        ``ownerReference`` is its uid, possibly none. A scope whose list failed leaves its
        jobs out, with a warning: each then lists its own pods when executed, as before.

    Raises:
        Interrupted: A signal arrived while retrying the list.
        RunTimeout: ``--timeout`` ran out during the list.
    """
    wanted: dict[str | None, set[str]] = {}
    for action in actions:
        if action.kind is ActionKind.TERMINATE_PODS:
            scope = action.job.namespace if namespaces else None
            wanted.setdefault(scope, set()).add(action.job.uid)
    index: dict[str, tuple[Owned, ...]] = {}
    for scope, uids in wanted.items():
        found: dict[str, list[Owned]] = {uid: [] for uid in uids}
        try:
            for page in cluster.list_pod_pages(scope, JOB_NAME_LABEL):
                for view in _views(page.items):
                    if view.controller_uid in found:
                        found[view.controller_uid].append(view)
        except ApiError as error:
            log.warning(
                "%s; the %d clean-up(s) there list their jobs' pods one by one",
                error,
                len(uids),
                extra={"namespace": scope},
            )
            continue
        index.update((uid, tuple(pods)) for uid, pods in found.items())
    return index


# What a write that went through makes of an action, by --dry-run mode.
_DONE = {None: Result.DONE, DryRun.SERVER: Result.DRY_RUN, DryRun.CLIENT: Result.PLANNED}


def _late(action: Action) -> str:
    return "?" if action.seconds_overdue is None else human(action.seconds_overdue)


def _served(job: Job) -> ServedKind:
    return ServedKind(job.kind, job.version)


def _views(objects: Iterable[Any]) -> list[Owned]:
    return [view for view in map(parse_owned, objects) if view is not None]
