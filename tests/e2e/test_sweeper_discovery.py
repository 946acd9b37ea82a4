"""Discovery against a real apiserver: six kinds found; a kind whose CRD is gone is skipped.

Deleting a CRD is global and slow to undo, so those tests start a control plane of their own.
The mid-run deletion goes through the fault proxy: its ``Before`` rule deletes the CRD (and
waits until the apiserver stops serving it) just before the sweeper's list of that kind
reaches the apiserver, which is the moment between discovery and list, deterministically.
"""

from __future__ import annotations

import pytest

from devcluster import ControlPlane, binaries, jobs, processes
from tests.e2e import clusters
from tests.e2e import workloads as w
from tests.e2e.faultproxy import PROXY_USER, Before, FaultProxy, Rule

pytestmark = pytest.mark.e2e

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture
def own_control_plane():
    """A control plane for one test, whose CRDs it may delete."""
    with clusters.start_control_plane() as cp:
        yield cp


def delete_crd(cp: ControlPlane, plural: str) -> None:
    """Delete a CRD and wait until its resource is no longer served."""
    cp.request("DELETE", f"{CRDS}/{plural}.kubeflow.org")

    def gone():
        served = {r["name"] for r in cp.request("GET", "/apis/kubeflow.org/v1")["resources"]}
        # Raises (so: not yet) while the resource still answers.
        cp.request("GET", f"/apis/kubeflow.org/v1/{plural}", expect=(404,))
        return plural not in served

    processes.wait_until(gone, timeout=60, what=f"CRD {plural} to be gone")


def test_discovery_finds_the_six_kinds(control_plane, namespace, sweep):
    # The six this release serves: up to v1.8.x MXJob instead of JAXJob.
    served = jobs.served_kinds(binaries.version("training-operator"))
    for kind in served:
        w.create_job(control_plane, namespace, f"{kind.lower()}-late", kind=kind)

    run = sweep("-n", namespace, "--dry-run", "-o", "json")

    assert run.result.returncode == 0, run.explain()
    assert {j["kind"] for j in w.report_jobs(run.result.stdout)} == set(served)
    listed = {e["objectRef"]["resource"] for e in run.requests if e["verb"] == "list"}
    # Every served kind, and the namespace's pods: the GPUs held for nothing are read from them.
    assert listed == {jobs.kind_info(k).plural for k in served} | {"pods"}


def test_a_kind_whose_crd_was_deleted_is_skipped_cleanly(own_control_plane):
    cp = own_control_plane
    namespace = cp.create_namespace("crd-gone")
    w.create_job(cp, namespace, "late", kind="PyTorchJob")
    delete_crd(cp, "tfjobs")
    kubeconfig = cp.user_kubeconfig(clusters.SWEEPER_USER, ["system:masters"])

    run = clusters.sweep(cp, kubeconfig, clusters.SWEEPER_USER, "--action", "touch", "-o", "json")

    assert run.result.returncode == 0, run.explain()
    assert "Traceback" not in run.result.stderr
    assert [(j["kind"], j["name"]) for j in w.report_jobs(run.result.stdout)] == [
        ("PyTorchJob", "late")
    ]
    assert w.TOUCHED_AT in w.get_job(cp, namespace, "PyTorchJob", "late")["metadata"]["annotations"]
    assert not [e for e in run.requests if (e.get("objectRef") or {}).get("resource") == "tfjobs"]


def test_a_crd_deleted_between_discovery_and_list_is_skipped_cleanly(own_control_plane):
    cp = own_control_plane
    namespace = cp.create_namespace("crd-vanishes")
    w.create_job(cp, namespace, "late", kind="PyTorchJob")
    rule = Rule(
        Before(lambda _seen: delete_crd(cp, "xgboostjobs"), name="delete-crd"),
        "GET",
        r"/xgboostjobs\?",
    )

    with FaultProxy.for_control_plane(cp, rules=[rule]) as proxy:
        run = clusters.sweep(cp, proxy.kubeconfig, PROXY_USER, "--action", "touch", "-o", "json")

    assert rule.matched >= 1, "the sweeper never listed xgboostjobs: " + run.explain()
    assert run.result.returncode == 0, run.explain()
    assert "Traceback" not in run.result.stderr
    assert [(j["kind"], j["name"]) for j in w.report_jobs(run.result.stdout)] == [
        ("PyTorchJob", "late")
    ]
    assert w.TOUCHED_AT in w.get_job(cp, namespace, "PyTorchJob", "late")["metadata"]["annotations"]
