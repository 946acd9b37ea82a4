"""The Kubernetes adapter's requests: ``KubeCluster``, with no client underneath.

It implements ``sweeper.k8s.cluster.Cluster`` with raw JSON (decoding lists into model classes
is the main cost at scale), each method as requests (paths, queries, bodies, pages) over a
``sweeper.k8s.transport.Transport``; ``sweeper.k8s.answers`` reads what comes back.
``sweeper.k8s.connection.client`` builds it over its HTTP client.
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
from sweeper.core.families import KINDS
from sweeper.core.kinds import Resource
from sweeper.core.model import JSON
from sweeper.core.platform import NO_PLATFORM, PlatformView
from sweeper.k8s import answers, decode
from sweeper.k8s.cluster import Answer, Discovery, JobPage, Page, ServedKind, Stream, WatchEvent
from sweeper.k8s.transport import Transport, one_line, status_message, succeeded

_JSON = "application/json"
LEASES = Resource("coordination.k8s.io", "v1", "leases")
_LEASE_VERBS = {"GET": "get", "POST": "create", "PUT": "update"}


class Opener(Protocol):
    """Opens a streaming GET (a watch): a response of urllib3's shape once the headers arrived.

    It raises ``ApiError`` (``WatchStalled`` after the read timeout), never the client's errors.
    """

    def open(self, resource_path: str, ref: RequestRef, read_timeout_s: float) -> Any:
        """Send the request; ``ApiError`` if no answer came back."""


class _WatchRequests:
    """``KubeCluster``'s ``WatchCluster`` requests: the streams and the Lease."""

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
        """Open a watch with bookmarks (``Gone``: list again); leaving the block closes it."""
        ref = RequestRef("watch", served.kind.resource, namespace)
        if self._stream is None:
            raise api_error(ref, None, "this cluster connection cannot watch")
        path = _collection(served.resource, namespace)
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
        """Read a Lease."""
        return self._lease(self._transport, "GET", namespace, name)

    def create_lease(self, namespace: str, body: JSON) -> Answer:
        """Create a Lease, tried once."""
        return self._lease(self._once, "POST", namespace, None, body)

    def update_lease(self, namespace: str, name: str, body: JSON) -> Answer:
        """Replace a Lease at its resourceVersion, tried once."""
        return self._lease(self._once, "PUT", namespace, name, body)

    @staticmethod
    def _lease(
        transport: Transport,
        method: str,
        namespace: str,
        name: str | None,
        body: JSON | None = None,
    ) -> Answer:
        ref = _ref(_LEASE_VERBS[method], LEASES, namespace, name)
        path = _collection(LEASES, namespace) if name is None else _object(LEASES, namespace, name)
        response = transport.request(method, path, ref, body=body, content_type=_JSON)
        return Answer(answers.one_object(response, ref), parse_http_date(response.date))


class KubeCluster(_WatchRequests):
    """``Cluster`` and ``WatchCluster`` as requests; ``once`` sends the Lease writes (one try)."""

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

    def discover(self) -> Discovery:
        """Find the job kinds the cluster serves, each at the first of its served versions."""
        plurals: dict[tuple[str, str], set[str]] = {}
        date = None
        for group in sorted({kind.group for kind in KINDS}):
            versions, answered = self._names(f"/apis/{group}", f"API group {group}", "versions")
            date = answered or date
            wanted = {v for kind in KINDS if kind.group == group for v in kind.versions}
            for version in sorted(wanted & versions):
                what = f"API resources of {group}/{version}"
                plurals[group, version], _ = self._names(
                    f"/apis/{group}/{version}", what, "resources"
                )
        served = []
        for kind in KINDS:
            for version in kind.versions:
                if kind.plural in plurals.get((kind.group, version), ()):
                    served.append(ServedKind(kind, version))
                    break
        return Discovery(tuple(served), date)

    def _names(self, path: str, what: str, key: str) -> tuple[set[str], datetime | None]:
        # A discovery document's versions or resources (none if it is missing), and the Date.
        ref = RequestRef("discover", what, cluster_scoped=True)
        response = self._transport.request("GET", path, ref, missing_ok=True)
        date = parse_http_date(response.date)
        if response.status == HTTPStatus.NOT_FOUND:
            return set(), date
        field = "version" if key == "versions" else "name"
        entries = answers.entries(response, ref, key)
        return {str(e.get(field)) for e in entries if isinstance(e, dict)}, date

    def list_job_views(
        self,
        served: ServedKind,
        namespace: str | None,
        selector: str | None,
        page_size: int,
        view: PlatformView = NO_PLATFORM,
    ) -> Iterator[JobPage]:
        """List jobs as views, a request per page in turn."""
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
        """Read one object."""
        ref = _ref("get", resource, namespace, name)
        path = _object(resource, namespace, name)
        return answers.one_object(self._transport.request("GET", path, ref), ref)

    def list_pages(
        self, resource: Resource, namespace: str | None, selector: str | None = None
    ) -> Iterator[Page]:
        """List objects page by page."""
        path = _collection(resource, namespace)
        ref = _ref("list", resource, namespace)
        token: str | None = None
        while True:
            query = _list_query(500, selector, token)
            response = self._transport.request("GET", path, ref, query=query)
            date = parse_http_date(response.date)
            items, token, version = answers.list_page(response, ref, decode.loads(resource))
            del response  # the raw bytes are as big as the page; drop them before yielding
            # Not cleared after the yield: read ahead, the next page is read while the caller
            # still reads this one (sweeper.k8s.readahead).
            yield Page(items, date, version)
            if not token:
                return

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
        """Merge-patch an object or its subresource."""
        path = _object(resource, namespace, name) + (f"/{subresource}" if subresource else "")
        ref = _ref("patch", resource, namespace, name, subresource)
        self._write("PATCH", path, ref, patch, dry_run)

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
        """Delete an object if its uid still matches."""
        ref = _ref("delete", resource, namespace, name)
        body: JSON = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        if propagation:
            body["propagationPolicy"] = propagation
        if dry_run:
            body["dryRun"] = ["All"]
        self._write("DELETE", _object(resource, namespace, name), ref, body, dry_run)

    def create(self, resource: Resource, namespace: str, body: JSON, *, dry_run: bool) -> None:
        """Create an object."""
        ref = _ref("create", resource, namespace)
        self._write("POST", _collection(resource, namespace), ref, body, dry_run)

    def close(self) -> None:
        """Close the client's connections."""
        self._close()

    def _write(self, method: str, path: str, ref: RequestRef, body: JSON, dry_run: bool) -> None:
        content = "application/merge-patch+json" if method == "PATCH" else _JSON
        response = self._transport.request(
            method, path, ref, body=body, content_type=content, dry_run=dry_run
        )
        # The server answers a write with the object or a Status; anything else means the
        # write may not have reached it.
        answers.decoded(response, ref)


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
