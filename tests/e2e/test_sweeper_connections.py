"""A run closes its connections when it ends: nothing is left for the garbage collector.

The CLI runs in-process (click's ``CliRunner``, as ``test_clock.py`` does) against the real
apiserver, so the test sees the sockets the client opened. A keep-alive socket left open when
a run ends is closed later by the garbage collector with a ``ResourceWarning: unclosed
<ssl.SSLSocket ...>``, in whatever code runs then; a long-lived process would collect one per
run.
"""

from __future__ import annotations

import gc
import os
import warnings
from pathlib import Path

import pytest

from devcluster import ControlPlane
from sweeper.cli import command
from tests.cli_runner import runner
from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("--action", "fail"), id="one-pass-with-writes"),
        pytest.param(("--every", "0.2", "--for", "0.5"), id="repeated-passes"),
        pytest.param(("--dry-run",), id="dry-run"),
    ],
)
def test_a_run_leaves_no_socket_open(
    control_plane: ControlPlane, namespace: str, sweeper_kubeconfig: Path, args: tuple[str, ...]
) -> None:
    late = w.create_job(control_plane, namespace, "late")
    w.create_replicas(control_plane, late, {"Master": ["Running"]})
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SWEEPER_")}
    env["KUBECONFIG"] = None
    gc.collect()  # whatever earlier tests left is not this run's

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        result = runner().invoke(
            command, ["--kubeconfig", str(sweeper_kubeconfig), "-n", namespace, *args],
            env=env, catch_exceptions=False,
        )
        gc.collect()

    assert result.exit_code == 0, result.output
    unclosed = [str(c.message) for c in caught if issubclass(c.category, ResourceWarning)]
    assert unclosed == []
