"""A run closes its connections when it ends, even while its caller still holds the client.

The run is made in-process (``sweeper.oneshot.run.run`` with the real
``sweeper.k8s.connection.client.connect``) against
the real apiserver, and the test keeps a reference to the cluster client the run built, as a
long-lived caller would. Before, the client's keep-alive sockets stayed open until the client
was garbage-collected: a ``ResourceWarning: unclosed <ssl.SSLSocket ...>`` at some later,
unrelated moment, and one idle connection per run for a process that lives for weeks.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from sweeper.config import Config, DryRun
from sweeper.core.model import ActionMode, Enforcement
from sweeper.k8s import kube
from sweeper.k8s.connection import client
from sweeper.oneshot.run import run
from sweeper.stop import Stop
from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e


def open_sockets() -> set[str]:
    """This process's open sockets (``socket:[inode]``), from ``/proc/self/fd``."""
    found = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        if target.startswith("socket:"):
            found.add(target)
    return found


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(
            {"enforcement": Enforcement(action=ActionMode.FAIL)}, id="one-pass-with-writes"
        ),
        pytest.param({"every": 0.2, "for_seconds": 0.5}, id="repeated-passes"),
        pytest.param({"dry_run": DryRun.CLIENT}, id="dry-run"),
    ],
)
def test_a_run_leaves_no_socket_open(
    control_plane: ControlPlane, namespace: str, sweeper_kubeconfig: Path, config: dict[str, Any]
) -> None:
    late = w.create_job(control_plane, namespace, "late")
    w.create_replicas(control_plane, late, {"Master": ["Running"]})
    kept: list[kube.KubeCluster] = []

    def connect(cfg: Config, *, stop: Stop) -> kube.KubeCluster:
        cluster = client.connect(cfg, stop=stop)
        kept.append(cluster)  # held, as a long-lived caller holds its client
        return cluster

    before = open_sockets()
    code = run(
        Config(kubeconfig=str(sweeper_kubeconfig), namespaces=(namespace,), **config),
        connect,
        io.StringIO(),
    )

    assert code == 0
    assert kept, "the run never connected"
    assert open_sockets() - before == set()
