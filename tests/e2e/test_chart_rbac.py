"""The chart on a real API server: its RBAC is enough for each action, and every rule is needed.

Each test renders the chart with helm, creates its ServiceAccount and RBAC objects, gets a
token for the ServiceAccount (TokenRequest) and runs the installed sweeper as that account
with the CronJob's own arguments. It works; with any one permission taken away it exits with
the documented code (3 when a list is refused, 1 when an action fails) and a message naming
the verb and the resource it was refused. The rendered workload objects are also sent to the
API server as strict server-side dry runs, in a namespace that enforces the "restricted" Pod
Security Standard.

Cluster-wide installs see every namespace, so each test gives its jobs a label of its own and
installs the chart with that label as `selector`.
"""

from __future__ import annotations

import datetime as dt
import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster import jobs as kubeflow
from tests.e2e import charts, clusters, workloads

pytestmark = pytest.mark.e2e

LABEL = "e2e.deadline-sweeper.kubeflow.org/test"
GROUP = "kubeflow.org"
Obj = dict[str, Any]

# Where each RBAC kind is created, by (kind, namespaced).
_PATHS = {
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}
_WORKLOAD_PATHS = {
    "CronJob": "/apis/batch/v1/namespaces/{ns}/cronjobs",
    "Pod": "/api/v1/namespaces/{ns}/pods",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
}


@pytest.fixture(scope="module")
def helm() -> Path:
    """The helm binary (skips locally, fails in CI, when it is not built)."""
    return charts.helm()


def one(docs: list[Obj], kind: str) -> Obj:
    """The only rendered object of ``kind``."""
    (found,) = [d for d in docs if d["kind"] == kind]
    return found


@dataclass
class Install:
    """The chart's ServiceAccount and RBAC objects, created; a kubeconfig with the SA's token."""

    cp: ControlPlane
    namespace: str
    docs: list[Obj]
    kubeconfig: Path

    @property
    def account(self) -> str:
        return str(one(self.docs, "ServiceAccount")["metadata"]["name"])

    @property
    def args(self) -> list[str]:
        """The CronJob container's arguments, as rendered."""
        pod = one(self.docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        return list(pod["containers"][0]["args"])

    def roles(self) -> list[Obj]:
        return [d for d in self.docs if d["kind"] in ("Role", "ClusterRole")]

    def can(self, verb: str, resource: str, namespace: str | None, group: str = "") -> bool:
        """Whether the API server's authorizer lets the ServiceAccount do this, now."""
        resource, _, subresource = resource.partition("/")
        attributes = {"group": group, "resource": resource, "verb": verb}
        if subresource:
            attributes["subresource"] = subresource
        if namespace:
            attributes["namespace"] = namespace
        review = self.cp.request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": f"system:serviceaccount:{self.namespace}:{self.account}",
                    "groups": [
                        "system:serviceaccounts",
                        f"system:serviceaccounts:{self.namespace}",
                        "system:authenticated",
                    ],
                    "resourceAttributes": attributes,
                },
            },
        )
        return bool(review["status"].get("allowed"))

    def wait_until(
        self, allowed: bool, verb: str, resource: str, namespace: str | None, group: str = ""
    ) -> None:
        """Wait for the RBAC authorizer's cache to reflect a change (it follows a watch)."""
        for _ in range(100):
            if self.can(verb, resource, namespace, group) is allowed:
                return
            time.sleep(0.1)
        pytest.fail(f"RBAC never {'granted' if allowed else 'revoked'} {verb} {resource}")

    def sweep(self, *extra: str) -> subprocess.CompletedProcess[str]:
        """Run the installed sweeper as the ServiceAccount with the CronJob's arguments."""
        return clusters.run_sweeper(self.kubeconfig, *self.args, "--output=json", *extra)


