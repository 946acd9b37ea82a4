"""Kubeflow jobs, pods and services as the Training Operator would have left them.

The sweeper's e2e tests need jobs in precise states (started an hour ago, Running, already
Succeeded...) without running the operator: the job is created through the API with the real
CRD schema, and its status is then written through the ``/status`` subresource the way the
operator writes it. Pods and services get the operator's labels and a controller
``ownerReference`` to the job; pods are moved to Running or Succeeded through ``pods/status``,
as a kubelet would report them.

Also here: reading the sweeper's ``-o json`` report and the audit log in the terms the tests
use.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

from devcluster import ControlPlane, jobs

GROUP_VERSION = f"{jobs.GROUP}/{jobs.VERSION}"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
TOUCHED_AT = "kubeflow-deadline-sweeper.github.io/touched-at"
EXCLUDE = "kubeflow-deadline-sweeper.github.io/exclude"
# The keys of 0.1.0, still read by the sweeper for at least one release.
OLD_TOUCHED_AT = "deadline-sweeper.kubeflow.org/touched-at"
OLD_EXCLUDE = "deadline-sweeper.kubeflow.org/exclude"
COMPONENT = "kubeflow-deadline-sweeper"

Obj = dict[str, Any]


def now() -> dt.datetime:
    """The current time in whole seconds (what the API keeps of a timestamp), UTC."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def stamp(moment: dt.datetime) -> str:
    """RFC 3339 UTC with whole seconds, as the operator writes times."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(value: str) -> dt.datetime:
    """The inverse of ``stamp`` (accepts fractional seconds and offsets too)."""
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(dt.UTC)


def plural(kind: str) -> str:
    """``PyTorchJob`` -> ``pytorchjobs``."""
    return jobs.kind_info(kind).plural


def job_path(namespace: str, kind: str, name: str = "") -> str:
    """API path of a job (or of the kind's collection in ``namespace`` when ``name`` is empty)."""
    path = f"/apis/{GROUP_VERSION}/namespaces/{namespace}/{plural(kind)}"
    return f"{path}/{name}" if name else path


def get_job(cp: ControlPlane, namespace: str, kind: str, name: str) -> Obj:
    """Read a job as the admin."""
    job: Obj = cp.request("GET", job_path(namespace, kind, name))
    return job


def create_job(
    cp: ControlPlane,
    namespace: str,
    name: str,
    *,
    kind: str = "PyTorchJob",
    deadline: int | None = 60,
    started_ago: int | None = 3600,
    finished: str | None = None,
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    workers: int = 1,
) -> Obj:
    """Create a job and give it the status the operator would have written.

    Args:
        cp: The control plane.
        namespace: Its namespace.
        name: Its name.
        kind: One of the six kinds.
        deadline: ``spec.runPolicy.activeDeadlineSeconds``; None for none.
        started_ago: Seconds since ``status.startTime``; None for a job the operator has not
            started yet (no status at all).
        finished: ``Succeeded`` or ``Failed`` to add that condition (True) after Running.
        annotations: Extra annotations (e.g. ``EXCLUDE`` or ``TOUCHED_AT``).
        labels: Labels.
        workers: Number of workers beside the master (JAXJob: workers + 1 workers).

    Returns:
        The job as the apiserver stores it after the status write.
    """
    body = jobs.manifest(kind, name, active_deadline_seconds=deadline, workers=workers)
    body["metadata"]["annotations"] = dict(annotations or {})
    body["metadata"]["labels"] = dict(labels or {})
    cp.request("POST", job_path(namespace, kind), body)
    if started_ago is None:
        return get_job(cp, namespace, kind, name)
    started = stamp(now() - dt.timedelta(seconds=started_ago))
    return set_status(cp, namespace, kind, name, operator_status(kind, started, finished=finished))


def operator_status(
    kind: str,
    started: str,
    *,
    finished: str | None = None,
    replicas: Mapping[str, int] | None = None,
) -> Obj:
    """A ``status`` like the operator's for a job started at ``started`` and still running.

    With ``finished`` (``Succeeded`` or ``Failed``), Running is flipped to False and that
    condition appended, with ``completionTime``, as the operator finishes a job.
    """
    info = jobs.kind_info(kind)
    types = {info.worker: 1} if info.master is None else {info.master: 1, info.worker: 1}
    conditions: list[Obj] = [
        _condition("Created", f"{kind}Created", f"{kind} is created.", started),
        _condition("Running", f"{kind}Running", f"{kind} is running.", started),
    ]
    status: Obj = {
        "startTime": started,
        "lastReconcileTime": started,
        "conditions": conditions,
        "replicaStatuses": {t: {"active": n} for t, n in (replicas or types).items()},
    }
    if finished is not None:
        done = stamp(now())
        conditions[-1]["status"] = "False"
        conditions.append(_condition(finished, f"{kind}{finished}", f"{kind} is {finished}.", done))
        status["completionTime"] = done
    return status


def _condition(ctype: str, reason: str, message: str, at: str) -> Obj:
    return {
        "type": ctype,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastUpdateTime": at,
        "lastTransitionTime": at,
    }


DEADLINE_MESSAGE = "Job {name} has failed because it was active longer than specified deadline"


def failed_by_its_deadline(
    cp: ControlPlane,
    namespace: str,
    name: str,
    *,
    kind: str = "PyTorchJob",
    labels: Mapping[str, str] | None = None,
) -> Obj:
    """A job the operator failed by its deadline, whose pods it left running (v1.9.4)."""
    job = create_job(cp, namespace, name, kind=kind, labels=labels, finished="Failed")
    status = json.loads(json.dumps(job["status"]))
    status["conditions"][-1]["message"] = DEADLINE_MESSAGE.format(name=name)
    return set_status(cp, namespace, kind, name, status)


def set_status(cp: ControlPlane, namespace: str, kind: str, name: str, status: Obj) -> Obj:
    """Replace a job's status through ``/status`` (a merge patch whose lists replace)."""
    job: Obj = cp.request(
        "PATCH",
        job_path(namespace, kind, name) + "/status",
        {"status": status},
        content_type="application/merge-patch+json",
    )
    return job


def create_replicas(
    cp: ControlPlane,
    job: Obj,
    replicas: Mapping[str, Iterable[str]],
    *,
    owned: bool = True,
) -> list[str]:
    """Create the pods and same-named services of a job, as the operator does, in given phases.

    Args:
        cp: The control plane.
        job: The job (as returned by ``create_job``).
        replicas: Replica type -> phase of each replica, e.g.
            ``{"Master": ["Running"], "Worker": ["Running", "Succeeded"]}``.
        owned: Give them the controller ``ownerReference`` to the job; False for look-alikes
            (same labels, no owner), which the sweeper must leave alone.

    Returns:
        The pod names (``<job>-<type>-<index>``, lower case), in creation order.
    """
    meta = job["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    owner = {
        "apiVersion": GROUP_VERSION,
        "kind": job["kind"],
        "name": name,
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    container = jobs.kind_info(job["kind"]).container
    names = []
    for rtype, phases in replicas.items():
        for index, phase in enumerate(phases):
            pod_name = f"{name}-{rtype.lower()}-{index}"
            labels = {
                JOB_NAME_LABEL: name,
                OPERATOR_NAME_LABEL: f"{job['kind'].lower()}-controller",
                REPLICA_TYPE_LABEL: rtype.lower(),
                REPLICA_INDEX_LABEL: str(index),
            }
            metadata: Obj = {"name": pod_name, "labels": labels}
            if owned:
                metadata["ownerReferences"] = [owner]
            cp.request(
                "POST",
                f"/api/v1/namespaces/{namespace}/pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": metadata,
                    "spec": {
                        "restartPolicy": "OnFailure",
                        "containers": [{"name": container, "image": "busybox:1.36"}],
                    },
                },
            )
            cp.request(
                "POST",
                f"/api/v1/namespaces/{namespace}/services",
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": metadata,
                    "spec": {
                        "clusterIP": "None",
                        "selector": labels,
                        "ports": [{"name": "default", "port": 23456}],
                    },
                },
            )
            if phase != "Pending":
                set_pod_phase(cp, namespace, pod_name, phase, container)
            names.append(pod_name)
    return names


