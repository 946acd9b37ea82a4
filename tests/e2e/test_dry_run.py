"""``--dry-run`` against a real apiserver, proven from the audit log: nothing can be written.

Client dry-run (bare ``--dry-run``) sends no write request at all. Server dry-run sends its
writes with ``dryRun=All``, which the apiserver validates and authorizes but never persists.
The namespace holds a job overdue by seconds and never touched, one an hour overdue that the
sweeper touched half an hour ago, both with running pods, and one already failed by its
deadline whose pods are still running, so that touch, fail, auto and the pod clean-up all have
something to write (``auto`` touches the first, and fails the second: it is more than
``--escalate-after`` past its deadline and its touch). Proven here:

- client dry-run sends no write for any ``--action`` x ``--terminate-pods`` combination, and
  plans what a real run would do; none through the ``SWEEPER_DRY_RUN`` twin either;
- server dry-run, for every ``--action``, sends each write as ``dryRun=All``, and persists
  nothing, not even an Event;
- client dry-run needs no write permission at all, while server dry-run is checked by RBAC
  (a read-only identity gets 403 on every write, reported per job) and persists nothing, not
  even an Event;
- the patch a client dry-run reports is the one a real run then sends.
"""

from __future__ import annotations

import datetime as dt
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from tests.e2e import clusters
from tests.e2e import workloads as w
from tests.e2e.faultproxy import PROXY_USER, FaultProxy

pytestmark = pytest.mark.e2e

ACTIONS = ["touch", "fail", "auto"]
PODS_MODES = ["active", "all", "policy"]
ESCALATE_AFTER = ["--escalate-after", "600"]
# What each action plans for (never touched, touched 30 min ago) with --escalate-after 600.
PLANNED = {
    "touch": {"untouched": "touch", "touched": "touch"},
    "fail": {"untouched": "fail", "touched": "fail"},
    "auto": {"untouched": "touch", "touched": "fail"},
}


@pytest.fixture
def every_path(control_plane: ControlPlane, namespace: str) -> str:
    """Jobs that make every action mode want to write: touch, fail, escalate, clean pods."""
    half_an_hour_ago = w.stamp(w.now() - dt.timedelta(minutes=30))
    # "untouched" is overdue by seconds: auto touches it (an hour overdue, auto would fail it).
    for name, deadline, marks in [
        ("untouched", 3590, {}),
        ("touched", 60, {w.TOUCHED_AT: half_an_hour_ago}),
    ]:
        job = w.create_job(control_plane, namespace, name, deadline=deadline, annotations=marks)
        w.create_replicas(control_plane, job, {"Master": ["Running"], "Worker": ["Pending"]})
    done = w.failed_by_its_deadline(control_plane, namespace, "failed-by-deadline")
    w.create_replicas(control_plane, done, {"Master": ["Running"], "Worker": ["Succeeded"]})
    return namespace


def dry_run_query(event: w.Obj) -> list[str] | None:
    return urllib.parse.parse_qs(urllib.parse.urlsplit(event["requestURI"]).query).get("dryRun")


@pytest.mark.parametrize("pods", PODS_MODES, ids=str)
@pytest.mark.parametrize("action", ACTIONS, ids=str)
def test_client_dry_run_sends_no_write_for_any_action_and_pods_mode(
    control_plane: ControlPlane, every_path: str, sweep: Any, action: str, pods: str
) -> None:
    before = w.namespace_state(control_plane, every_path)

    run = sweep(
        "-n",
        every_path,
        "--action",
        action,
        "--terminate-pods",
        pods,
        *ESCALATE_AFTER,
        "--dry-run",
        "-o",
        "json",
    )

    assert run.result.returncode == 0, run.explain()
    assert w.writes(run.requests) == [], run.explain()
    assert w.namespace_state(control_plane, every_path) == before
    planned = {j["name"]: (j["decision"], j["result"]) for j in w.report_jobs(run.result.stdout)}
    for name, decision in PLANNED[action].items():
        assert planned[name] == (decision, "planned"), name
    if action != "touch" and pods != "policy":
        # The clean-up path is planned too, and still writes nothing.
        assert planned["failed-by-deadline"] == ("terminate-pods", "planned")


@pytest.mark.parametrize("value", ["client", "true"], ids=str)
def test_the_environment_twin_makes_a_client_dry_run(
    control_plane: ControlPlane, every_path: str, sweep: Any, value: str
) -> None:
    before = w.namespace_state(control_plane, every_path)

    run = sweep("-n", every_path, "--action", "fail", env={"SWEEPER_DRY_RUN": value})

    assert run.result.returncode == 0, run.explain()
    assert w.writes(run.requests) == [], run.explain()
    assert w.namespace_state(control_plane, every_path) == before


# --- RBAC: client dry-run needs no write permission; server dry-run is checked -----------------


