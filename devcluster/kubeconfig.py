"""Write self-contained kubeconfig files (certificates embedded, one cluster, one context).

Embedded data rather than file paths, so a kubeconfig can be copied elsewhere (``scripts/
devcluster up`` copies the admin one to a stable path) and still work while the cluster runs.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

from devcluster.pki import KeyPair

CONTEXT = "devcluster"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def render(
    *,
    server: str,
    ca_pem: bytes,
    user: str,
    client: KeyPair | None = None,
    token: str | None = None,
) -> str:
    """The YAML text of a kubeconfig with exactly one of a client certificate or a bearer token.

    Args:
        server: API server URL, e.g. ``https://127.0.0.1:6443``.
        ca_pem: The CA that signed the serving certificate.
        user: Name of the kubeconfig user entry (informational; the server decides who it is).
        client: Client certificate and key.
        token: Bearer token.

    Raises:
        ValueError: Not exactly one credential was given.
    """
    if (client is None) == (token is None):
        raise ValueError("give exactly one of client or token")
    credentials: dict[str, str]
    if client is not None:
        credentials = {
            "client-certificate-data": _b64(client.cert_pem),
            "client-key-data": _b64(client.key_pem),
        }
    else:
        credentials = {"token": str(token)}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": user}}],
        "current-context": CONTEXT,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write(path: Path, text: str) -> Path:
    """Write a kubeconfig readable by its owner only (it holds a private key or token)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path
