"""The official client's glue: the only module that imports ``kubernetes`` and ``urllib3``.

``connect`` loads the configuration (kubeconfig, else in-cluster) and builds a
``sweeper.k8s.kube.KubeCluster`` over ``ClientSend``, which puts one request on the
wire through the client and translates what it raises, and ``ClientStream``, which opens
watch streams. Import it lazily: importing ``kubernetes`` costs a quarter of a second that
``sweeper --version`` and ``--help`` do not need.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from sweeper import __version__
from sweeper.config import Config
from sweeper.core.errors import ConfigError, RequestRef, WatchStalled, api_error
from sweeper.core.model import JSON
from sweeper.k8s.kube import KubeCluster
from sweeper.k8s.transport import (
    NoResponse,
    Response,
    RetryPolicy,
    StopSignal,
    Transport,
    one_line,
    status_message,
)

USER_AGENT = f"kubeflow-deadline-sweeper/{__version__}"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def connect(config: Config, *, stop: StopSignal) -> KubeCluster:
    """Build a cluster client from the usual sources, in the usual order.

    ``--kubeconfig``/``KUBECONFIG``, else ``~/.kube/config``, else the in-cluster service
    account.

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
            raise ConfigError(f"kubeconfig {source}: {_kubeconfig_fault(paths, error)}") from error
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
            "no kubeconfig found (--kubeconfig, KUBECONFIG, or ~/.kube/config) "
            "and not running in a cluster"
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


_YAML_NAMES = {"str": "a string", "list": "a list", "int": "a number", "float": "a number"}


def _kubeconfig_fault(paths: list[str], error: Exception) -> str:
    """What is wrong with a kubeconfig the client could not load, in one line.

    The client reads any YAML document and then indexes it: a file that is a string or a list
    (a path pasted in, a stray ``-``) fails inside it as ``'str' object does not support item
    assignment``, which names nothing the user wrote.
    """
    for path in paths:
        try:
            document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError, yaml.YAMLError):
            continue  # the client's own message says it
        if document is not None and not isinstance(document, dict):
            found = _YAML_NAMES.get(type(document).__name__, "something else")
            where = f"{path}: " if len(paths) > 1 else ""
            return (
                f"{where}not a kubeconfig (a YAML mapping with clusters, contexts and users; "
                f"found {found})"
            )
    return one_line(error)


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

    ``kubeconfig`` is ``None`` in a cluster.
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
    """``sweeper.k8s.transport.Send`` over the official client's REST layer."""

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
    """Opens a streaming GET through the official client (a watch), body left unread."""

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
                raw = self._api.call_api(
                    "GET", url, header_params=header_params, _request_timeout=timeout
                ).response
            else:
                raw = self._api.call_api(
                    resource_path,
                    "GET",
                    header_params=headers,
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    # Without it, 31-35 wrap the response in (data, status, headers).
                    _return_http_data_only=True,
                    _request_timeout=timeout,
                )
        except k8s_client.ApiException as error:
            if error.status:
                answer = _answer_from(error)
                raise api_error(ref, answer.status, status_message(answer.data)) from error
            raise api_error(ref, None, one_line(error.reason or error)) from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise api_error(ref, None, _describe_connection_error(error)) from error
        return _Streamed(raw, ref, read_timeout_s)


class _Streamed:
    """urllib3's streaming response, its body's errors translated where they are raised.

    ``kube``'s watch stream reads lines from it and never sees the client's exceptions.
    """

    def __init__(self, raw: Any, ref: RequestRef, read_timeout_s: float) -> None:
        self._raw = raw
        self._ref = ref
        self._read_timeout_s = read_timeout_s
        self.status = raw.status
        self.headers = raw.headers

    @property
    def data(self) -> bytes:
        """The whole body (read for an answer that is not a stream)."""
        return bytes(self._raw.data or b"")

    def stream(self, amt: int | None = None, decode_content: bool = True) -> Iterator[bytes]:
        """The body's chunks as they arrive.

        Raises:
            WatchStalled: Nothing arrived for the read timeout.
            ApiError: The connection broke.
        """
        try:
            yield from self._raw.stream(amt=amt, decode_content=decode_content)
        except urllib3.exceptions.ReadTimeoutError as error:
            raise WatchStalled(
                self._ref, None, f"nothing received for {self._read_timeout_s:g}s"
            ) from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise api_error(self._ref, None, _describe_connection_error(error)) from error

    def release_conn(self) -> None:
        """Give the connection back to its pool."""
        self._raw.release_conn()

    def close(self) -> None:
        """Close the response."""
        self._raw.close()


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

    Any other status raises ``ApiException`` carrying the answer (see ``_answer_from``).
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


def _describe_connection_error(error: BaseException) -> str:
    reason = getattr(error, "reason", None)
    text = str(reason or error)
    if "Connection refused" in text:
        return "connection refused"
    if "timed out" in text.lower():
        return "timed out (--request-timeout)"
    return one_line(text)