def read_only(cp: ControlPlane, namespace: str) -> tuple[Path, str]:
    """A ServiceAccount that may read jobs, pods and services in ``namespace``; write nothing."""
    rules = [
        {"apiGroups": ["kubeflow.org"], "resources": ["*"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["get", "list"]},
    ]
    cp.request(
        "POST",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "reader"},
            "rules": rules,
        },
    )
    cp.request(
        "POST",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
        },
    )
    token = cp.service_account_token(namespace, "reader")
    return cp.token_kubeconfig(
        token, f"reader-{namespace}"
    ), f"system:serviceaccount:{namespace}:reader"


def test_client_dry_run_needs_no_write_permission(
    control_plane: ControlPlane, every_path: str, sweep: Any
) -> None:
    kubeconfig, user = read_only(control_plane, every_path)

    run = sweep("-n", every_path, "--action", "fail", "--dry-run", kubeconfig=kubeconfig, user=user)

    assert run.result.returncode == 0, run.explain()
    assert run.requests, "the audit log should attribute the reads to the ServiceAccount"
    assert w.writes(run.requests) == []


def test_server_dry_run_is_refused_by_rbac_for_a_read_only_identity_and_persists_nothing(
    control_plane: ControlPlane, every_path: str, sweep: Any
) -> None:
    kubeconfig, user = read_only(control_plane, every_path)
    before = w.namespace_state(control_plane, every_path)

    run = sweep(
        "-n",
        every_path,
        "--action",
        "fail",
        "--dry-run=server",
        "-o",
        "json",
        kubeconfig=kubeconfig,
        user=user,
    )

    assert run.result.returncode == 1, run.explain()
    writes = w.writes(run.requests)
    assert writes, run.explain()
    for event in writes:
        assert dry_run_query(event) == ["All"], event["requestURI"]
        assert event["responseStatus"]["code"] == 403, event["requestURI"]
    jobs = {j["name"]: j for j in w.report_jobs(run.result.stdout)}
    assert jobs["untouched"]["result"] == "error"
    assert any("forbidden (403)" in e and "'untouched'" in e for e in jobs["untouched"]["errors"])
    assert w.namespace_state(control_plane, every_path) == before


@pytest.mark.parametrize("action", ACTIONS, ids=str)
def test_server_dry_run_sends_every_write_as_dry_run_and_persists_no_event(
    control_plane: ControlPlane, every_path: str, sweep: Any, action: str
) -> None:
    before = w.namespace_state(control_plane, every_path)

    run = sweep(
        "-n", every_path, "--action", action, *ESCALATE_AFTER, "--dry-run=server", "-o", "json"
    )

    assert run.result.returncode == 0, run.explain()
    writes = w.writes(run.requests)
    assert writes, "server dry-run should still send its writes: " + run.explain()
    verbs = {(e["verb"], (e.get("objectRef") or {}).get("resource")) for e in writes}
    if action == "fail":
        # Status writes, pod and service deletes, and Events: all of them sent, all dry-run.
        assert {
            ("patch", "pytorchjobs"),
            ("delete", "pods"),
            ("delete", "services"),
            ("create", "events"),
        } <= verbs
    for event in writes:
        assert dry_run_query(event) == ["All"], event["requestURI"]
        assert event["responseStatus"]["code"] in (200, 201), event["requestURI"]
    assert w.namespace_state(control_plane, every_path) == before
    jobs = w.report_jobs(run.result.stdout)
    assert {j["name"]: j["decision"] for j in jobs if j["name"] in PLANNED[action]} == (
        PLANNED[action]
    )
    assert {j["result"] for j in jobs if j["decision"] != "skip"} == {"dry-run"}


# --- the patch a dry run reports is the patch a real run sends ---------------------------------


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy.for_control_plane(control_plane, lifetime=300) as p:
        yield p


def at(document: Any, now: str) -> Any:
    """``document`` with the pass's own instant replaced by a placeholder (runs differ in it)."""
    if isinstance(document, dict):
        return {k: at(v, now) for k, v in document.items()}
    if isinstance(document, list):
        return [at(v, now) for v in document]
    return "<now>" if document == now else document


@pytest.mark.parametrize(
    ("action", "method", "suffix"), [("touch", "PATCH", ""), ("fail", "PATCH", "/status")]
)
def test_the_patch_a_dry_run_reports_is_the_patch_a_real_run_sends(  # noqa: PLR0917 - fixtures and a parameter table
    control_plane: ControlPlane,
    namespace: str,
    proxy: FaultProxy,
    action: str,
    method: str,
    suffix: str,
) -> None:
    w.create_job(control_plane, namespace, "late")
    args = ("-n", namespace, "--action", action, "-o", "json")

    planned = clusters.sweep(control_plane, proxy.kubeconfig, PROXY_USER, *args, "--dry-run")
    real = clusters.sweep(control_plane, proxy.kubeconfig, PROXY_USER, *args)

    assert planned.result.returncode == 0, planned.explain()
    assert real.result.returncode == 0, real.explain()
    (plan_report,) = w.passes(planned.result.stdout)
    (real_report,) = w.passes(real.result.stdout)
    [reported] = [j["patch"] for j in plan_report["jobs"] if j["name"] == "late"]
    [sent] = [s.json() for s in proxy.matching(method, rf"/pytorchjobs/late{suffix}$")]
    assert at(reported, plan_report["now"]) == at(sent, real_report["now"])
