"""A pass's plan from its judged entries: ``--max-actions``, the order, the clean-ups' targets.

``sweeper.core.decide.judge`` decides for one job; here the entries of a pass (or of one
timer's firing) become a ``Plan``, and the executor learns in which
order to run it and which of a failed job's pods and services to delete. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from sweeper.core.jobs import Job, Owned
from sweeper.core.model import (
    CLEAN_UPS,
    Action,
    Entry,
    Plan,
    PodsMode,
    Policy,
    Skip,
    SkipReason,
    Why,
)

# What of a job's leftovers a clean-up deletes (its family's ``leftovers``), and what its
# family says when that is nothing.
Select = Callable[[Sequence[Owned], Job, Policy], tuple[Sequence[Owned], str]]


def assemble(
    entries: Iterable[Entry],
    now: datetime,
    policy: Policy,
    pods: Mapping[str, Sequence[Owned]] | None = None,
    select: Select | None = None,
) -> Plan:
    """Make the plan of entries judged one by one, as ``sweeper.core.decide.decide`` does.

    For a caller that judges jobs as they arrive (a pass judges each page as it comes, and
    hands over only the actions, since a skip is final): ``assemble([judge(j, now, policy)
    for j in jobs], now, policy)`` is ``decide(jobs, now, policy)``. Pure.

    ``pods`` is what may be left of the jobs failed by their deadline (each family's
    leftovers), by controller uid, from one listing per namespace scope
    (``leftovers_by_owner``). A clean-up whose job's uid is a key gets its targets chosen here
    (by ``select``, the job's family's choice): with none to delete it is a ``finished``
    skip, so a clean-up that can find nothing takes no ``--max-actions`` slot and no request.
    A uid that is not a key (its scope could not be listed) keeps the action, and the
    executor reads that job's leftovers itself.
    """
    listed = list(entries)
    if pods is not None and select is not None:
        listed = [_with_targets(entry, pods, policy, select) for entry in listed]
    if policy.max_actions is not None:
        listed = _cap(listed, policy.max_actions)
    return Plan(now=now, policy=policy, entries=tuple(listed))


def _with_targets(
    entry: Entry, owned: Mapping[str, Sequence[Owned]], policy: Policy, select: Select
) -> Entry:
    if not isinstance(entry, Action) or entry.kind not in CLEAN_UPS:
        return entry
    found = owned.get(entry.job.uid)
    if found is None:
        return entry
    chosen, left = select(found, entry.job, reclaim_policy(entry, policy))
    if not chosen:
        finished = entry.job.finished or "Failed"
        return Skip(entry.job, SkipReason.FINISHED, entry.seconds_overdue, f"{finished}; {left}")
    return replace(entry, targets=tuple(chosen))


def reclaim_policy(action: Action, policy: Policy) -> Policy:
    """The policy a clean-up's leftovers are chosen under (the family's ``leftovers``). Pure.

    A platform rule's ``startDeadline`` and ``reclaimFailedAfter`` free the GPUs their job
    holds: its Running and Pending pods, whatever ``--terminate-pods`` and ``cleanPodPolicy``
    say (finished pods stay, with their logs). Any other clean-up: ``policy`` as it is.
    """
    if action.why in (Why.START_DEADLINE, Why.FINISHED_HOLDING):
        return replace(policy, terminate_pods=PodsMode.ACTIVE)
    return policy


def _priority(entries: Sequence[Entry], index: int) -> tuple[int, float, int]:
    # Touches and fails before pod clean-ups, then the most overdue first, then listing order.
    entry = entries[index]
    assert isinstance(entry, Action)  # noqa: S101 - only actions are ranked
    cleanup = 1 if entry.kind in CLEAN_UPS else 0
    return (cleanup, -(entry.seconds_overdue or 0.0), index)


def _cap(entries: list[Entry], limit: int) -> list[Entry]:
    ranked = sorted(
        (i for i, e in enumerate(entries) if isinstance(e, Action)),
        key=lambda i: _priority(entries, i),
    )
    capped = list(entries)
    for index in ranked[max(limit, 0) :]:
        action = entries[index]
        assert isinstance(action, Action)  # noqa: S101 - ranked holds actions only
        capped[index] = Skip(
            action.job,
            SkipReason.OVER_MAX_ACTIONS,
            action.seconds_overdue,
            f"would {action.kind.value} ({action.why.value}); --max-actions {limit} reached",
        )
    return capped


def execution_order(plan: Plan) -> tuple[int, ...]:
    """The order in which to run a plan's actions: indices into ``plan.entries``. Pure.

    Touches and fails come first, the most overdue first, then pod clean-ups (most overdue
    first too): a pass stopped by a signal or ``--timeout`` leaves the least urgent actions
    ``not-started``, and the jobs still running never wait behind clean-ups. The same order
    ``--max-actions`` selects by. The report keeps the listing order whatever this order is.
    """
    entries = plan.entries
    return tuple(
        sorted(
            (i for i, e in enumerate(entries) if isinstance(e, Action)),
            key=lambda i: _priority(entries, i),
        )
    )


def pods_to_terminate(pods: Iterable[Owned], job: Job, mode: PodsMode) -> list[Owned]:
    """Choose the pods of a failed job to delete. Pure.

    Those whose controller ``ownerReference`` is the job (same uid), that are not being
    deleted already (``deletionTimestamp`` set: deleting one again changes nothing, and the
    operator's own ``DeletePod`` skips it), and that the mode selects: ``active`` (Running and
    Pending), ``all``, or ``policy``: the job's ``cleanPodPolicy`` read as the v1.9.4 operator
    reads it. It special-cases two values, ``None`` (keep every pod) and ``Running`` (Running
    and Pending); any other value deletes every pod (the CRD has no enum: ``""`` and ``"all"``
    included). An absent field is ``None``: the defaulter fills in only a missing field.
    """
    if mode is PodsMode.POLICY:
        policy = "None" if job.clean_pod_policy is None else job.clean_pod_policy
        if policy == "None":
            return []
        mode = PodsMode.ACTIVE if policy == "Running" else PodsMode.ALL
    owned = [pod for pod in pods if pod.controller_uid == job.uid and not pod.deleting]
    if mode is PodsMode.ALL:
        return owned
    return [pod for pod in owned if pod.phase in ("Running", "Pending")]


def services_to_delete(
    services: Iterable[Owned], job: Job, pod_names: Sequence[str]
) -> list[Owned]:
    """Choose the services to delete with their pods (same names, same owner). Pure."""
    names = set(pod_names)
    return [s for s in services if s.name in names and s.controller_uid == job.uid]
