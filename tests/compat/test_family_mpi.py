"""mpi-operator v0.8.2 (MPIJob v2beta1) on each Kubernetes minor of ``CELLS``: the reclaim, real.

On the cell's kube-apiserver, with its kube-controller-manager (whose Job controller enforces
the launcher's ``activeDeadlineSeconds``) and the real mpi-operator, an MPIJob with the default
``cleanPodPolicy`` is failed at its deadline with its workers still Running; one sweeper run
with the defaults deletes them and the MPIJob stays Failed. The e2e tier
(``tests/e2e/test_family_mpi_*``) proves the rest of the family on the pinned minor.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e import clusters, families
from tests.e2e.conftest_families import MPICluster

pytestmark = [pytest.mark.compat]

FAMILY = "mpi-operator"
# Long enough for the workers to be made Running before it, even on a busy machine.
ADS = 6


def test_the_workers_left_after_the_launchers_deadline_are_deleted(
    mpi_cluster: MPICluster,
    family_namespace: str,
    family_sweep: Callable[..., clusters.Sweep],
) -> None:
    cp, namespace = mpi_cluster.cp, family_namespace
    workers = families.start_mpijob(cp, namespace, "kept", ads=ADS)
    failed = families.mpijob_failed(cp, namespace, "kept")
    assert (families.condition(failed, "Failed") or {}).get("reason") == "DeadlineExceeded"
    launcher = families.get(cp, families.JOBS, namespace, "kept-launcher")
    assert (families.condition(launcher, "Failed") or {}).get("reason") == "DeadlineExceeded"
    names = [pod["metadata"]["name"] for pod in workers]
    assert families.active_mpi_workers(cp, namespace, "kept") == names, "premise: they stayed"

    run = family_sweep("-n", namespace)

    assert run.result.returncode == 0, run.explain()
    assert families.active_mpi_workers(cp, namespace, "kept") == [], run.explain()
    assert families.events_on(cp, namespace, failed) == ["DeadlinePodsTerminated"]
    after = families.get(cp, families.MPIJOBS, namespace, "kept")
    assert families.condition(after, "Failed") is not None, "the MPIJob stays Failed"
