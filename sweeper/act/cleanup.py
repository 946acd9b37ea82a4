"""What a job failed by its deadline left, deleted; and what the executor's writers share.

The writes below the job itself: its family's ``LEFTOVERS`` (each with its companion) deleted,
and the Event after every action. ``leftovers_by_owner`` lists a pass's leftovers once per
resource and scope, so the plan holds only the clean-ups that have something to delete.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sweeper.core.clock import format_rfc3339
from sweeper.core.errors import ApiError, Conflict, NotFound
from sweeper.core.families import family_of
from sweeper.core.held import HELD_PODS_REASON, held_pods_deleted
from sweeper.core.jobs import Job, Owned, parse_owned
from sweeper.core.kinds import COMPONENT, EVENTS, OPERATOR_PODS, PODS, Leftovers, Resource
from sweeper.core.model import CLEAN_UPS, JSON, Action, Enforcement, Result, Why
from sweeper.core.plan import reclaim_policy, services_to_delete
from sweeper.core.warn import REASON as WARNING_REASON
from sweeper.core.warn import DeadlineWarning, Warned
from sweeper.core.warn import message as warning_message
from sweeper.k8s.cluster import Cluster, Page, list_all
from sweeper.k8s.readahead import ReadAhead

log = logging.getLogger(__name__)

# A pass's pod lists (80 pages at 10,000 jobs of 4 pods) are read on threads ahead of the sums:
# the API server writes the next page while this process reads the last one
# (docs/benchmarks.md). Two pages wait at most, some 2 MB of views.
_READERS = 2
_AHEAD = 2


@dataclass(slots=True)
class Progress:
    """What one action has done so far, so an interruption still reports it.

    ``escalated`` is the action taken instead (a fail after a refused touch): the outcome's.
    """

    body: JSON | None = None
    wrote: bool = False
    reclaimed: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    detail: str = ""
    escalated: Action | None = None
    touch_refused: str = ""


@dataclass(frozen=True, slots=True)
class Writing:
    """How an executor writes: to which cluster, with ``dryRun=All`` or not, and what then.

    ``done`` is the result of an action whose writes went through; ``stop_if_asked`` raises
    when the run must stop, and is called before every write.
    """

    cluster: Cluster
    server_dry_run: bool
    done: Result
    stop_if_asked: Callable[[], None]

    def patch(
        self, resource: Resource, job: Job, body: JSON, *, name: str = "", subresource: str = ""
    ) -> None:
        """Write a merge patch carrying its precondition: the job's, or ``name``'s (its carrier)."""
        self.stop_if_asked()
        namespace, dry_run = job.namespace, self.server_dry_run
        self.cluster.patch(
            resource, namespace, name or job.name, body, subresource=subresource, dry_run=dry_run
        )

    def patch_status(self, resource: Resource, job: Job, body: JSON) -> None:
        """Write a job's status."""
        self.patch(resource, job, body, subresource="status")

    def record_event(
        self,
        job: Job,
        progress: Progress,
        now: datetime,
        reason: str,
        message: str,
        *,
        warning: bool = True,
    ) -> None:
        """Record a core/v1 Event on the job; a refused one is an error of the action."""
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
        """Record a Warning Event once, under a name of its own; the result, and why if not done.

        A 409 is a pass's or a replica's record of it already: no error.
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
        # The Event names the job's uid: it is about this job, not a namesake created since. A
        # fixed ``name`` makes a second create of it refused (a warning once a deadline); else
        # generated, as two kinds may have jobs of one name in a namespace.
        self.stop_if_asked()
        stamp = format_rfc3339(now)
        named = {"generateName": f"{job.name[:200]}."} if name is None else {"name": name}
        involved = {"apiVersion": f"{job.kind.group}/{job.version}", "kind": job.kind.name}
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": named | {"namespace": job.namespace},
            "involvedObject": involved
            | {"namespace": job.namespace, "name": job.name, "uid": job.uid},
            "type": "Warning" if warning else "Normal",
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        self.cluster.create(EVENTS, job.namespace, body, dry_run=self.server_dry_run)


class Reclaimer:
    """Deletes what a job its deadline failed left behind: its family's ``LEFTOVERS``."""

    def __init__(self, writing: Writing) -> None:
        self._w = writing

    def reclaim(
        self, action: Action, now: datetime, enforcement: Enforcement, progress: Progress
    ) -> Result:
        """Carry out a clean-up: the deletes, then the Event (``left-alone``: nothing left)."""
        job = action.job
        family = family_of(job.kind, job.version)
        deleted, companions = self.delete_leftovers(
            job, reclaim_policy(action, enforcement), progress, action.targets
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
        self._w.record_event(job, progress, now, reason, message)
        return self._w.done

    def delete_leftovers(
        self,
        job: Job,
        enforcement: Enforcement,
        progress: Progress,
        chosen: Sequence[Owned] | None = None,
    ) -> tuple[list[str], list[str]]:
        """Delete what the job left, and each one's companion, while each has its uid.

        ``chosen`` from the pass's listing, else listed now. Returns the names deleted, of both.
        """
        family = family_of(job.kind, job.version)
        left = family.LEFTOVERS
        cluster = self._w.cluster
        if chosen is None:
            listed = _views(list_all(cluster, left.resource, job.namespace, left.of(job.name)))
            chosen = family.leftovers(listed, job, enforcement)
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
        self, resource: Resource, job: Job, target: Owned, progress: Progress, propagation: str = ""
    ) -> bool:
        name, uid, dry_run = target.name, target.uid, self._w.server_dry_run
        try:
            self._w.cluster.delete(
                resource, job.namespace, name, uid, propagation=propagation, dry_run=dry_run
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

    def lost(self, namespace: str | None) -> None:
        """The list of a scope (``None``: cluster-wide) failed: its sums are incomplete."""

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

    A job failed by its deadline stays a clean-up as long as it is kept, most with nothing
    left; each family's ``LEFTOVERS`` listed once per scope (cluster-wide, or per namespace
    with ``--namespace``: the RBAC each grants) lets the plan hold only clean-ups with work.
    ``holders`` (uid to namespace) are jobs the pass leaves whose pods are listed too, and
    ``sink`` is handed every pod listed (its pod lists, ``scopes``, are read as well). The
    lists are read ahead (``sweeper.k8s.readahead``), in order, each error where it was.

    Returns:
        For each clean-up's job whose scope was listed, the leftovers it controls, possibly
        none; a scope whose list failed leaves its jobs out (each reads its own), with a
        warning.
    """
    summed = sink.scopes() if sink is not None else set()
    wanted = _wanted(actions, namespaces, holders or {}, summed)
    index: dict[str, tuple[Owned, ...]] = {}
    with ReadAhead[Page](workers=_READERS, ahead=_AHEAD, name="leftovers") as ahead:
        for left, scope in wanted:
            ahead.submit(
                (left, scope),
                functools.partial(cluster.list_pages, left.resource, scope, left.selector),
            )
        for (left, scope), uids in wanted.items():
            found: dict[str, list[Owned]] = {uid: [] for uid in uids}
            summing = sink if left.resource == PODS else None
            try:
                for page in ahead.pages((left, scope)):
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
