"""MPIJobs (v2beta1) and TrainJobs for the tests that run their real controllers.

Plain functions for fixtures and tests (``conftest_families.py`` holds the fixtures): the
manifests, reads of what the controllers made, pods made Running without a node (their status
written through ``pods/status`` as a kubelet would, ``devcluster.kubelet.pod_status``), and a
ValidatingAdmissionPolicy that makes the API server refuse JobSet deletes (or JobSet's own
foreground deletes of its Jobs) in one namespace.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import secrets
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from devcluster import ControlPlane, kubelet
from devcluster.admin import ApiError
from devcluster.trainer import RUNTIME
from tests.e2e import charts, clusters
from tests.e2e.conftest_operator import poll

Obj = dict[str, Any]

MPIJOBS = "/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs"
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets"
JOBS = "/apis/batch/v1/namespaces/{namespace}/jobs"
PODS = "/api/v1/namespaces/{namespace}/pods"
_ADMISSION = "/apis/admissionregistration.k8s.io/v1"
# mpi-operator's pod labels (pkg/controller/mpi_job_controller.go at v0.8.2).
MPI_JOB_NAME_LABEL = "training.kubeflow.org/job-name"
MPI_JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
# What the Job controller writes when a Job passes activeDeadlineSeconds.
JOB_DEADLINE_MESSAGE = "Job was active longer than specified deadline"
# The trainer's (pkg/constants/constants.go at v2.3.0).
TRAINJOB_DEADLINE_MESSAGE = "TrainJob exceeded its active deadline"
# Who the sweeper's Events say recorded them.
SWEEPER = "kubeflow-deadline-sweeper"
_CONTAINER = {"image": "busybox:1.36", "command": ["sleep", "3600"]}


def mpijob(
    name: str,
    *,
    ads: int,
    workers: int = 2,
    clean_pod_policy: str | None = None,
    launcher_creation_policy: str | None = None,
) -> Obj:
    """An MPIJob v2beta1 with a launcher and ``workers`` workers that sleep.

    No ``cleanPodPolicy`` unless given: mpi-operator then defaults it to ``None`` in memory
    (the stored object keeps no field), which is what most MPIJobs run with.
    """
    run_policy: Obj = {"activeDeadlineSeconds": ads}
    if clean_pod_policy is not None:
        run_policy["cleanPodPolicy"] = clean_pod_policy
    spec: Obj = {
        "slotsPerWorker": 1,
        "runPolicy": run_policy,
        "mpiReplicaSpecs": {
            role: {
                "replicas": replicas,
                "template": {"spec": {"containers": [{"name": role.lower(), **_CONTAINER}]}},
            }
            for role, replicas in (("Launcher", 1), ("Worker", workers))
        },
    }
    if launcher_creation_policy is not None:
        spec["launcherCreationPolicy"] = launcher_creation_policy
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": spec,
    }


def trainjob(name: str, *, ads: int, runtime: str = RUNTIME) -> Obj:
    """A TrainJob on a ClusterTrainingRuntime (the devcluster installs ``torch-distributed``)."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": runtime},
            "activeDeadlineSeconds": ads,
            "trainer": {"image": _CONTAINER["image"], "command": _CONTAINER["command"]},
        },
    }


def create(cp: ControlPlane, collection: str, namespace: str, body: Obj) -> Obj:
    """Create ``body`` in ``collection`` (``MPIJOBS``, ``TRAINJOBS``...) of ``namespace``."""
    created: Obj = cp.request("POST", collection.format(namespace=namespace), body)
    return created


def get(cp: ControlPlane, collection: str, namespace: str, name: str) -> Obj | None:
    """One object of ``collection``, or None when it does not exist."""
    found: Obj = cp.request(
        "GET", f"{collection.format(namespace=namespace)}/{name}", expect=(200, 404)
    )
    return None if found.get("kind") == "Status" else found


def condition(obj: Obj | None, kind: str) -> Obj | None:
    """The status condition of type ``kind`` when it is True, else None."""
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind and c["status"] == "True"), None)


def pods(cp: ControlPlane, namespace: str, selector: str = "") -> list[Obj]:
    """The pods of ``namespace`` matching a label selector, by name."""
    query = f"?labelSelector={urllib.parse.quote(selector)}" if selector else ""
    items: list[Obj] = cp.request("GET", PODS.format(namespace=namespace) + query)["items"]
    return sorted(items, key=lambda pod: pod["metadata"]["name"])


def mpi_workers(cp: ControlPlane, namespace: str, name: str) -> list[Obj]:
    """The worker pods of one MPIJob (mpi-operator's labels)."""
    return pods(cp, namespace, f"{MPI_JOB_NAME_LABEL}={name},{MPI_JOB_ROLE_LABEL}=worker")


def make_running(cp: ControlPlane, pod: Obj) -> None:
    """Report the pod Running and Ready through ``pods/status``, as its kubelet would."""
    report_phase(cp, pod, "Running")


