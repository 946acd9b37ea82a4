"""The chart's exemption admission policy, enforced by the real kube-apiserver itself.

``policy.exemptionAdmission`` renders a ValidatingAdmissionPolicy and its binding (CEL in the
API server, no webhook). Here they are rendered with helm and created on a control plane of
this module's own (a cluster-wide policy must not reach the other modules' jobs), beside the
Training Operator's CRDs and the Trainer's TrainJob CRD, both from the binary cache. The
requests come from real identities, each with RBAC to create and patch jobs: a tenant and a
platform admin impersonated with kubectl's ``--as``/``--as-group`` (the admin's client
certificate may impersonate), and a ServiceAccount's own token. Only the admin's group may add
the exclude annotation or change its value, and only the sweeper's ServiceAccount the
touched-at stamp; anyone may remove either; a job without them is created and edited as before.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devcluster import BinaryMissing, ControlPlane, binaries
from devcluster import jobs as kubeflow
from devcluster.trainer import manifest_files
from tests.e2e import charts, clusters
from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e

RBAC = "rbac.authorization.k8s.io"
ADMINS = "platform-admins"
TENANTS = "ml-tenants"
TENANT = ["--as=alice", f"--as-group={TENANTS}"]
ADMIN = ["--as=carol", f"--as-group={ADMINS}"]
KEYS = [w.EXCLUDE, w.OLD_EXCLUDE]
TOUCH_KEYS = [w.TOUCHED_AT, w.OLD_TOUCHED_AT]
# The chart's ServiceAccount, as `helm template sw` names it.
SWEEPER = "sw-kubeflow-deadline-sweeper"
FUTURE = "2125-01-01T00:00:00Z"
# How long the API server may take to start enforcing a new policy (its informers pick up the
# policy and the binding and compile the CEL): polled, never slept through.
ENFORCE_TIMEOUT = 60.0
Obj = dict[str, Any]


@dataclass(frozen=True)
class Cluster:
    """The module's control plane with the policy enforced; ``kubeconfig`` may impersonate.

    ``message`` is the exclude annotation's refusal, ``touch_message`` the touch stamp's;
    ``sweeper`` authenticates as the chart's ServiceAccount, with its own token, in the
    release's namespace ``home``.
    """

    cp: ControlPlane
    kubeconfig: Path
    message: str
    touch_message: str
    sweeper: Path
    home: str


def kubectl(
    kubeconfig: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the cached kubectl; the caller reads the return code."""
    return subprocess.run(
        [str(binaries.find("kubectl")), f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def render_policy(values: Obj, namespace: str = "sweeper", which: str = "exemptions") -> list[Obj]:
    """The chart's ValidatingAdmissionPolicy ``<fullname>-<which>`` and its binding, rendered by
    helm with ``values``."""
    kinds = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    return [
        d
        for d in charts.render(values, namespace)
        if d["kind"] in kinds and d["metadata"]["name"].endswith(f"-{which}")
    ]


def job(kind: str, name: str, annotations: dict[str, str] | None = None) -> Obj:
    """A job body of ``kind`` (a Training Operator kind or TrainJob), as a tenant writes one."""
    if kind == "TrainJob":
        body: Obj = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
        }
    else:
        body = kubeflow.manifest(kind, name, active_deadline_seconds=3600, workers=1)
    if annotations is not None:
        body["metadata"]["annotations"] = annotations
    return body


def as_(
    cluster: Cluster, who: list[str], namespace: str, verb: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """``kubectl VERB pytorchjobs train ARGS`` in ``namespace``, as ``who``."""
    return kubectl(cluster.kubeconfig, *who, "-n", namespace, verb, "pytorchjobs", "train", *args)


def create(
    cluster: Cluster, who: list[str], namespace: str, body: Obj, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``kubectl create`` of ``body`` in ``namespace``, as ``who``."""
    return kubectl(
        cluster.kubeconfig,
        *who,
        "-n",
        namespace,
        "create",
        "-f",
        "-",
        *extra,
        stdin=json.dumps(body),
    )


def refused(done: subprocess.CompletedProcess[str], cluster: Cluster) -> bool:
    """Whether the request was denied by the chart's policy (not RBAC, not the schema)."""
    return done.returncode != 0 and cluster.message in done.stderr


def refused_touch(done: subprocess.CompletedProcess[str], cluster: Cluster) -> bool:
    """Whether the request was denied by the chart's policy for its touch stamp."""
    return done.returncode != 0 and cluster.touch_message in done.stderr


def allowed(done: subprocess.CompletedProcess[str]) -> bool:
    """Whether the request succeeded; its stderr is in the assertion's message otherwise."""
    assert done.returncode == 0, done.stderr
    return True


def annotations_of(cluster: Cluster, namespace: str, kind: str, name: str) -> dict[str, str]:
    stored = w.get_job(cluster.cp, namespace, kind, name)
    return dict(stored["metadata"].get("annotations") or {})


def create_policy(cp: ControlPlane, policy: Obj, binding: Obj) -> None:
    """Create a ValidatingAdmissionPolicy and its binding (strict: an unknown field fails)."""
    admission = "/apis/admissionregistration.k8s.io/v1"
    cp.request("POST", f"{admission}/validatingadmissionpolicies?fieldValidation=Strict", policy)
    cp.request(
        "POST", f"{admission}/validatingadmissionpolicybindings?fieldValidation=Strict", binding
    )


def grant(cp: ControlPlane, namespace: str, name: str, rule: Obj, account: tuple[str, str]) -> None:
    """A Role ``name`` in ``namespace`` with ``rule``, bound to ServiceAccount ``account``."""
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    cp.request(
        "POST",
        f"{rbac}/roles",
        {"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": {"name": name}, "rules": [rule]},
    )
    account_namespace, account_name = account
    cp.request(
        "POST",
        f"{rbac}/rolebindings",
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": name},
            "subjects": [
                {"kind": "ServiceAccount", "name": account_name, "namespace": account_namespace}
            ],
        },
    )


@pytest.fixture(scope="module")
def trainjob_crd(family_control_plane: ControlPlane) -> None:
    """The Trainer's TrainJob CRD (no controller: admission is all that is exercised)."""
    try:
        crds, _ = manifest_files("trainer")
    except BinaryMissing as e:
        clusters.binaries_missing(e)
        raise  # unreachable: binaries_missing always raises
    family_control_plane.install_crds([c for c in crds if c.name.endswith("_trainjobs.yaml")])


@pytest.fixture(scope="module")
def cluster(family_control_plane: ControlPlane, trainjob_crd: None) -> Iterator[Cluster]:
    """The policy and its binding created, RBAC for the identities, and the policy enforcing."""
    del trainjob_crd
    cp = family_control_plane
    home = cp.create_namespace("sweeper")
    policy, binding = render_policy(
        {"policy": {"exemptionAdmission": {"enabled": True, "allowedGroups": [ADMINS]}}}, home
    )
    create_policy(cp, policy, binding)
    resources = [kubeflow.ALL_KINDS[k].plural for k in kubeflow.ALL_KINDS]
    cp.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "job-editor"},
            "rules": [
                {
                    "apiGroups": ["kubeflow.org"],
                    "resources": resources,
                    "verbs": ["create", "get", "list", "patch", "update"],
                },
                {
                    "apiGroups": ["trainer.kubeflow.org"],
                    "resources": ["trainjobs"],
                    "verbs": ["create", "get", "list", "patch", "update"],
                },
            ],
        },
    )
    cp.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "job-editors"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "job-editor"},
            "subjects": [
                {"apiGroup": RBAC, "kind": "Group", "name": TENANTS},
                {"apiGroup": RBAC, "kind": "Group", "name": ADMINS},
                {"kind": "ServiceAccount", "name": SWEEPER, "namespace": home},
            ],
        },
    )
    exclude, touch = (v["message"] for v in policy["spec"]["validations"])
    sweeper = cp.token_kubeconfig(cp.service_account_token(home, SWEEPER), SWEEPER)
    enforced = Cluster(cp, cp.kubeconfig, exclude, touch, sweeper, home)
    probe_namespace = cp.create_namespace("policy-probe")
    probe = job("PyTorchJob", "probe", {w.EXCLUDE: "true"})
    deadline = time.monotonic() + ENFORCE_TIMEOUT
    while True:
        # A server-side dry run goes through admission and stores nothing.
        done = create(enforced, TENANT, probe_namespace, probe, "--dry-run=server")
        if refused(done, enforced):
            break
        assert time.monotonic() < deadline, f"the policy is not enforced: {done.stderr}"
        time.sleep(0.2)
    yield enforced


