"""The node's GPUs: the status patch's pointer, and a job whose every container asks for one."""

from __future__ import annotations

from typing import Any

from devcluster import gpus
from devcluster import jobs as kubeflow


class Recorder:
    """Stands in for the admin client: keeps the requests, answers with a node's status."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any, str]] = []

    def request(self, method: str, path: str, body: Any = None, *, content_type: str = "") -> Any:
        self.sent.append((method, path, body, content_type))
        return {"status": {"allocatable": {gpus.GPU: "2"}}}


def test_advertise_patches_capacity_and_allocatable_with_an_escaped_pointer() -> None:
    cp = Recorder()
    gpus.advertise(cp, "node-a", 2)  # type: ignore[arg-type]
    ((method, path, patch, content_type),) = cp.sent
    assert (method, path, content_type) == (
        "PATCH",
        "/api/v1/nodes/node-a/status",
        "application/json-patch+json",
    )
    assert [op["path"] for op in patch] == [
        "/status/capacity/nvidia.com~1gpu",
        "/status/allocatable/nvidia.com~1gpu",
    ]
    assert {op["value"] for op in patch} == {"2"}
    assert gpus.advertised(cp, "node-a") == 2  # type: ignore[arg-type]


def test_every_container_of_a_job_asks_for_a_gpu() -> None:
    body = gpus.gpu_limits(kubeflow.manifest("TFJob", "gang", active_deadline_seconds=None))
    replicas = body["spec"][kubeflow.KINDS["TFJob"].replica_specs].values()
    limits = [
        c["resources"]["limits"] for r in replicas for c in r["template"]["spec"]["containers"]
    ]
    assert limits and all(limit == {gpus.GPU: "1"} for limit in limits)
