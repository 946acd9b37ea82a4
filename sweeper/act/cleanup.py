"""A failed job's pod and service clean-up, and what the executor's writers share.

:mod:`sweeper.act.executor` decides the order of a plan's writes and turns each action's
:class:`Progress` into its outcome; the writes below the job itself live here: deleting the
pods (and their same-named services) of a job failed by its deadline, after its Failed status
is written (docs/operator.md, "Ordering when failing a job by hand"), and the Event recorded
after every action (:meth:`Writing.record_event`). :func:`leftovers_by_owner` lists a pass's
pods and JobSets once per scope, so the plan holds only the clean-ups that have something to
delete. A TrainJob's JobSet is deleted as the trainer deletes it (:meth:`PodCleaner.delete_jobset`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sweeper.core.errors import ApiError, Conflict, NotFound
from sweeper.core.jobs import Job, Owned, parse_owned
from sweeper.core.kinds import COMPONENT, JOB_NAME_LABEL
from sweeper.core.model import JSON, Action, ActionKind, PodsMode, Policy, Result, Why, pods_mode
from sweeper.core.patches import event_body
from sweeper.core.plan import pods_to_terminate, reclaim_mode, services_to_delete
from sweeper.core.warn import REASON as WARNING_REASON
from sweeper.core.warn import DeadlineWarning, Warned
from sweeper.core.warn import message as warning_message
from sweeper.k8s.cluster import Cluster, Page

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Progress:
    """What one action has done so far, so an interruption still reports it."""

    body: JSON | None = None
    wrote: bool = False
    pods: list[str] = field(default_factory=list)
    services: list[str] = field(default_factory=list)
    jobsets: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    detail: str = ""
    # Set when a refused touch escalated to a fail: the outcome reports that action.
    escalated: Action | None = None
    touch_refused: str = ""


@dataclass(frozen=True, slots=True)
class Writing:
    """How an executor writes: to which cluster, with ``dryRun=All`` or not, and what then.

    Attributes:
        cluster: The cluster, or the recording wrapper of a client dry run.
        server_dry_run: Send writes with ``dryRun=All``.
        done: The result of an action whose writes went through.
        stop_if_asked: Raises when the run must stop (:mod:`sweeper.stop`); called before
            every write.
    """

    cluster: Cluster
    server_dry_run: bool
    done: Result
    stop_if_asked: Callable[[], None]

    def record_event(
        self,
        job: Job,
        progress: Progress,
        now: datetime,
        *,
        reason: str,
        message: str,
        warning: bool,
    ) -> None:
        """Record a core/v1 Event on the job; a refused event is an error of the action.

        Args:
            job: The job acted on.
            progress: Where an error is recorded.
            now: The instant of the pass.
            reason: A CamelCase reason (``DeadlineTouched``...).
            message: The human explanation.
            warning: ``Warning`` type rather than ``Normal``.
        """
        self.stop_if_asked()
        body = event_body(
            job.kind,
            job.version,
            job.namespace,
            job.name,
            job.uid,
            reason=reason,
            message=message,
            warning=warning,
            now=now,
        )
        try:
            self.cluster.create_event(job.namespace, body, dry_run=self.server_dry_run)
        except ApiError as error:
            progress.errors.append(str(error))

    def record_warning(self, warning: DeadlineWarning, now: datetime) -> Warned:
        """Record a ``DeadlineApproaching`` Event, under the name that makes it once a deadline."""
        message = warning_message(warning, now)
        result, detail = self.record_once(
            warning.job, now, reason=WARNING_REASON, message=message, name=warning.name
        )
        return Warned(warning, result, detail)

    def record_once(
        self, job: Job, now: datetime, *, reason: str, message: str, name: str
    ) -> tuple[Result, str]:
        """Record a Warning Event under a name of its own, so that it is recorded once.

        409 means a pass or a replica already recorded it: nothing more to do, and no error.

        Returns:
            The write's result, and why when it is not done.
        """
        self.stop_if_asked()
        body = event_body(
            job.kind,
            job.version,
            job.namespace,
            job.name,
            job.uid,
            reason=reason,
            message=message,
            warning=True,
            now=now,
            event_name=name,
        )
        try:
            self.cluster.create_event(job.namespace, body, dry_run=self.server_dry_run)
        except Conflict:
            return Result.LEFT_ALONE, "already recorded"
        except ApiError as error:
            return Result.ERROR, str(error)
        return self.done, ""


class PodCleaner:
    """Deletes a failed job's pods and their same-named services, or a TrainJob's JobSet."""

    def __init__(self, writing: Writing) -> None:
        self._w = writing

    def reclaim(self, action: Action, now: datetime, policy: Policy, progress: Progress) -> Result:
        """Carry out a clean-up (one of ``CLEAN_UPS``)."""
        if action.kind is ActionKind.DELETE_JOBSET:
            return self.delete_jobset(action, now, progress)
        return self.terminate_pods(action, now, policy, progress)

    def terminate_pods(
        self, action: Action, now: datetime, policy: Policy, progress: Progress
    ) -> Result:
        """Carry out a ``terminate-pods`` action: the pods the pass listed, then the event.

        Returns:
            The writes' result; ``left-alone`` when no pod was left to delete.
        """
        job = action.job
        self.delete_pods(job, policy, progress, action.targets, reclaim_mode(action, policy))
        deleted = f"Deleted {len(progress.pods)} pod(s) and {len(progress.services)} service(s)"
        if action.why is Why.FINISHED_HOLDING:
            reason, message = "HeldPodsDeleted", f"{deleted} of a job {action.detail}"
        else:
            reason, message = "DeadlinePodsTerminated", f"{deleted} of a job failed by its deadline"
        return self._reclaimed(
            job,
            progress.pods,
            progress,
            now,
            left="no pods left to terminate",
            reason=reason,
            message=f"{message} ({COMPONENT})",
        )

    def delete_jobset(self, action: Action, now: datetime, progress: Progress) -> Result:
        """Carry out a ``delete-jobset``: the JobSet the trainer failed to delete, then the event.

        Only a JobSet that its TrainJob controls and that is not being deleted already, and
        only while it still has the uid read (a precondition of the delete): a JobSet
        re-created since is not the one left behind.

        Returns:
            The write's result; ``left-alone`` when no such JobSet is left.
        """
        job = action.job
        self.delete_jobsets(job, progress, action.targets)
        return self._reclaimed(
            job,
            progress.jobsets,
            progress,
            now,
            left="no JobSet of it left to delete",
            reason="DeadlineJobSetDeleted",
            message=(
                f"Deleted JobSet {', '.join(progress.jobsets)} of a TrainJob failed by its "
                f"deadline, which the trainer controller left running ({COMPONENT})"
            ),
        )

    def delete_jobsets(
        self, job: Job, progress: Progress, targets: Sequence[Owned] | None = None
    ) -> None:
        """Delete the JobSet a TrainJob controls, unless it is being deleted already.

        Args:
            job: The TrainJob.
            progress: Where the deletes are recorded.
            targets: The JobSets the pass listed for it; ``None`` to read the one named after
                it now (the trainer names it so).
        """
        if targets is None:
            try:
                found = parse_owned(self._w.cluster.get_jobset(job.namespace, job.name))
            except NotFound:
                found = None
            targets = (found,) if found is not None else ()
        chosen = [t for t in targets if t.controller_uid == job.uid and not t.deleting]
        for jobset in chosen:
            self._w.stop_if_asked()
            if self._delete(self._w.cluster.delete_jobset, job, jobset, progress):
                progress.jobsets.append(jobset.name)

    def _reclaimed(
        self,
        job: Job,
        deleted: list[str],
        progress: Progress,
        now: datetime,
        *,
        left: str,
        reason: str,
        message: str,
    ) -> Result:
        # A clean-up's result: the Event when it deleted something, else why not.
        if not deleted:
            if progress.errors:
                return Result.ERROR
            progress.detail = left
            return Result.LEFT_ALONE
        self._w.record_event(job, progress, now, reason=reason, warning=True, message=message)
        return self._w.done

    def delete_pods(
        self,
        job: Job,
        policy: Policy,
        progress: Progress,
        chosen: Sequence[Owned] | None = None,
        mode: PodsMode | None = None,
    ) -> None:
        """Delete the pods (and same-named services) of a failed job.

        Args:
            job: The job.
            policy: The knobs (``--terminate-pods``).
            progress: Where the deletes are recorded.
            chosen: The pods to delete, chosen from the pass's pod listing; ``None`` to list
                the job's pods now (after a fail's status write, or in watch mode).
            mode: Which pods to choose then; ``pods_mode`` of the policy by default.
        """
        selector = f"{JOB_NAME_LABEL}={job.name}"
        if chosen is None:
            listed = _views(self._w.cluster.list_pods(job.namespace, selector))
            chosen = pods_to_terminate(listed, job, mode or pods_mode(policy))
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
            self._w.stop_if_asked()
            if not self._delete(self._w.cluster.delete_pod, job, pod, progress):
                continue
            progress.pods.append(pod.name)
            service = by_name.get(pod.name)
            if service is None:
                continue
            self._w.stop_if_asked()
            if not self._delete(self._w.cluster.delete_service, job, service, progress):
                continue
            progress.services.append(service.name)

    def _delete(
        self,
        delete: Callable[..., None],
        job: Job,
        target: Owned,
        progress: Progress,
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


class PodSink(Protocol):
    """Where a pass's one pod list is summed, besides the clean-ups' leftovers."""

    def add(self, raw: object, pod: Owned) -> None:
        """Take one listed pod (the object and its view)."""
        ...

    def lost(self, namespace: str | None) -> None:
        """The list of a scope (``None``: cluster-wide) failed: its sums are incomplete."""
        ...

    def namespaces(self) -> set[str]:
        """The namespaces whose pods it sums (those of the jobs it watches)."""
        ...


def leftovers_by_owner(
    cluster: Cluster,
    actions: Iterable[Action],
    namespaces: Sequence[str],
    holders: Mapping[str, str] | None = None,
    sink: PodSink | None = None,
) -> dict[str, tuple[Owned, ...]]:
    """List what the jobs a pass would clean up left behind: one LIST per scope, not per job.

    A job failed by its deadline stays ``terminate-pods`` (a TrainJob ``delete-jobset``) for
    as long as it is kept, most of them with nothing left (their controllers delete nothing
    more and re-create nothing). Listing the operators' pods (label
    ``training.kubeflow.org/job-name``) and the JobSets once per namespace scope, cluster-wide
    for a cluster-wide pass and per namespace with ``--namespace`` (the RBAC each grants), lets
    :func:`sweeper.core.plan.assemble` plan only the clean-ups that have something to delete.

    Args:
        cluster: The cluster (a read: a client dry run sends it too).
        actions: The pass's actions; only ``terminate-pods`` and ``delete-jobset`` ones are
            looked at.
        namespaces: ``--namespace``; empty for a cluster-wide pass.
        holders: Jobs failed by their deadline that the pass leaves, whose pods are counted
            too (uid to namespace):
            their scopes' pods are in the same one list.
        sink: Handed every pod listed when given, and the scopes of its namespaces are listed
            too: the pass sums there the pods of the jobs that could hold GPUs for nothing
            (``sweeper.oneshot.holding``).

    Returns:
        For each such job whose scope was listed, the pods or JobSets (views) whose controller
        ``ownerReference`` is its uid, possibly none. A scope whose list failed leaves its
        jobs out, with a warning: each then reads its own when executed.

    Raises:
        Interrupted: A signal arrived while retrying the list.
        RunTimeout: ``--timeout`` ran out during the list.
    """
    lists: dict[ActionKind, Callable[[str | None], Iterator[Page]]] = {
        ActionKind.TERMINATE_PODS: lambda scope: cluster.list_pod_pages(scope, JOB_NAME_LABEL),
        ActionKind.DELETE_JOBSET: cluster.list_jobset_pages,
    }
    summed = sink.namespaces() if sink is not None else set()
    wanted = _wanted(actions, lists, namespaces, holders or {}, summed)
    index: dict[str, tuple[Owned, ...]] = {}
    for (kind, scope), uids in wanted.items():
        found: dict[str, list[Owned]] = {uid: [] for uid in uids}
        try:
            for page in lists[kind](scope):
                for raw in page.items:
                    view = parse_owned(raw)
                    if view is None:
                        continue
                    if sink is not None and kind is ActionKind.TERMINATE_PODS:
                        sink.add(raw, view)
                    if view.controller_uid in found:
                        found[view.controller_uid].append(view)
        except ApiError as error:
            log.warning(
                "%s; the %d clean-up(s) there read their jobs' leftovers one by one",
                error,
                len(uids),
                extra={"namespace": scope},
            )
            if sink is not None and kind is ActionKind.TERMINATE_PODS:
                sink.lost(scope)
            continue
        index.update((uid, tuple(owned)) for uid, owned in found.items())
    return index


def _wanted(
    actions: Iterable[Action],
    lists: Mapping[ActionKind, object],
    namespaces: Sequence[str],
    holders: Mapping[str, str],
    summed: set[str],
) -> dict[tuple[ActionKind, str | None], set[str]]:
    # The lists a pass reads (what, scope), each with the uids whose leftovers it looks for;
    # and the pods of the scopes of ``summed`` (the namespaces of the jobs a sink watches).
    wanted: dict[tuple[ActionKind, str | None], set[str]] = {}
    for action in actions:
        if action.kind in lists:
            scope = action.job.namespace if namespaces else None
            wanted.setdefault((action.kind, scope), set()).add(action.job.uid)
    for uid, namespace in holders.items():
        scope = namespace if namespaces else None
        wanted.setdefault((ActionKind.TERMINATE_PODS, scope), set()).add(uid)
    for namespace in summed:
        wanted.setdefault((ActionKind.TERMINATE_PODS, namespace if namespaces else None), set())
    return wanted


def _views(objects: Iterable[Any]) -> list[Owned]:
    return [view for view in map(parse_owned, objects) if view is not None]
