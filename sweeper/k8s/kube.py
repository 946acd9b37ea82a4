"""The Kubernetes adapter's requests: ``KubeCluster``, with no client underneath.

It implements ``sweeper.k8s.cluster.Cluster`` with raw JSON (no model classes: decoding lists
into them is the main cost at scale): ``KubeCluster`` turns each method into requests (paths,
queries, bodies, pages) over a ``sweeper.k8s.transport.Transport``, which does the retries,
backoff, ``Retry-After``, ``--timeout`` and error mapping over a one-method ``Send``;
``sweeper.k8s.answers`` reads what comes back. The HTTP client is
``sweeper.k8s.connection.client``'s alone: it builds a ``KubeCluster`` over its ``Send`` and
watch opener.
"""

from __future__ import annotations

import contextlib
import json
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import datetime
from http import HTTPStatus
from typing import Any, Protocol

from sweeper.core.clock import parse_http_date
from sweeper.core.errors import RequestRef, api_error
from sweeper.core.kinds import KINDS, Resource
from sweeper.core.model import JSON
from sweeper.core.platform import NO_PLATFORM, PlatformView
from sweeper.k8s import answers, decode
from sweeper.k8s.cluster import Answer, Discovery, JobPage, Page, ServedKind, Stream, WatchEvent
from sweeper.k8s.transport import Transport, one_line, status_message, succeeded

MERGE_PATCH = "application/merge-patch+json"
LEASES = Resource("coordination.k8s.io", "v1", "leases")
LEASE_RESOURCE = LEASES.name


class Opener(Protocol):
    """Opens a streaming GET (a watch) and returns the response once its headers arrived.

    The response has urllib3's shape (``status``, ``data``, ``headers``, ``stream``,
    ``release_conn``, ``close``); its ``stream`` raises ``sweeper.core.errors.ApiError``
    (``WatchStalled`` when nothing came for the read timeout), never the client's errors.
    ``sweeper.k8s.connection.client.ClientStream`` is the one over urllib3.
    """

    def open(self, resource_path: str, ref: RequestRef, read_timeout_s: float) -> Any:
        """Send the request.

        Raises:
            ApiError: No answer came back.
        """


class _WatchRequests:
    """``KubeCluster``'s watch-mode requests: the streams and the Lease.

    See ``sweeper.k8s.cluster.WatchCluster``; the attributes are ``KubeCluster``'s.
    """

    _transport: Transport
    _once: Transport
    _stream: Opener | None

    @contextlib.contextmanager
    def watch_jobs(
        self,
        served: ServedKind,
        namespace: str | None,
        selector: str | None,
        resource_version: str,
        *,
        timeout_s: int,
        read_timeout_s: float,
    ) -> Iterator[Stream]:
        """Open a watch with bookmarks; leaving the block closes the connection.

        Raises:
            Gone: 410, the resourceVersion is too old: list again.
            ApiError: The watch could not be opened.
        """
        if self._stream is None:
            raise api_error(
                RequestRef("watch", served.kind.resource, namespace),
                None,
                "this cluster connection cannot watch",
            )
        path = _collection(served.resource, namespace)
        ref = RequestRef("watch", served.kind.resource, namespace)
        query = [
            ("watch", "1"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_s)),
        ]
        if selector:
            query.append(("labelSelector", selector))
        url_query = urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
        raw = self._stream.open(f"{path}?{url_query}", ref, read_timeout_s)
        try:
            status = int(raw.status)
            if not succeeded(status):
                raise api_error(ref, status, status_message(raw.data or b""))
            yield _WatchStream(raw, ref, parse_http_date(raw.headers.get("Date")))
        finally:
            raw.release_conn()
            raw.close()

    def get_lease(self, namespace: str, name: str) -> Answer:
        """Read a Lease (see ``WatchCluster``)."""
        ref = RequestRef("get", LEASE_RESOURCE, namespace, name)
        response = self._transport.request("GET", _object(LEASES, namespace, name), ref)
        return Answer(answers.one_object(response, ref), parse_http_date(response.date))

    def create_lease(self, namespace: str, body: JSON) -> Answer:
        """Create a Lease, tried once (see ``WatchCluster``)."""
        ref = RequestRef("create", LEASE_RESOURCE, namespace)
        response = self._once.request(
            "POST",
            _collection(LEASES, namespace),
            ref,
            body=body,
            content_type="application/json",
        )
        return Answer(answers.one_object(response, ref), parse_http_date(response.date))

    def update_lease(self, namespace: str, name: str, body: JSON) -> Answer:
        """Replace a Lease at its resourceVersion, tried once (see ``WatchCluster``)."""
        ref = RequestRef("update", LEASE_RESOURCE, namespace, name)
        response = self._once.request(
            "PUT",
            _object(LEASES, namespace, name),
            ref,
            body=body,
            content_type="application/json",
        )
        return Answer(answers.one_object(response, ref), parse_http_date(response.date))


