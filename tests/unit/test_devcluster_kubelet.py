"""The stand-in kubelet's timeline (devcluster.kubelet): which phase a pod should have, when."""

from __future__ import annotations

import pytest

from devcluster.kubelet import (
    REPLICA_INDEX_LABEL,
    REPLICA_TYPE_LABEL,
    Transition,
    desired_phase,
    staggered,
)

EXPERIMENT = staggered(master_running=1, workers_running=[3, 5, 7], master_succeeded=30)


def pod(replica_type: str, index: int) -> dict[str, str]:
    # The operator writes replica types in lower case.
    return {REPLICA_TYPE_LABEL: replica_type.lower(), REPLICA_INDEX_LABEL: str(index)}


@pytest.mark.parametrize(
    ("labels", "elapsed", "phase"),
    [
        (pod("Master", 0), 0.0, "Pending"),
        (pod("Master", 0), 1.0, "Running"),
        (pod("Master", 0), 29.9, "Running"),
        (pod("Master", 0), 30.0, "Succeeded"),
        (pod("Worker", 0), 2.9, "Pending"),
        (pod("Worker", 0), 3.0, "Running"),
        (pod("Worker", 1), 4.0, "Pending"),
        (pod("Worker", 2), 7.0, "Running"),
        (pod("Worker", 2), 60.0, "Running"),
    ],
    ids=[
        "master-before-its-time",
        "master-at-1s",
        "master-just-before-completion",
        "master-completes-at-30s",
        "worker-0-just-before-3s",
        "worker-0-at-3s",
        "worker-1-not-yet",
        "worker-2-at-7s",
        "workers-never-complete",
    ],
)
def test_the_experiment_timeline(labels: dict[str, str], elapsed: float, phase: str) -> None:
    assert desired_phase(EXPERIMENT, labels, elapsed) == phase


@pytest.mark.parametrize(
    ("timeline", "labels", "phase"),
    [
        ([Transition(1, "Running")], pod("Launcher", 0), "Running"),
        ([Transition(1, "Running", "worker")], pod("Worker", 3), "Running"),
        ([Transition(1, "Running", "Worker", 0)], pod("Worker", 1), "Pending"),
        ([Transition(1, "Running"), Transition(1, "Failed")], pod("Worker", 0), "Failed"),
        ([Transition(2, "Failed"), Transition(1, "Running")], pod("Worker", 0), "Failed"),
        ([], pod("Worker", 0), "Pending"),
    ],
    ids=[
        "no-replica-type-matches-every-pod",
        "replica-type-is-case-insensitive",
        "index-selects-one-pod",
        "a-tie-goes-to-the-later-entry",
        "the-latest-due-transition-wins-whatever-the-order",
        "no-transition-means-pending",
    ],
)
def test_matching_and_precedence(
    timeline: list[Transition], labels: dict[str, str], phase: str
) -> None:
    assert desired_phase(timeline, labels, elapsed=5.0) == phase