@pytest.fixture
def namespace(cluster: Cluster, family_namespace: str) -> str:
    return family_namespace


@pytest.mark.parametrize("key", KEYS)
def test_a_tenant_cannot_create_a_job_with_the_annotation(cluster, namespace, key):
    done = create(cluster, TENANT, namespace, job("PyTorchJob", "train", {key: "true"}))

    assert refused(done, cluster), done.stderr
    assert key in done.stderr
    assert ADMINS in done.stderr
    assert cluster.cp.request("GET", w.job_path(namespace, "PyTorchJob"))["items"] == []


@pytest.mark.parametrize("key", KEYS)
def test_a_tenant_cannot_add_it_to_a_job_without_annotations_but_edits_the_rest(
    cluster, namespace, key
):
    # No metadata.annotations at all: the policy must read that as "none", on create and update.
    assert allowed(create(cluster, TENANT, namespace, job("PyTorchJob", "train")))

    add = as_(cluster, TENANT, namespace, "annotate", f"{key}=true")
    label = as_(cluster, TENANT, namespace, "label", "team=a")
    spec = as_(
        cluster,
        TENANT,
        namespace,
        "patch",
        "--type=merge",
        "-p",
        '{"spec": {"runPolicy": {"activeDeadlineSeconds": 600}}}',
    )

    assert refused(add, cluster), add.stderr
    assert allowed(label)
    assert allowed(spec)
    assert key not in annotations_of(cluster, namespace, "PyTorchJob", "train")


