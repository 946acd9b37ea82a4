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
        pytest.param(pod("Master", 0), 0.0, "Pending", id="master-before-its-time"),
        pytest.param(pod("Master", 0), 1.0, "Running", id="master-at-1s"),
        pytest.param(pod("Master", 0), 29.9, "Running", id="master-just-before-completion"),
        pytest.param(pod("Master", 0), 30.0, "Succeeded", id="master-completes-at-30s"),
        pytest.param(pod("Worker", 0), 2.9, "Pending", id="worker-0-just-before-3s"),
        pytest.param(pod("Worker", 0), 3.0, "Running", id="worker-0-at-3s"),
        pytest.param(pod("Worker", 1), 4.0, "Pending", id="worker-1-not-yet"),
        pytest.param(pod("Worker", 2), 7.0, "Running", id="worker-2-at-7s"),
        pytest.param(pod("Worker", 2), 60.0, "Running", id="workers-never-complete"),
    ],
)
def test_the_experiment_timeline(labels: dict[str, str], elapsed: float, phase: str) -> None:
    assert desired_phase(EXPERIMENT, labels, elapsed) == phase


@pytest.mark.parametrize(
    ("timeline", "labels", "phase"),
    [
        pytest.param(
            [Transition(1, "Running")],
            pod("Launcher", 0),
            "Running",
            id="no-replica-type-matches-every-pod",
        ),
        pytest.param(
            [Transition(1, "Running", "worker")],
            pod("Worker", 3),
            "Running",
            id="replica-type-is-case-insensitive",
        ),
        pytest.param(
            [Transition(1, "Running", "Worker", 0)],
            pod("Worker", 1),
            "Pending",
            id="index-selects-one-pod",
        ),
        pytest.param(
            [Transition(1, "Running"), Transition(1, "Failed")],
            pod("Worker", 0),
            "Failed",
            id="a-tie-goes-to-the-later-entry",
        ),
        pytest.param(
            [Transition(2, "Failed"), Transition(1, "Running")],
            pod("Worker", 0),
            "Failed",
            id="the-latest-due-transition-wins-whatever-the-order",
        ),
        pytest.param([], pod("Worker", 0), "Pending", id="no-transition-means-pending"),
    ],
)
def test_matching_and_precedence(
    timeline: list[Transition], labels: dict[str, str], phase: str
) -> None:
    assert desired_phase(timeline, labels, elapsed=5.0) == phase
