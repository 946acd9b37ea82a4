"""The fleet's pods: four a job, with GPUs, so a pass's pod list and GPU sums have work to do.

Job ``i`` of ``benchmarks.fleet`` gets :data:`PER_JOB` pods, fully determined by its plan, as
the Training Operator's controller and the kubelet leave them: the job's labels and the
operator's, its controller ``ownerReference``, the replica template's containers (with their
``nvidia.com/gpu`` requests and limits), what the API server and the kubelet add (the service
account's projected volume, the scheduling defaults, ``managedFields``, container statuses),
about 4.5 KB of JSON each. Their phases follow the job's:

- running: four pods Running on a node; one running job in :data:`STUCK_EVERY` that started at
  least :data:`HELD_AGE_S` before the fleet's reference time is **stuck starting** instead (two
  pods Running, two Pending ``Unschedulable``);
- not started (no status): four pods Pending ``Unschedulable``, none placed (**waiting**);
- succeeded: four pods Succeeded;
- failed: one pod Failed; when the job ended at least :data:`HELD_AGE_S` before the reference
  time, the three others still Running (**finished holding**), else Failed too.

So the stuck and finished-holding jobs are past ``--stuck-after`` (10m) and ``--reclaim-grace``
(2m) whenever a pass runs, and :func:`expected_held` says what its report must count.

Pods go straight into etcd as JSON (:func:`put`): the API server reads JSON and protobuf alike
from its storage, and serves them like pods it wrote itself; nothing runs them (the benchmark's
control plane has no scheduler, kubelet or controller manager).
"""

from __future__ import annotations

import datetime as dt
import json
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from benchmarks.fleet import SEED, Cloner, Planned, name_of, plan
from devcluster import ApiError, ControlPlane
from devcluster.jobs import GROUP, KINDS, VERSION

PER_JOB = 4
STUCK_EVERY = 10  # one running job in ten (old enough) is stuck starting: i % 10 == 3
_STUCK_OFFSET = 3  # never an overdue job (i % 100 == 37)
HELD_AGE_S = 3600
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
_NODES = 64
_STUCK, _FINISHED, _WAITING = "stuck-starting", "finished-holding", "waiting"


def phase_of(job: Planned) -> str:
    """The job's phase as its status says: ``New``, ``Running``, ``Succeeded`` or ``Failed``."""
    if job.status is None:
        return "New"
    return str(job.status["conditions"][-1]["type"])


def _at(stamp: str) -> dt.datetime:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def held_state(job: Planned, reference: dt.datetime) -> str | None:
    """What the sweeper's report must say of the job's pods (``None``: nothing held)."""
    phase = phase_of(job)
    if phase == "New":
        return _WAITING
    assert job.status is not None  # noqa: S101 - a started job has a status
    old = dt.timedelta(seconds=HELD_AGE_S)
    if phase == "Running" and job.index % STUCK_EVERY == _STUCK_OFFSET:
        return _STUCK if _at(job.status["startTime"]) <= reference - old else None
    if phase == "Failed":
        return _FINISHED if _at(job.status["completionTime"]) <= reference - old else None
    return None


def _phases(job: Planned, reference: dt.datetime) -> tuple[str, ...]:
    phase = phase_of(job)
    state = held_state(job, reference)
    if state == _WAITING:
        return ("Pending",) * PER_JOB
    if state == _STUCK:
        return ("Running", "Running", "Pending", "Pending")
    if phase == "Running":
        return ("Running",) * PER_JOB
    if phase == "Succeeded":
        return ("Succeeded",) * PER_JOB
    return ("Failed", *(("Running" if state == _FINISHED else "Failed"),) * (PER_JOB - 1))


