"""Kubeflow objects for the unit tests, shaped as the API server returns them (decoded JSON)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from sweeper.core.families import KINDS
from sweeper.core.kinds import JOB_NAME_LABEL, Kind

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
KIND = {kind.name: kind for kind in KINDS}
_UNSET: Any = object()


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def ago(seconds: float) -> str:
    return stamp(NOW - timedelta(seconds=seconds))


def running_conditions(started: datetime) -> list[dict[str, Any]]:
    return [
        {
            "type": "Created",
            "status": "True",
            "reason": "PyTorchJobCreated",
            "message": "PyTorchJob team-a/train is created.",
            "lastUpdateTime": stamp(started),
            "lastTransitionTime": stamp(started),
        },
        {
            "type": "Running",
            "status": "True",
            "reason": "PyTorchJobRunning",
            "message": "PyTorchJob team-a/train is running.",
            "lastUpdateTime": stamp(started),
            "lastTransitionTime": stamp(started),
        },
    ]


def job(
    kind: str | Kind = "PyTorchJob",
    name: str = "train",
    namespace: str = "team-a",
    *,
    uid: str | None = None,
    deadline: Any = 3600,
    started_ago: float | None = 7200,
    conditions: Any = _UNSET,
    suspend: Any = None,
    managed_by: Any = None,
    annotations: dict[str, Any] | None = None,
    deleting: bool = False,
    clean_pod_policy: Any = None,
    legacy_clean_pod_policy: Any = None,
    resource_version: str = "1",
    completion_time: str | None = None,
    status: Any = _UNSET,
) -> dict[str, Any]:
    """A job; by default a PyTorchJob running for 2 h with a 1 h deadline (overdue by 1 h)."""
    kind_name = kind.name if isinstance(kind, Kind) else kind
    info = KIND[kind_name]
    run_policy: dict[str, Any] = {}
    if deadline is not None:
        run_policy["activeDeadlineSeconds"] = deadline
    if suspend is not None:
        run_policy["suspend"] = suspend
    if managed_by is not None:
        run_policy["managedBy"] = managed_by
    if clean_pod_policy is not None:
        run_policy["cleanPodPolicy"] = clean_pod_policy
    spec: dict[str, Any] = {
        "runPolicy": run_policy,
        info.replica_specs: {"Worker": {"replicas": 1, "template": {"spec": {"containers": []}}}},
    }
    if legacy_clean_pod_policy is not None:
        spec["cleanPodPolicy"] = legacy_clean_pod_policy
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{kind_name}-{namespace}-{name}",
        "resourceVersion": resource_version,
        "creationTimestamp": ago((started_ago or 0) + 5),
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    if deleting:
        metadata["deletionTimestamp"] = ago(1)
        metadata["finalizers"] = ["example.com/keep"]
    raw: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind_name,
        "metadata": metadata,
        "spec": spec,
    }
    if status is not _UNSET:
        if status is not None:
            raw["status"] = copy.deepcopy(status)
        return raw
    job_status: dict[str, Any] = {}
    if started_ago is not None:
        started = NOW - timedelta(seconds=started_ago)
        job_status["startTime"] = stamp(started)
        job_status["conditions"] = (
            running_conditions(started) if conditions is _UNSET else conditions
        )
        job_status["replicaStatuses"] = {"Worker": {"active": 1}}
    elif conditions is not _UNSET:
        job_status["conditions"] = conditions
    if completion_time is not None:
        job_status["completionTime"] = completion_time
    raw["status"] = job_status
    return raw


def condition(
    ctype: str, status: str = "True", message: str = "", reason: str = ""
) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason or f"PyTorchJob{ctype}",
        "message": message,
        "lastUpdateTime": ago(60),
        "lastTransitionTime": ago(60),
    }


def deadline_failed(name: str = "train", *, by_sweeper: bool = False) -> list[dict[str, Any]]:
    message = f"Job {name} has failed because it was active longer than specified deadline"
    if by_sweeper:
        message += " (enforced by kubeflow-deadline-sweeper)"
    running = condition("Running", "False")
    return [condition("Created"), running, condition("Failed", message=message)]


def owned(
    name: str,
    owner: dict[str, Any],
    *,
    phase: str | None = "Running",
    controller: bool = True,
    owner_uid: str | None = None,
    uid: str | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    """A pod (with a phase) or a service (phase None) created by the operator for ``owner``.

    ``deleting``: already being deleted (a finalizer or its grace period keeps it, phase
    unchanged).
    """
    meta = owner["metadata"]
    obj: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "uid": uid or f"uid-{name}",
            "labels": {JOB_NAME_LABEL: meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": owner["kind"],
                    "name": meta["name"],
                    "uid": owner_uid or meta["uid"],
                    "controller": controller,
                    "blockOwnerDeletion": True,
                }
            ],
        },
    }
    if deleting:
        obj["metadata"]["deletionTimestamp"] = ago(10)
        obj["metadata"]["finalizers"] = ["example.com/keep"]
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def mpijob(
    name: str = "mpi",
    namespace: str = "team-a",
    *,
    deadline: int | None = 600,
    started_ago: float | None = 900,
    waits: bool = False,
    failed: str | None = None,
    completed: bool = True,
    clean_pod_policy: str | None = None,
    suspend: bool | None = None,
) -> dict[str, Any]:
    """An mpi-operator MPIJob (``kubeflow.org/v2beta1``) as v0.8.x stores it.

    ``failed``: the reason of a ``Failed=True`` condition (``DeadlineExceeded`` is what the
    launcher Job's deadline gives), with ``completionTime`` when ``completed``.
    """
    run_policy: dict[str, Any] = {}
    if deadline is not None:
        run_policy["activeDeadlineSeconds"] = deadline
    if clean_pod_policy is not None:
        run_policy["cleanPodPolicy"] = clean_pod_policy
    if suspend is not None:
        run_policy["suspend"] = suspend
    status: dict[str, Any] = {"conditions": [condition("Created", reason="MPIJobCreated")]}
    if started_ago is not None:
        status["startTime"] = ago(started_ago)
    if failed is not None:
        message = (
            "Job was active longer than specified deadline"
            if failed == "DeadlineExceeded"
            else "MPIJob has failed"
        )
        status["conditions"].append(condition("Failed", message=message, reason=failed))
        if completed:
            status["completionTime"] = ago(60)
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
        },
        "spec": {
            "runPolicy": run_policy,
            "launcherCreationPolicy": "WaitForWorkersReady" if waits else "AtStartup",
            "mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}},
        },
        "status": status,
    }


def trainjob(
    name: str = "tj",
    namespace: str = "team-a",
    *,
    deadline: int | None = 600,
    created_ago: float = 900,
    failed: str | None = None,
    failed_ago: float = 300,
    managed_by: str | None = None,
    suspend: bool | None = None,
    resumed_ago: float | None = None,
    complete: bool = False,
    still_suspended: bool = False,
) -> dict[str, Any]:
    """A Trainer v2 TrainJob (``trainer.kubeflow.org/v1alpha1``) as v2.3.0 stores it.

    ``complete``: with the ``Complete=True`` condition the trainer copies from JobSet's
    ``Completed`` (jobset.go, ``Status``). ``still_suspended``: with the ``Suspended=True``
    condition the trainer wrote while it was suspended (``setSuspendedCondition``).
    """
    spec: dict[str, Any] = {"runtimeRef": {"name": "torch-distributed"}}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    if managed_by is not None:
        spec["managedBy"] = managed_by
    if suspend is not None:
        spec["suspend"] = suspend
    conditions: list[dict[str, Any]] = []
    if still_suspended:
        conditions.append(condition("Suspended", reason="Suspended"))
    if resumed_ago is not None:
        resumed = condition("Suspended", "False", reason="Resumed")
        resumed["lastTransitionTime"] = ago(resumed_ago)
        conditions.append(resumed)
    if complete:
        conditions.append(condition("Complete", reason="JobSetCompleted"))
    if failed is not None:
        failure = condition(
            "Failed", message="TrainJob exceeded its active deadline", reason=failed
        )
        failure["lastTransitionTime"] = ago(failed_ago)
        conditions.append(failure)
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": ago(created_ago),
            "resourceVersion": "1",
        },
        "spec": spec,
        "status": {"conditions": conditions},
    }


def jobset(owner: dict[str, Any], *, deleting: bool = False, owner_uid: str = "") -> dict[str, Any]:
    """The JobSet the trainer made for a TrainJob: its name, no label, owned by it."""
    meta = owner["metadata"]
    obj: dict[str, Any] = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": f"uid-jobset-{meta['name']}",
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": meta["name"],
                    "uid": owner_uid or meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
    }
    if deleting:
        obj["metadata"]["deletionTimestamp"] = ago(5)
    return obj