@pytest.fixture
def install(
    control_plane: ControlPlane,
) -> Iterator[Callable[..., Install]]:
    """Install the chart's SA and RBAC into a namespace with given values; removed afterwards."""
    created: list[str] = []

    def _install(namespace: str, values: Obj) -> Install:
        # Cluster-scoped names must not collide between tests.
        values = {"fullnameOverride": f"sw-{secrets.token_hex(4)}", **values}
        docs = charts.render(values, namespace)
        for doc in docs:
            if doc["kind"] not in _PATHS:
                continue
            path = _PATHS[doc["kind"]].format(ns=doc["metadata"].get("namespace", namespace))
            control_plane.request("POST", path, doc)
            created.append(f"{path}/{doc['metadata']['name']}")
        account = one(docs, "ServiceAccount")["metadata"]["name"]
        token = control_plane.service_account_token(namespace, account)
        done = Install(
            control_plane,
            namespace,
            docs,
            control_plane.token_kubeconfig(token, f"{namespace}-{account}"),
        )
        first = workloads.plural("PyTorchJob")
        scope = None if not values.get("namespaces") else values["namespaces"][0]
        done.wait_until(True, "list", first, scope, GROUP)
        return done

    yield _install
    for path in reversed(created):
        if "/namespaces/" not in path:  # namespaced objects go with their namespace
            control_plane.request("DELETE", path, expect=(200, 404))


@pytest.fixture
def other_namespaces(control_plane: ControlPlane) -> Iterator[list[str]]:
    """Two more fresh namespaces, emptied afterwards."""
    names = [control_plane.create_namespace("chart-rbac") for _ in range(2)]
    yield names
    for name in names:
        clusters.empty_namespace(control_plane, name)


def overdue_job(
    cp: ControlPlane,
    namespace: str,
    tag: str,
    kind: str = "PyTorchJob",
    *,
    touched_ago: int | None = None,
    pods: bool = False,
    fresh: bool = False,
) -> Obj:
    """A running job an hour past its 60 s deadline (``fresh``: 10 s past), labelled for this test.

    ``auto`` fails a job ``--escalate-after`` (120 s) past its deadline whether or not it was
    touched, so a job that ``auto`` must touch is a fresh one.
    """
    annotations = {}
    if touched_ago is not None:
        moment = workloads.now() - dt.timedelta(seconds=touched_ago)
        annotations[workloads.TOUCHED_AT] = workloads.stamp(moment)
    name = f"{kind.lower()}-{secrets.token_hex(3)}"
    job = workloads.create_job(
        cp,
        namespace,
        name,
        kind=kind,
        labels={LABEL: tag},
        annotations=annotations,
        deadline=3590 if fresh else 60,
    )
    if pods:
        master = kubeflow.KINDS[kind].master or "Worker"
        workloads.create_replicas(cp, job, {master: ["Running"]})
    return job


def is_failed(cp: ControlPlane, job: Obj) -> bool:
    meta = job["metadata"]
    current = workloads.get_job(cp, meta["namespace"], job["kind"], meta["name"])
    return any(
        c["type"] == "Failed" and c["status"] == "True"
        for c in current["status"].get("conditions", [])
    )


def is_touched(cp: ControlPlane, job: Obj) -> bool:
    meta = job["metadata"]
    current = workloads.get_job(cp, meta["namespace"], job["kind"], meta["name"])
    return workloads.TOUCHED_AT in (current["metadata"].get("annotations") or {})


def sweeper_events(cp: ControlPlane, namespace: str) -> list[Obj]:
    items = cp.request("GET", f"/api/v1/namespaces/{namespace}/events")["items"]
    return [e for e in items if (e.get("source") or {}).get("component") == workloads.COMPONENT]


def ok(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-3000:]}"


# --- each action, all six kinds, cluster-wide ----------------------------------------------------

KIND_NAMES = list(kubeflow.KINDS)


def test_touch_rbac_is_enough_for_every_kind(install, namespace, control_plane):
    tag = secrets.token_hex(4)
    jobs = [overdue_job(control_plane, namespace, tag, kind) for kind in KIND_NAMES]
    chart = install(namespace, {"action": "touch", "selector": f"{LABEL}={tag}"})

    ok(chart.sweep())

    assert all(is_touched(control_plane, job) for job in jobs)
    assert len(sweeper_events(control_plane, namespace)) == len(jobs)


