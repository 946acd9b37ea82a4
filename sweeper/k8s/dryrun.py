"""``--dry-run`` (client) by construction: a ``sweeper.k8s.cluster.Cluster`` that cannot write.

``RecordingCluster`` wraps the real cluster: reads pass through, writes are kept as
``Write`` values. The executor selects it once, so the same code runs in every dry-run mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sweeper.core.kinds import Resource
from sweeper.core.model import JSON
from sweeper.core.platform import NO_PLATFORM, PlatformView
from sweeper.k8s.cluster import Cluster, Discovery, JobPage, Page, ServedKind


@dataclass(frozen=True, slots=True)
class Write:
    """A write a ``RecordingCluster`` kept instead of sending.

    ``name`` is the involved object's for an event; ``body`` is ``None`` for deletes.
    """

    verb: str
    namespace: str
    name: str
    body: JSON | None = None
    resource: Resource | None = None


class RecordingCluster:
    """``--dry-run`` (client) by construction: reads go to the cluster, writes only to a list.

    The executor runs the same code in every mode; wrapped in this, nothing it does can write.
    Each write is taken as accepted, as ``dryRun=All`` would have it, and kept in order.
    """

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self.endpoint = cluster.endpoint
        self.writes: list[Write] = []

    def discover(self) -> Discovery:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.discover()

    def list_job_views(
        self,
        served: ServedKind,
        namespace: str | None,
        selector: str | None,
        page_size: int,
        view: PlatformView = NO_PLATFORM,
    ) -> Iterator[JobPage]:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.list_job_views(served, namespace, selector, page_size, view)

    def get(self, resource: Resource, namespace: str | None, name: str) -> JSON:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.get(resource, namespace, name)

    def list_pages(
        self, resource: Resource, namespace: str | None, selector: str | None = None
    ) -> Iterator[Page]:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.list_pages(resource, namespace, selector)

    def patch(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        patch: JSON,
        *,
        subresource: str = "",
        dry_run: bool,
    ) -> None:
        """Record (see ``sweeper.k8s.cluster.Cluster``)."""
        verb = "-".join(("patch", subresource) if subresource else ("patch",))
        self.writes.append(Write(verb, namespace, name, patch, resource))

    def delete(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        uid: str,
        *,
        propagation: str = "",
        dry_run: bool,
    ) -> None:
        """Record (see ``sweeper.k8s.cluster.Cluster``)."""
        self.writes.append(Write("delete", namespace, name, None, resource))

    def create(self, resource: Resource, namespace: str, body: JSON, *, dry_run: bool) -> None:
        """Record (see ``sweeper.k8s.cluster.Cluster``)."""
        about = body.get("involvedObject") or body.get("metadata") or {}
        name = str(about.get("name", ""))
        self.writes.append(Write("create", namespace, name, body, resource))

    def close(self) -> None:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        self._cluster.close()
