"""``--namespace a --namespace b`` against a real apiserver: no request ever leaves a and b.

The audit log shows every request the sweeper made; each one about a resource must name
namespace a or b (discovery requests are about no resource). A third namespace with an
overdue job shows the restriction from the other side: nothing there changes.
"""

from __future__ import annotations

import pytest

from tests.e2e import clusters
from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e


@pytest.fixture
def three_namespaces(control_plane, namespace):
    others = [control_plane.create_namespace("ns-b"), control_plane.create_namespace("ns-c")]
    names = [namespace, *others]
    for ns in names:
        job = w.create_job(control_plane, ns, "late")
        w.create_replicas(control_plane, job, {"Master": ["Running"], "Worker": ["Running"]})
    yield names
    for ns in others:
        clusters.empty_namespace(control_plane, ns)
        control_plane.request("DELETE", f"/api/v1/namespaces/{ns}")


@pytest.mark.parametrize("action", ["touch", "fail", "auto"], ids=str)
def test_requests_stay_inside_the_given_namespaces(control_plane, three_namespaces, sweep, action):
    a, b, c = three_namespaces
    before_c = w.get_job(control_plane, c, "PyTorchJob", "late")

    run = sweep("-n", a, "-n", b, "--action", action)

    assert run.result.returncode == 0, run.explain()
    about_resources = [e for e in run.requests if e.get("objectRef", {}).get("resource")]
    outside = [
        e["requestURI"] for e in about_resources if e["objectRef"].get("namespace") not in {a, b}
    ]
    assert outside == [], run.explain()
    assert {e["objectRef"]["namespace"] for e in w.writes(run.requests)} == {a, b}
    after_c = w.get_job(control_plane, c, "PyTorchJob", "late")
    assert after_c["metadata"]["resourceVersion"] == before_c["metadata"]["resourceVersion"]
    assert w.names(control_plane, c, "pods") == {"late-master-0", "late-worker-0"}