class KubeCluster(_WatchRequests):
    """``sweeper.k8s.cluster.Cluster`` as requests: paths, queries, bodies, pages, decoding.

    The watch mode's requests (``sweeper.k8s.cluster.WatchCluster``) come from
    ``_WatchRequests``.

    ``once`` sends the requests tried once (Lease writes), ``transport`` when not given;
    ``stream`` is ``None`` when the cluster cannot watch.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        close: Callable[[], None] = lambda: None,
        endpoint: str = "server ?",
        once: Transport | None = None,
        stream: Opener | None = None,
        home_namespace: str = "default",
    ) -> None:
        self._transport = transport
        self._close = close
        self.endpoint = endpoint
        self._once = once or transport
        self._stream = stream
        self.home_namespace = home_namespace

    # --- discovery and lists ---------------------------------------------------------------

    def discover(self) -> Discovery:
        """Find the job kinds the cluster serves, each at the first of its served versions.

        MPIJob: ``v1`` from the Training Operator, else ``v2beta1`` from mpi-operator; only one
        MPIJob CRD can exist.
        """
        groups = sorted({kind.group for kind in KINDS})
        plurals: dict[tuple[str, str], set[str]] = {}
        date = None
        for group in groups:
            ref = RequestRef("discover", f"API group {group}", cluster_scoped=True)
            response = self._transport.request("GET", f"/apis/{group}", ref, missing_ok=True)
            date = parse_http_date(response.date) or date
            if response.status == HTTPStatus.NOT_FOUND:
                continue
            versions = {
                v.get("version")
                for v in answers.entries(response, ref, "versions")
                if isinstance(v, dict)
            }
            wanted = {v for kind in KINDS if kind.group == group for v in kind.versions}
            for version in sorted(wanted & versions):
                resources = RequestRef(
                    "discover", f"API resources of {group}/{version}", cluster_scoped=True
                )
                listing = self._transport.request(
                    "GET", f"/apis/{group}/{version}", resources, missing_ok=True
                )
                if listing.status == HTTPStatus.NOT_FOUND:
                    continue
                plurals[group, version] = {
                    str(r.get("name"))
                    for r in answers.entries(listing, resources, "resources")
                    if isinstance(r, dict)
                }
        served = []
        for kind in KINDS:
            for version in kind.versions:
                if kind.plural in plurals.get((kind.group, version), ()):
                    served.append(ServedKind(kind, version))
                    break
        return Discovery(tuple(served), date)

    def list_job_views(
        self,
        served: ServedKind,
        namespace: str | None,
        selector: str | None,
        page_size: int,
        view: PlatformView = NO_PLATFORM,
    ) -> Iterator[JobPage]:
        """List jobs as views (see ``sweeper.k8s.cluster.Cluster``), a request per page in turn.

        ``sweeper.k8s.decode.decode_jobs`` reads each body into views, never into objects
        (``managedFields`` and the replica specs are most of a page's bytes).
        """
        path = _collection(served.resource, namespace)
        ref = RequestRef("list", served.kind.resource, namespace)
        token: str | None = None
        while True:
            query = _list_query(page_size, selector, token)
            response = self._transport.request("GET", path, ref, query=query)
            date = parse_http_date(response.date)
            try:
                page = decode.decode_jobs(response.data, served.kind, served.version, view)
            except (ValueError, RecursionError) as error:
                raise answers.undecodable(ref, response, error) from error
            del response  # the raw bytes are as big as the page; drop them before yielding
            token = page.continue_token
            yield JobPage(page.jobs, date, page.resource_version or "")
            if not token:
                return

    def get(self, resource: Resource, namespace: str | None, name: str) -> JSON:
        """Read one object (see ``sweeper.k8s.cluster.Cluster``)."""
        ref = _ref("get", resource, namespace, name)
        path = _object(resource, namespace, name)
        return answers.one_object(self._transport.request("GET", path, ref), ref)

    def list_pages(
        self, resource: Resource, namespace: str | None, selector: str | None = None
    ) -> Iterator[Page]:
        """List objects page by page; a page's items are cleared when the next is asked."""
        path = _collection(resource, namespace)
        ref = _ref("list", resource, namespace)
        token: str | None = None
        while True:
            query = _list_query(500, selector, token)
            response = self._transport.request("GET", path, ref, query=query)
            date = parse_http_date(response.date)
            items, token, version = answers.list_page(response, ref, decode.loads(resource))
            del response  # the raw bytes are as big as the page; drop them before yielding
            yield Page(items, date, version)
            items.clear()  # the consumer is done with this page: free it before the next
            if not token:
                return

    # --- writes ----------------------------------------------------------------------------

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
        """Merge-patch an object or its subresource (see ``sweeper.k8s.cluster.Cluster``)."""
        ref = _ref("patch", resource, namespace, name, subresource)
        path = _object(resource, namespace, name) + (f"/{subresource}" if subresource else "")
        answers.decoded(
            self._transport.request(
                "PATCH", path, ref, body=patch, content_type=MERGE_PATCH, dry_run=dry_run
            ),
            ref,
        )

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
        """Delete an object if its uid still matches (see ``sweeper.k8s.cluster.Cluster``)."""
        ref = _ref("delete", resource, namespace, name)
        body: JSON = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": uid},
        }
        if propagation:
            body["propagationPolicy"] = propagation
        if dry_run:
            body["dryRun"] = ["All"]
        answers.decoded(
            self._transport.request(
                "DELETE",
                _object(resource, namespace, name),
                ref,
                body=body,
                content_type="application/json",
                dry_run=dry_run,
            ),
            ref,
        )

    def create(self, resource: Resource, namespace: str, body: JSON, *, dry_run: bool) -> None:
        """Create an object (see ``sweeper.k8s.cluster.Cluster``)."""
        ref = _ref("create", resource, namespace)
        answers.decoded(
            self._transport.request(
                "POST",
                _collection(resource, namespace),
                ref,
                body=body,
                content_type="application/json",
                dry_run=dry_run,
            ),
            ref,
        )

    def close(self) -> None:
        """Close the client's connections (see ``sweeper.k8s.cluster.Cluster``).

        A run that ends leaves nothing open, however long the process lives after it.
        """
        self._close()


