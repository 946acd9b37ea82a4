"""A controller's admission webhooks, registered with the API server and served on loopback.

Controllers built with controller-runtime (Kueue, JobSet, Trainer v2) ship their webhook
configurations as ``manifests.yaml`` in their Go module, with each ``clientConfig`` naming an
in-cluster Service. The harness has no Service network: each ``clientConfig`` becomes
``url: https://127.0.0.1:<port><path>`` with the devcluster CA as ``caBundle``, and each
configuration gets a name of the harness's own (configurations are cluster-scoped).

A webhook with ``failurePolicy: Fail`` whose server is gone refuses every request it matches,
so ``Registrations.remove`` runs before the controller stops (and when its start fails).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import yaml

from devcluster.admin import ApiError

if TYPE_CHECKING:
    from devcluster.admin import AdminClient

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PLURALS = {
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
}

Hook = dict[str, Any]


def on_loopback(
    manifests: str,
    *,
    port: int,
    ca_pem: bytes,
    names: Mapping[str, str],
    keep: Callable[[Hook], bool] = lambda hook: True,
    object_selectors: Mapping[str, dict[str, Any]] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """A module's webhook configurations, pointed at ``https://127.0.0.1:<port>``.

    Args:
        manifests: The module's webhook ``manifests.yaml``.
        port: Where the controller's webhook server listens.
        ca_pem: The CA that issued its serving certificate.
        names: The harness's name for each configuration, by kind
            (``MutatingWebhookConfiguration``, ``ValidatingWebhookConfiguration``).
        keep: Which webhooks to register (those whose paths the controller serves).
        object_selectors: An ``objectSelector`` to set, by webhook name (what the module's
            own kustomize patches add).

    Returns:
        (resource plural, body) pairs, mutating first.
    """
    bundle = base64.b64encode(ca_pem).decode("ascii")
    selectors = object_selectors or {}
    out = []
    for document in yaml.safe_load_all(manifests):
        if not document or document.get("kind") not in names:
            continue
        hooks = [dict(hook) for hook in document.get("webhooks", []) if keep(hook)]
        for hook in hooks:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
            if hook["name"] in selectors:
                hook["objectSelector"] = selectors[hook["name"]]
        body = {**document, "metadata": {"name": names[document["kind"]]}, "webhooks": hooks}
        out.append((PLURALS[document["kind"]], body))
    out.sort(key=lambda pair: pair[0] != "mutatingwebhookconfigurations")
    return out


class Registrations:
    """The webhook configurations one controller registered, to remove before it stops."""

    def __init__(self, cp: AdminClient) -> None:
        self._cp = cp
        self._registered: list[tuple[str, str]] = []

    def add(self, configurations: list[tuple[str, dict[str, Any]]]) -> None:
        """Register the configurations, replacing any of the same name a crash left behind."""
        for plural, body in configurations:
            name = body["metadata"]["name"]
            self._cp.request("DELETE", f"{ADMISSION}/{plural}/{name}", expect=(200, 404))
            self._cp.request("POST", f"{ADMISSION}/{plural}", body)
            self._registered.append((plural, name))

    def remove(self) -> None:
        """Remove what ``add`` registered; safe to call twice and with the API server gone."""
        for plural, name in self._registered:
            with contextlib.suppress(ApiError, OSError):
                self._cp.request("DELETE", f"{ADMISSION}/{plural}/{name}", expect=(200, 404))
        self._registered = []