def _gpus(job: Planned) -> int:
    replicas = job.body["spec"][KINDS[job.kind].replica_specs]
    template = next(iter(replicas.values()))["template"]["spec"]
    return int(template["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])


def reported_held(document: dict[str, Any]) -> dict[str, dict[str, int]]:
    """What an ``-o json`` report says is held: its summary's pods and GPUs, its jobs counted."""
    return {
        state: {"jobs": sum(1 for h in document["held"] if h["state"] == state), **sums}
        for state, sums in document["summary"]["held"].items()
    }


def expected_held(jobs: Iterable[Planned], reference: dt.datetime) -> dict[str, dict[str, int]]:
    """What :func:`reported_held` must say of ``jobs`` (each as :func:`stored` gives it)."""
    counts: dict[str, Counter[str]] = {s: Counter() for s in (_STUCK, _FINISHED, _WAITING)}
    for job in jobs:
        state = held_state(job, reference)
        if state is None:
            continue
        phases = _phases(job, reference)
        placed = phases.count("Running")
        counts[state]["jobs"] += 1
        counts[state]["pods"] += phases.count("Running") + phases.count("Pending")
        counts[state]["gpus"] += 0 if state == _WAITING else placed * _gpus(job)
    return {s: {k: c[k] for k in ("jobs", "pods", "gpus")} for s, c in counts.items()}


def pods(job: Planned, uid: str, reference: dt.datetime) -> list[dict[str, Any]]:
    """The job's pods, as the operator, the scheduler and the kubelet leave them (pure)."""
    info = KINDS[job.kind]
    replicas = job.body["spec"][info.replica_specs]
    rtype, replica = next(iter(replicas.items()))
    template = replica["template"]["spec"]
    name = job.body["metadata"]["name"]
    started = _at(job.status["startTime"]) if job.status else reference
    created = _stamp(started - dt.timedelta(seconds=1))
    scheduled = _stamp(started + dt.timedelta(seconds=2))
    ended = job.status.get("completionTime") if job.status else None
    out = []
    for n, phase in enumerate(_phases(job, reference)):
        pod_name = f"{name}-{rtype.lower()}-{n}"
        placed = phase != "Pending"
        token = f"kube-api-access-{job.index % 99991:05d}"
        containers = [
            {
                **container,
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "ports": [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}],
                "volumeMounts": [
                    *container.get("volumeMounts", []),
                    {
                        "name": token,
                        "readOnly": True,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    },
                ],
            }
            for container in template["containers"]
        ]
        spec = {
            **template,
            "containers": containers,
            "volumes": [*template.get("volumes", []), _token_volume(token)],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "hostname": pod_name,
            "subdomain": name,
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        node = f"gpu-node-{(job.index * PER_JOB + n) % _NODES:03d}"
        if placed:
            spec["nodeName"] = node
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name,
                    "namespace": job.namespace,
                    "uid": _pod_uid(uid, n),
                    "creationTimestamp": created,
                    "labels": {
                        **job.body["metadata"].get("labels", {}),
                        JOB_NAME_LABEL: name,
                        "training.kubeflow.org/operator-name": f"{job.kind.lower()}-controller",
                        "training.kubeflow.org/replica-index": str(n),
                        "training.kubeflow.org/replica-type": rtype.lower(),
                    },
                    "ownerReferences": [
                        {
                            "apiVersion": f"{GROUP}/{VERSION}",
                            "kind": job.kind,
                            "name": name,
                            "uid": uid,
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                    "managedFields": _managed(created, placed),
                },
                "spec": spec,
                "status": _status(
                    phase,
                    placed=placed,
                    created=created,
                    scheduled=scheduled,
                    ended=ended,
                    n=n,
                    containers=containers,
                ),
            }
        )
    return out


def _pod_uid(job_uid: str, n: int) -> str:
    # Unique and stable: the job's uid with its last hex digits replaced by the pod's index.
    return f"{job_uid[:-4]}{n:04x}"


def _token_volume(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
        },
    }


def _managed(created: str, placed: bool) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = [
        {
            "manager": "training-operator",
            "operation": "Update",
            "apiVersion": "v1",
            "time": created,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:labels": {".": {}, "f:training.kubeflow.org/job-name": {}},
                    "f:ownerReferences": {".": {}, 'k:{"uid"}': {}},
                },
                "f:spec": {"f:containers": {}, "f:restartPolicy": {}, "f:volumes": {}},
            },
        }
    ]
    if placed:
        entries.append(
            {
                "manager": "kubelet",
                "operation": "Update",
                "apiVersion": "v1",
                "time": created,
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:status": {
                        "f:conditions": {},
                        "f:containerStatuses": {},
                        "f:hostIP": {},
                        "f:phase": {},
                        "f:podIP": {},
                        "f:startTime": {},
                    }
                },
                "subresource": "status",
            }
        )
    return entries


