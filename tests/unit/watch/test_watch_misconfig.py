"""--watch with --training-operator-deployment: each resync pass sets the misconfigured gauge."""

from __future__ import annotations

from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION, MPIJOB
from sweeper.core.families.training_operator import PYTORCHJOB
from sweeper.k8s.cluster import ServedKind
from tests.unit.fakes import FakeCluster
from tests.unit.objects import NOW
from tests.unit.oneshot.test_misconfig import OTHERS, operator
from tests.unit.watch.conftest import Start
from tests.unit.watch.harness import wait_for

GAUGE = "deadline_sweeper_misconfigured"
WHAT = {"what": "training-operator-mpijob-scheme"}


def test_each_resync_pass_sets_the_gauge_from_the_deployment_as_it_is_then(start: Start) -> None:
    fake = FakeCluster(
        served=(ServedKind(PYTORCHJOB, "v1"), ServedKind(MPIJOB, MPI_OPERATOR_VERSION)), date=NOW
    )
    fake.deployments["kubeflow", "training-operator"] = operator()  # every scheme
    # Only PyTorchJobs swept: the operator's MPIJob controller crashes it for them too.
    run = start(
        fake, resync=0.05, training_operator_deployment=("kubeflow", "training-operator")
    ).listed()
    assert run.metric(GAUGE, **WHAT) == 0, "before the first pass"

    wait_for(lambda: run.metric(GAUGE, **WHAT) == 1, "a resync pass to find it")
    fake.deployments["kubeflow", "training-operator"] = operator(OTHERS)  # fixed
    wait_for(lambda: run.metric(GAUGE, **WHAT) == 0, "the next pass to find it fixed")
    run.stop()
