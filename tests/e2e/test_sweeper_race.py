"""A job that finishes while the sweeper is failing it is never marked Failed.

The race is made deterministic without any hook in the product: the sweeper talks to the real
apiserver through the fault proxy, whose ``Before`` rule holds one chosen request of the
sweeper, lets the "operator" (the test, as admin) mark the job Succeeded through ``/status``
exactly as the operator would, and only then forwards the held request. Two moments matter:

- between the list and the re-read (``GET`` of the job): the re-read must see Succeeded;
- between the re-read and the status write (``PATCH .../status``): the write still carries
  the resourceVersion read before the job changed, so the real apiserver must answer 409
  Conflict, and the sweeper must read again, see Succeeded, and leave the job alone.

Both orders happen with the real API semantics (resourceVersion, merge patch on ``/status``);
only the timing is chosen by the test.
"""

from __future__ import annotations

import pytest

from devcluster import ControlPlane
from tests.e2e import clusters
from tests.e2e import workloads as w
from tests.e2e.faultproxy import PROXY_USER, Before, FaultProxy, Rule

pytestmark = pytest.mark.e2e


def succeed(cp: ControlPlane, namespace: str, name: str) -> None:
    """Finish the job as the operator would: Running flips to False, Succeeded=True appended."""
    job = w.get_job(cp, namespace, "PyTorchJob", name)
    status = w.operator_status("PyTorchJob", job["status"]["startTime"], finished="Succeeded")
    w.set_status(cp, namespace, "PyTorchJob", name, status)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", r"/pytorchjobs/late$"),
        ("PATCH", r"/pytorchjobs/late/status$"),
    ],
    ids=["succeeds-between-list-and-re-read", "succeeds-between-re-read-and-status-write"],
)
def test_a_job_that_succeeds_meanwhile_is_not_marked_failed(control_plane, namespace, method, path):
    job = w.create_job(control_plane, namespace, "late")
    pods = w.create_replicas(control_plane, job, {"Master": ["Running"], "Worker": ["Running"]})
    rule = Rule(
        Before(lambda _seen: succeed(control_plane, namespace, "late"), name="operator-succeeds"),
        method,
        path,
    )

    with FaultProxy.for_control_plane(control_plane, rules=[rule]) as proxy:
        run = clusters.sweep(
            control_plane, proxy.kubeconfig, PROXY_USER, "-n", namespace, "--action", "fail"
        )
        status_writes = proxy.matching("PATCH", r"/pytorchjobs/late/status")

    assert rule.matched >= 1, "the race was never staged: " + run.explain()
    assert run.result.returncode == 0, run.explain()
    after = w.get_job(control_plane, namespace, "PyTorchJob", "late")
    conditions = {c["type"]: c["status"] for c in after["status"]["conditions"]}
    assert conditions == {"Created": "True", "Running": "False", "Succeeded": "True"}
    assert w.names(control_plane, namespace, "pods") == set(pods)
    if method == "PATCH":
        # The held write carried the resourceVersion read before the job succeeded.
        assert [s.upstream_status for s in status_writes] == [409], run.explain()
        assert status_writes[0].json()["metadata"]["resourceVersion"] == job_rv_before(job, after)
    else:
        assert status_writes == [], run.explain()


def job_rv_before(created: w.Obj, after: w.Obj) -> str:
    """The resourceVersion the sweeper read: the created job's, since nothing else changed it."""
    assert created["metadata"]["resourceVersion"] != after["metadata"]["resourceVersion"]
    return str(created["metadata"]["resourceVersion"])
