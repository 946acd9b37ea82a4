"""The Kubernetes adapter: the only module that imports the official client.

It implements :class:`sweeper.k8s.cluster.Cluster` with raw JSON (no model classes: decoding lists
into them is the main cost at scale): :class:`KubeCluster` turns each method into requests,
:class:`ClientSend` puts one request on the wire through the client and translates what it
raises, and :class:`sweeper.k8s.transport.Transport` does the retries, backoff, ``Retry-After``,
``--timeout`` and error mapping in between. Import it lazily: importing ``kubernetes`` costs a
quarter of a second that ``sweeper --version`` and ``--help`` do not need.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import datetime
from http import HTTPStatus
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from sweeper import __version__
from sweeper.config import Config
from sweeper.core.clock import parse_http_date
from sweeper.core.errors import ApiError, ConfigError, RequestRef, WatchStalled, api_error
from sweeper.core.kinds import GROUP, KINDS, MPI_OPERATOR_VERSION, MPIJOB, VERSION
from sweeper.core.model import JSON
from sweeper.k8s import decode
from sweeper.k8s.cluster import Answer, Discovery, JobPage, Page, ServedKind, Stream, WatchEvent
from sweeper.k8s.transport import (
    NoResponse,
    Response,
    RetryPolicy,
    StopSignal,
    Transport,
    one_line,
    status_message,
    succeeded,
)

MERGE_PATCH = "application/merge-patch+json"
USER_AGENT = f"kubeflow-deadline-sweeper/{__version__}"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
LEASES = "/apis/coordination.k8s.io/v1"
LEASE_RESOURCE = "leases.coordination.k8s.io"


def connect(config: Config, *, stop: StopSignal) -> KubeCluster:
    """Build a cluster client from the usual sources, in the usual order.

    ``--kubeconfig``/``KUBECONFIG``, else ``~/.kube/config``, else the in-cluster service
    account.

    Args:
        config: The run's settings (kubeconfig, context, timeouts).
        stop: The run's stop flag: a signal, or ``--timeout`` on the run's clock.

    Returns:
        The client.

    Raises:
        ConfigError: The kubeconfig is missing or broken, or no configuration applies.
    """
    configuration = k8s_client.Configuration()
    source = config.kubeconfig
    default = Path.home() / ".kube" / "config"
    if not source and default.is_file():
        source = str(default)
    if source:
        paths = [p for p in source.split(os.pathsep) if p]
        if not any(Path(p).is_file() for p in paths):
            raise ConfigError(f"kubeconfig {source}: no such file")
        try:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=source,
                context=config.context,
                client_configuration=configuration,
                persist_config=False,
            )
        except Exception as error:
            raise ConfigError(f"kubeconfig {source}: {one_line(error)}") from error
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        if config.context:
            raise ConfigError("--context needs a kubeconfig; none was found")
        try:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        except Exception as error:
            raise ConfigError(f"in-cluster configuration: {one_line(error)}") from error
    else:
        raise ConfigError(
            "no kubeconfig found (use --kubeconfig or KUBECONFIG) and not running in a cluster"
        )
    # Retries are ours (bounded, with backoff); urllib3's would hide failures and time.
    configuration.retries = False
    api = k8s_client.ApiClient(configuration)
    api.user_agent = USER_AGENT
    send = ClientSend(api)
    transport = Transport(send, stop, request_timeout=config.request_timeout)
    # A Lease write is tried once per retry period: a retried write could land after the
    # renew deadline, which the election counts from the first sending. It is not fenced by
    # leadership: it is how a candidate takes the Lease.
    once = Transport(
        send,
        stop,
        request_timeout=config.request_timeout,
        policy=RetryPolicy(attempts=1),
        fenced=False,
    )
    context = "in-cluster" if not source else f'"{config.context or _current_context(source)}"'
    return KubeCluster(
        transport,
        close=lambda: _close(api),
        once=once,
        stream=ClientStream(api, config.request_timeout),
        home_namespace=_home_namespace(source, config.context),
        endpoint=f"server {configuration.host}, context {context}",
    )


def _current_context(source: str) -> str:
    try:
        _contexts, active = k8s_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=source
        )
        return str(active["name"])
    except Exception:  # noqa: BLE001 - only names the context in messages; never fails a run
        return "?"


def _home_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace a process "is in": its pod's, else its kubeconfig context's, else default.

    Args:
        kubeconfig: The kubeconfig used, ``None`` in a cluster.
        context: ``--context``.

    Returns:
        The namespace.
    """
    if not kubeconfig:
        try:
            return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
        except OSError:
            return "default"
    try:
        contexts, active = k8s_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=kubeconfig
        )
    except Exception:  # noqa: BLE001 - it loaded a moment ago; a default is enough here
        return "default"
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return namespace if isinstance(namespace, str) and namespace else "default"


