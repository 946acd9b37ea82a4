"""Trainer v2.3.0 with JobSet v0.12.0 on each Kubernetes minor of ``CELLS``: the reclaim, real.

On the cell's kube-apiserver, with its kube-controller-manager and the real JobSet and trainer
(their webhooks and the ``torch-distributed`` runtime), a TrainJob's JobSet whose delete the API
server refused at the deadline (a ValidatingAdmissionPolicy) outlives the failure: the trainer
never tries again. Once the refusal is lifted, one sweeper run deletes the JobSet and the
TrainJob stays Failed. The e2e tier (``tests/e2e/test_family_trainer_*``) proves the rest of
the family on the pinned minor.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e import clusters, families
from tests.e2e.conftest_families import TrainerCluster
from tests.e2e.conftest_operator import poll

pytestmark = [pytest.mark.compat]

FAMILY = "trainer"
# Long enough for the trainer to make the JobSet and the policy to take effect before it.
ADS = 8


def _failed_reason(cluster: TrainerCluster, namespace: str) -> str | None:
    failed = families.condition(
        families.get(cluster.cp, families.TRAINJOBS, namespace, "train"), "Failed"
    )
    return None if failed is None else str(failed["reason"])


def test_a_jobset_left_by_a_refused_delete_is_deleted_once_the_refusal_is_lifted(
    trainer_cluster: TrainerCluster,
    family_namespace: str,
    family_sweep: Callable[..., clusters.Sweep],
) -> None:
    cp, namespace = trainer_cluster.cp, family_namespace
    with families.refusing_jobset_deletes(cp, namespace):
        families.start_trainjob(cp, namespace, "train", ads=ADS)
        poll(
            lambda: families.jobset_delete_refused(cp, namespace, "train"),
            what="the policy to refuse deleting the JobSet",
        )
        assert _failed_reason(trainer_cluster, namespace) is None, "premise: refused in time"
        poll(
            lambda: _failed_reason(trainer_cluster, namespace) == "DeadlineExceeded",
            what="the trainer to fail the TrainJob at its deadline",
        )
    poll(
        lambda: not families.jobset_delete_refused(cp, namespace, "train"),
        what="the lifted policy to stop refusing",
    )
    jobset = families.get(cp, families.JOBSETS, namespace, "train")
    assert jobset is not None, "premise: the refused delete left the JobSet"
    assert not jobset["metadata"].get("deletionTimestamp"), "premise: and nothing deletes it"

    run = family_sweep("-n", namespace, "--reclaim-grace", "0s")

    assert run.result.returncode == 0, run.explain()
    poll(
        lambda: families.get(cp, families.JOBSETS, namespace, "train") is None,
        what="the JobSet to be gone",
    )
    assert _failed_reason(trainer_cluster, namespace) == "DeadlineExceeded", "it stays Failed"
