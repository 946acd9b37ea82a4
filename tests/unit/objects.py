"""Kubeflow objects for the unit tests, shaped as the API server returns them (decoded JSON)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from sweeper.core.kinds import JOB_NAME_LABEL, KINDS, Kind

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
