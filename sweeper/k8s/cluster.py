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
from typing import NamedTuple, Protocol

from sweeper.core.families import family_of
from sweeper.core.jobs import Job
from sweeper.core.kinds import Kind, Resource
from sweeper.core.model import JSON
from sweeper.core.platform import NO_PLATFORM, PlatformView


class ServedKind(NamedTuple):
    """A job kind the cluster serves, at the version discovery found."""

    kind: Kind
    version: str

    @property
    def resource(self) -> Resource:
        """Where its jobs are."""
        return self.kind.at(self.version)

    @property
    def family(self) -> str:
        """The name of the family whose controller serves the kind at this version."""
        return family_of(self.kind, self.version).NAME


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

    def get(self, resource: Resource, namespace: str | None, name: str) -> JSON:
        """Read one object (``NotFound`` if none); ``namespace`` is ``None`` when cluster-scoped."""
        ...

    def list_pages(
        self, resource: Resource, namespace: str | None, selector: str | None = None
    ) -> Iterator[Page]:
        """List objects page by page, in one namespace or all (or cluster-scoped ones)."""
        ...

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
        """Apply a JSON merge patch to an object, or to its ``subresource`` (``status``)."""
        ...

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
        """Delete an object provided it still has that uid (``propagationPolicy`` if given)."""
        ...

    def create(self, resource: Resource, namespace: str, body: JSON, *, dry_run: bool) -> None:
        """Create an object (``Conflict`` if one of its name exists)."""
        ...

    def close(self) -> None:
        """Release the connections; the run calls it once, when it ends, however it ends."""
        ...


def list_all(
    cluster: Cluster, resource: Resource, namespace: str | None, selector: str | None = None
) -> list[JSON]:
    """Every object of a list, its pages joined (for the short lists: one job's pods...)."""
    found: list[JSON] = []
    for page in cluster.list_pages(resource, namespace, selector):
        found.extend(page.items)
    return found


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
