"""What e2e tests share beyond fixtures: starting control planes, emptying namespaces, the CLI.

Fixtures live in ``conftest.py``; this module holds the plain functions and constants that
fixtures and tests both use (tests must not import ``conftest`` itself).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devcluster import BinaryMissing, ControlPlane, binaries

SKIP_REASON = "run scripts/build-binaries (needs Go 1.26) to enable e2e tests"
# The sweeper's own user: a client certificate in system:masters, so RBAC never gets in the
# way unless a test wants it to, and the audit log attributes exactly the sweeper's requests.
SWEEPER_USER = "sweeper"
KUBEFLOW_PLURALS = ("tfjobs", "pytorchjobs", "xgboostjobs", "mpijobs", "paddlejobs", "jaxjobs")


def binaries_missing(reason: BinaryMissing) -> None:
    """Skip the calling test (locally) or fail it (``CI=true``) because a binary is missing."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"e2e tests must run in CI: {reason}", pytrace=False)
    pytest.skip(SKIP_REASON)


def require_binaries(*names: str) -> None:
    """Skip or fail (see ``binaries_missing``) unless these binaries are built."""
    try:
        for name in names:
            binaries.find(name)
    except BinaryMissing as e:
        binaries_missing(e)


def start_control_plane(crds: bool = True) -> ControlPlane:
    """Start a control plane of the test's own; skip or fail when the binaries are missing."""
    try:
        return ControlPlane.start(crds=crds)
    except BinaryMissing as e:
        binaries_missing(e)
        raise  # unreachable: binaries_missing always raises


def empty_namespace(cp: ControlPlane, namespace: str) -> None:
    """Delete every Kubeflow job, pod and service in ``namespace`` (nothing garbage-collects)."""
    for plural in KUBEFLOW_PLURALS:
        # 404 when a test deleted that CRD.
        cp.request(
            "DELETE", f"/apis/kubeflow.org/v1/namespaces/{namespace}/{plural}", expect=(200, 404)
        )
    cp.request("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
    for service in cp.request("GET", f"/api/v1/namespaces/{namespace}/services")["items"]:
        name = service["metadata"]["name"]
        cp.request("DELETE", f"/api/v1/namespaces/{namespace}/services/{name}", expect=(200, 404))


def sweeper_executable() -> Path:
    """The installed CLI of the venv running the tests (``.venv/bin/sweeper``)."""
    return Path(sys.executable).parent / "sweeper"


def run_sweeper(
    kubeconfig: Path,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run the installed CLI with ``--kubeconfig`` and ``args``; never raises on its exit code.

    The environment is this one without ``KUBECONFIG`` and ``SWEEPER_*``, so nothing from the
    developer's shell leaks into a test; ``env`` adds to it.
    """
    clean = {
        k: v for k, v in os.environ.items() if k != "KUBECONFIG" and not k.startswith("SWEEPER_")
    }
    clean.update(env or {})
    argv = [str(sweeper_executable()), "--kubeconfig", str(kubeconfig), *args]
    return subprocess.run(
        argv, capture_output=True, text=True, env=clean, timeout=timeout, check=False
    )
