"""``--dry-run`` (client) by construction: a ``Cluster`` whose writes only go to a list.

The executor wraps the cluster in a ``RecordingCluster`` once, so the same code runs in every
dry-run mode. Reads pass through; each write is taken as accepted, as ``dryRun=All`` would have
it, and kept in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweeper.core.kinds import Resource
from sweeper.core.model import JSON
from sweeper.k8s.cluster import Cluster


@dataclass(frozen=True, slots=True)
class Write:
    """A write kept instead of sent; an Event's ``name`` is its involved object's."""

    verb: str
    namespace: str
    name: str
    body: JSON | None = None
    resource: Resource | None = None


class RecordingCluster:
    """Reads go to the wrapped cluster, writes to ``writes``."""

    def __init__(self, cluster: Cluster) -> None:
        self.endpoint = cluster.endpoint
        self.discover = cluster.discover
        self.list_job_views = cluster.list_job_views
        self.get = cluster.get
        self.list_pages = cluster.list_pages
        self.close = cluster.close
        self.writes: list[Write] = []

    def patch(
        self, resource: Resource, namespace: str, name: str, patch: JSON, **how: str | bool
    ) -> None:
        """Record a ``patch`` (``patch-status`` for the status)."""
        verb = f"patch-{how['subresource']}" if how.get("subresource") else "patch"
        self.writes.append(Write(verb, namespace, name, patch, resource))

    def delete(self, resource: Resource, namespace: str, name: str, uid: str, **_: object) -> None:
        """Record a ``delete``."""
        self.writes.append(Write("delete", namespace, name, None, resource))

    def create(self, resource: Resource, namespace: str, body: JSON, **_: bool) -> None:
        """Record a ``create``."""
        about = body.get("involvedObject") or body.get("metadata") or {}
        self.writes.append(Write("create", namespace, str(about.get("name", "")), body, resource))
