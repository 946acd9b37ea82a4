"""The admin's side of a devcluster control plane: requests, CRDs, users, namespaces, audit.

:class:`AdminClient` talks to a kube-apiserver as ``devcluster-admin`` (group
``system:masters``) with the client certificate that :class:`devcluster.controlplane.ControlPlane`
writes, and mints kubeconfigs for other users from the same CA. It starts and stops nothing:
the process lifecycle is ``ControlPlane``'s, which is an ``AdminClient`` once it serves.
"""

from __future__ import annotations

import concurrent.futures
import functools
import http.client
import json
import re
import secrets
import ssl
import threading
import urllib.parse
from collections.abc import Iterable
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devcluster import audit, kubeconfig, operator_crds, pki, processes

if TYPE_CHECKING:
    import kubernetes.client

ADMIN_USER = "devcluster-admin"
_CRD_TIMEOUT = 60.0


class ApiError(RuntimeError):
    """An admin request through ``ControlPlane.request`` got an unexpected HTTP status.

    Attributes:
        status: The HTTP status code.
        body: The decoded response body (a ``Status`` object, usually).
    """

    def __init__(self, method: str, path: str, status: int, body: Any):
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path} -> {status}: {message}")
        self.status = status
        self.body = body


class AdminClient:
    """Requests to one kube-apiserver as its admin, and credentials for other users.

    Attributes:
        workdir: The control plane's directory: ``pki/`` (CA, admin certificate), kubeconfigs.
        server: ``https://127.0.0.1:<port>``; empty until the apiserver serves.
        audit_log: JSON-lines audit log, one line per completed request (see ``audit``).
        ca_pem: The CA that signed the serving and every client certificate.
    """

    def __init__(self, workdir: Path, ca: pki.CertificateAuthority) -> None:
        self.workdir = workdir
        self.server = ""
        self.audit_log = workdir / "audit.log"
        self._ca = ca
        self.ca_pem = ca.cert_pem
        self._ssl: ssl.SSLContext | None = None
        self._api_client: kubernetes.client.ApiClient | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the ``kubernetes`` client, if :meth:`api` made one."""
        with self._lock:
            client, self._api_client = self._api_client, None
        if client is not None:
            client.close()  # type: ignore[no-untyped-call]  # unannotated in the client

    # --- CRDs ---------------------------------------------------------------------------------

    def install_crds(self, files: Iterable[Path] | None = None) -> list[str]:
        """Create CRDs (skipping those that exist) and wait until they are served.

        Creation sends the YAML as is (``Content-Type: application/yaml``): no client-side
        parsing of ~600 KB documents and no last-applied annotation. Safe to call again, e.g.
        to restore a CRD a test deleted.

        Args:
            files: CRD manifests; default the six Training Operator CRDs.

        Returns:
            The CRD names, e.g. ``pytorchjobs.kubeflow.org``.
        """
        paths = list(files) if files is not None else operator_crds.crd_files()
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(paths) or 1) as pool:
            crds = list(pool.map(self._create_crd, paths))
        for crd in crds:
            self.wait_crd_established(crd["metadata"]["name"])
        # Established means the handler serves; discovery can lag a moment behind, and the
        # sweeper finds its kinds through discovery.
        by_group: dict[str, set[str]] = {}
        for crd in crds:
            group_version = f"{crd['spec']['group']}/{_storage_version(crd)}"
            by_group.setdefault(group_version, set()).add(crd["spec"]["names"]["plural"])
        for group_version, plurals in by_group.items():
            processes.wait_until(
                functools.partial(self._discovered, group_version, plurals),
                timeout=_CRD_TIMEOUT,
                what=f"discovery of {sorted(plurals)} in {group_version}",
            )
        return [crd["metadata"]["name"] for crd in crds]

    def _discovered(self, group_version: str, plurals: set[str]) -> bool:
        resources = self.request("GET", f"/apis/{group_version}")["resources"]
        return plurals <= {r["name"] for r in resources}

    def _create_crd(self, path: Path) -> dict[str, Any]:
        crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        status, body = self._raw(
            "POST",
            f"{crds}?fieldManager=devcluster",
            path.read_bytes(),
            content_type="application/yaml",
        )
        if status == HTTPStatus.CONFLICT:
            name = _yaml_metadata_name(path.read_text(encoding="utf-8"))
            return self.request("GET", f"{crds}/{name}")  # type: ignore[no-any-return]  # JSON
        if status != HTTPStatus.CREATED:
            raise ApiError("POST", f"{crds} ({path.name})", status, body)
        return body  # type: ignore[no-any-return]  # a CRD, as JSON

    def wait_crd_established(self, name: str, timeout: float = _CRD_TIMEOUT) -> None:
        """Wait until a CRD has condition ``Established=True``."""

        def established() -> bool:
            crd = self.request(
                "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
            )
            conditions = crd.get("status", {}).get("conditions", [])
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        processes.wait_until(established, timeout=timeout, what=f"CRD {name} established")

    # --- admin requests -----------------------------------------------------------------------

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            context = ssl.create_default_context(cafile=str(self.workdir / "pki" / "ca.crt"))
            context.load_cert_chain(
                self.workdir / "pki" / "admin.crt", self.workdir / "pki" / "admin.key"
            )
            self._ssl = context
        return self._ssl

    def _raw(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        url = urllib.parse.urlsplit(self.server)
        conn = http.client.HTTPSConnection(
            url.hostname or "127.0.0.1", url.port, context=self._context(), timeout=30
        )
        response: http.client.HTTPResponse | None = None
        try:
            headers = {"Accept": "application/json"}
            if body is not None:
                headers["Content-Type"] = content_type
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        finally:
            # A read that fails half-way leaves the response holding the socket open after
            # conn.close(); closing both releases it now, not at some later collection.
            if response is not None:
                response.close()
            conn.close()
        try:
            decoded: Any = json.loads(data) if data else None
        except ValueError:
            decoded = data.decode("utf-8", "replace")
        return response.status, decoded

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        expect: Iterable[int] = (200, 201),
    ) -> Any:
        """Send one request as the admin and return the decoded JSON answer.

        A small escape hatch for what the generated client makes awkward (raw paths, patches
        with a given content type, subresources).

        Args:
            method: HTTP method.
            path: Path and query, e.g. ``/api/v1/namespaces``.
            body: JSON-serialisable body, or bytes sent as they are.
            content_type: Content type of ``body``.
            expect: Statuses that count as success.

        Raises:
            ApiError: Any other status.
        """
        raw = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        status, decoded = self._raw(method, path, raw, content_type=content_type)
        if status not in set(expect):
            raise ApiError(method, path, status, decoded)
        return decoded

    def api(self) -> kubernetes.client.ApiClient:
        """A ``kubernetes`` client for the admin (one per control plane, closed by ``stop()``)."""
        import kubernetes.client  # noqa: PLC0415 - only users of this method need the client

        with self._lock:
            if self._api_client is None:
                configuration = kubernetes.client.Configuration()
                configuration.host = self.server
                configuration.ssl_ca_cert = str(self.workdir / "pki" / "ca.crt")
                configuration.cert_file = str(self.workdir / "pki" / "admin.crt")
                configuration.key_file = str(self.workdir / "pki" / "admin.key")
                self._api_client = kubernetes.client.ApiClient(configuration)
            return self._api_client

    # --- users, namespaces, audit -------------------------------------------------------------

    def user_kubeconfig(self, name: str, groups: list[str]) -> Path:
        """A kubeconfig that authenticates as user ``name`` in ``groups`` (client certificate).

        The apiserver's audit log then attributes this kubeconfig's requests to ``name``:
        ``audit_events(user=name)``.
        """
        client = self._ca.client_cert(name, groups)
        text = kubeconfig.render(server=self.server, ca_pem=self.ca_pem, user=name, client=client)
        return kubeconfig.write(
            self.workdir / "kubeconfigs" / f"user-{_file_safe(name)}.yaml", text
        )

    def token_kubeconfig(self, token: str, name: str) -> Path:
        """A kubeconfig that authenticates with a bearer token (see ``service_account_token``)."""
        text = kubeconfig.render(server=self.server, ca_pem=self.ca_pem, user=name, token=token)
        return kubeconfig.write(
            self.workdir / "kubeconfigs" / f"token-{_file_safe(name)}.yaml", text
        )

    def service_account_token(
        self, namespace: str, name: str, expiration_seconds: int = 3600
    ) -> str:
        """Create the ServiceAccount if needed and get a token for it through TokenRequest.

        Its audit user name is ``system:serviceaccount:<namespace>:<name>``.
        """
        self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
            expect=(201, 409),
        )
        token_request = self.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration_seconds},
            },
        )
        return str(token_request["status"]["token"])

    def create_namespace(self, prefix: str = "e2e", labels: dict[str, str] | None = None) -> str:
        """Create a namespace with a unique name starting with ``prefix`` and return the name.

        Unique, because a deleted namespace stays Terminating forever without
        kube-controller-manager, so a name can never be reused.
        """
        name = f"{prefix}-{secrets.token_hex(3)}"
        self.request(
            "POST",
            "/api/v1/namespaces",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": labels or {}},
            },
        )
        return name

    def audit_offset(self) -> int:
        """A cursor into the audit log: pass it as ``since`` to see only later requests."""
        return audit.end_offset(self.audit_log)

    def audit_events(self, user: str | None = None, since: int = 0) -> list[audit.AuditEvent]:
        """Audit events (one per completed request), optionally for one user and after a cursor."""
        return audit.read_events(self.audit_log, user=user, since=since)


def _storage_version(crd: dict[str, Any]) -> str:
    return str(next(v["name"] for v in crd["spec"]["versions"] if v.get("storage")))


def _yaml_metadata_name(text: str) -> str:
    # The name of a CRD that exists already; cheaper than parsing 600 KB of YAML.
    match = re.search(r"^metadata:\n(?:[ ].*\n)*?  name: (\S+)$", text, re.MULTILINE)
    if not match:
        raise ValueError("no metadata.name in CRD manifest")
    return match[1]


def _file_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)
