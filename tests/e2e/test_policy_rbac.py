"""The chart's Namespace grant under ``policy.rules``, on the real kube-apiserver's authorizer.

With rules the sweeper reads the labels of the jobs' Namespaces, never watching them:
cluster-wide it lists them, and in a namespaced install (``namespaces``) it reads each listed
one. Namespaces are cluster-scoped, yet the namespaced install keeps its promise of no
cluster-wide grant: the Role in namespace X grants ``get`` on ``namespaces``, and the API server
authorizes a request for Namespace X in namespace X. Each test renders the chart, creates its
ServiceAccount and RBAC objects, and sends the requests with the ServiceAccount's own token.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane, binaries
from tests.e2e import charts

pytestmark = pytest.mark.e2e

RULES = {"rules": [{"name": "everyone", "maxDeadline": "168h"}]}
_PATHS = {
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}
Obj = dict[str, Any]


class Account:
    """The chart's ServiceAccount, with its RBAC objects created, as a kubectl user."""

    def __init__(self, cp: ControlPlane, namespace: str, kubeconfig: Path) -> None:
        self.cp = cp
        self.namespace = namespace
        self.kubeconfig = kubeconfig

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(binaries.find("kubectl")), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )

    def can(self, *args: str) -> bool:
        """``kubectl auth can-i ARGS``: the authorizer's answer for this account."""
        return self.kubectl("auth", "can-i", *args).stdout.strip() == "yes"


@pytest.fixture
def install(control_plane: ControlPlane) -> Iterator[Any]:
    """Render the chart with values and create its ServiceAccount and RBAC; removed afterwards."""
    created: list[str] = []

    def _install(namespace: str, values: Obj, ready: tuple[str, ...]) -> Account:
        # Cluster-scoped names must not collide with other tests'.
        values = {"fullnameOverride": f"pol-{secrets.token_hex(4)}", **values}
        docs = [d for d in charts.render(values, namespace) if d["kind"] in _PATHS]
        for doc in docs:
            path = _PATHS[doc["kind"]].format(ns=doc["metadata"].get("namespace", namespace))
            control_plane.request("POST", path, doc)
            created.append(f"{path}/{doc['metadata']['name']}")
        (account,) = [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"]
        token = control_plane.service_account_token(namespace, account)
        done = Account(
            control_plane, namespace, control_plane.token_kubeconfig(token, f"{namespace}-pol")
        )
        # The authorizer's cache follows the RBAC objects through a watch.
        deadline = time.monotonic() + 10
        while not done.can(*ready):
            assert time.monotonic() < deadline, f"RBAC never granted {ready}"
            time.sleep(0.1)
        return done

    yield _install
    for path in reversed(created):
        if "/namespaces/" not in path:  # namespaced objects go with their namespace
            control_plane.request("DELETE", path, expect=(200, 404))


def test_a_namespaced_install_reads_each_listed_namespace_and_no_other(
    control_plane, namespace, install
):
    other = control_plane.create_namespace("pol-other")
    account = install(
        namespace,
        {"namespaces": [namespace], "policy": RULES},
        ("list", "pytorchjobs.kubeflow.org", "-n", namespace),
    )

    own = account.kubectl("get", "namespace", namespace, "-o", "json")
    elsewhere = account.kubectl("get", "namespace", other, "-o", "json")
    listed = account.kubectl("get", "namespaces", "-o", "json")

    assert own.returncode == 0, own.stderr
    assert json.loads(own.stdout)["metadata"]["name"] == namespace
    assert "forbidden" in elsewhere.stderr.lower(), elsewhere.stderr
    assert "forbidden" in listed.stderr.lower(), listed.stderr


def test_a_namespaced_install_without_rules_reads_no_namespace(control_plane, namespace, install):
    account = install(
        namespace,
        {"namespaces": [namespace]},
        ("list", "pytorchjobs.kubeflow.org", "-n", namespace),
    )

    own = account.kubectl("get", "namespace", namespace, "-o", "json")

    assert "forbidden" in own.stderr.lower(), own.stderr


@pytest.mark.parametrize(
    ("values", "verbs"),
    [
        pytest.param({"policy": RULES}, {"list": True, "watch": False}, id="cronjob"),
        pytest.param(
            {"policy": RULES, "mode": "watch"}, {"list": True, "watch": False}, id="watch"
        ),
        pytest.param({}, {"list": False, "watch": False}, id="no-rules"),
    ],
)
def test_a_cluster_wide_install_lists_namespaces_only_with_rules(
    control_plane, namespace, install, values, verbs
):
    account = install(namespace, values, ("list", "pytorchjobs.kubeflow.org", "-A"))

    listed = account.kubectl("get", "namespaces", "-o", "json")

    assert {verb: account.can(verb, "namespaces") for verb in verbs} == verbs
    if verbs["list"]:
        assert listed.returncode == 0, listed.stderr
        assert namespace in {n["metadata"]["name"] for n in json.loads(listed.stdout)["items"]}
    else:
        assert "forbidden" in listed.stderr.lower(), listed.stderr