def test_fail_rbac_is_enough_for_every_kind(install, namespace, control_plane):
    tag = secrets.token_hex(4)
    jobs = [overdue_job(control_plane, namespace, tag, kind, pods=True) for kind in KIND_NAMES]
    chart = install(namespace, {"action": "fail", "selector": f"{LABEL}={tag}"})

    ok(chart.sweep())

    assert all(is_failed(control_plane, job) for job in jobs)
    assert workloads.names(control_plane, namespace, "pods") == set()
    assert workloads.names(control_plane, namespace, "services") == set()


def test_auto_rbac_is_enough_to_touch_and_to_fail_every_kind(install, namespace, control_plane):
    tag = secrets.token_hex(4)
    fresh = [overdue_job(control_plane, namespace, tag, kind, fresh=True) for kind in KIND_NAMES]
    stale = [
        overdue_job(control_plane, namespace, tag, kind, touched_ago=600, pods=True)
        for kind in KIND_NAMES
    ]
    chart = install(namespace, {"action": "auto", "selector": f"{LABEL}={tag}"})

    ok(chart.sweep())

    assert all(
        is_touched(control_plane, job) and not is_failed(control_plane, job) for job in fresh
    )
    assert all(is_failed(control_plane, job) for job in stale)
    assert workloads.names(control_plane, namespace, "pods") == set()


@pytest.mark.parametrize("action", ["touch", "fail", "auto"])
def test_client_dry_run_needs_only_reads_and_writes_nothing(
    install, namespace, control_plane, action
):
    tag = secrets.token_hex(4)
    job = overdue_job(control_plane, namespace, tag, touched_ago=600, pods=True)
    chart = install(namespace, {"action": action, "dryRun": True, "selector": f"{LABEL}={tag}"})
    since = control_plane.audit_offset()

    done = chart.sweep()

    ok(done)
    assert workloads.report_jobs(done.stdout)[0]["result"] == "planned"
    assert not is_failed(control_plane, job)
    user = f"system:serviceaccount:{namespace}:{chart.account}"
    assert workloads.writes(control_plane.audit_events(user=user, since=since)) == []


def test_server_dry_run_is_authorized_like_the_real_writes(install, namespace, control_plane):
    tag = secrets.token_hex(4)
    job = overdue_job(control_plane, namespace, tag, pods=True)
    chart = install(namespace, {"action": "fail", "dryRun": "server", "selector": f"{LABEL}={tag}"})

    done = chart.sweep()

    ok(done)
    assert workloads.report_jobs(done.stdout)[0]["result"] == "dry-run"
    assert not is_failed(control_plane, job)
    assert workloads.names(control_plane, namespace, "pods") != set()


def test_discovery_needs_no_grant(install, namespace, control_plane):
    chart = install(namespace, {"action": "touch", "selector": f"{LABEL}=none"})
    for role in chart.roles():
        control_plane.request(
            "DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role['metadata']['name']}"
        )
    chart.wait_until(False, "list", "pytorchjobs", None, GROUP)

    done = chart.sweep()

    # The API group was discovered (system:discovery); only the first list was refused.
    assert done.returncode == 3
    assert "cannot list tfjobs.kubeflow.org in all namespaces: forbidden (403)" in done.stderr


# --- any one permission removed -----------------------------------------------------------------


def without(rules: list[Obj], group: str, resource: str, verb: str) -> list[Obj]:
    """``rules`` minus one (group, resource, verb) permission, the rest kept as they were."""
    kept: list[Obj] = []
    for rule in rules:
        if (
            group not in rule["apiGroups"]
            or resource not in rule["resources"]
            or verb not in rule["verbs"]
        ):
            kept.append(rule)
            continue
        others = [r for r in rule["resources"] if r != resource]
        if others:
            kept.append({**rule, "resources": others})
        verbs = [v for v in rule["verbs"] if v != verb]
        if verbs:
            kept.append({**rule, "resources": [resource], "verbs": verbs})
    return kept


def permissions(rules: list[Obj]) -> list[tuple[str, str, str]]:
    return [
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    ]