def report_phase(cp: ControlPlane, pod: Obj, phase: kubelet.Phase) -> None:
    """Report the pod in ``phase`` through ``pods/status``, as its kubelet would."""
    from kubernetes import client  # noqa: PLC0415 - only for the typed model kubelet reads

    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    model = client.CoreV1Api(cp.api()).read_namespaced_pod(name, namespace)
    status = kubelet.pod_status(model, phase, dt.datetime.now(dt.UTC))
    cp.request(
        "PATCH",
        f"{PODS.format(namespace=namespace)}/{name}/status",
        {"status": status},
        content_type="application/merge-patch+json",
    )


def start_mpijob(
    cp: ControlPlane,
    namespace: str,
    name: str,
    *,
    ads: int,
    workers: int = 2,
    ready: int | None = None,
    clean_pod_policy: str | None = None,
    launcher_creation_policy: str | None = None,
) -> list[Obj]:
    """Create an MPIJob and make ``ready`` (all by default) of its workers Running.

    Returns:
        Its workers, once mpi-operator has created them all.
    """
    body = mpijob(
        name,
        ads=ads,
        workers=workers,
        clean_pod_policy=clean_pod_policy,
        launcher_creation_policy=launcher_creation_policy,
    )
    create(cp, MPIJOBS, namespace, body)
    created = poll(
        lambda: w if len(w := mpi_workers(cp, namespace, name)) == workers else None,
        what=f"mpi-operator to create the {workers} workers of {name}",
    )
    for pod in created[: workers if ready is None else ready]:
        make_running(cp, pod)
    return created


def mpijob_failed(cp: ControlPlane, namespace: str, name: str) -> Obj:
    """Wait until the MPIJob is Failed with a ``completionTime``; return it."""

    def failed() -> Obj | None:
        job = get(cp, MPIJOBS, namespace, name)
        assert job is not None, f"MPIJob {name} is gone"
        return job if condition(job, "Failed") and job["status"].get("completionTime") else None

    return poll(failed, timeout=90, what=f"MPIJob {name} to be Failed with a completionTime")


def active_mpi_workers(cp: ControlPlane, namespace: str, name: str) -> list[str]:
    """The names of an MPIJob's Running and Pending workers that are not being deleted."""
    return [
        pod["metadata"]["name"]
        for pod in mpi_workers(cp, namespace, name)
        if pod["status"].get("phase") in ("Running", "Pending")
        and not pod["metadata"].get("deletionTimestamp")
    ]


def start_trainjob(cp: ControlPlane, namespace: str, name: str, *, ads: int) -> Obj:
    """Create a TrainJob and wait for the trainer to make its JobSet; return the JobSet."""
    create(cp, TRAINJOBS, namespace, trainjob(name, ads=ads))
    return poll(
        lambda: get(cp, JOBSETS, namespace, name),
        what=f"the trainer to create the JobSet of {name}",
    )


def delete_pod(cp: ControlPlane, pod: Obj) -> None:
    """Delete one pod, on the condition that it is still the same object (uid precondition)."""
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    cp.request(
        "DELETE",
        f"{PODS.format(namespace=namespace)}/{name}",
        {"preconditions": {"uid": pod["metadata"]["uid"]}},
        expect=(200, 202),
    )


# --- JobSet deletes refused by the API server ----------------------------------------------------

_TITLES = {"jobsets": "JobSets", "jobs": "Jobs"}


def jobset_delete_refused(cp: ControlPlane, namespace: str, name: str) -> bool:
    """Whether the API server refuses to delete this JobSet now (a dry run: nothing is deleted).

    Admission runs on dry runs, so this is what a real delete would meet. False as well when
    the JobSet is gone.
    """
    path = f"{JOBSETS.format(namespace=namespace)}/{name}?dryRun=All"
    try:
        cp.request("DELETE", path, expect=(200, 202, 404))
    except ApiError as e:
        if e.status == 403:  # Forbidden: the policy's answer
            return True
        raise
    return False


@contextlib.contextmanager
def refusing_jobset_deletes(cp: ControlPlane, namespace: str) -> Iterator[str]:
    """A ValidatingAdmissionPolicy and binding that deny every DELETE of a JobSet in ``namespace``.

    The real API server enforces it (as an admission webhook or a policy of a cluster admin
    would refuse a controller's delete); it is removed on leaving the block. A new policy takes
    effect a moment after it is created: wait for ``jobset_delete_refused`` before relying on it.

    Yields:
        The policy's (and binding's) name.
    """
    with _refusing(cp, namespace, "jobset.x-k8s.io", "jobsets", "true") as name:
        yield name


@contextlib.contextmanager
def refusing_foreground_job_deletes(cp: ControlPlane, namespace: str) -> Iterator[str]:
    """As ``refusing_jobset_deletes``, for the foreground DELETEs of batch Jobs (JobSet's own).

    The garbage collector's background deletes of a deleted JobSet's Jobs go through.
    """
    foreground = "has(request.options.propagationPolicy) && "
    foreground += "request.options.propagationPolicy == 'Foreground'"
    with _refusing(cp, namespace, "batch", "jobs", foreground) as name:
        yield name


