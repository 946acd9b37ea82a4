"""A real local Kubernetes control plane for the tests, benchmarks and demos (not shipped).

``ControlPlane.start()`` runs etcd and kube-apiserver built by ``scripts/build-binaries``; see
``controlplane`` for what it provides and ``scripts/devcluster`` for the command-line use.
"""

from devcluster.admin import AdminClient, ApiError
from devcluster.binaries import BinaryMissing
from devcluster.controlplane import ControlPlane, ControlPlaneError

__all__ = ["AdminClient", "ApiError", "BinaryMissing", "ControlPlane", "ControlPlaneError"]