def _cases() -> list[Any]:
    """Every permission the chart grants for each action (one kind, so each one is used)."""
    plural = "pytorchjobs"
    # Every action reclaims the pods a job failed by its deadline keeps (v1.9.4).
    pods = [
        ("", "pods", "list"),
        ("", "pods", "delete"),
        ("", "services", "list"),
        ("", "services", "delete"),
    ]
    granted = {
        "touch": [
            (GROUP, plural, "list"),
            (GROUP, plural, "patch"),
            *pods,
            ("", "events", "create"),
        ],
        "fail": [
            (GROUP, plural, "get"),
            (GROUP, plural, "list"),
            (GROUP, f"{plural}/status", "patch"),
            ("", "pods", "list"),
            ("", "pods", "delete"),
            ("", "services", "list"),
            ("", "services", "delete"),
            ("", "events", "create"),
        ],
    }
    granted["auto"] = [*granted["fail"][:2], (GROUP, plural, "patch"), *granted["fail"][2:]]
    return [
        pytest.param(action, perm, id=f"{action}-no-{perm[2]}-{perm[1].replace('/', '-')}")
        for action, perms in granted.items()
        for perm in perms
    ]


def _qualified(group: str, resource: str) -> str:
    name, _, sub = resource.partition("/")
    name = f"{name}.{group}" if group else name
    return f"{name}/{sub}" if sub else name


@pytest.mark.parametrize(("action", "removed"), _cases())
def test_any_one_permission_removed_fails_with_the_documented_code_and_names_it(
    install, namespace, control_plane, action, removed
):
    group, resource, verb = removed
    tag = secrets.token_hex(4)
    overdue_job(
        control_plane, namespace, tag, touched_ago=600 if action == "auto" else None, pods=True
    )
    if action == "auto":
        overdue_job(control_plane, namespace, tag, pods=True, fresh=True)  # this one is touched
    if action == "touch":
        left = workloads.failed_by_its_deadline(
            control_plane, namespace, f"failed-{tag}", labels={LABEL: tag}
        )
        workloads.create_replicas(control_plane, left, {"Master": ["Running"]})
    chart = install(
        namespace, {"action": action, "kinds": ["PyTorchJob"], "selector": f"{LABEL}={tag}"}
    )
    (role,) = chart.roles()
    # The chart grants exactly the permissions this test takes away one by one.
    assert sorted(permissions(role["rules"])) == sorted(
        p for case in _cases() if case.values[0] == action for p in [case.values[1]]
    )
    role = {**role, "rules": without(role["rules"], group, resource, verb)}
    control_plane.request(
        "PUT", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role['metadata']['name']}", role
    )
    chart.wait_until(False, verb, resource, namespace, group)

    done = chart.sweep()

    qualified = _qualified(group, resource)
    if action == "auto" and (verb, resource) == ("patch", "pytorchjobs"):
        # A refused touch makes auto fail the job itself: the run succeeds, the refusal is a
        # WARNING naming the request.
        assert done.returncode == 0, done.stderr
        assert f"touch refused (cannot patch {qualified}" in done.stderr
        assert "forbidden (403)" in done.stderr
    elif verb == "list" and resource == "pytorchjobs":
        assert done.returncode == 3, done.stderr
        assert f"cannot list {qualified} in all namespaces: forbidden (403)" in done.stderr
    else:
        assert done.returncode == 1, done.stderr
        assert f"cannot {verb} {qualified}" in done.stderr
        assert "forbidden (403)" in done.stderr


@pytest.mark.parametrize("plural", [workloads.plural(k) for k in KIND_NAMES])
def test_each_kind_needs_its_own_list_grant(install, namespace, control_plane, plural):
    chart = install(namespace, {"action": "touch", "selector": f"{LABEL}=none"})
    (role,) = chart.roles()
    role = {**role, "rules": without(role["rules"], GROUP, plural, "list")}
    control_plane.request(
        "PUT", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role['metadata']['name']}", role
    )
    chart.wait_until(False, "list", plural, None, GROUP)

    done = chart.sweep()

    assert done.returncode == 3
    assert f"cannot list {plural}.kubeflow.org in all namespaces: forbidden (403)" in done.stderr