@pytest.mark.parametrize("key", KEYS)
def test_the_allowed_group_adds_it_and_a_tenant_may_not_change_it_but_may_remove_it(
    cluster, namespace, key
):
    assert allowed(create(cluster, TENANT, namespace, job("PyTorchJob", "train", {"note": "x"})))
    assert allowed(as_(cluster, ADMIN, namespace, "annotate", f"{key}=true"))
    assert annotations_of(cluster, namespace, "PyTorchJob", "train")[key] == "true"

    change = as_(cluster, TENANT, namespace, "annotate", "--overwrite", f"{key}=forever")
    # Another annotation, beside the unchanged exclude one: compared with oldObject, allowed.
    other = as_(cluster, TENANT, namespace, "annotate", "--overwrite", "note=y")
    assert refused(change, cluster), change.stderr
    assert allowed(other)
    assert annotations_of(cluster, namespace, "PyTorchJob", "train")[key] == "true"

    remove = as_(cluster, TENANT, namespace, "annotate", f"{key}-")
    assert allowed(remove)
    assert key not in annotations_of(cluster, namespace, "PyTorchJob", "train")


def test_the_allowed_group_creates_a_job_with_it(cluster, namespace):
    assert allowed(create(cluster, ADMIN, namespace, job("TFJob", "exempt", {w.EXCLUDE: "true"})))

    assert annotations_of(cluster, namespace, "TFJob", "exempt") == {w.EXCLUDE: "true"}


