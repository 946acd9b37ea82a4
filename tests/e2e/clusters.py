"""What e2e tests share beyond fixtures: control planes, empty namespaces, runs of the CLI.

Fixtures live in ``conftest.py``; this module holds the plain functions and constants that
fixtures and tests both use (tests must not import ``conftest`` itself).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from devcluster import BinaryMissing, ControlPlane, binaries
from tests.e2e import workloads

if TYPE_CHECKING:
    from tests.e2e.faultproxy import FaultProxy

SKIP_REASON = "run scripts/build-binaries (needs Go 1.26) to enable e2e tests"
# The sweeper's own user: a client certificate in system:masters, so RBAC never gets in the
# way unless a test wants it to, and the audit log attributes exactly the sweeper's requests.
SWEEPER_USER = "sweeper"
KUBEFLOW_PLURALS = ("tfjobs", "pytorchjobs", "xgboostjobs", "mpijobs", "paddlejobs", "jaxjobs")

# The type of the ``run_sweeper`` fixture.
RunSweeper = Callable[..., "subprocess.CompletedProcess[str]"]


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


def admin_account_token(cp: ControlPlane, namespace: str, name: str) -> str:
    """A token of ServiceAccount ``name``, bound to cluster-admin (made if missing).

    Its audit user name is ``system:serviceaccount:<namespace>:<name>``.
    """
    token = cp.service_account_token(namespace, name)
    cp.request(
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": f"{namespace}-{name}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    )
    return token


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


def gone(pid: int) -> bool:
    """Whether a process no longer runs (a zombie left for an init that does not reap counts)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"


def wait_gone(pids: list[int], timeout: float = 30) -> list[int]:
    """Wait up to ``timeout`` seconds for the processes to end; return those still running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(gone(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if not gone(p)]


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


@dataclass(frozen=True)
class Sweep:
    """One run of the CLI and the requests the API server saw from it.

    Attributes:
        result: The finished process (``returncode``, ``stdout``, ``stderr``).
        requests: Audit events of the run's user during the run, one per request, in order.
    """

    result: subprocess.CompletedProcess[str]
    requests: list[dict[str, Any]]

    @property
    def output(self) -> str:
        """stdout and stderr together, for messages whose stream is not the point."""
        return self.result.stdout + self.result.stderr

    def explain(self) -> str:
        """Everything needed to understand a failed expectation about this run."""
        lines = [f"exit code {self.result.returncode}", "requests:"]
        lines += [
            f"  {e['verb']} {e['requestURI']} -> {e.get('responseStatus', {}).get('code')}"
            for e in self.requests
        ]
        lines += ["stdout:", self.result.stdout, "stderr:", self.result.stderr[-4000:]]
        return "\n".join(lines)

    def jobs_by_name(self) -> dict[str, dict[str, Any]]:
        """The ``jobs`` entries of a single-pass ``-o json`` report, by job name."""
        return {j["name"]: j for j in workloads.report_jobs(self.result.stdout)}


def sweep(
    cp: ControlPlane,
    kubeconfig: Path,
    user: str,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> Sweep:
    """Run the CLI as ``user`` (whose credentials ``kubeconfig`` holds) and collect its requests.

    The audit log is complete once the process has its answers (see ``devcluster.audit``), so
    reading it right after the process exits sees every request the run made.
    """
    since = cp.audit_offset()
    result = run_sweeper(kubeconfig, *args, env=env, timeout=timeout)
    return Sweep(result, cp.audit_events(user=user, since=since))


def sweep_through(cp: ControlPlane, proxy: FaultProxy, *args: str) -> Sweep:
    """Run the CLI through a fault proxy, as the proxy's own user, and collect its requests.

    The audit log then shows what reached the apiserver; ``proxy.seen`` what the CLI sent.
    """
    # Imported here: the proxy is only needed by the fault tests.
    from tests.e2e.faultproxy import PROXY_USER  # noqa: PLC0415

    return sweep(cp, proxy.kubeconfig, PROXY_USER, *args, timeout=120)


def explain_through(run: Sweep, proxy: FaultProxy) -> str:
    """``Sweep.explain`` and what the fault proxy saw, for a failed expectation of a fault test."""
    return f"{run.explain()}\nproxy saw:\n{proxy.describe()}"