# --- namespaced mode ---------------------------------------------------------------------------


def test_namespaced_install_sweeps_the_listed_namespaces_only(
    install, namespace, other_namespaces, control_plane
):
    listed_a, listed_b = other_namespaces
    tag = secrets.token_hex(4)
    inside = [overdue_job(control_plane, ns, tag, pods=True) for ns in (listed_a, listed_b)]
    outside = overdue_job(control_plane, namespace, tag, pods=True)
    chart = install(
        namespace,
        {"action": "fail", "namespaces": [listed_a, listed_b], "selector": f"{LABEL}={tag}"},
    )

    ok(chart.sweep())

    assert [d["kind"] for d in chart.docs if d["kind"].startswith("Cluster")] == []
    assert not chart.can("list", "pytorchjobs", None, GROUP)
    assert not chart.can("list", "pytorchjobs", namespace, GROUP)
    assert all(is_failed(control_plane, job) for job in inside)
    assert not is_failed(control_plane, outside)


def test_namespaced_install_without_its_binding_in_one_namespace_cannot_list_there(
    install, namespace, other_namespaces, control_plane
):
    listed_a, listed_b = other_namespaces
    chart = install(
        namespace,
        {"action": "touch", "namespaces": [listed_a, listed_b], "selector": f"{LABEL}=none"},
    )
    binding = next(
        d
        for d in chart.docs
        if d["kind"] == "RoleBinding" and d["metadata"]["namespace"] == listed_b
    )
    control_plane.request(
        "DELETE",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{listed_b}/rolebindings/"
        f"{binding['metadata']['name']}",
    )
    chart.wait_until(False, "list", "pytorchjobs", listed_b, GROUP)

    done = chart.sweep()

    assert done.returncode == 3
    assert f'in namespace "{listed_b}": forbidden (403)' in done.stderr


def test_namespaced_install_without_one_verb_in_one_namespace_fails_that_action(
    install, namespace, other_namespaces, control_plane
):
    listed_a, listed_b = other_namespaces
    tag = secrets.token_hex(4)
    jobs = {ns: overdue_job(control_plane, ns, tag, pods=True) for ns in (listed_a, listed_b)}
    chart = install(
        namespace,
        {"action": "fail", "namespaces": [listed_a, listed_b], "selector": f"{LABEL}={tag}"},
    )
    role = next(
        d for d in chart.docs if d["kind"] == "Role" and d["metadata"]["namespace"] == listed_b
    )
    role = {**role, "rules": without(role["rules"], GROUP, "pytorchjobs/status", "patch")}
    control_plane.request(
        "PUT",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{listed_b}/roles/"
        f"{role['metadata']['name']}",
        role,
    )
    chart.wait_until(False, "patch", "pytorchjobs/status", listed_b, GROUP)

    done = chart.sweep()

    assert done.returncode == 1
    assert (
        f"cannot patch pytorchjobs.kubeflow.org/status {jobs[listed_b]['metadata']['name']!r}"
        in done.stderr
    )
    assert is_failed(control_plane, jobs[listed_a])
    assert not is_failed(control_plane, jobs[listed_b])


# --- the workload objects on the real API server -------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="defaults"),
        pytest.param(
            {
                "action": "auto",
                "intervalSeconds": 15,
                "dryRun": "server",
                "maxActions": 10,
                "priorityClassName": "",
            },
            id="sub-minute",
        ),
    ],
)
def test_workload_objects_pass_strict_validation_and_the_restricted_pod_security_standard(
    control_plane, values
):
    restricted = control_plane.create_namespace(
        "chart-restricted", labels={"pod-security.kubernetes.io/enforce": "restricted"}
    )
    docs = charts.render(values, restricted)
    cronjob = one(docs, "CronJob")
    # The CronJob's pod, as the Job controller would create it: admission enforces
    # "restricted" on pods only (workload objects only get warnings).
    template = cronjob["spec"]["jobTemplate"]["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": "sweeper-run"},
        "spec": template["spec"],
    }

    for doc in [*(d for d in docs if d["kind"] in _WORKLOAD_PATHS), pod]:
        path = _WORKLOAD_PATHS[doc["kind"]].format(ns=restricted)
        control_plane.request(
            "POST", f"{path}?dryRun=All&fieldValidation=Strict", doc, expect=(201,)
        )