class KubeCluster:
    """:class:`sweeper.k8s.cluster.Cluster` as requests: paths, queries, bodies, pages, decoding.

    Args:
        transport: Sends the requests (retries, ``--timeout``, errors).
        close: Closes the connections underneath.
        endpoint: The server and kubeconfig context, as error messages name them.
        once: Sends the requests tried once (Lease writes); ``transport`` when not given.
        stream: Opens watch streams (``--watch``); ``None`` when the cluster cannot watch.
        home_namespace: The default namespace of the Lease (see
            :class:`sweeper.k8s.cluster.WatchCluster`).
    """

    def __init__(
        self,
        transport: Transport,
        *,
        close: Callable[[], None] = lambda: None,
        endpoint: str = "server ?",
        once: Transport | None = None,
        stream: ClientStream | None = None,
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
        """Find the Kubeflow kinds the cluster serves (see :class:`sweeper.k8s.cluster.Cluster`).

        Returns:
            The served kinds; MPIJob at ``v2beta1`` only when ``v1`` does not serve it.
        """
        ref = RequestRef("discover", f"API group {GROUP}", cluster_scoped=True)
        response = self._transport.request("GET", f"/apis/{GROUP}", ref, missing_ok=True)
        date = parse_http_date(response.date)
        if response.status == HTTPStatus.NOT_FOUND:
            return Discovery((), date)
        versions = {
            v.get("version") for v in _entries(response, ref, "versions") if isinstance(v, dict)
        }
        plurals: dict[str, set[str]] = {}
        for version in (VERSION, MPI_OPERATOR_VERSION):
            if version not in versions:
                continue
            resources = RequestRef(
                "discover", f"API resources of {GROUP}/{version}", cluster_scoped=True
            )
            listing = self._transport.request(
                "GET", f"/apis/{GROUP}/{version}", resources, missing_ok=True
            )
            if listing.status == HTTPStatus.NOT_FOUND:
                continue
            plurals[version] = {
                str(r.get("name"))
                for r in _entries(listing, resources, "resources")
                if isinstance(r, dict)
            }
        served = []
        for kind in KINDS:
            if kind.plural in plurals.get(VERSION, ()):
                served.append(ServedKind(kind, VERSION))
            elif kind is MPIJOB and kind.plural in plurals.get(MPI_OPERATOR_VERSION, ()):
                served.append(ServedKind(kind, MPI_OPERATOR_VERSION))
        return Discovery(tuple(served), date)

    def list_job_views(
        self, served: ServedKind, namespace: str | None, selector: str | None, page_size: int
    ) -> Iterator[JobPage]:
        """List jobs as views (see :class:`sweeper.k8s.cluster.Cluster`).

        One request per page, one after the other; each body is read by
        :func:`sweeper.k8s.decode.decode_jobs`, which builds only the fields the views need
        (a page's objects are never built: ``managedFields`` and the replica specs are most
        of its bytes).

        Yields:
            Pages of views.
        """
        path = _collection(f"/apis/{GROUP}/{served.version}", namespace, served.kind.plural)
        ref = RequestRef("list", served.kind.resource, namespace)
        token: str | None = None
        while True:
            query = _list_query(page_size, selector, token)
            response = self._transport.request("GET", path, ref, query=query)
            date = parse_http_date(response.date)
            try:
                page = decode.decode_jobs(response.data, served.kind, served.version)
            except (ValueError, RecursionError) as error:
                raise _undecodable(ref, response, error) from error
            del response  # the raw bytes are as big as the page; drop them before yielding
            token = page.continue_token
            yield JobPage(page.jobs, date, page.resource_version or "")
            if not token:
                return

    def _pages(
        self, path: str, ref: RequestRef, selector: str | None, page_size: int
    ) -> Iterator[Page]:
        token: str | None = None
        while True:
            query = _list_query(page_size, selector, token)
            response = self._transport.request("GET", path, ref, query=query)
            date = parse_http_date(response.date)
            items, token, version = _list_page(response, ref)
            del response  # the raw bytes are as big as the page; drop them before yielding
            yield Page(items, date, version)
            items.clear()  # the consumer is done with this page: free it before the next
            if not token:
                return

    def get_job(self, served: ServedKind, namespace: str, name: str) -> JSON:
        """Read one job (see :class:`sweeper.k8s.cluster.Cluster`)."""
        path = _object(f"/apis/{GROUP}/{served.version}", namespace, served.kind.plural, name)
        ref = RequestRef("get", served.kind.resource, namespace, name)
        return _object_answer(self._transport.request("GET", path, ref), ref)

    def list_pods(self, namespace: str, selector: str) -> list[JSON]:
        """List pods by label in one namespace (see :class:`sweeper.k8s.cluster.Cluster`)."""
        return self._list_core("pods", namespace, selector)

    def list_pod_pages(self, namespace: str | None, selector: str) -> Iterator[Page]:
        """List pods by label, page by page (see :class:`sweeper.k8s.cluster.Cluster`).

        Yields:
            Pages; each one's items are cleared when the next is requested.
        """
        path = _collection("/api/v1", namespace, "pods")
        yield from self._pages(path, RequestRef("list", "pods", namespace), selector, 500)

    def list_services(self, namespace: str, selector: str) -> list[JSON]:
        """List services by label in one namespace (see :class:`sweeper.k8s.cluster.Cluster`)."""
        return self._list_core("services", namespace, selector)

    def _list_core(self, plural: str, namespace: str, selector: str) -> list[JSON]:
        path = _collection("/api/v1", namespace, plural)
        found: list[JSON] = []
        for page in self._pages(path, RequestRef("list", plural, namespace), selector, 500):
            found.extend(page.items)
        return found

    # --- writes ----------------------------------------------------------------------------

    def patch_job(
        self, served: ServedKind, namespace: str, name: str, patch: JSON, *, dry_run: bool
    ) -> None:
        """Merge-patch a job (see :class:`sweeper.k8s.cluster.Cluster`)."""
        path = _object(f"/apis/{GROUP}/{served.version}", namespace, served.kind.plural, name)
        ref = RequestRef("patch", served.kind.resource, namespace, name)
        _decode(
            self._transport.request(
                "PATCH", path, ref, body=patch, content_type=MERGE_PATCH, dry_run=dry_run
            ),
            ref,
        )

    def patch_job_status(
        self, served: ServedKind, namespace: str, name: str, patch: JSON, *, dry_run: bool
    ) -> None:
        """Merge-patch a job's status subresource (see :class:`sweeper.k8s.cluster.Cluster`)."""
        path = _object(f"/apis/{GROUP}/{served.version}", namespace, served.kind.plural, name)
        ref = RequestRef("patch", f"{served.kind.resource}/status", namespace, name)
        path = f"{path}/status"
        _decode(
            self._transport.request(
                "PATCH", path, ref, body=patch, content_type=MERGE_PATCH, dry_run=dry_run
            ),
            ref,
        )

    def delete_pod(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> None:
        """Delete a pod if its uid still matches (see :class:`sweeper.k8s.cluster.Cluster`)."""
        self._delete_core("pods", namespace, name, uid, dry_run=dry_run)

    def delete_service(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> None:
        """Delete a service if its uid still matches (see :class:`sweeper.k8s.cluster.Cluster`)."""
        self._delete_core("services", namespace, name, uid, dry_run=dry_run)

    def _delete_core(
        self, plural: str, namespace: str, name: str, uid: str, *, dry_run: bool
    ) -> None:
        body: JSON = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": uid},
        }
        if dry_run:
            body["dryRun"] = ["All"]
        ref = RequestRef("delete", plural, namespace, name)
        path = _object("/api/v1", namespace, plural, name)
        _decode(
            self._transport.request(
                "DELETE", path, ref, body=body, content_type="application/json", dry_run=dry_run
            ),
            ref,
        )

    def create_event(self, namespace: str, event: JSON, *, dry_run: bool) -> None:
        """Create a core/v1 Event (see :class:`sweeper.k8s.cluster.Cluster`)."""
        ref = RequestRef("create", "events", namespace)
        path = _collection("/api/v1", namespace, "events")
        _decode(
            self._transport.request(
                "POST", path, ref, body=event, content_type="application/json", dry_run=dry_run
            ),
            ref,
        )

    # --- watch mode: streams and the Lease -------------------------------------------------

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
        """Open a watch with bookmarks (see :class:`sweeper.k8s.cluster.WatchCluster`).

        Yields:
            The open stream; leaving the block closes the connection.

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
        path = _collection(f"/apis/{GROUP}/{served.version}", namespace, served.kind.plural)
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
            yield _WatchStream(raw, ref, read_timeout_s, parse_http_date(raw.headers.get("Date")))
        finally:
            raw.release_conn()
            raw.close()

    def get_lease(self, namespace: str, name: str) -> Answer:
        """Read a Lease (see :class:`sweeper.k8s.cluster.WatchCluster`).

        Returns:
            The Lease and the answer's date.
        """
        ref = RequestRef("get", LEASE_RESOURCE, namespace, name)
        response = self._transport.request("GET", _object(LEASES, namespace, "leases", name), ref)
        return Answer(_object_answer(response, ref), parse_http_date(response.date))

    def create_lease(self, namespace: str, body: JSON) -> Answer:
        """Create a Lease, tried once (see :class:`sweeper.k8s.cluster.WatchCluster`).

        Returns:
            The Lease as created and the answer's date.
        """
        ref = RequestRef("create", LEASE_RESOURCE, namespace)
        response = self._once.request(
            "POST",
            _collection(LEASES, namespace, "leases"),
            ref,
            body=body,
            content_type="application/json",
        )
        return Answer(_object_answer(response, ref), parse_http_date(response.date))

    def update_lease(self, namespace: str, name: str, body: JSON) -> Answer:
        """Replace a Lease at its resourceVersion, tried once (see ``WatchCluster``).

        Returns:
            The Lease as written and the answer's date.
        """
        ref = RequestRef("update", LEASE_RESOURCE, namespace, name)
        response = self._once.request(
            "PUT",
            _object(LEASES, namespace, "leases", name),
            ref,
            body=body,
            content_type="application/json",
        )
        return Answer(_object_answer(response, ref), parse_http_date(response.date))

    def close(self) -> None:
        """Close the client's connections (see :class:`sweeper.k8s.cluster.Cluster`).

        A run that ends leaves nothing open, however long the process lives after it.
        """
        self._close()


def _close(api: Any) -> None:
    api.close()
    # Each connection pool is closed explicitly: ``ApiClient.close`` clears the pool manager
    # only from client 37 on, and recent urllib3 releases no longer close the pools a
    # clear() drops (they leave them to a finalizer). Up to client 36 the ApiClient keeps
    # its last response, and with it the pool and its keep-alive socket, alive.
    manager = getattr(getattr(api, "rest_client", None), "pool_manager", None)
    if manager is not None:
        for key in list(manager.pools.keys()):
            pool = manager.pools.get(key)
            if pool is not None:
                pool.close()
        manager.clear()


class ClientSend:
    """:class:`sweeper.k8s.transport.Send` over the official client's REST layer.

    Args:
        api: A configured ``kubernetes.client.ApiClient``.
    """

    def __init__(self, api: Any) -> None:
        self._api = api
        self._send = _send_since_37 if hasattr(api, "param_serialize") else _send_before_37

    def __call__(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        *,
        body: JSON | None,
        timeout: float,
    ) -> Response:
        """Send one request; what the client raises becomes an answer or a ``NoResponse``."""
        try:
            return self._send(self._api, method, path, headers, body=body, timeout=timeout)
        except k8s_client.ApiException as error:
            if error.status:
                # Only the legacy REST layer raises for an HTTP status: it is an answer.
                return _answer_from(error)
            # Both layers report TLS failures this way (status 0); they do not heal.
            raise NoResponse(one_line(error.reason or error), retryable=False) from error
        except urllib3.exceptions.HTTPError as error:
            raise NoResponse(_describe_connection_error(error), retryable=True) from error
        except OSError as error:
            raise NoResponse(one_line(error), retryable=True) from error


class ClientStream:
    """Opens a streaming GET through the official client (a watch), body left unread.

    Args:
        api: A configured ``kubernetes.client.ApiClient``.
        connect_timeout: Seconds to connect (``--request-timeout``).
    """

    def __init__(self, api: Any, connect_timeout: float = 10.0) -> None:
        self._api = api
        self._connect_timeout = connect_timeout

    def open(self, resource_path: str, ref: RequestRef, read_timeout_s: float) -> Any:
        """Send the request and return urllib3's response as soon as its headers arrived.

        Raises:
            ApiError: No answer came back.
        """
        headers = {"Accept": "application/json"}
        timeout = (self._connect_timeout, read_timeout_s)
        try:
            # The two client generations, as in ClientSend.
            if hasattr(self._api, "param_serialize"):
                _m, url, header_params, _b, _p = self._api.param_serialize(
                    method="GET",
                    resource_path=resource_path,
                    header_params=headers,
                    auth_settings=["BearerToken"],
                )
                return self._api.call_api(
                    "GET", url, header_params=header_params, _request_timeout=timeout
                ).response
            return self._api.call_api(
                resource_path,
                "GET",
                header_params=headers,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except k8s_client.ApiException as error:
            if error.status:
                answer = _answer_from(error)
                raise api_error(ref, answer.status, status_message(answer.data)) from error
            raise api_error(ref, None, one_line(error.reason or error)) from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise api_error(ref, None, _describe_connection_error(error)) from error


class _WatchStream:
    """The events of an open watch response, one JSON document per line."""

    def __init__(
        self, raw: Any, ref: RequestRef, read_timeout_s: float, server_date: datetime | None
    ) -> None:
        self._raw = raw
        self._ref = ref
        self._read_timeout_s = read_timeout_s
        self.server_date = server_date

    def __iter__(self) -> Iterator[WatchEvent]:
        pending = b""
        try:
            for chunk in self._raw.stream(amt=None, decode_content=True):
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    if line.strip():
                        yield self._event(line)
        except urllib3.exceptions.ReadTimeoutError as error:
            raise WatchStalled(
                self._ref, None, f"nothing received for {self._read_timeout_s:g}s"
            ) from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise api_error(self._ref, None, _describe_connection_error(error)) from error
        if pending.strip():
            yield self._event(pending)

    def _event(self, line: bytes) -> WatchEvent:
        try:
            document = json.loads(line)
        except (ValueError, RecursionError) as error:
            raise api_error(
                self._ref, None, f"undecodable watch event: not JSON ({_start(line)})"
            ) from error
        kind = document.get("type") if isinstance(document, dict) else None
        obj = document.get("object") if isinstance(document, dict) else None
        if not isinstance(kind, str) or not isinstance(obj, dict):
            raise api_error(self._ref, None, "malformed watch event")
        if kind == "ERROR":
            code = obj.get("code")
            status = code if isinstance(code, int) else None
            raise api_error(self._ref, status, one_line(str(obj.get("message") or "")))
        return WatchEvent(kind, obj)


# The client changed generators at release 37: ``ApiClient.call_api`` took a resource path and
# options up to 36 (``_preload_content`` included), and takes a finished URL from 37 on, built by
# ``param_serialize`` (new in 37). Both calls below are the public API of their releases, and
# both return the raw response: no model classes, the body decoded once by ``json.loads``.


def _send_since_37(
    api: Any,
    method: str,
    resource_path: str,
    headers: dict[str, str],
    *,
    body: JSON | None,
    timeout: float,
) -> Response:
    """Client >= 37: every status comes back as a response; the REST layer raises none."""
    _m, url, header_params, _b, _p = api.param_serialize(
        method=method,
        resource_path=resource_path,
        header_params=headers,
        auth_settings=["BearerToken"],
    )
    # The REST layer serialises a dict body to JSON for every JSON content type.
    response = api.call_api(
        method, url, header_params=header_params, body=body, _request_timeout=(timeout, timeout)
    )
    data = response.read()
    return Response(
        int(response.status),
        data or b"",
        response.headers.get("Date"),
        response.headers.get("Retry-After"),
    )


def _send_before_37(
    api: Any,
    method: str,
    resource_path: str,
    headers: dict[str, str],
    *,
    body: JSON | None,
    timeout: float,
) -> Response:
    """Client < 37: ``_preload_content=False`` returns urllib3's response for a 2xx as it came.

    Any other status raises ``ApiException`` carrying the answer (see :func:`_answer_from`).
    """
    # Without _return_http_data_only, 31-35 wrap the response in (data, status, headers).
    response = api.call_api(
        resource_path,
        method,
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
        _request_timeout=(timeout, timeout),
    )
    data = response.read()
    return Response(
        int(response.status),
        data or b"",
        response.headers.get("Date"),
        response.headers.get("Retry-After"),
    )


def _answer_from(error: Any) -> Response:
    """The HTTP answer inside a legacy ``ApiException`` (its body is bytes, or str from 35)."""
    body = error.body or b""
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    headers = error.headers or {}
    return Response(int(error.status), data, headers.get("Date"), headers.get("Retry-After"))


def _collection(prefix: str, namespace: str | None, plural: str) -> str:
    if namespace is None:
        return f"{prefix}/{plural}"
    return f"{prefix}/namespaces/{urllib.parse.quote(namespace, safe='')}/{plural}"


def _object(prefix: str, namespace: str, plural: str, name: str) -> str:
    return f"{_collection(prefix, namespace, plural)}/{urllib.parse.quote(name, safe='')}"


def _list_query(page_size: int, selector: str | None, token: str | None) -> list[tuple[str, str]]:
    query = [("limit", str(page_size))]
    if selector:
        query.append(("labelSelector", selector))
    if token:
        query.append(("continue", token))
    return query


# --- answers that are not the API server's JSON ------------------------------------------------
# An auth proxy's sign-in page, a captive portal or a gateway can answer 200 in the API server's
# place; a connection cut mid-body leaves truncated JSON. Such an answer is a state of the
# cluster, never a bug: each becomes an ApiError naming the request (exit 3 for discovery and
# lists, a per-job error for a job's own requests), never a traceback. Nor is it ever read as
# "nothing there": a body without the List's items or the discovery document's entries would
# otherwise make a pass that finds no job and exits 0. A write's answer is read too: the API
# server answers every write with the object (or a Status), so anything else means the write
# may not have reached it.


def _decode(response: Response, ref: RequestRef) -> dict[str, Any]:
    """The JSON object of a successful answer.

    Raises:
        ApiError: The body is not a JSON object.
    """
    try:
        document = json.loads(response.data)
    except (ValueError, RecursionError) as error:
        raise _undecodable(ref, response, error) from error
    if not isinstance(document, dict):
        raise _undecodable(ref, response, f"a JSON {type(document).__name__}, not an object")
    return document


def _object_answer(response: Response, ref: RequestRef) -> dict[str, Any]:
    """A successful answer that must be one object (a job, a Lease): it has a uid.

    Read as an object without one, a re-read job would look replaced by a new one.

    Raises:
        ApiError: The body is not such an object.
    """
    document = _decode(response, ref)
    metadata = document.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("uid"), str):
        raise _undecodable(ref, response, "no 'metadata.uid': not a Kubernetes object")
    return document


def _entries(response: Response, ref: RequestRef, key: str) -> list[Any]:
    """The list under ``key`` of a discovery document (``versions``, ``resources``).

    Raises:
        ApiError: The body is not such a document.
    """
    entries = _decode(response, ref).get(key)
    if not isinstance(entries, list):
        raise _undecodable(ref, response, f"no {key!r} list")
    return entries


def _list_page(response: Response, ref: RequestRef) -> tuple[list[Any], str | None, str | None]:
    """The items, continue token and resourceVersion of a List answer.

    Raises:
        ApiError: The body is not a List (no ``items``, or fields of the wrong type).
    """
    document = _decode(response, ref)
    if "items" not in document:
        raise _undecodable(ref, response, "no 'items': not a List")
    items = document["items"]
    metadata = document.get("metadata")
    if metadata is None:
        metadata = {}
    token, version = (
        (metadata.get("continue"), metadata.get("resourceVersion"))
        if isinstance(metadata, dict)
        else (None, None)
    )
    if items is not None and not isinstance(items, list):
        raise _undecodable(ref, response, "'items' is not a list")
    if not isinstance(metadata, dict) or not all(
        v is None or isinstance(v, str) for v in (token, version)
    ):
        raise _undecodable(ref, response, "'metadata' is not a ListMeta")
    return items or [], token or None, version or None


def _undecodable(ref: RequestRef, response: Response, why: object) -> ApiError:
    if isinstance(why, ValueError | RecursionError) and not isinstance(why, decode.NotAList):
        why = f"not JSON ({_start(response.data)}; a proxy answering for the API server?)"
    return api_error(
        ref, None, f"undecodable answer (HTTP {response.status}, {len(response.data)} bytes): {why}"
    )


def _start(data: bytes) -> str:
    """The first characters of a body, printable and on one line (it may hold any bytes)."""
    if not data:
        return "empty body"
    text = data[:_SHOWN].decode("utf-8", "replace")
    shown = "".join(c if c.isprintable() else "?" for c in one_line(text))
    return f"starts {shown!r}" + ("..." if len(data) > _SHOWN else "")


_SHOWN = 40  # bytes of an undecodable body quoted in its error: enough to tell HTML from JSON


def _describe_connection_error(error: BaseException) -> str:
    reason = getattr(error, "reason", None)
    text = str(reason or error)
    if "Connection refused" in text:
        return "connection refused"
    if "timed out" in text.lower():
        return "timed out (--request-timeout)"
    return one_line(text)
