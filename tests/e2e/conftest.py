"""Fixtures for end-to-end tests against a real kube-apiserver (``devcluster``).

``control_plane`` starts one etcd + kube-apiserver with the six Training Operator CRDs for
the whole session. Without the binaries the tests skip locally, and fail in CI (``CI=true``),
where a skipped e2e suite would hide everything it exists to prove.

Other versions than the pinned ones (Training Operator v1.9.4, Kubernetes 1.36.3) come from
``SWEEPER_TEST_OPERATOR_VERSION`` and ``SWEEPER_TEST_KUBERNETES_VERSION``, read here and only
here (``SWEEPER_TEST_``: ``SWEEPER_OPERATOR_VERSION`` is the sweeper's own
``--operator-version``), e.g. ``SWEEPER_TEST_OPERATOR_VERSION=v1.7.0
SWEEPER_TEST_KUBERNETES_VERSION=v1.32.13 pytest -m e2e ...`` (build them first:
``scripts/build-binaries --operator-version v1.7.0 --kubernetes-version v1.32.13``). Tests that
start a control plane in a subprocess of their own use the pinned ones.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devcluster import ControlPlane, binaries
from tests import summary
from tests.e2e import clusters
from tests.e2e.clusters import RunSweeper
from tests.e2e.conftest_families import (  # noqa: F401
    chart_sweep,
    family_control_plane,
    family_namespace,
    family_sweep,
    mpi_cluster,
    trainer_cluster,
)
from tests.e2e.conftest_operator import figures, kubeflow_jobs, operator  # noqa: F401

SweepAs = Callable[..., clusters.Sweep]


def pytest_configure(config: pytest.Config) -> None:
    """Select the versions the environment asks for, before any binary is looked up.

    Raises:
        pytest.UsageError: A version is malformed or out of range (one line says why).
    """
    del config
    try:
        binaries.select(
            operator=os.environ.get("SWEEPER_TEST_OPERATOR_VERSION") or None,
            kubernetes=os.environ.get("SWEEPER_TEST_KUBERNETES_VERSION") or None,
        )
    except binaries.VersionError as e:
        raise pytest.UsageError(str(e)) from None


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """One control plane (etcd, kube-apiserver, CRDs established) for the whole session."""
    cp = clusters.start_control_plane()
    summary.record(
        request.config,
        "devcluster",
        f"control plane {cp.server} (kube-apiserver {binaries.version('kube-apiserver')}, "
        f"Training Operator {binaries.version('training-operator')} CRDs) started in "
        f"{cp.describe_timings()}",
    )
    with cp:
        yield cp


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace named after the test; emptied afterwards.

    Namespaces never finish deleting without kube-controller-manager, so each test gets a new
    name, and teardown deletes the jobs, pods and services in it: tests that sweep all
    namespaces then see only their own objects.
    """
    prefix = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = control_plane.create_namespace(prefix or "e2e")
    yield name
    clusters.empty_namespace(control_plane, name)
    control_plane.request("DELETE", f"/api/v1/namespaces/{name}", expect=(200, 202, 404))


@pytest.fixture
def sweeper_kubeconfig(control_plane: ControlPlane) -> Path:
    """Kubeconfig of user ``sweeper`` (group ``system:masters``)."""
    return control_plane.user_kubeconfig(clusters.SWEEPER_USER, ["system:masters"])


@pytest.fixture
def run_sweeper(sweeper_kubeconfig: Path) -> RunSweeper:
    """Run the installed ``sweeper`` CLI as a subprocess; returns the ``CompletedProcess``.

    ``run_sweeper("--action", "touch", kubeconfig=path, env={...}, timeout=60)``; the
    kubeconfig defaults to user ``sweeper`` in ``system:masters`` (see ``clusters.run_sweeper``).
    """

    def run(
        *args: str,
        kubeconfig: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        return clusters.run_sweeper(
            kubeconfig or sweeper_kubeconfig, *args, env=env, timeout=timeout
        )

    return run


@pytest.fixture
def sweep(control_plane: ControlPlane, sweeper_kubeconfig: Path) -> SweepAs:
    """Run the CLI and return a ``clusters.Sweep``: its result and the requests it made.

    ``sweep("-n", ns, "--action", "fail")`` runs as user ``sweeper`` (system:masters);
    ``sweep(..., kubeconfig=path, user="system:serviceaccount:ns:sa")`` as someone else.
    """

    def run(
        *args: str,
        kubeconfig: Path | None = None,
        user: str = clusters.SWEEPER_USER,
        env: dict[str, str] | None = None,
        timeout: float = 120,
    ) -> clusters.Sweep:
        return clusters.sweep(
            control_plane, kubeconfig or sweeper_kubeconfig, user, *args, env=env, timeout=timeout
        )

    return run
