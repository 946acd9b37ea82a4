"""What a failed job left, deleted; and what the executor's writers share.

:mod:`sweeper.act.executor` decides the order of a plan's writes and turns each action's
:class:`Progress` into its outcome; the writes below the job itself live here: deleting what a
job failed by its deadline left behind, its family's ``LEFTOVERS`` (and each one's companion),
after its Failed status is written (docs/operator.md, "Ordering when failing a job by hand"),
and the Event recorded after every action (:meth:`Writing.record_event`).
:func:`leftovers_by_owner` lists a pass's leftovers once per resource and scope, so the plan
holds only the clean-ups that have something to delete.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sweeper.core.errors import ApiError, Conflict, NotFound
from sweeper.core.families import family_of
from sweeper.core.held import HELD_PODS_REASON, held_pods_deleted
from sweeper.core.jobs import Job, Owned, parse_owned
from sweeper.core.kinds import (
    EVENTS,
    OPERATOR_PODS,
    PODS,
    Leftovers,
    Resource,
)
from sweeper.core.model import CLEAN_UPS, JSON, Action, Policy, Result, Why
from sweeper.core.patches import event_body
from sweeper.core.plan import reclaim_policy, services_to_delete
from sweeper.core.warn import REASON as WARNING_REASON
from sweeper.core.warn import DeadlineWarning, Warned
from sweeper.core.warn import message as warning_message
from sweeper.k8s.cluster import Cluster, list_all

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Progress:
    """What one action has done so far, so an interruption still reports it."""

    body: JSON | None = None
    wrote: bool = False
    reclaimed: list[tuple[str, str]] = field(default_factory=list)
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

    def patch_status(self, resource: Resource, job: Job, body: JSON) -> None:
        """Write a job's status (``body``, a merge patch carrying its precondition)."""
        self.stop_if_asked()
        self.cluster.patch(
            resource,
            job.namespace,
            job.name,
            body,
            subresource="status",
            dry_run=self.server_dry_run,
        )

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
        try:
            self._create_event(job, now, reason=reason, message=message, warning=warning)
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
        try:
            self._create_event(job, now, reason=reason, message=message, warning=True, name=name)
        except Conflict:
            return Result.LEFT_ALONE, "already recorded"
        except ApiError as error:
            return Result.ERROR, str(error)
        return self.done, ""

    def _create_event(
        self,
        job: Job,
        now: datetime,
        *,
        reason: str,
        message: str,
        warning: bool,
        name: str | None = None,
    ) -> None:
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
            event_name=name,
        )
        self.cluster.create(EVENTS, job.namespace, body, dry_run=self.server_dry_run)


class Reclaimer:
    """Deletes what a job its deadline failed left behind: its family's ``LEFTOVERS``."""

    def __init__(self, writing: Writing) -> None:
        self._w = writing

    def reclaim(self, action: Action, now: datetime, policy: Policy, progress: Progress) -> Result:
        """Carry out a clean-up (one of ``CLEAN_UPS``): the deletes, then the Event.

        Returns:
            The writes' result; ``left-alone`` when nothing was left to delete.
        """
        job = action.job
        family = family_of(job.kind, job.version)
        deleted, companions = self.delete_leftovers(
            job, reclaim_policy(action, policy), progress, action.targets
        )
        if not deleted:
            if progress.errors:
                return Result.ERROR
            progress.detail = family.NOTHING_LEFT
            return Result.LEFT_ALONE
        if action.why is Why.FINISHED_HOLDING:
            reason = HELD_PODS_REASON
            what = family.LEFTOVERS.resource.plural
            message = held_pods_deleted(what, deleted, companions, action.detail)
        else:
            reason = family.RECLAIM_REASON
            message = family.reclaimed_event(job, deleted, companions)
        self._w.record_event(job, progress, now, reason=reason, warning=True, message=message)
        return self._w.done

    def delete_leftovers(
        self,
        job: Job,
        policy: Policy,
        progress: Progress,
        chosen: Sequence[Owned] | None = None,
    ) -> tuple[list[str], list[str]]:
        """Delete what the job left (and each one's companion), provided it still has its uid.

        Args:
            job: The job.
            policy: The knobs (``--terminate-pods``).
            progress: Where the deletes are recorded.
            chosen: What to delete, chosen from the pass's listing; ``None`` to list the job's
                leftovers now (after a fail's status write, or in watch mode).

        Returns:
            The names deleted, and those of their companions deleted.
        """
        family = family_of(job.kind, job.version)
        left = family.LEFTOVERS
        cluster = self._w.cluster
        if chosen is None:
            listed = _views(list_all(cluster, left.resource, job.namespace, left.of(job.name)))
            chosen = family.leftovers(listed, job, policy)
        targets = list(chosen)
        deleted: list[str] = []
        companions: list[str] = []
        if not targets:
            return deleted, companions
        by_name: dict[str, Owned] = {}
        if left.companion is not None:
            listed = _views(list_all(cluster, left.companion, job.namespace, left.of(job.name)))
            by_name = {
                c.name: c for c in services_to_delete(listed, job, [t.name for t in targets])
            }
        for target in targets:
            self._w.stop_if_asked()
            if not self._delete(left.resource, job, target, progress, left.propagation):
                continue
            deleted.append(target.name)
            companion = by_name.get(target.name)
            if companion is None or left.companion is None:
                continue
            self._w.stop_if_asked()
            if self._delete(left.companion, job, companion, progress):
                companions.append(companion.name)
        return deleted, companions

    def _delete(
        self,
        resource: Resource,
        job: Job,
        target: Owned,
        progress: Progress,
        propagation: str = "",
    ) -> bool:
        try:
            self._w.cluster.delete(
                resource,
                job.namespace,
                target.name,
                target.uid,
                propagation=propagation,
                dry_run=self._w.server_dry_run,
            )
            progress.wrote = True
        except (NotFound, Conflict):
            # Gone already, or replaced by an object with another uid: not ours to delete.
            return False
        except ApiError as error:
            progress.errors.append(str(error))
            return False
        progress.reclaimed.append((resource.plural, target.name))
        return True


