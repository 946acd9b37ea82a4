"""The HTTP glue: the only module that imports ``urllib3``.

``connect`` builds a ``sweeper.k8s.kube.KubeCluster`` over ``ClientSend`` (one request, what
urllib3 raises translated) and ``ClientStream`` (watches). Import it lazily: ``--version`` and
``--help`` need none of it. Each request says of its sender what kubectl's does (the
credential, ``Impersonate-*``, ``Proxy-Authorization``). Why not ``kubernetes``: docs/decisions.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import ssl
import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import urllib3
from urllib3.util.ssl_ import create_urllib3_context

from sweeper import __version__
from sweeper.config import Config
from sweeper.core.errors import ConfigError, RequestRef, WatchStalled, api_error
from sweeper.core.model import JSON
from sweeper.k8s.connection import kubeconfig, proxies
from sweeper.k8s.connection.credentials import Auth, Credential, auth_for
from sweeper.k8s.kube import KubeCluster
from sweeper.k8s.transport import NoResponse, Response, RetryPolicy, StopSignal, Transport, one_line

USER_AGENT = f"kubeflow-deadline-sweeper/{__version__}"
# Header-name bytes client-go leaves as they are in Impersonate-Extra-<key> (RFC 7230's token
# characters but %); every other byte is percent-encoded.
_HEADER_KEY_BYTES = frozenset(
    b"!#$&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)
log = logging.getLogger(__name__)


def connect(config: Config, *, stop: StopSignal) -> KubeCluster:
    """Build a cluster client from ``--kubeconfig``/``KUBECONFIG``, ``~/.kube/config`` or the pod.

    ``ConfigError``: no configuration applies, or its kubeconfig or credentials are unusable.
    """
    source = config.kubeconfig
    default = Path.home() / ".kube" / "config"
    if not source and default.is_file():
        source = str(default)
    if source:
        target = kubeconfig.load(source, config.context)
        where = f"kubeconfig {source}"
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        if config.context:
            raise ConfigError("--context needs a kubeconfig; none was found")
        target = kubeconfig.in_cluster()
        where = "in-cluster configuration"
    else:
        raise ConfigError(
            "no kubeconfig found (--kubeconfig, KUBECONFIG, or ~/.kube/config) "
            "and not running in a cluster"
        )
    if target.withheld:
        log.warning(
            "server %s is plain http: not sending the kubeconfig's %s (kubectl sends credentials "
            "only over https)",
            target.server,
            ", ".join(target.withheld),
            extra={"server": target.server, "withheld": list(target.withheld)},
        )
    try:
        auth = auth_for(target, stop.remaining)
        http = Http(target, auth)
        # Run an exec plugin and load the certificates now: what fails is a configuration error.
        http.pool(auth.current())
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from error
    except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
        raise ConfigError(f"{where}: {one_line(error)}") from error
    send = ClientSend(http)
    transport = Transport(send, stop, request_timeout=config.request_timeout)
    # A Lease write is tried once per retry period: a retry could land after the renew deadline,
    # counted from the first sending. Not fenced by leadership: it is how a candidate leads.
    once = Transport(
        send,
        stop,
        request_timeout=config.request_timeout,
        policy=RetryPolicy(attempts=1),
        fenced=False,
    )
    context = "in-cluster" if target.context == "in-cluster" else f'"{target.context}"'
    return KubeCluster(
        transport,
        close=http.close,
        once=once,
        stream=ClientStream(http, config.request_timeout),
        home_namespace=target.namespace,
        endpoint=f"server {target.server}, context {context}",
    )


class _NoCredential(Exception):  # noqa: N818 - a state, as NoResponse
    """The credential source failed while sending (an exec plugin run again)."""


class Http:
    """urllib3's pool manager for one target, and what each request says of its sender.

    One pool manager serves every thread; an exec plugin's new client certificate gets a new
    one, and the old one is closed (a socket lent to a watch when that response is released).
    """

    def __init__(self, target: kubeconfig.Target, auth: Auth) -> None:
        self._target = target
        self._auth = auth
        self._lock = threading.Lock()
        self._manager: urllib3.PoolManager | None = None
        self._cert: tuple[bytes, bytes] | None = None
        self._identity = _impersonation_headers(target.impersonate)

    def pool(self, credential: Credential) -> urllib3.PoolManager:
        """The pool manager for ``credential``'s client certificate; ``ConfigError``: unusable."""
        with self._lock:
            superseded = None
            if self._manager is None or credential.cert != self._cert:
                superseded, self._manager = (
                    self._manager,
                    _pool_manager(self._target, credential.cert),
                )
                self._cert = credential.cert
            manager = self._manager
        if superseded is not None:
            _close(superseded)
        return manager

    def open(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        *,
        body: JSON | None,
        timeout: urllib3.Timeout,
        preload: bool,
    ) -> Any:
        """Send one request; after a 401, once more with a renewed credential (exec plugins).

        Raises urllib3's ``HTTPError`` or ``OSError`` (no answer), or ``_NoCredential``.
        """
        # Serialised as the official client did for every JSON content type.
        data = None if body is None else json.dumps(body).encode("utf-8")
        for attempt in (1, 2):
            try:
                credential = self._auth.current()
                pool = self.pool(credential)
            except ConfigError as error:
                raise _NoCredential(str(error)) from error
            sent = urllib3.HTTPHeaderDict({**headers, "User-Agent": USER_AGENT})
            for name, value in self._identity:
                sent.add(name, value)
            if credential.authorization:
                sent["Authorization"] = credential.authorization
            if data is not None:
                sent.setdefault("Content-Type", "application/json")
            response = pool.request(
                method,
                self._target.server + path,
                body=data,
                headers=sent,
                timeout=timeout,
                # Retries are ours (bounded, with backoff); urllib3's would hide failures.
                retries=False,
                redirect=False,
                preload_content=preload,
            )
            if response.status == 401 and attempt == 1 and self._auth.renew(credential):  # noqa: PLR2004
                if not preload:
                    response.drain_conn()
                    response.release_conn()
                continue
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close every connection of the pool manager."""
        with self._lock:
            manager, self._manager = self._manager, None
        if manager is not None:
            _close(manager)


def _close(manager: urllib3.PoolManager) -> None:
    # Each pool closed explicitly: recent urllib3 releases no longer close the pools a clear()
    # drops (they leave them, and their keep-alive sockets, to a finalizer). The closed pools
    # stay in the manager: a thread that took it just before it was superseded gets a
    # ClosedPoolError (no answer, tried again) instead of a new pool that nothing would close.
    for key in list(manager.pools.keys()):
        pool = manager.pools.get(key)
        if pool is not None:
            pool.close()


def _impersonation_headers(who: kubeconfig.Impersonation | None) -> list[tuple[str, str]]:
    """The ``Impersonate-*`` headers kubectl sends: one per group, one per value of an extra."""
    if who is None:
        return []
    headers = [("Impersonate-User", who.user)]
    if who.uid:
        headers.append(("Impersonate-Uid", who.uid))
    headers += [("Impersonate-Group", group) for group in who.groups]
    for key, values in who.extra:
        escaped = "".join(
            chr(b) if b in _HEADER_KEY_BYTES else f"%{b:02X}" for b in key.encode("utf-8")
        )
        headers += [(f"Impersonate-Extra-{escaped}", value) for value in values]
    return headers


def _pool_manager(
    target: kubeconfig.Target, exec_cert: tuple[bytes, bytes] | None
) -> urllib3.PoolManager:
    """Raises: ConfigError: A certificate, a key or the proxy cannot be used (named)."""
    options: dict[str, Any] = {"maxsize": (os.cpu_count() or 1) * 5}  # the official client's
    if target.server.startswith("https:"):
        verify = ssl.CERT_NONE if target.insecure else ssl.CERT_REQUIRED
        context = create_urllib3_context(cert_reqs=verify)
        if target.ca_file:
            with _loading(f"certificate-authority {target.ca_file}"):
                context.load_verify_locations(cafile=target.ca_file)
        elif target.ca_data:
            with _loading("certificate-authority-data"):
                context.load_verify_locations(cadata=target.ca_data)
        elif not target.insecure:
            context.load_default_certs()
        if exec_cert is not None:
            with _loading("the exec plugin's client certificate and key"):
                _load_pair(context, *exec_cert)
        elif target.cert_data is not None or target.key_data is not None:
            with _loading("client-certificate and client-key"):
                cert = target.cert_data or Path(str(target.cert_file)).read_bytes()
                key = target.key_data or Path(str(target.key_file)).read_bytes()
                _load_pair(context, cert, key)
        elif target.cert_file:
            with _loading(f"client-certificate {target.cert_file}, client-key {target.key_file}"):
                context.load_cert_chain(target.cert_file, target.key_file)
        options.update(ssl_context=context, cert_reqs=verify)
        if target.tls_server_name:
            options["server_hostname"] = target.tls_server_name
        if target.insecure:
            # Asked for in the kubeconfig; urllib3 would warn on every request.
            warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
    url = target.proxy_url or proxies.from_environment(target.server, os.environ)
    if url:
        proxy = proxies.parse(url)
        if proxy.basic_auth is not None:
            options["proxy_headers"] = urllib3.make_headers(proxy_basic_auth=proxy.basic_auth)
        return urllib3.ProxyManager(proxy.url, **options)
    return urllib3.PoolManager(**options)


@contextlib.contextmanager
def _loading(what: str) -> Iterator[None]:
    try:
        yield
    except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise ConfigError(f"{what}: {one_line(reason)}") from error


def _load_pair(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """Load a certificate and key held in memory: ``ssl`` reads them only from files."""
    with tempfile.TemporaryDirectory(prefix="sweeper-") as folder:
        cert_path, key_path = Path(folder, "cert.pem"), Path(folder, "key.pem")
        for path, data in ((cert_path, cert), (key_path, key)):
            path.touch(mode=0o600)
            path.write_bytes(data)
        context.load_cert_chain(cert_path, key_path)


class ClientSend:
    """``sweeper.k8s.transport.Send`` over ``Http``."""

    def __init__(self, http: Http) -> None:
        self._http = http

    def __call__(
        self, method: str, path: str, headers: dict[str, str], *, body: JSON | None, timeout: float
    ) -> Response:
        """Send one request; what urllib3 raises becomes a ``NoResponse``."""
        try:
            response = self._http.open(
                method,
                path,
                headers,
                body=body,
                timeout=urllib3.Timeout(connect=timeout, read=timeout),
                preload=True,
            )
        except _NoCredential as error:
            raise NoResponse(str(error), retryable=False) from error
        except urllib3.exceptions.SSLError as error:
            # A TLS failure (an unknown CA, a name mismatch) does not heal.
            raise NoResponse(_describe_tls_error(error), retryable=False) from error
        except urllib3.exceptions.HTTPError as error:
            raise NoResponse(_describe_connection_error(error), retryable=True) from error
        except OSError as error:
            raise NoResponse(one_line(error), retryable=True) from error
        return Response(
            int(response.status),
            response.data or b"",
            response.headers.get("Date"),
            response.headers.get("Retry-After"),
        )


class ClientStream:
    """Opens a streaming GET (a watch), its body left unread."""

    def __init__(self, http: Http, connect_timeout: float = 10.0) -> None:
        self._http = http
        self._connect_timeout = connect_timeout

    def open(self, resource_path: str, ref: RequestRef, read_timeout_s: float) -> Any:
        """urllib3's response as soon as its headers arrived; ``ApiError`` if none came."""
        try:
            raw = self._http.open(
                "GET",
                resource_path,
                {"Accept": "application/json"},
                body=None,
                timeout=urllib3.Timeout(connect=self._connect_timeout, read=read_timeout_s),
                preload=False,
            )
        except _NoCredential as error:
            raise api_error(ref, None, str(error)) from error
        except urllib3.exceptions.SSLError as error:
            raise api_error(ref, None, _describe_tls_error(error)) from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise api_error(ref, None, _describe_connection_error(error)) from error
        return _Streamed(raw, ref, read_timeout_s)


class _Streamed:
    """urllib3's streaming response, its body's errors translated where they are raised."""

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
        """The body's chunks as they arrive; ``WatchStalled`` after the read timeout."""
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


def _describe_tls_error(error: BaseException) -> str:
    # The official client's words, which messages and runbooks quote.
    return one_line(f"SSLError {error}")


def _describe_connection_error(error: BaseException) -> str:
    reason = getattr(error, "reason", None)
    text = str(reason or error)
    if "Connection refused" in text:
        return "connection refused"
    if "timed out" in text.lower():
        return "timed out (--request-timeout)"
    return one_line(text)
