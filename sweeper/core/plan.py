"""A pass's plan from its judged entries: ``--max-actions``, the order, the clean-ups' targets.

Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from sweeper.core.jobs import Job, Owned
from sweeper.core.model import (
    CLEAN_UPS,
    Action,
    Enforcement,
    Entry,
    Plan,
    PodsMode,
    Skip,
    SkipReason,
    Why,
)

# What of a job's leftovers a clean-up deletes, and what its family says when that is nothing.
Select = Callable[[Sequence[Owned], Job, Enforcement], tuple[Sequence[Owned], str]]


def assemble(
    entries: Iterable[Entry],
    now: datetime,
    enforcement: Enforcement,
    pods: Mapping[str, Sequence[Owned]] | None = None,
    select: Select | None = None,
) -> Plan:
    """Make the plan of entries judged one by one (a pass judges each page as it comes).

    ``pods`` is what the jobs failed by their deadline left, by controller uid: a clean-up
    whose job is a key gets its targets chosen here by ``select`` (none: a ``finished`` skip,
    taking no ``--max-actions`` slot and no request); one that is not (its scope could not be
    listed) keeps the action, and the executor reads its leftovers itself.
    """
    listed = list(entries)
    if pods is not None and select is not None:
        listed = [_with_targets(entry, pods, enforcement, select) for entry in listed]
    if enforcement.max_actions is not None:
        listed = _cap(listed, enforcement.max_actions)
    return Plan(now=now, enforcement=enforcement, entries=tuple(listed))


def _with_targets(
    entry: Entry, owned: Mapping[str, Sequence[Owned]], enforcement: Enforcement, select: Select
) -> Entry:
    if not isinstance(entry, Action) or entry.kind not in CLEAN_UPS:
        return entry
    found = owned.get(entry.job.uid)
    if found is None:
        return entry
    chosen, left = select(found, entry.job, reclaim_policy(entry, enforcement))
    if not chosen:
        finished = entry.job.finished or "Failed"
        return Skip(entry.job, SkipReason.FINISHED, entry.seconds_overdue, f"{finished}; {left}")
    return replace(entry, targets=tuple(chosen))


def reclaim_policy(action: Action, enforcement: Enforcement) -> Enforcement:
    """The policy a clean-up's leftovers are chosen under. Pure.

    A platform rule's ``startDeadline`` and ``reclaimFailedAfter`` free the GPUs their job
    holds: its Running and Pending pods, whatever ``--terminate-pods`` says.
    """
    if action.why in (Why.START_DEADLINE, Why.FINISHED_HOLDING):
        return replace(enforcement, terminate_pods=PodsMode.ACTIVE)
    return enforcement


def _priority(entries: Sequence[Entry], index: int) -> tuple[int, float, int]:
    # Touches and fails before pod clean-ups, then the most overdue first, then listing order.
    entry = entries[index]
    assert isinstance(entry, Action)  # noqa: S101 - only actions are ranked
    cleanup = 1 if entry.kind in CLEAN_UPS else 0
    return (cleanup, -(entry.seconds_overdue or 0.0), index)


def _ranked(entries: Sequence[Entry]) -> tuple[int, ...]:
    actions = (i for i, e in enumerate(entries) if isinstance(e, Action))
    return tuple(sorted(actions, key=lambda i: _priority(entries, i)))


def _cap(entries: list[Entry], limit: int) -> list[Entry]:
    capped = list(entries)
    for index in _ranked(entries)[max(limit, 0) :]:
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
    """The order to run a plan's actions in, as indices into ``plan.entries``. Pure.

    Touches and fails first, then clean-ups, the most overdue first: a stopped pass leaves the
    least urgent ``not-started``. The same order ``--max-actions`` selects by.
    """
    return _ranked(plan.entries)


def pods_to_terminate(pods: Iterable[Owned], job: Job, mode: PodsMode) -> list[Owned]:
    """The pods of a failed job the mode deletes: those it controls, not being deleted. Pure.

    ``policy`` reads ``cleanPodPolicy`` as the v1.9.4 operator does: absent or ``None`` keeps
    every pod, ``Running`` deletes the Running and Pending ones, any other value all of them
    (the CRD has no enum).
    """
    if mode is PodsMode.POLICY:
        enforcement = "None" if job.clean_pod_policy is None else job.clean_pod_policy
        if enforcement == "None":
            return []
        mode = PodsMode.ACTIVE if enforcement == "Running" else PodsMode.ALL
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
