"""Kubeflow v1 jobs for the harness: manifests shaped like the experiment, and reading them back.

The experiment behind the project ran a PyTorchJob with one master and three workers, each
``sleep 30s``. ``manifest`` builds that shape for every kind the Training Operator v1.9.4
serves, with the container name each controller expects. ``JobView`` reads what the tests
and the demo measure from a job object: its conditions, ``startTime``, the deadline, and
when it failed. Deliberately independent of ``sweeper/``: the harness checks the product, so it
does not borrow the product's own tables.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from devcluster import fields

GROUP = "kubeflow.org"
VERSION = "v1"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"


@dataclass(frozen=True)
class Kind:
    """What the harness needs to know about one job kind.

    Attributes:
        kind: Kind name, e.g. ``PyTorchJob``.
        plural: Resource name, e.g. ``pytorchjobs``.
        replica_specs: Field of ``spec`` holding the replica specs.
        container: The container name the operator looks for in every replica.
        master: Replica type of the single coordinating replica; None when the kind has
            only workers (JAXJob), in which case worker 0 plays that part.
        worker: Replica type of the workers.
        extra_spec: Further required ``spec`` fields, as (field, value) pairs (MXJob's
            ``jobMode``).
    """

    kind: str
    plural: str
    replica_specs: str
    container: str
    master: str | None
    worker: str = "Worker"
    extra_spec: tuple[tuple[str, str], ...] = ()


KINDS: dict[str, Kind] = {
    k.kind: k
    for k in (
        Kind("TFJob", "tfjobs", "tfReplicaSpecs", "tensorflow", "Chief"),
        Kind("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", "pytorch", "Master"),
        Kind("XGBoostJob", "xgboostjobs", "xgbReplicaSpecs", "xgboost", "Master"),
        Kind("MPIJob", "mpijobs", "mpiReplicaSpecs", "mpi", "Launcher"),
        Kind("PaddleJob", "paddlejobs", "paddleReplicaSpecs", "paddle", "Master"),
        Kind("JAXJob", "jaxjobs", "jaxReplicaSpecs", "jax", None),
    )
}
# Served by operator v1.7.0 to v1.8.x only (pkg/controller.v1/register_controller.go; JAXJob
# took its place in v1.9.0), so not one of KINDS, which every release the suite runs by default
# serves; the compat tier and the per-release tests use it where the release serves it. A
# Scheduler coordinates MXTrain jobs (mxjob_controller.go at v1.8.1 marks the job Running from it).
MXJOB = Kind(
    "MXJob", "mxjobs", "mxReplicaSpecs", "mxnet", "Scheduler", extra_spec=(("jobMode", "MXTrain"),)
)
# Every kind the harness can create, whichever release serves it.
ALL_KINDS: dict[str, Kind] = {**KINDS, MXJOB.kind: MXJOB}


def kind_info(kind: str) -> Kind:
    """One of ``KINDS``, or MXJob."""
    return ALL_KINDS[kind]


def served_kinds(operator_version: str) -> list[str]:
    """The kinds an operator release serves, e.g. ``served_kinds("v1.8.1")``."""
    release = tuple(int(part) for part in operator_version.lstrip("v").split(".")[:2])
    if release >= (1, 9):
        return list(KINDS)
    return [kind for kind in KINDS if kind != "JAXJob"] + [MXJOB.kind]


def manifest(
    kind: str,
    name: str,
    *,
    active_deadline_seconds: int | None,
    workers: int = 3,
    clean_pod_policy: str | None = None,
    sleep_seconds: int = 30,
) -> dict[str, Any]:
    """A job of ``kind`` with one master and ``workers`` workers running ``sleep``.

    Args:
        kind: One of ``ALL_KINDS``.
        name: Job name.
        active_deadline_seconds: ``spec.runPolicy.activeDeadlineSeconds``; None for none.
        workers: Number of workers (a JAXJob gets ``workers + 1`` workers instead of a master).
        clean_pod_policy: ``spec.runPolicy.cleanPodPolicy``; None leaves it unset, which
            v1.9.4 treats as ``None`` (pods are kept when the job finishes).
        sleep_seconds: What the containers would run; no kubelet runs them, but the pods
            look like the experiment's.
    """
    info = ALL_KINDS[kind]

    def replica(count: int) -> dict[str, Any]:
        return {
            "replicas": count,
            "restartPolicy": "OnFailure",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": info.container,
                            "image": "busybox:1.36",
                            "command": ["sleep", f"{sleep_seconds}s"],
                        }
                    ],
                },
            },
        }

    if info.master is None:
        specs = {info.worker: replica(workers + 1)}
    else:
        specs = {info.master: replica(1), info.worker: replica(workers)}
    run_policy: dict[str, Any] = {}
    if active_deadline_seconds is not None:
        run_policy["activeDeadlineSeconds"] = active_deadline_seconds
    if clean_pod_policy is not None:
        run_policy["cleanPodPolicy"] = clean_pod_policy
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"runPolicy": run_policy, info.replica_specs: specs, **dict(info.extra_spec)},
    }


def create(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> JobView:
    """Create a job and return what the apiserver stored."""
    plural = ALL_KINDS[body["kind"]].plural
    created = client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, plural, body
    )
    return JobView(json_object(created, f"creating a {body['kind']} in {namespace}"))


def get(api: client.ApiClient, kind: str, namespace: str, name: str) -> JobView:
    """Read a job."""
    obj = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, ALL_KINDS[kind].plural, name
    )
    return JobView(json_object(obj, f"reading {kind} {namespace}/{name}"))


def pods(api: client.ApiClient, namespace: str, name: str) -> list[client.V1Pod]:
    """The job's pods (by the operator's job-name label), sorted by name."""
    items = (
        client.CoreV1Api(api)
        .list_namespaced_pod(namespace, label_selector=f"{JOB_NAME_LABEL}={name}")
        .items
    )
    return sorted(items, key=fields.name)


def delete_everything(api: client.ApiClient, kind: str, namespace: str, name: str) -> None:
    """Delete a job with its pods and services.

    Without kube-controller-manager nothing garbage-collects owned objects, so a test that
    leaves a job behind must remove its pods and services itself.
    """
    core = client.CoreV1Api(api)
    selector = f"{JOB_NAME_LABEL}={name}"
    custom = client.CustomObjectsApi(api)
    try:
        custom.delete_namespaced_custom_object(
            GROUP, VERSION, namespace, ALL_KINDS[kind].plural, name
        )
    except client.ApiException as e:
        if e.status != 404:  # noqa: PLR2004
            raise
    core.delete_collection_namespaced_pod(
        namespace, label_selector=selector, grace_period_seconds=0
    )
    for service in core.list_namespaced_service(namespace, label_selector=selector).items:
        try:
            core.delete_namespaced_service(fields.name(service), namespace)
        except client.ApiException as e:
            if e.status != 404:  # noqa: PLR2004
                raise


def json_object(returned: object, what: str) -> dict[str, Any]:
    """``returned`` as a JSON object: the custom objects API is typed ``object``, returns dicts.

    Raises:
        TypeError: ``returned`` is not a dict; ``what`` names the call in the message.
    """
    if not isinstance(returned, dict):
        raise TypeError(f"{what}: the apiserver returned {type(returned).__name__}, not an object")
    return returned


def parse_time(value: str | None) -> dt.datetime | None:
    """An RFC 3339 timestamp as an aware UTC datetime; None stays None."""
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(dt.UTC)


@dataclass(frozen=True)
class JobView:
    """Read-only accessors over one job object as the apiserver returned it.

    Attributes:
        obj: The raw object.
    """

    obj: dict[str, Any]

    @property
    def kind(self) -> str:
        """The job's kind."""
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        """The job's name."""
        return str(self.obj["metadata"]["name"])

    @property
    def namespace(self) -> str:
        """The job's namespace."""
        return str(self.obj["metadata"]["namespace"])

    @property
    def uid(self) -> str:
        """The job's uid."""
        return str(self.obj["metadata"]["uid"])

    @property
    def conditions(self) -> list[dict[str, Any]]:
        """``status.conditions`` in order (empty before the operator's first write)."""
        return list(self.obj.get("status", {}).get("conditions") or [])

    def condition(self, kind: str) -> dict[str, Any] | None:
        """The condition of type ``kind``, if present."""
        return next((c for c in self.conditions if c.get("type") == kind), None)

    def is_true(self, kind: str) -> bool:
        """Whether condition ``kind`` has status ``"True"``."""
        condition = self.condition(kind)
        return condition is not None and condition.get("status") == "True"

    @property
    def failed(self) -> bool:
        """Whether the job has ``Failed=True``."""
        return self.is_true("Failed")

    @property
    def finished(self) -> bool:
        """Whether the job has ``Failed=True`` or ``Succeeded=True``."""
        return self.failed or self.is_true("Succeeded")

    @property
    def phase(self) -> str:
        """A one-word summary for narration: the type of the latest true condition."""
        true = [c["type"] for c in self.conditions if c.get("status") == "True"]
        return true[-1] if true else "New"

    @property
    def start_time(self) -> dt.datetime | None:
        """``status.startTime`` (whole seconds, written by the operator)."""
        return parse_time(self.obj.get("status", {}).get("startTime"))

    @property
    def active_deadline_seconds(self) -> int | None:
        """``spec.runPolicy.activeDeadlineSeconds``."""
        value = self.obj["spec"].get("runPolicy", {}).get("activeDeadlineSeconds")
        return int(value) if value is not None else None

    @property
    def deadline(self) -> dt.datetime | None:
        """``startTime + activeDeadlineSeconds``: when the operator's rule makes the job overdue."""
        if self.start_time is None or self.active_deadline_seconds is None:
            return None
        return self.start_time + dt.timedelta(seconds=self.active_deadline_seconds)

    @property
    def failed_at(self) -> dt.datetime | None:
        """``lastTransitionTime`` of the ``Failed=True`` condition."""
        condition = self.condition("Failed")
        if condition is None or condition.get("status") != "True":
            return None
        return parse_time(condition.get("lastTransitionTime"))

    @property
    def late_by(self) -> float | None:
        """Seconds from the deadline to ``Failed`` (both whole-second API timestamps)."""
        if self.deadline is None or self.failed_at is None:
            return None
        return (self.failed_at - self.deadline).total_seconds()

    @property
    def annotations(self) -> dict[str, str]:
        """``metadata.annotations``."""
        return dict(self.obj["metadata"].get("annotations") or {})
