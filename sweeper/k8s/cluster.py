"""The sweeper's own boundary to the cluster: the interface the executor and the pass loop use.

``sweeper.k8s.kube`` implements ``Cluster``, unit tests in memory; objects cross as decoded JSON.
Every method raises only the sweeper's errors (``ApiError``, ``RunTimeout``, ``Interrupted``).
A ``server_date`` is the API server's clock (its ``Date`` header) when it answered.
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
    """One page of a list, emptied when the next is asked; the last has ``resource_version``."""

    items: list[JSON]
    server_date: datetime | None
    resource_version: str | None = None


@dataclass(frozen=True, slots=True)
class JobPage:
    """One page of a job list, read into views; ``resource_version`` as a ``Page``'s, or empty."""

    jobs: list[Job]
    server_date: datetime | None
    resource_version: str = ""


class Cluster(Protocol):
    """Everything the sweeper asks of a cluster; a write's ``dry_run`` sends ``dryRun=All``.

    ``endpoint`` names the server and context in errors (``server https://..., context "prod"``).
    """

    endpoint: str

    def discover(self) -> Discovery:
        """Find which Kubeflow job kinds (and versions) the cluster serves."""

    def list_job_views(
        self,
        served: ServedKind,
        namespace: str | None,
        selector: str | None,
        page_size: int,
        view: PlatformView = NO_PLATFORM,
    ) -> Iterator[JobPage]:
        """List jobs page by page, in one namespace or all, as views under their rule (``view``).

        Only views are handed out: an implementation may read only what they need of a page.
        """

    def get(self, resource: Resource, namespace: str | None, name: str) -> JSON:
        """Read one object (``NotFound`` if none); ``namespace`` is ``None`` when cluster-scoped."""

    def list_pages(
        self, resource: Resource, namespace: str | None, selector: str | None = None
    ) -> Iterator[Page]:
        """List objects page by page, in one namespace or all (or cluster-scoped ones)."""

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

    def create(self, resource: Resource, namespace: str, body: JSON, *, dry_run: bool) -> None:
        """Create an object (``Conflict`` if one of its name exists)."""

    def close(self) -> None:
        """Release the connections; the run calls it once, when it ends, however it ends."""


def list_all(
    cluster: Cluster, resource: Resource, namespace: str | None, selector: str | None = None
) -> list[JSON]:
    """Every object of a short list (one job's pods...), its pages joined."""
    found: list[JSON] = []
    for page in cluster.list_pages(resource, namespace, selector):
        found.extend(page.items)
    return found


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """``ADDED``, ``MODIFIED``, ``DELETED`` or ``BOOKMARK``; an ``ERROR`` is raised instead."""

    type: str
    object: JSON


class Stream(Protocol):
    """An open watch stream's events until the server closes it.

    Iterating raises ``WatchStalled`` (nothing for the read timeout), ``Gone`` (410), ``ApiError``.
    """

    server_date: datetime | None

    def __iter__(self) -> Iterator[WatchEvent]:
        """The events, in order."""


@dataclass(frozen=True, slots=True)
class Answer:
    """An object the API server returned, with its clock."""

    object: JSON
    server_date: datetime | None


class WatchCluster(Cluster, Protocol):
    """What ``--watch`` asks of a cluster besides; ``home_namespace``: the Lease's by default."""

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

    def get_lease(self, namespace: str, name: str) -> Answer:
        """Read a coordination.k8s.io/v1 Lease (``NotFound`` if none)."""

    def create_lease(self, namespace: str, body: JSON) -> Answer:
        """Create a Lease (``Conflict`` if it exists already)."""

    def update_lease(self, namespace: str, name: str, body: JSON) -> Answer:
        """Replace a Lease; its ``metadata.resourceVersion`` is the precondition (409)."""