def test_a_cluster_admin_outside_the_group_cannot_add_it_either(cluster, namespace):
    # No impersonation: the control plane's admin, in system:masters, whom RBAC never refuses.
    done = create(cluster, [], namespace, job("PyTorchJob", "train", {w.EXCLUDE: "true"}))

    assert refused(done, cluster), done.stderr


def test_a_service_account_that_may_patch_jobs_cannot_add_it(cluster, namespace):
    cp = cluster.cp
    jobs = {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get", "patch"]}
    grant(cp, namespace, "pipeline", jobs, (namespace, "pipeline"))
    kubeconfig = cp.token_kubeconfig(cp.service_account_token(namespace, "pipeline"), "pipeline")
    w.create_job(cp, namespace, "train", started_ago=None)

    add = kubectl(
        kubeconfig, "-n", namespace, "annotate", "pytorchjobs", "train", f"{w.EXCLUDE}=true"
    )
    label = kubectl(kubeconfig, "-n", namespace, "label", "pytorchjobs", "train", "stage=2")

    assert refused(add, cluster), add.stderr
    assert allowed(label)
    assert w.EXCLUDE not in annotations_of(cluster, namespace, "PyTorchJob", "train")


@pytest.mark.parametrize("key", TOUCH_KEYS)
def test_only_the_sweeper_stamps_a_touch_and_anyone_may_remove_it(cluster, namespace, key):
    # A stamp in the future would hold back every touch of the job.
    assert allowed(create(cluster, TENANT, namespace, job("PyTorchJob", "train")))

    forged = as_(cluster, TENANT, namespace, "annotate", f"{key}={FUTURE}")
    by_admin = as_(cluster, ADMIN, namespace, "annotate", f"{key}={FUTURE}")
    assert refused_touch(forged, cluster), forged.stderr
    assert refused_touch(by_admin, cluster), by_admin.stderr
    assert key not in annotations_of(cluster, namespace, "PyTorchJob", "train")

    def stamp(value: str) -> subprocess.CompletedProcess[str]:
        return kubectl(
            cluster.sweeper, "-n", namespace, "annotate", "--overwrite", "pytorchjobs", "train",
            f"{key}={value}",
        )  # fmt: skip

    assert allowed(stamp("2024-05-01T04:00:00Z"))
    assert allowed(stamp("2024-05-01T04:02:00Z"))
    moved = as_(cluster, TENANT, namespace, "annotate", "--overwrite", f"{key}={FUTURE}")
    assert refused_touch(moved, cluster), moved.stderr
    assert annotations_of(cluster, namespace, "PyTorchJob", "train")[key] == "2024-05-01T04:02:00Z"

    assert allowed(as_(cluster, TENANT, namespace, "annotate", f"{key}-"))
    assert key not in annotations_of(cluster, namespace, "PyTorchJob", "train")


def test_a_tenant_cannot_create_a_job_with_a_touch_stamp(cluster, namespace):
    done = create(cluster, TENANT, namespace, job("TrainJob", "tj", {w.TOUCHED_AT: FUTURE}))

    assert refused_touch(done, cluster), done.stderr
    assert SWEEPER in done.stderr


def test_an_emptied_allowed_groups_is_a_policy_the_api_server_accepts(cluster):
    # `allowedGroups:` in a values file is null: rendered as it is, `g in null` has no CEL
    # overload and the API server refuses the whole policy at install.
    values = {"policy": {"exemptionAdmission": {"enabled": True, "allowedGroups": None}}}
    policy, _ = render_policy(values)
    policy["metadata"]["name"] = "null-groups"
    path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    query = "?dryRun=All&fieldValidation=Strict"

    cluster.cp.request("POST", path + query, policy)

    allowed_ = next(v for v in policy["spec"]["variables"] if v["name"] == "allowed")
    allowed_["expression"] = allowed_["expression"].replace("g in []", "g in null")
    refusal = cluster.cp.request("POST", path + query, policy, expect=(422,))
    assert "no matching overload" in json.dumps(refusal)


def batch_job(name: str, owner: Obj | None = None) -> Obj:
    """A suspended batch/v1 Job, controlled by ``owner`` when given (an MPIJob's launcher)."""
    body: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.invalid/launcher:1"}],
                }
            },
        },
    }
    if owner is not None:
        body["metadata"]["ownerReferences"] = [owner]
    return body


