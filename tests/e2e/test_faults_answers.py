"""Answers that are not the apiserver's JSON: an auth proxy's sign-in page, a truncated body.

The fault proxy sits in front of the real kube-apiserver and replaces one answer with an HTML
page served as 200 (what oauth2-proxy or an SSO gateway sends a client whose session expired),
or forwards the request and cuts the real answer short. For discovery or a list, the pass is a
cluster state: exit 3, the request and the server named, the pass reported, nothing written.
During ``--action fail``, it is the one job's error: the other job is failed all the same and
the run exits 1 (issue 19, item 9; it exited 70 with a JSONDecodeError before).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devcluster import ControlPlane
from devcluster.kubeconfig import CONTEXT
from tests.e2e import workloads as w
from tests.e2e.clusters import explain_through, sweep_through
from tests.e2e.faultproxy import FaultProxy, Garble, Rule

pytestmark = pytest.mark.e2e

LIST = r"/apis/kubeflow\.org/v1/namespaces/[^/]+/pytorchjobs\?"


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy.for_control_plane(control_plane, lifetime=300) as p:
        yield p


@pytest.fixture
def two_late(control_plane: ControlPlane, namespace: str) -> str:
    for name in ("late-a", "late-b"):
        job = w.create_job(control_plane, namespace, name)
        w.create_replicas(control_plane, job, {"Master": ["Running"]})
    return namespace


def failed(cp: ControlPlane, namespace: str, name: str) -> bool:
    conditions = (
        w.get_job(cp, namespace, "PyTorchJob", name).get("status", {}).get("conditions", [])
    )
    return any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)


@pytest.mark.parametrize(
    "rule",
    [
        pytest.param(Rule(Garble(), "GET", r"^/apis/kubeflow\.org$"), id="discovery-sign-in-page"),
        pytest.param(Rule(Garble(), "GET", LIST), id="list-sign-in-page"),
        pytest.param(Rule(Garble(truncate=40), "GET", LIST), id="list-truncated"),
        pytest.param(
            Rule(Garble(b"{}", content_type="application/json"), "GET", LIST),
            id="list-without-items",
        ),
    ],
)
def test_a_garbled_listing_exits_3_naming_the_server_and_writes_nothing(
    control_plane: ControlPlane, two_late: str, proxy: FaultProxy, rule: Rule
) -> None:
    proxy.rules.append(Rule(rule.fault, rule.method, rule.path, times=None))  # every attempt

    run = sweep_through(control_plane, proxy, "-o", "json", "-n", two_late)

    assert run.result.returncode == 3, explain_through(run, proxy)
    last = run.result.stderr.splitlines()[-1]
    assert last.startswith("sweeper: error: cannot "), last
    assert "undecodable answer (HTTP 200, " in last, last
    assert last.endswith(f'(server {proxy.url}, context "{CONTEXT}")'), last
    (report,) = w.passes(run.result.stdout)
    assert "undecodable answer" in report["summary"]["stopped_by"]
    assert proxy.writes() == [], proxy.describe()
    assert "Traceback" not in run.result.stderr


@pytest.mark.parametrize(
    "rule",
    [
        pytest.param(Rule(Garble(), "GET", r"/pytorchjobs/late-a$"), id="re-read-sign-in-page"),
        pytest.param(
            Rule(Garble(truncate=25), "PATCH", r"/pytorchjobs/late-a/status"),
            id="status-truncated",
        ),
    ],
)
def test_during_fail_a_garbled_answer_is_one_jobs_error_and_the_other_is_failed(
    control_plane: ControlPlane, two_late: str, proxy: FaultProxy, rule: Rule
) -> None:
    proxy.rules.append(Rule(rule.fault, rule.method, rule.path, times=None))  # every attempt
    fault = rule.fault
    assert isinstance(fault, Garble)

    run = sweep_through(control_plane, proxy, "-o", "json", "-n", two_late, "--action", "fail")

    assert run.result.returncode == 1, explain_through(run, proxy)
    jobs = run.jobs_by_name()
    assert jobs["late-b"]["result"] == "done", jobs
    assert failed(control_plane, two_late, "late-b")
    assert jobs["late-a"]["result"] == "error", jobs
    assert any("undecodable answer" in e for e in jobs["late-a"]["errors"]), jobs
    # The truncated answer came after the write: the job is failed, but the run cannot know.
    assert failed(control_plane, two_late, "late-a") == (fault.truncate is not None)
    assert "Traceback" not in run.result.stderr
