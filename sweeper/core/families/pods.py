"""What a family whose controller labels its pods leaves behind: the pods, and their services.

The Training Operator v1 and mpi-operator keep a job's pods after its deadline failure unless
``cleanPodPolicy`` says otherwise, and default to ``None``; the deadline wins (docs/decisions.md):
they are reclaimed as ``--terminate-pods`` says, each with its same-named service.
"""

from __future__ import annotations

from collections.abc import Sequence

from sweeper.core.jobs import Job, Owned
from sweeper.core.kinds import COMPONENT, OPERATOR_PODS
from sweeper.core.model import (
    Action,
    ActionKind,
    Enforcement,
    Entry,
    PodsMode,
    Skip,
    SkipReason,
    Why,
)
from sweeper.core.plan import pods_to_terminate

LEFTOVERS = OPERATOR_PODS
RECLAIM_REASON = "DeadlinePodsTerminated"
NOTHING_LEFT = "no pods left to terminate"


def pods_mode(enforcement: Enforcement) -> PodsMode:
    """What ``--terminate-pods`` selects for a job failed by its deadline, with the release.

    ``policy`` keeps what the operator keeps: ``all`` under v1.7.0 to v1.9.3, which delete
    every pod at a deadline failure; ``cleanPodPolicy`` under v1.9.4 or an unknown release.
    """
    release, mode = enforcement.operator_version, enforcement.terminate_pods
    if mode is PodsMode.POLICY and release and release.deletes_every_pod_on_deadline:
        return PodsMode.ALL
    return mode


def reclaim(job: Job, enforcement: Enforcement, overdue: float | None) -> Entry:
    """Reclaim the pods of a job failed by its deadline (``policy`` keeps its controller's)."""
    mode = pods_mode(enforcement)
    if mode is PodsMode.POLICY:
        return Skip(
            job, SkipReason.FINISHED, overdue, "Failed; --terminate-pods policy keeps its pods"
        )
    detail = f"failed by its deadline; {mode.value} pods to terminate"
    return Action(job, ActionKind.TERMINATE_PODS, Why.FAILED_BY_DEADLINE, overdue, detail)


def reclaim_words(enforcement: Enforcement) -> str:
    """What follows its deadline failure, as a ``DeadlineApproaching`` warning says it."""
    mode = pods_mode(enforcement)
    if mode is PodsMode.POLICY:
        return "then its pods are kept or deleted as its cleanPodPolicy says"
    which = "all its pods" if mode is PodsMode.ALL else "its Running and Pending pods"
    return f"then {which} are deleted, giving their GPUs back"


def leftovers(owned: Sequence[Owned], job: Job, enforcement: Enforcement) -> list[Owned]:
    """The pods of a job its deadline failed that ``--terminate-pods`` deletes."""
    return pods_to_terminate(owned, job, pods_mode(enforcement))


def reclaimed_event(_job: Job, deleted: Sequence[str], companions: Sequence[str]) -> str:
    """The Event's message after a reclaim."""
    return (
        f"Deleted {len(deleted)} pod(s) and {len(companions)} service(s) "
        f"of a job failed by its deadline ({COMPONENT})"
    )