def test_the_sweeper_may_write_only_a_launchers_deadline(cluster, namespace):
    # Sweeping mpi-operator's MPIJobs grants patch on every Job, rules or none: the second
    # policy holds the sweeper's ServiceAccount to a deadline on the Jobs an MPIJob controls.
    cp = cluster.cp
    values = {"policy": {"exemptionAdmission": {"enabled": True}}}
    launchers = render_policy(values, cluster.home, "launchers")
    assert [d["kind"] for d in launchers] == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    create_policy(cp, *launchers)
    launcher_jobs = {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "patch"]}
    grant(cp, namespace, "launchers", launcher_jobs, (cluster.home, SWEEPER))
    owner = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "name": "mpi",
        "uid": "00000000-0000-0000-0000-000000000001",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    cp.request("POST", jobs, batch_job("mpi-launcher", owner))
    cp.request("POST", jobs, batch_job("queued"))
    message = launchers[0]["spec"]["validations"][0]["message"]

    def patch(name: str, spec: Obj, *extra: str) -> subprocess.CompletedProcess[str]:
        return kubectl(
            cluster.sweeper, "-n", namespace, "patch", "jobs", name, "--type=merge",
            "-p", json.dumps({"spec": spec}), *extra,
        )  # fmt: skip

    deadline = time.monotonic() + ENFORCE_TIMEOUT
    while True:
        probe = patch("queued", {"activeDeadlineSeconds": 1}, "--dry-run=server")
        if probe.returncode != 0 and message in probe.stderr:
            break
        assert time.monotonic() < deadline, f"the policy is not enforced: {probe.stderr}"
        time.sleep(0.2)

    unsuspend = patch("mpi-launcher", {"suspend": False})
    other = patch("queued", {"activeDeadlineSeconds": 1})
    selector = patch("mpi-launcher", {"template": {"spec": {"nodeSelector": {"gpu": "a"}}}})
    written = patch("mpi-launcher", {"activeDeadlineSeconds": 3600})
    by_admin = kubectl(
        cluster.kubeconfig, "-n", namespace, "patch", "jobs", "queued", "--type=merge",
        "-p", '{"spec": {"activeDeadlineSeconds": 60}}',
    )  # fmt: skip

    for refused_ in (unsuspend, other, selector):
        assert refused_.returncode != 0 and message in refused_.stderr, refused_.stderr
    assert allowed(written)
    assert allowed(by_admin)
    stored = cp.request("GET", f"{jobs}/mpi-launcher")
    assert stored["spec"]["activeDeadlineSeconds"] == 3600
    assert stored["spec"]["suspend"] is True
    assert cp.request("GET", f"{jobs}/queued")["spec"]["activeDeadlineSeconds"] == 60


def served_kinds(cp: ControlPlane) -> list[str]:
    served = {r["kind"] for r in cp.request("GET", "/apis/kubeflow.org/v1")["resources"]}
    return [k for k in kubeflow.ALL_KINDS if k in served]


def test_every_kind_the_sweeper_sweeps_is_covered(cluster, namespace):
    kinds = [*served_kinds(cluster.cp), "TrainJob"]
    assert len(kinds) >= 7  # the six v1 kinds the pinned operator serves, and TrainJob

    for kind in kinds:
        body = job(kind, kind.lower(), {w.OLD_EXCLUDE: "true"})
        tenant = create(cluster, TENANT, namespace, body, "--dry-run=server")
        admin = create(cluster, ADMIN, namespace, body, "--dry-run=server")

        assert refused(tenant, cluster), f"{kind}: {tenant.stderr}"
        assert admin.returncode == 0, f"{kind}: {admin.stderr}"
