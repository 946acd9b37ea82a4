"""--training-operator-deployment on a real API server serving mpi-operator's MPIJob v2beta1.

A Training Operator Deployment that passes no ``--enable-scheme`` (every scheme, the upstream
manifest) or one naming ``mpijob`` runs the v1 MPIJob controller beside the v2beta1 CRD and
crash-loops (docs/compatibility.md): the sweeper says so, once per pass, and acts on nothing
because of it. One with only the other schemes is not reported. A Deployment that is missing,
or that the sweeper may not read (the chart's ClusterRole without the chart's Role for it), is
one WARNING, and the pass still touches an overdue job, exit 0. With the chart's Role it reads.

The Deployments are only stored (no kubelet, no controller): the sweeper reads their spec.
The CRD is mpi-operator's, from its Go module (``devcluster.mpi_operator.use_v2beta1_crd``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devcluster import BinaryMissing, ControlPlane
from devcluster.mpi_operator import use_v2beta1_crd
from tests.e2e import charts, clusters, families, workloads

pytestmark = [pytest.mark.e2e]

Obj = dict[str, Any]
OTHERS = ["--enable-scheme=tfjob", "--enable-scheme=pytorchjob", "--enable-scheme=xgboostjob"]
SCHEMES: dict[str, list[str] | None] = {
    "every-scheme": None,  # the upstream Deployment: command [/manager], no args
    "with-mpijob": [*OTHERS, "--enable-scheme", "MPIJob"],
    "others-only": [*OTHERS, "--enable-scheme=paddlejob", "--enable-scheme=jaxjob"],
}
REPORTED = (
    "runs its kubeflow.org/v1 MPIJob controller while MPIJob is served at kubeflow.org/v2beta1"
)
UNREADABLE = "cannot check the Training Operator's schemes"
SUMMARY = "; misconfigured: training-operator-mpijob-scheme"
USER = "sweeper-chart-misconfig"
_RBAC = "/apis/rbac.authorization.k8s.io/v1"


def deployment(name: str, args: list[str] | None) -> Obj:
    container: Obj = {"name": "training-operator", "image": "kubeflow/training-operator:v1-855e096"}
    container["command"] = ["/manager"]
    if args is not None:
        container["args"] = args
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


@pytest.fixture(scope="module")
def operator_namespace(family_control_plane: ControlPlane) -> str:
    """MPIJob served at v2beta1, and a namespace holding the three operator Deployments."""
    try:
        use_v2beta1_crd(family_control_plane)
    except BinaryMissing as e:
        clusters.binaries_missing(e)
        raise  # unreachable: binaries_missing always raises
    namespace = family_control_plane.create_namespace("kubeflow")
    for name, args in SCHEMES.items():
        family_control_plane.request(
            "POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment(name, args)
        )
    return namespace


def lines(run: clusters.Sweep, text: str) -> list[str]:
    return [line for line in run.result.stderr.splitlines() if text in line]


def touched(run: clusters.Sweep) -> list[tuple[str, str, str]]:
    return [w for w in families.writes(run.requests) if w[0] == "patch"]


def deployment_reads(run: clusters.Sweep) -> list[str]:
    return [e["verb"] for e in run.requests if "/deployments" in e["requestURI"]]


def overdue(cp: ControlPlane, namespace: str) -> None:
    workloads.create_job(cp, namespace, "late", deadline=60, started_ago=3600)


@pytest.mark.parametrize("name", list(SCHEMES))
def test_the_mpijob_scheme_is_reported_once_per_pass_and_only_it(
    name: str,
    operator_namespace: str,
    family_control_plane: ControlPlane,
    family_namespace: str,
    family_sweep: Callable[..., clusters.Sweep],
) -> None:
    overdue(family_control_plane, family_namespace)

    run = family_sweep(
        "-n",
        family_namespace,
        "--training-operator-deployment",
        f"{operator_namespace}/{name}",
        "--every",
        "1s",
        "--for",
        "1.5s",
    )

    assert run.result.returncode == 0, run.explain()
    reported = name != "others-only"
    passes = run.result.stdout.count("Pass ")  # 2 unless the first took more than --for
    assert passes >= 1, run.explain()
    assert len(lines(run, REPORTED)) == (passes if reported else 0), run.explain()
    assert run.result.stdout.count(SUMMARY) == (passes if reported else 0), run.explain()
    assert deployment_reads(run) == ["get"] * passes, run.explain()
    # Nothing of the operator is written: the overdue job is touched, once.
    assert [(w[0], w[2]) for w in touched(run)] == [("patch", "late")], run.explain()
    assert [w for w in families.writes(run.requests) if "deployments" in w[1]] == []


def test_a_missing_deployment_is_one_warning_and_the_pass_acts(
    operator_namespace: str,
    family_control_plane: ControlPlane,
    family_namespace: str,
    family_sweep: Callable[..., clusters.Sweep],
) -> None:
    overdue(family_control_plane, family_namespace)

    run = family_sweep(
        "-n", family_namespace, "--training-operator-deployment", f"{operator_namespace}/gone"
    )

    assert run.result.returncode == 0, run.explain()
    (line,) = lines(run, UNREADABLE)
    assert "not found" in line.lower() or "404" in line, line
    assert lines(run, REPORTED) == []
    assert [(w[0], w[2]) for w in touched(run)] == [("patch", "late")], run.explain()


@pytest.fixture(scope="module")
def chart_kubeconfig(
    family_control_plane: ControlPlane,
    operator_namespace: str,
) -> Path:
    """User ``USER`` with the chart's ClusterRole for trainingOperator.deployment set."""
    values = {
        "families": ["training-operator"],
        "trainingOperator": {"deployment": f"{operator_namespace}/every-scheme"},
    }
    waits = {"group": "kubeflow.org", "resource": "pytorchjobs", "verb": "patch"}
    return families.chart_user(family_control_plane, USER, values, waits=waits)