def set_pod_phase(cp: ControlPlane, namespace: str, pod: str, phase: str, container: str) -> None:
    """Report a pod's phase through ``pods/status``, as a kubelet would."""
    at = stamp(now())
    if phase == "Running":
        state: Obj = {"running": {"startedAt": at}}
    else:
        code = 0 if phase == "Succeeded" else 1
        state = {"terminated": {"exitCode": code, "startedAt": at, "finishedAt": at}}
    ready = "True" if phase == "Running" else "False"
    cp.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/status",
        {
            "status": {
                "phase": phase,
                "startTime": at,
                "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": at}],
                "containerStatuses": [
                    {
                        "name": container,
                        "image": "busybox:1.36",
                        "imageID": "",
                        "ready": phase == "Running",
                        "started": phase == "Running",
                        "restartCount": 0,
                        "state": state,
                    }
                ],
            }
        },
        content_type="application/merge-patch+json",
    )


def names(cp: ControlPlane, namespace: str, resource: str) -> set[str]:
    """Names of the pods or services (``resource``) that exist in ``namespace``."""
    items = cp.request("GET", f"/api/v1/namespaces/{namespace}/{resource}")["items"]
    return {item["metadata"]["name"] for item in items}


# --- the sweeper's report and its requests ------------------------------------------------------