class PodSink(Protocol):
    """Where a pass's one pod list is summed, besides the clean-ups' leftovers."""

    def add(self, raw: object, pod: Owned) -> None:
        """Take one listed pod (the object and its view)."""
        ...

    def lost(self, namespace: str | None) -> None:
        """The list of a scope (``None``: cluster-wide) failed: its sums are incomplete."""
        ...

    def scopes(self) -> set[tuple[Leftovers, str]]:
        """The pod lists it sums (which pods, in which namespace)."""
        ...


def leftovers_by_owner(
    cluster: Cluster,
    actions: Iterable[Action],
    namespaces: Sequence[str],
    holders: Mapping[str, str] | None = None,
    sink: PodSink | None = None,
) -> dict[str, tuple[Owned, ...]]:
    """List what the jobs a pass would clean up left behind: one LIST per scope, not per job.

    A job failed by its deadline stays a clean-up for as long as it is kept, most of them with
    nothing left (their controllers delete nothing more and re-create nothing). Listing each
    family's ``LEFTOVERS`` once per namespace scope, cluster-wide for a cluster-wide pass and
    per namespace with ``--namespace`` (the RBAC each grants), lets
    :func:`sweeper.core.plan.assemble` plan only the clean-ups that have something to delete.

    Args:
        cluster: The cluster (a read: a client dry run sends it too).
        actions: The pass's actions; only the clean-ups (``CLEAN_UPS``) are looked at.
        namespaces: ``--namespace``; empty for a cluster-wide pass.
        holders: Jobs failed by their deadline that the pass leaves, whose pods are counted
            too (uid to namespace):
            their scopes' pods are in the same one list.
        sink: Handed every pod listed when given, and its pod lists (``scopes``) are read
            too: the pass sums there the pods of the jobs that could hold GPUs for nothing
            (``sweeper.oneshot.holding``).

    Returns:
        For each such job whose scope was listed, the leftovers (views) whose controller
        ``ownerReference`` is its uid, possibly none. A scope whose list failed leaves its
        jobs out, with a warning: each then reads its own when executed.

    Raises:
        Interrupted: A signal arrived while retrying the list.
        RunTimeout: ``--timeout`` ran out during the list.
    """
    summed = sink.scopes() if sink is not None else set()
    wanted = _wanted(actions, namespaces, holders or {}, summed)
    index: dict[str, tuple[Owned, ...]] = {}
    for (left, scope), uids in wanted.items():
        found: dict[str, list[Owned]] = {uid: [] for uid in uids}
        summing = sink if left.resource == PODS else None
        try:
            for page in cluster.list_pages(left.resource, scope, left.selector):
                for raw in page.items:
                    view = parse_owned(raw)
                    if view is None:
                        continue
                    if summing is not None:
                        summing.add(raw, view)
                    if view.controller_uid in found:
                        found[view.controller_uid].append(view)
        except ApiError as error:
            log.warning(
                "%s; the %d clean-up(s) there read their jobs' leftovers one by one",
                error,
                len(uids),
                extra={"namespace": scope},
            )
            if summing is not None:
                summing.lost(scope)
            continue
        index.update((uid, tuple(owned)) for uid, owned in found.items())
    return index


def _wanted(
    actions: Iterable[Action],
    namespaces: Sequence[str],
    holders: Mapping[str, str],
    summed: set[tuple[Leftovers, str]],
) -> dict[tuple[Leftovers, str | None], set[str]]:
    # The lists a pass reads (what, scope), each with the uids whose leftovers it looks for;
    # and the pod lists of ``summed`` (those a sink sums).
    wanted: dict[tuple[Leftovers, str | None], set[str]] = {}
    for action in actions:
        if action.kind in CLEAN_UPS:
            scope = action.job.namespace if namespaces else None
            left = family_of(action.job.kind, action.job.version).LEFTOVERS
            wanted.setdefault((left, scope), set()).add(action.job.uid)
    for uid, namespace in holders.items():
        scope = namespace if namespaces else None
        wanted.setdefault((OPERATOR_PODS, scope), set()).add(uid)
    for left, namespace in summed:
        wanted.setdefault((left, namespace if namespaces else None), set())
    return wanted


def _views(objects: Iterable[Any]) -> list[Owned]:
    return [view for view in map(parse_owned, objects) if view is not None]
