"""The sweeper's own boundary to the cluster: the interface the executor and the pass loop use.

``sweeper.k8s.kube`` implements ``Cluster`` over the sweeper's HTTP client
(``sweeper.k8s.connection.client``); unit tests implement it in memory. Objects cross this
boundary as decoded JSON, never as the client's model classes. Every method raises only the
sweeper's own errors (``sweeper.core.errors``): ``ApiError`` and its subclasses
for a request that failed for good, ``RunTimeout`` when ``--timeout``
ran out, and ``Interrupted`` when a signal arrived while waiting to retry.
A ``server_date`` is always the API server's clock (its ``Date`` header) when it answered.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sweeper.core.jobs import Job
from sweeper.core.kinds import Kind
from sweeper.core.model import JSON
from sweeper.core.platform import NO_PLATFORM, PlatformView


@dataclass(frozen=True, slots=True)
class ServedKind:
    """A kind the cluster serves, at ``v1`` (MPIJob v2: ``v2beta1``, TrainJob: ``v1alpha1``)."""

    kind: Kind
    version: str


@dataclass(frozen=True, slots=True)
class Discovery:
    """The kinds found in ``kubeflow.org`` and ``trainer.kubeflow.org``, in the table's order."""

    served: tuple[ServedKind, ...]
    server_date: datetime | None


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list.

    Attributes:
        items: Valid only until the next page is requested: the list is emptied then, so that
            one page at a time stays in memory.
        resource_version: The list's ``metadata.resourceVersion`` (where a watch starts), on
            the last page; ``None`` when the server did not say.
    """

    items: list[JSON]
    server_date: datetime | None
    resource_version: str | None = None


@dataclass(frozen=True, slots=True)
class JobPage:
    """One page of a job list, read into views (``parse_job``'s, what a pass keeps of it).

    ``resource_version`` is empty when the server did not say.
    """

    jobs: list[Job]
    server_date: datetime | None
    resource_version: str = ""


class Cluster(Protocol):
    """Everything the sweeper asks of a cluster.

    Writes take ``dry_run``: ``True`` sends them with ``dryRun=All`` (``--dry-run=server``).
    With ``--dry-run`` (client) the executor talks to a
    ``RecordingCluster``, whose writes never reach this interface.

    Attributes:
        endpoint: Which server and kubeconfig context this is, as errors name them
            (``server https://10.0.0.1:6443, context "prod"``).
    """

    endpoint: str

    def discover(self) -> Discovery:
        """Find which Kubeflow job kinds (and versions) the cluster serves."""
        ...

    def list_job_views(
        self,
        served: ServedKind,
        namespace: str | None,
        selector: str | None,
        page_size: int,
        view: PlatformView = NO_PLATFORM,
    ) -> Iterator[JobPage]:
        """List jobs page by page (``limit`` and ``continue``), in one namespace or all, as views.

        Each view is under its platform rule (``view``): built once, not built and then replaced.

        The decoded objects are never handed out, so an implementation may read from each
        page only what the views need (``sweeper.k8s.kube`` does, with
        ``sweeper.k8s.decode``).
        """
        ...

    def get_job(self, served: ServedKind, namespace: str, name: str) -> JSON:
        """Read one job."""
        ...

    def patch_job(
        self, served: ServedKind, namespace: str, name: str, patch: JSON, *, dry_run: bool
    ) -> None:
        """Apply a JSON merge patch to a job (its metadata)."""
        ...

    def patch_job_status(
        self, served: ServedKind, namespace: str, name: str, patch: JSON, *, dry_run: bool
    ) -> None:
        """Apply a JSON merge patch to a job's ``/status`` subresource."""
        ...

    def list_pods(self, namespace: str, selector: str) -> list[JSON]:
        """List the pods matching a label selector in one namespace."""
        ...

    def list_pod_pages(self, namespace: str | None, selector: str) -> Iterator[Page]:
        """List the pods matching a label selector page by page, in one namespace or all."""
        ...

    def list_services(self, namespace: str, selector: str) -> list[JSON]:
        """List the services matching a label selector in one namespace."""
        ...

    def delete_pod(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> None:
        """Delete a pod, provided it still has that uid."""
        ...

    def delete_service(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> None:
        """Delete a service, provided it still has that uid."""
        ...

    def create_event(self, namespace: str, event: JSON, *, dry_run: bool) -> None:
        """Create a core/v1 Event."""
        ...

    def list_jobset_pages(self, namespace: str | None) -> Iterator[Page]:
        """List the ``jobset.x-k8s.io`` JobSets page by page, in one namespace or all."""
        ...

    def get_jobset(self, namespace: str, name: str) -> JSON:
        """Read one JobSet (``NotFound`` if none)."""
        ...

    def delete_jobset(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> None:
        """Delete a JobSet in the background, provided it still has that uid."""
        ...

    def get_batch_job(self, namespace: str, name: str) -> JSON:
        """Read one batch/v1 Job (``NotFound`` if none)."""
        ...

    def patch_batch_job(self, namespace: str, name: str, patch: JSON, *, dry_run: bool) -> None:
        """Apply a JSON merge patch to a batch/v1 Job (an MPIJob's launcher)."""
        ...

    def list_namespaces(self) -> list[JSON]:
        """List every Namespace (cluster-scoped; for the platform rules' selectors)."""
        ...

    def get_namespace(self, name: str) -> JSON:
        """Read one Namespace (``NotFound`` if none)."""
        ...

    def get_deployment(self, namespace: str, name: str) -> JSON:
        """Read one apps/v1 Deployment (``NotFound`` if none)."""
        ...

    def close(self) -> None:
        """Release the connections; the run calls it once, when it ends, however it ends."""
        ...


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One event of a watch stream.

    Attributes:
        type: ``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK`` (an ``ERROR`` event is
            raised instead: ``Gone`` for 410, else ``ApiError``).
        object: For a bookmark, only its ``resourceVersion``.
    """

    type: str
    object: JSON


class Stream(Protocol):
    """An open watch stream: iterate for events; it ends when the server closes it.

    Iterating raises ``WatchStalled`` when nothing (not even a
    bookmark) arrived for the read timeout, ``Gone`` when the
    resourceVersion is too old, and ``ApiError`` for anything else.
    """

    server_date: datetime | None

    def __iter__(self) -> Iterator[WatchEvent]:
        """The events, in order."""
        ...


@dataclass(frozen=True, slots=True)
class Answer:
    """An object the API server returned, with its clock."""

    object: JSON
    server_date: datetime | None


class WatchCluster(Cluster, Protocol):
    """What ``sweeper --watch`` asks of a cluster on top of a pass's needs.

    Attributes:
        home_namespace: Where the Lease lives by default: the pod's namespace in a cluster,
            else the kubeconfig context's namespace (``default`` when unset).
    """

    home_namespace: str

    def watch_jobs(
        self,
        served: ServedKind,
        namespace: str | None,
        selector: str | None,
        resource_version: str,
        *,
        timeout_s: int,
        read_timeout_s: float,
    ) -> AbstractContextManager[Stream]:
        """Open a watch from a resourceVersion, with bookmarks; closing it ends the request."""
        ...

    def get_lease(self, namespace: str, name: str) -> Answer:
        """Read a coordination.k8s.io/v1 Lease (``NotFound`` if none)."""
        ...

    def create_lease(self, namespace: str, body: JSON) -> Answer:
        """Create a Lease (``Conflict`` if it exists already)."""
        ...

    def update_lease(self, namespace: str, name: str, body: JSON) -> Answer:
        """Replace a Lease; its ``metadata.resourceVersion`` is the precondition (409)."""
        ...