def passes(stdout: str) -> list[Obj]:
    """The JSON objects ``-o json`` printed, one per pass (one per line or pretty-printed)."""
    decoder = json.JSONDecoder()
    found, position = [], 0
    text = stdout.strip()
    while position < len(text):
        obj, end = decoder.raw_decode(text, position)
        found.append(obj)
        position = end
        while position < len(text) and text[position].isspace():
            position += 1
    return found


def namespace_state(cp: ControlPlane, namespace: str) -> Obj:
    """Everything a sweeper write could change in a namespace: job versions, pods, services, Events.

    Two equal states mean nothing was written in between.
    """
    return {
        "jobs": {
            j["metadata"]["name"]: j["metadata"]["resourceVersion"]
            for j in cp.request("GET", job_path(namespace, "PyTorchJob"))["items"]
        },
        "pods": names(cp, namespace, "pods"),
        "services": names(cp, namespace, "services"),
        "events": names(cp, namespace, "events"),
    }


def events_about(cp: ControlPlane, job: Obj) -> list[Obj]:
    """The Events in the job's namespace whose ``involvedObject`` is the job (by uid)."""
    namespace = job["metadata"]["namespace"]
    events: list[Obj] = cp.request("GET", f"/api/v1/namespaces/{namespace}/events")["items"]
    return [e for e in events if e["involvedObject"].get("uid") == job["metadata"]["uid"]]


def report_jobs(stdout: str) -> list[Obj]:
    """The ``jobs`` entries of a single-pass ``-o json`` report."""
    (report,) = passes(stdout)
    entries: list[Obj] = report["jobs"]
    return entries


def request_summary(event: Obj) -> tuple[str, str, str | None, str | None]:
    """An audit event as (verb, resource[/subresource], namespace, name)."""
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", event["requestURI"].split("?")[0])
    if ref.get("subresource"):
        resource = f"{resource}/{ref['subresource']}"
    return event["verb"], resource, ref.get("namespace"), ref.get("name")


def writes(events: Iterable[Obj]) -> list[Obj]:
    """The events of requests that could change state (any verb but get, list, watch)."""
    return [e for e in events if e["verb"] not in {"get", "list", "watch"}]