@contextlib.contextmanager
def _refusing(
    cp: ControlPlane, namespace: str, group: str, plural: str, refused: str
) -> Iterator[str]:
    name = f"deny-{plural}-delete-{namespace}"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [group],
                        "apiVersions": ["*"],
                        "operations": ["DELETE"],
                        "resources": [plural],
                    }
                ]
            },
            "validations": [
                {
                    "expression": f"!({refused})",
                    "message": f"deleting {_TITLES[plural]} is refused in namespace {namespace}",
                    "reason": "Forbidden",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    cp.request("POST", f"{_ADMISSION}/validatingadmissionpolicies", policy)
    try:
        cp.request("POST", f"{_ADMISSION}/validatingadmissionpolicybindings", binding)
        yield name
    finally:
        for admission in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            cp.request("DELETE", f"{_ADMISSION}/{admission}/{name}", expect=(200, 404))


# --- What the sweeper did ------------------------------------------------------------------------

_READS = frozenset({"get", "list", "watch"})


def writes(requests: list[Obj]) -> list[tuple[str, str, str]]:
    """The writes among a run's audit events: ``(verb, resource[/subresource], name)`` each.

    A server dry run's writes are listed too, with ``?dryRun`` kept in the verb's place
    (``delete?dryRun``), so that a test tells them from real ones.
    """
    found = []
    for event in requests:
        if event["verb"] in _READS:
            continue
        ref = event.get("objectRef", {})
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += f"/{ref['subresource']}"
        verb = event["verb"] + ("?dryRun" if "dryRun=" in event["requestURI"] else "")
        found.append((verb, resource, ref.get("name", "")))
    return found


def events_on(cp: ControlPlane, namespace: str, obj: Obj) -> list[str]:
    """The reasons of the Events the sweeper recorded on one object (by its uid), oldest first.

    The controllers record their own (mpi-operator's ``MPIJobCreated``...): those are left out.
    """
    selector = urllib.parse.quote(f"involvedObject.uid={obj['metadata']['uid']}")
    found: list[Obj] = cp.request(
        "GET", f"/api/v1/namespaces/{namespace}/events?fieldSelector={selector}"
    )["items"]
    # A list comes in name order; etcd's revision at creation orders them in time.
    found.sort(key=lambda event: int(event["metadata"]["resourceVersion"]))
    return [event["reason"] for event in found if event.get("reportingComponent") == SWEEPER]


def resource_versions(cp: ControlPlane, collection: str, namespace: str) -> dict[str, str]:
    """Every object of ``collection`` in ``namespace``: its resourceVersion, by name."""
    items: list[Obj] = cp.request("GET", collection.format(namespace=namespace))["items"]
    return {item["metadata"]["name"]: item["metadata"]["resourceVersion"] for item in items}


# --- The chart's grants --------------------------------------------------------------------------

_RBAC = "/apis/rbac.authorization.k8s.io/v1"


def chart_user(cp: ControlPlane, user: str, values: Obj, *, waits: Obj) -> Path:
    """A kubeconfig for ``user``, bound to the chart's ClusterRole rendered with ``values``.

    The sweeper run with it has exactly the chart's grants, on the real authorizer. ``waits``
    is one grant of the role (``resourceAttributes`` of a SubjectAccessReview) to wait for:
    the authorizer follows RBAC objects through a watch.
    """
    name = f"sw-{secrets.token_hex(4)}"
    docs = charts.render({"fullnameOverride": name, **values})
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    cp.request("POST", f"{_RBAC}/clusterroles", role)
    cp.request(
        "POST",
        f"{_RBAC}/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:authenticated"], "resourceAttributes": waits},
    }
    for _ in range(100):
        answer = cp.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
        if answer["status"].get("allowed"):
            return cp.user_kubeconfig(user, [])
        time.sleep(0.1)
    raise AssertionError(f"RBAC never granted {waits} to {user}")


def chart_policy_sweep(
    cp: ControlPlane,
    sweep: Callable[..., clusters.Sweep],
    tmp: Path,
    *,
    user: str,
    family: str,
    kind: str,
    rules: str,
    waits: Obj,
) -> Callable[..., clusters.Sweep]:
    """The CLI with ``--policy`` over ``rules``, as ``user`` with the chart's grants for them.

    ``family`` is the chart's one family and ``kind`` its kind, as the chart runs it
    (cluster-wide, as its grants are); ``waits`` as for :func:`chart_user`.
    """
    path = tmp / "rules.yaml"
    path.write_text(rules)
    values = {"families": [family], "policy": {"rules": yaml.safe_load(rules)["rules"]}}
    kubeconfig = chart_user(cp, user, values, waits=waits)

    def run(*args: str) -> clusters.Sweep:
        return sweep("--policy", str(path), "--kind", kind, *args, kubeconfig=kubeconfig, user=user)

    return run
