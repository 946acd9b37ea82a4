"""Faults that change the cluster under the sweeper: a CRD removed mid-run, the apiserver killed.

Both need a control plane of their own (one CRD deleted, or the apiserver SIGKILLed, would
break every other test of the session). The fault proxy triggers each fault at an exact point
of the run, just before a chosen request reaches the apiserver:

- the PyTorchJob CRD is deleted right before the sweeper's touch of a PyTorchJob: the patch
  gets the real 404, the job is left alone, jobs of the other kinds are still swept;
- the apiserver is killed right before the first pod delete of a ``fail``: the Failed status
  is written, the pods are not yet deleted. After a restart, the next run completes the
  cleanup; the job that was not overdue and the finished one are never touched.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from devcluster import ControlPlane, jobs, processes
from devcluster.kubelet import Kubelet, Transition
from devcluster.operator import Operator
from tests.e2e import clusters
from tests.e2e import workloads as w
from tests.e2e.clusters import explain_through, sweep_through
from tests.e2e.faultproxy import Before, FaultProxy, Rule, Seen

pytestmark = pytest.mark.e2e

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture
def own_control_plane() -> Iterator[ControlPlane]:
    with clusters.start_control_plane() as cp:
        yield cp


@pytest.fixture
def proxy(own_control_plane: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy.for_control_plane(own_control_plane, lifetime=300) as p:
        yield p


def failed(job: w.Obj) -> bool:
    conditions = job.get("status", {}).get("conditions", [])
    return any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)


# --- a CRD removed mid-run --------------------------------------------------------------------


def delete_crd(cp: ControlPlane, plural: str) -> None:
    """Delete a CRD and wait until its resource is no longer served."""
    cp.request("DELETE", f"{CRDS}/{plural}.kubeflow.org")
    processes.wait_until(
        lambda: cp.request("GET", f"/apis/kubeflow.org/v1/{plural}", expect=(404,)) is not None,
        timeout=60,
        what=f"{plural} to stop being served",
    )


def test_a_crd_removed_mid_run_gives_the_real_404_and_the_other_kinds_are_still_swept(
    own_control_plane: ControlPlane, proxy: FaultProxy
) -> None:
    cp = own_control_plane
    namespace = cp.create_namespace("crd-removed")
    w.create_job(cp, namespace, "late-pytorch", kind="PyTorchJob")
    w.create_job(cp, namespace, "late-xgboost", kind="XGBoostJob")
    proxy.rules.append(
        Rule(
            Before(lambda _seen: delete_crd(cp, "pytorchjobs"), name="delete-crd-first"),
            "PATCH",
            r"/pytorchjobs/late-pytorch$",
        )
    )

    run = sweep_through(cp, proxy, "-o", "json", "--action", "touch")

    assert run.result.returncode == 0, explain_through(run, proxy)
    [hit] = [s for s in proxy.seen if s.fault == "delete-crd-first"]
    assert hit.upstream_status == 404
    jobs = run.jobs_by_name()
    assert jobs["late-pytorch"]["result"] == "left-alone", jobs["late-pytorch"]
    assert jobs["late-xgboost"]["result"] == "done"
    xgboost = w.get_job(cp, namespace, "XGBoostJob", "late-xgboost")
    assert w.TOUCHED_AT in xgboost["metadata"]["annotations"]
    assert "Traceback" not in run.result.stderr


# --- the apiserver killed in the middle of a fail ---------------------------------------------


def test_the_apiserver_killed_between_status_write_and_pod_deletes_then_the_next_run_cleans_up(
    own_control_plane: ControlPlane, proxy: FaultProxy
) -> None:
    cp = own_control_plane
    namespace = cp.create_namespace("killed")
    late = w.create_job(cp, namespace, "late")
    w.create_replicas(cp, late, {"Master": ["Running"], "Worker": ["Running", "Running"]})
    early = w.create_job(cp, namespace, "early", deadline=7200)
    w.create_replicas(cp, early, {"Master": ["Running"]})
    done = w.create_job(cp, namespace, "done", finished="Succeeded")
    untouched = {
        name: w.get_job(cp, namespace, "PyTorchJob", name)["metadata"]["resourceVersion"]
        for name in ("early", "done")
    }
    killed: list[processes.Process] = []

    def kill(_seen: Seen) -> None:
        killed.append(cp.kill_apiserver())

    proxy.rules.append(Rule(Before(kill, name="kill-apiserver"), "DELETE", r"/pods/late-"))

    crashed = sweep_through(cp, proxy, "-o", "json", "--action", "fail", "--timeout", "40")

    assert killed, proxy.describe()
    cp.revive_apiserver(killed[0])
    # The Failed status reached etcd before the kill; no pod was deleted.
    after_crash = w.get_job(cp, namespace, "PyTorchJob", "late")
    assert failed(after_crash), explain_through(crashed, proxy)
    assert w.names(cp, namespace, "pods") == {
        "late-master-0",
        "late-worker-0",
        "late-worker-1",
        "early-master-0",
    }
    # Exit 1: the run completed, with the pod deletes of one job failed and named.
    assert crashed.result.returncode == 1, explain_through(crashed, proxy)
    assert "Traceback" not in crashed.result.stderr
    errors = crashed.jobs_by_name()["late"]["errors"]
    assert any("delete pods 'late-" in e and namespace in e for e in errors), errors
    assert crashed.jobs_by_name()["late"]["result"] == "done"  # its status write did happen
    status_writes = [s.index for s in proxy.matching("PATCH", r"/late/status$")]
    first_delete = min(s.index for s in proxy.matching("DELETE", r"/pods/"))
    assert status_writes
    assert max(status_writes) < first_delete  # status first, then pods: never the reverse

    proxy.rules.clear()
    proxy.upstream = cp.server
    again = sweep_through(cp, proxy, "-o", "json", "--action", "fail")

    assert again.result.returncode == 0, explain_through(again, proxy)
    jobs = again.jobs_by_name()
    assert (jobs["late"]["decision"], jobs["late"]["result"]) == ("terminate-pods", "done")
    assert w.names(cp, namespace, "pods") == {"early-master-0"}
    assert w.names(cp, namespace, "services") == {"early-master-0"}
    assert failed(w.get_job(cp, namespace, "PyTorchJob", "late"))
    # The job that was not overdue, and the finished one, were never written to.
    for name, version in untouched.items():
        assert (
            w.get_job(cp, namespace, "PyTorchJob", name)["metadata"]["resourceVersion"] == version
        )
    assert not proxy.matching("PATCH", r"/(early|done)(/status)?$")
    assert done["metadata"]["name"] == "done"


# --- the same crash with the real operator watching -------------------------------------------

# Short, so that the test waits little for the job to become overdue.
OPERATOR_DEADLINE_S = 15
# How long the test watches for pods the operator might recreate: it reacts to a pod deletion
# within a second or two, so this is ample, and it bounds an observation, it measures nothing.
WATCH_S = 10.0


def job_pods(cp: ControlPlane, namespace: str, name: str) -> list[w.Obj]:
    selector = f"{w.JOB_NAME_LABEL}={name}"
    pods: list[w.Obj] = cp.request(
        "GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}"
    )["items"]
    return pods


@pytest.mark.operator
def test_with_the_operator_a_job_failed_before_the_crash_never_gets_its_pods_back(
    own_control_plane: ControlPlane, proxy: FaultProxy
) -> None:
    cp = own_control_plane
    clusters.require_binaries("training-operator")
    with Operator.start(cp) as operator:
        namespace = cp.create_namespace("killed-op")
        body = jobs.manifest(
            "PyTorchJob", "late", active_deadline_seconds=OPERATOR_DEADLINE_S, workers=1
        )
        jobs.create(cp.api(), namespace, body)
        with Kubelet(cp.api(), namespace, "late", [Transition(at=0.5, phase="Running")]).start():
            processes.wait_until(
                lambda: (
                    len(job_pods(cp, namespace, "late")) == 2
                    and all(
                        p["status"].get("phase") == "Running"
                        for p in job_pods(cp, namespace, "late")
                    )
                ),
                timeout=120,
                what="the operator's pods to run",
            )
        deadline = jobs.get(cp.api(), "PyTorchJob", namespace, "late").deadline
        assert deadline is not None
        # The operator's own deadline check never fires for a stable job: that is the bug.
        processes.wait_until(
            lambda: dt.datetime.now(dt.UTC) > deadline + dt.timedelta(seconds=2),
            timeout=OPERATOR_DEADLINE_S + 60,
            what="the job's deadline to pass",
        )
        killed: list[processes.Process] = []
        proxy.rules.append(
            Rule(
                Before(lambda _s: killed.append(cp.kill_apiserver()), name="kill"),
                "DELETE",
                r"/pods/",
            )
        )

        crashed = sweep_through(
            cp, proxy, "-o", "json", "-n", namespace, "--action", "fail", "--timeout", "40"
        )

        assert killed, explain_through(crashed, proxy)
        cp.revive_apiserver(killed[0])
        assert failed(w.get_job(cp, namespace, "PyTorchJob", "late")), explain_through(
            crashed, proxy
        )
        proxy.rules.clear()
        again = sweep_through(cp, proxy, "-o", "json", "-n", namespace, "--action", "fail")

        assert again.result.returncode == 0, explain_through(again, proxy)
        assert job_pods(cp, namespace, "late") == []
        # Watch the operator, which reconnected to the restarted apiserver meanwhile: a job
        # that is Failed keeps no pods, and gets none back.
        with pytest.raises(TimeoutError):
            processes.wait_until(
                lambda: job_pods(cp, namespace, "late") != [],
                timeout=WATCH_S,
                what="a recreated pod",
            )
        assert failed(w.get_job(cp, namespace, "PyTorchJob", "late"))
        assert operator.running