class _WatchStream:
    """The events of an open watch response, one JSON document per line."""

    def __init__(self, raw: Any, ref: RequestRef, server_date: datetime | None) -> None:
        self._raw = raw
        self._ref = ref
        self.server_date = server_date

    def __iter__(self) -> Iterator[WatchEvent]:
        pending = b""
        # The opener's response raises ApiError (WatchStalled for the read timeout) itself.
        for chunk in self._raw.stream(amt=None, decode_content=True):
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line.strip():
                    yield self._event(line)
        if pending.strip():
            yield self._event(pending)

    def _event(self, line: bytes) -> WatchEvent:
        try:
            document = json.loads(line)
        except (ValueError, RecursionError) as error:
            raise api_error(
                self._ref, None, f"undecodable watch event: not JSON ({answers.start_of(line)})"
            ) from error
        kind = document.get("type") if isinstance(document, dict) else None
        obj = document.get("object") if isinstance(document, dict) else None
        if not isinstance(kind, str) or not isinstance(obj, dict):
            raise api_error(self._ref, None, "malformed watch event")
        if kind == "ERROR":
            status = answers.watch_error_status(obj)
            raise api_error(self._ref, status, one_line(str(obj.get("message") or "")))
        return WatchEvent(kind, obj)


def _collection(resource: Resource, namespace: str | None) -> str:
    if namespace is None or not resource.namespaced:
        return f"{resource.api}/{resource.plural}"
    return f"{resource.api}/namespaces/{urllib.parse.quote(namespace, safe='')}/{resource.plural}"


def _object(resource: Resource, namespace: str | None, name: str) -> str:
    return f"{_collection(resource, namespace)}/{urllib.parse.quote(name, safe='')}"


def _ref(
    verb: str, resource: Resource, namespace: str | None, name: str | None = None, sub: str = ""
) -> RequestRef:
    what = f"{resource.name}/{sub}" if sub else resource.name
    if not resource.namespaced:
        return RequestRef(verb, what, name=name, cluster_scoped=True)
    return RequestRef(verb, what, namespace, name)


def _list_query(page_size: int, selector: str | None, token: str | None) -> list[tuple[str, str]]:
    query = [("limit", str(page_size))]
    if selector:
        query.append(("labelSelector", selector))
    if token:
        query.append(("continue", token))
    return query
