"""trainingOperator.deployment: the flag and a get on that one Deployment, only when set.

tests/e2e/test_family_mpi_misconfig.py proves on a real API server what the sweeper
reads with it.
"""

from __future__ import annotations

from typing import Any

import pytest

DEPLOYMENT = {"trainingOperator": {"deployment": "kubeflow/training-operator"}}
FLAG = "--training-operator-deployment=kubeflow/training-operator"


@pytest.mark.parametrize("mode", ["cronjob", "watch"])
def test_unset_there_is_no_flag_and_no_grant_on_any_deployment(render, mode):
    rendered = render({"mode": mode})
    containers = [
        c
        for d in rendered.docs
        for c in _containers(d)
        if "--training-operator-deployment" in str(c)
    ]

    assert containers == []
    rules = [r for role in rendered.of_kind("Role") for r in role["rules"]]
    assert [r for r in rules if "deployments" in r["resources"]] == []


def test_set_the_cronjob_passes_the_flag(render):
    assert FLAG in render(DEPLOYMENT).args


def test_set_the_watch_deployment_passes_the_flag(render):
    (deployment,) = render({**DEPLOYMENT, "mode": "watch"}).of_kind("Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert FLAG in container["args"]


def test_set_a_role_in_the_operators_namespace_gets_that_one_deployment_bound_to_the_sweeper(
    render,
):
    rendered = render(DEPLOYMENT)

    (role,) = [r for r in rendered.of_kind("Role") if r["metadata"]["namespace"] == "kubeflow"]
    assert role["rules"] == [
        {
            "apiGroups": ["apps"],
            "resources": ["deployments"],
            "resourceNames": ["training-operator"],
            "verbs": ["get"],
        }
    ]
    (binding,) = [
        b for b in rendered.of_kind("RoleBinding") if b["metadata"]["namespace"] == "kubeflow"
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": rendered.pod_spec["serviceAccountName"],
            "namespace": "sweeper",
        }
    ]


def test_without_rbac_creation_no_role_is_made_but_the_flag_stays(render):
    rendered = render({**DEPLOYMENT, "rbac": {"create": False}})

    assert rendered.of_kind("Role") == []
    assert FLAG in rendered.args


@pytest.mark.parametrize("value", ["training-operator", "kubeflow/", "Kubeflow/x", "a/b/c"])
def test_a_value_that_is_not_namespace_slash_name_is_refused(render_error, value):
    error = render_error({"trainingOperator": {"deployment": value}})

    assert "trainingOperator/deployment" in error


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec: Any = doc.get("spec") or {}
    for path in (("jobTemplate", "spec", "template", "spec"), ("template", "spec"), ()):
        found = spec
        for key in path:
            found = (found or {}).get(key)
        if found and "containers" in found:
            return list(found["containers"])
    return []
