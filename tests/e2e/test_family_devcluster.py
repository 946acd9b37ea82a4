"""``scripts/devcluster up`` with every family: one MPIJob CRD, one controller of each kind.

Only one ``mpijobs.kubeflow.org`` can exist, so beside mpi-operator the MPIJob CRD serves
v2beta1 alone and the Training Operator runs without its MPIJob controller (two controllers of
one CRD would both act on each MPIJob). Both families share one kube-controller-manager, and
``down`` stops everything.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from devcluster import binaries
from tests.e2e.clusters import require_binaries, wait_gone

pytestmark = [pytest.mark.e2e]

SCRIPT = binaries.REPO_ROOT / "scripts" / "devcluster"
NEEDS = ("etcd", "kube-apiserver", "kubectl", "training-operator", "kube-controller-manager")


def _kubectl(kubeconfig: Path, *args: str) -> Any:
    out = subprocess.run(
        [str(binaries.find("kubectl")), f"--kubeconfig={kubeconfig}", *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def test_up_with_every_family_serves_mpijob_v2beta1_alone_beside_an_operator_without_it(
    tmp_path: Path,
) -> None:
    require_binaries(*NEEDS, "mpi-operator", "jobset", "trainer")
    env = dict(
        os.environ,
        XDG_CACHE_HOME=str(tmp_path),  # a state directory of its own, beside any real devcluster
        SWEEPER_BIN_CACHE=str(binaries.cache_dir()),
    )
    flags = ["--operator", "--mpi-operator", "--trainer"]
    up = subprocess.run(
        [str(SCRIPT), "up", *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    try:
        assert up.returncode == 0, up.stderr
        # One state directory per checkout (<folder>-<hash of its path>) under the cache.
        (state_file,) = (tmp_path / "kubeflow-deadline-sweeper" / "devcluster").glob("*/state.json")
        state = json.loads(state_file.read_text())
        kubeconfig = Path(up.stdout.splitlines()[0])

        crd = _kubectl(kubeconfig, "get", "crd", "mpijobs.kubeflow.org")
        assert [v["name"] for v in crd["spec"]["versions"] if v["served"]] == ["v2beta1"]
        names = sorted(p["name"] for p in state["processes"])
        assert names == sorted(
            [
                "etcd",
                "kube-apiserver",
                "training-operator",
                "kube-controller-manager",
                "mpi-operator",
                "jobset",
                "trainer",
            ]
        )
        [operator] = [p for p in state["processes"] if p["name"] == "training-operator"]
        started = re.findall(
            r'Starting workers.*"controller": "([a-z]+)-controller"',
            Path(operator["log"]).read_text(),
        )
        assert sorted(started) == ["jaxjob", "paddlejob", "pytorchjob", "tfjob", "xgboostjob"]
        runtimes = _kubectl(kubeconfig, "get", "clustertrainingruntimes")["items"]
        assert [r["metadata"]["name"] for r in runtimes] == ["torch-distributed"]
        hooks = _kubectl(kubeconfig, "get", "mutatingwebhookconfigurations")["items"]
        assert sorted(h["metadata"]["name"] for h in hooks) == [
            "devcluster-jobset-mutating",
            "devcluster-trainer-mutating",
        ]
    finally:
        down = subprocess.run(
            [str(SCRIPT), "down"], capture_output=True, text=True, env=env, timeout=120, check=False
        )

    assert down.returncode == 0, down.stderr
    assert wait_gone([state["pid"], *(p["pid"] for p in state["processes"])]) == []
    assert not Path(state["workdir"]).exists()
