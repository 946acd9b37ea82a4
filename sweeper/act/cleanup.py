"""A failed job's pod and service clean-up, and what the executor's writers share.

:mod:`sweeper.act.executor` decides the order of a plan's writes and turns each action's
:class:`Progress` into its outcome; the writes below the job itself live here: deleting the
pods (and their same-named services) of a job failed by its deadline, after its Failed status
is written (docs/operator.md, "Ordering when failing a job by hand"), and the Event recorded
after every action (:meth:`Writing.record_event`). :func:`pods_by_owner` lists a pass's pods
once per scope, so the plan holds only the clean-ups that have something to delete.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sweeper.core.errors import ApiError, Conflict, NotFound
from sweeper.core.jobs import Job, Owned, parse_owned
from sweeper.core.kinds import COMPONENT, JOB_NAME_LABEL
from sweeper.core.model import JSON, Action, ActionKind, Policy, Result, pods_mode
from sweeper.core.patches import event_body
from sweeper.core.plan import pods_to_terminate, services_to_delete
from sweeper.k8s.cluster import Cluster

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Progress:
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


class PodCleaner:
    """Deletes a failed job's pods and their same-named services."""

    def __init__(self, writing: Writing) -> None:
        self._w = writing

    def terminate_pods(
        self, action: Action, now: datetime, policy: Policy, progress: Progress
    ) -> Result:
        """Carry out a ``terminate-pods`` action: the pods the pass listed, then the event.

        Returns:
            The writes' result; ``left-alone`` when no pod was left to delete.
        """
        job = action.job
        self.delete_pods(job, policy, progress, action.targets)
        if not progress.pods:
            if progress.errors:
                return Result.ERROR
            progress.detail = "no pods left to terminate"
            return Result.LEFT_ALONE
        self._w.record_event(
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
        progress: Progress,
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


def pods_by_owner(
    cluster: Cluster, actions: Iterable[Action], namespaces: Sequence[str]
) -> dict[str, tuple[Owned, ...]]:
    """List the pods of the jobs a pass would clean up: one LIST per scope, not one per job.

    A job failed by its deadline stays ``terminate-pods`` for as long as it is kept, most of
    them with no pod left (the operator deletes none of a Failed job's pods under
    ``cleanPodPolicy: None``, the default, and never recreates any). Listing the operator's
    pods (label ``training.kubeflow.org/job-name``) once per namespace scope, cluster-wide
    for a cluster-wide pass and per namespace with ``--namespace`` (the RBAC each grants),
    lets :func:`sweeper.core.plan.assemble` plan only the clean-ups that have something to
    delete.

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


def _views(objects: Iterable[Any]) -> list[Owned]:
    return [view for view in map(parse_owned, objects) if view is not None]