def grant_chart_role(cp: ControlPlane, operator_namespace: str) -> None:
    """Bind ``USER`` to the Role the chart renders for the operator's Deployment."""
    deployment = f"{operator_namespace}/every-scheme"
    docs = charts.render({"trainingOperator": {"deployment": deployment}})
    (role,) = [d for d in docs if d["kind"] == "Role" and "deployments" in str(d["rules"])]
    (binding,) = [
        d
        for d in docs
        if d["kind"] == "RoleBinding" and d["roleRef"]["name"] == role["metadata"]["name"]
    ]
    binding["subjects"] = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]
    cp.request("POST", f"{_RBAC}/namespaces/{operator_namespace}/roles", role)
    cp.request("POST", f"{_RBAC}/namespaces/{operator_namespace}/rolebindings", binding)
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": USER,
            "groups": ["system:authenticated"],
            "resourceAttributes": {
                "namespace": operator_namespace,
                "group": "apps",
                "resource": "deployments",
                "verb": "get",
                "name": "every-scheme",
            },
        },
    }
    for _ in range(100):
        answer = cp.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        if answer["status"].get("allowed"):
            return
        time.sleep(0.1)
    raise AssertionError("RBAC never granted the chart's Role")


def test_without_the_charts_role_it_is_one_warning_then_with_it_the_operator_is_reported(
    operator_namespace: str,
    family_control_plane: ControlPlane,
    family_namespace: str,
    family_sweep: Callable[..., clusters.Sweep],
    chart_kubeconfig: Path,
) -> None:
    overdue(family_control_plane, family_namespace)
    args = ("--training-operator-deployment", f"{operator_namespace}/every-scheme")

    refused = family_sweep("-n", family_namespace, *args, kubeconfig=chart_kubeconfig, user=USER)

    assert refused.result.returncode == 0, refused.explain()
    (line,) = lines(refused, UNREADABLE)
    assert "403" in line or "forbidden" in line.lower(), line
    assert [(w[0], w[2]) for w in touched(refused)] == [("patch", "late")], refused.explain()

    grant_chart_role(family_control_plane, operator_namespace)
    allowed = family_sweep("-n", family_namespace, *args, kubeconfig=chart_kubeconfig, user=USER)

    assert allowed.result.returncode == 0, allowed.explain()
    assert len(lines(allowed, REPORTED)) == 1, allowed.explain()
    assert lines(allowed, UNREADABLE) == []