def test_install_dry_run_against_the_cluster_prints_the_notes(helm, control_plane, namespace):
    done = subprocess.run(
        [
            str(helm),
            "install",
            "sw",
            str(charts.CHART),
            "-n",
            namespace,
            "--dry-run",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--set",
            "dryRun=true",
        ],
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    notes = done.stdout.split("NOTES:", 1)[1]
    assert f"installed as CronJob {namespace}/sw-kubeflow-deadline-sweeper" in notes
    assert "DRY RUN: client; nothing is written" in notes
    assert f"kubectl -n {namespace} logs" in notes


@pytest.mark.parametrize("mode", ["cronjob", "watch"])
def test_the_default_priority_class_is_admitted_outside_kube_system(control_plane, mode):
    # The evidence behind priorityClassName's default (chart/README.md, "Priority"): the
    # Priority admission plugin resolves system-cluster-critical in an ordinary namespace.
    namespace = control_plane.create_namespace("chart-priority")
    docs = charts.render({"mode": mode}, namespace)
    if mode == "cronjob":
        template = one(docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]
    else:
        template = one(docs, "Deployment")["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": "sweeper"},
        "spec": template["spec"],
    }

    admitted = control_plane.request(
        "POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod, expect=(201,)
    )

    assert admitted["spec"]["priorityClassName"] == "system-cluster-critical"
    assert admitted["spec"]["priority"] == 2_000_000_000


# --- policy.rules: the rendered rules file and its RBAC ------------------------------------------


def policy_args(chart: Install, tmp_path: Path) -> list[str]:
    """The CronJob's arguments, with ``--policy`` at a copy of the chart's rules ConfigMap."""
    (config_map,) = [
        d
        for d in chart.docs
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-policy")
    ]
    path = tmp_path / "rules.yaml"
    path.write_text(config_map["data"]["rules.yaml"])
    args = [f"--policy={path}" if a.startswith("--policy=") else a for a in chart.args]
    assert args != chart.args, "the chart passes no --policy"
    return args


@pytest.mark.parametrize("namespaced", [False, True], ids=["cluster-wide", "namespaced"])
def test_action_touch_fails_a_job_past_its_rules_default_with_the_charts_rbac(
    install, namespace, control_plane, tmp_path, namespaced
):
    # A default the job does not carry is enforced by failing it, whatever the action: the
    # chart's rules give action touch the fail verbs, and the Namespaces' labels to read.
    tag = secrets.token_hex(4)
    control_plane.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}",
        {"metadata": {"labels": {"e2e-policy-tier": tag}}},
        content_type="application/merge-patch+json",
    )
    past = workloads.create_job(
        control_plane, namespace, "past", deadline=None, labels={LABEL: tag}
    )
    within = workloads.create_job(
        control_plane, namespace, "within", deadline=7200, labels={LABEL: tag}
    )
    rule = {
        "name": "tier",
        "namespaceSelector": {"matchLabels": {"e2e-policy-tier": tag}},
        "defaultDeadline": "30m",
    }
    values: Obj = {"action": "touch", "selector": f"{LABEL}={tag}", "policy": {"rules": [rule]}}
    if namespaced:
        values["namespaces"] = [namespace]
    chart = install(namespace, values)

    done = clusters.run_sweeper(chart.kubeconfig, *policy_args(chart, tmp_path), "--output=json")

    ok(done)
    assert "forbidden" not in done.stderr.lower()
    assert is_failed(control_plane, past)
    stored = workloads.get_job(control_plane, namespace, "PyTorchJob", "within")
    assert stored["metadata"]["resourceVersion"] == within["metadata"]["resourceVersion"]