def _status(
    phase: str,
    *,
    placed: bool,
    created: str,
    scheduled: str,
    ended: str | None,
    n: int,
    containers: list[dict[str, Any]],
) -> dict[str, Any]:
    if not placed:
        return {
            "phase": "Pending",
            "qosClass": "Burstable",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": created,
                    "reason": "Unschedulable",
                    "message": "0/64 nodes are available: 64 Insufficient nvidia.com/gpu. "
                    "preemption: 0/64 nodes are available: 64 No preemption victims found "
                    "for incoming pod.",
                }
            ],
        }
    running = phase == "Running"
    ready = "True" if running else "False"
    conditions = [
        {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": scheduled}
        for kind, status in (
            ("PodReadyToStartContainers", "True"),
            ("Initialized", "True"),
            ("Ready", ready),
            ("ContainersReady", ready),
            ("PodScheduled", "True"),
        )
    ]
    if running:
        state: dict[str, Any] = {"running": {"startedAt": scheduled}}
    else:
        state = {
            "terminated": {
                "exitCode": 0 if phase == "Succeeded" else 1,
                "reason": "Completed" if phase == "Succeeded" else "Error",
                "startedAt": scheduled,
                "finishedAt": ended or scheduled,
                "containerID": f"containerd://{n:064x}",
            }
        }
    return {
        "phase": phase,
        "conditions": conditions,
        "hostIP": "10.20.0.1",
        "hostIPs": [{"ip": "10.20.0.1"}],
        "podIP": f"10.244.{n}.7",
        "podIPs": [{"ip": f"10.244.{n}.7"}],
        "startTime": scheduled,
        "qosClass": "Burstable",
        "containerStatuses": [
            {
                "name": c["name"],
                "state": state,
                "lastState": {},
                "ready": running,
                "restartCount": 0,
                "image": c["image"],
                "imageID": f"{c['image']}@sha256:{n:064x}",
                "containerID": f"containerd://{n:064x}",
                "started": running,
            }
            for c in containers
        ],
    }


def stored(index: int, reference: dt.datetime) -> Planned:
    """Job ``index`` as the API server stores it: beyond the seed, job ``index % SEED``'s copy.

    A copy (``fleet.Cloner``) has its original's status and replicas under its own name.
    """
    origin = plan(index % SEED, reference)
    if index < SEED:
        return origin
    body = {**origin.body, "metadata": {**origin.body["metadata"], "name": name_of(index)}}
    return replace(origin, index=index, body=body)


def load(
    cp: ControlPlane,
    cloner: Cloner,
    indices: Iterable[int],
    reference: dt.datetime,
    *,
    jobs: int,
) -> None:
    """Write the pods of jobs ``indices`` (created or copied already) straight into etcd.

    Then wait until the API server lists the pods of ``jobs`` jobs.
    """
    planned = (stored(i, reference) for i in indices)
    cloner.put(
        (
            f"/registry/pods/{pod['metadata']['namespace']}/{pod['metadata']['name']}".encode(),
            json.dumps(pod, separators=(",", ":")).encode(),
        )
        for job in planned
        for pod in pods(job, cloner.uid_of(job.index), reference)
    )
    wait_until_served(cp, jobs)


def wait_until_served(cp: ControlPlane, jobs: int, timeout: float = 600.0) -> None:
    """Wait until the API server lists the pods of the first ``jobs`` jobs (as ``Cloner``'s).

    Raises:
        RuntimeError: Still not listed after ``timeout`` seconds.
    """
    expected = jobs * PER_JOB
    deadline = time.monotonic() + timeout
    while True:
        try:
            listed = cp.request("GET", "/api/v1/pods?limit=1")
        except ApiError:
            listed = None  # the watch cache is behind: 504 until it catches up
        if listed is not None:
            meta = listed.get("metadata") or {}
            count = len(listed.get("items") or ()) + (meta.get("remainingItemCount") or 0)
            token = meta.get("continue")
            # The next page is read from the watch cache: it must serve it too.
            if count == expected and (not token or _served(cp, token)):
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the API server does not list {expected} pods yet")
        time.sleep(0.5)


def _served(cp: ControlPlane, token: str) -> bool:
    try:
        cp.request("GET", f"/api/v1/pods?limit=1&continue={urllib.parse.quote(token)}")
    except ApiError:
        return False
    return True
