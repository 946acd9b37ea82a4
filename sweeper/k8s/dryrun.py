"""``--dry-run`` (client) by construction: a ``sweeper.k8s.cluster.Cluster`` that cannot write.

``RecordingCluster`` wraps the real cluster: reads pass through, writes are kept as
``Write`` values. The executor selects it once, so the same code runs in every dry-run mode.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

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

    def get_job(self, served: ServedKind, namespace: str, name: str) -> JSON:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.get_job(served, namespace, name)

    def list_pods(self, namespace: str, selector: str) -> list[JSON]:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.list_pods(namespace, selector)

    def list_pod_pages(self, namespace: str | None, selector: str) -> Iterator[Page]:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.list_pod_pages(namespace, selector)

    def list_services(self, namespace: str, selector: str) -> list[JSON]:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.list_services(namespace, selector)

    def patch_job(
        self, served: ServedKind, namespace: str, name: str, patch: JSON, *, dry_run: bool
    ) -> None:
        """Record (see ``sweeper.k8s.cluster.Cluster``)."""
        self.writes.append(Write("patch", namespace, name, patch))

    def patch_job_status(
        self, served: ServedKind, namespace: str, name: str, patch: JSON, *, dry_run: bool
    ) -> None:
        """Record (see ``sweeper.k8s.cluster.Cluster``)."""
        self.writes.append(Write("patch-status", namespace, name, patch))

    def delete_pod(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> None:
        """Record (see ``sweeper.k8s.cluster.Cluster``)."""
        self.writes.append(Write("delete-pod", namespace, name))

    def delete_service(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> None:
        """Record (see ``sweeper.k8s.cluster.Cluster``)."""
        self.writes.append(Write("delete-service", namespace, name))

    def list_jobset_pages(self, namespace: str | None) -> Iterator[Page]:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.list_jobset_pages(namespace)

    def get_jobset(self, namespace: str, name: str) -> JSON:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.get_jobset(namespace, name)

    def get_batch_job(self, namespace: str, name: str) -> JSON:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.get_batch_job(namespace, name)

    def patch_batch_job(self, namespace: str, name: str, patch: JSON, *, dry_run: bool) -> None:
        """Record (see ``sweeper.k8s.cluster.Cluster``)."""
        self.writes.append(Write("patch-batch-job", namespace, name, patch))

    def list_namespaces(self) -> list[JSON]:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.list_namespaces()

    def get_namespace(self, name: str) -> JSON:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.get_namespace(name)

    def get_deployment(self, namespace: str, name: str) -> JSON:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        return self._cluster.get_deployment(namespace, name)

    def delete_jobset(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> None:
        """Record (see ``sweeper.k8s.cluster.Cluster``)."""
        self.writes.append(Write("delete-jobset", namespace, name))

    def create_event(self, namespace: str, event: JSON, *, dry_run: bool) -> None:
        """Record (see ``sweeper.k8s.cluster.Cluster``)."""
        self.writes.append(Write("create-event", namespace, event["involvedObject"]["name"], event))

    def close(self) -> None:
        """Pass through (see ``sweeper.k8s.cluster.Cluster``)."""
        self._cluster.close()
