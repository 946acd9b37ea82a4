"""GPUs on the real node: an extended resource its status advertises, so the scheduler counts it.

A node without a device plugin can still offer devices to the scheduler: a patch of its
status's ``capacity`` and ``allocatable`` (Kubernetes' "Advertise Extended Resources for a
Node"). The kubelet keeps what it does not manage itself, and kube-scheduler then places at most
that many pods asking for one each: a gang larger than the devices is left partly Pending
``Unschedulable``, as on a GPU cluster that is full. Nothing runs on a device; the containers
ignore what they were given.
"""

from __future__ import annotations

from typing import Any

from devcluster.admin import AdminClient

GPU = "nvidia.com/gpu"


def _escaped(resource: str) -> str:
    # A JSON pointer's segment: ~ and / are escaped (RFC 6901).
    return resource.replace("~", "~0").replace("/", "~1")


def advertise(cp: AdminClient, node: str, count: int, resource: str = GPU) -> None:
    """Give ``node`` ``count`` devices of ``resource`` (0 withdraws them from new pods)."""
    path = _escaped(resource)
    patch = [
        {"op": "add", "path": f"/status/capacity/{path}", "value": str(count)},
        {"op": "add", "path": f"/status/allocatable/{path}", "value": str(count)},
    ]
    cp.request(
        "PATCH",
        f"/api/v1/nodes/{node}/status",
        patch,
        content_type="application/json-patch+json",
    )


def advertised(cp: AdminClient, node: str, resource: str = GPU) -> int:
    """How many devices of ``resource`` the node's status offers (0 when none)."""
    status: dict[str, Any] = cp.request("GET", f"/api/v1/nodes/{node}").get("status", {})
    return int(status.get("allocatable", {}).get(resource, "0"))


def gpu_limits(body: dict[str, Any], count: int = 1, resource: str = GPU) -> dict[str, Any]:
    """A Kubeflow job's manifest whose every container asks for ``count`` devices."""
    for spec in body["spec"].values():
        if not isinstance(spec, dict):
            continue
        for replica in spec.values():
            if not isinstance(replica, dict) or "template" not in replica:
                continue
            for container in replica["template"]["spec"]["containers"]:
                resources = container.setdefault("resources", {})
                resources.setdefault("limits", {})[resource] = str(count)
    return body
