"""Beside the official Kubeflow Training SDK: installable together, and the SDK reads our Failed.

Users create these jobs with ``kubeflow-training`` 1.9.4, which requires ``kubernetes<36``. A
fresh virtual environment (outside the repository; uv's own cache keeps the downloads) gets the
SDK and the sweeper resolved together, so the declared ranges must overlap and the sweeper must
work with the older client the SDK forces. The SDK creates a PyTorchJob on the real apiserver,
the test writes the status the operator would have written an hour ago, the installed
``sweeper`` fails it, and the SDK reads it back: ``TrainingClient.is_job_failed`` and
``get_job_conditions``.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.binaries import REPO_ROOT
from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e

SDK = "kubeflow-training==1.9.4"

CREATE = """
import sys
from kubernetes import client as k
from kubeflow.training import TrainingClient, models
kubeconfig, namespace, name = sys.argv[1:]
replica = models.KubeflowOrgV1ReplicaSpec(
    replicas=1, restart_policy="OnFailure",
    template=k.V1PodTemplateSpec(spec=k.V1PodSpec(
        containers=[k.V1Container(name="pytorch", image="busybox:1.36")])))
job = models.KubeflowOrgV1PyTorchJob(
    api_version="kubeflow.org/v1", kind="PyTorchJob",
    metadata=k.V1ObjectMeta(name=name, namespace=namespace),
    spec=models.KubeflowOrgV1PyTorchJobSpec(
        run_policy=models.KubeflowOrgV1RunPolicy(active_deadline_seconds=60),
        pytorch_replica_specs={"Master": replica}))
TrainingClient(config_file=kubeconfig, namespace=namespace).create_job(job=job)
"""

READ = """
import json, sys
from kubeflow.training import TrainingClient
kubeconfig, namespace, name = sys.argv[1:]
sdk = TrainingClient(config_file=kubeconfig, namespace=namespace, job_kind="PyTorchJob")
conditions = sdk.get_job_conditions(name=name)
print(json.dumps({
    "failed": sdk.is_job_failed(name=name),
    "conditions": [[c.type, c.status, c.reason, c.message] for c in conditions],
}))
"""


@pytest.fixture(scope="module")
def sdk_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with the SDK and this checkout's sweeper, resolved together."""
    uv = Path(sys.executable).parent / "uv"
    if not uv.exists():
        pytest.fail("uv is missing: .venv/bin/pip install -e '.[dev]'", pytrace=False)
    venv = tmp_path_factory.mktemp("kubeflow-training") / "venv"
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, venv], check=True)
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", venv / "bin" / "python", SDK, REPO_ROOT],
        check=True,
    )
    return venv


def run_in(venv: Path, script: str, *args: str) -> str:
    done = subprocess.run(
        [venv / "bin" / "python", "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_sdk_reads_back_a_job_the_sweeper_failed(
    control_plane: ControlPlane, namespace: str, sweeper_kubeconfig: Path, sdk_venv: Path
) -> None:
    versions = run_in(
        sdk_venv,
        "from importlib.metadata import version as v; "
        "print(v('kubernetes'), v('kubeflow-training'))",
    ).split()
    print(f"beside {SDK}: kubernetes {versions[0]}")
    assert int(versions[0].split(".")[0]) < 36  # the older client the SDK forces
    kubeconfig = str(sweeper_kubeconfig)
    run_in(sdk_venv, CREATE, kubeconfig, namespace, "sdk-job")
    # What the operator writes when it starts a job, an hour ago: 59 minutes past its deadline.
    started = w.stamp(w.now() - dt.timedelta(seconds=3600))
    w.set_status(
        control_plane,
        namespace,
        "PyTorchJob",
        "sdk-job",
        w.operator_status("PyTorchJob", started, replicas={"Master": 1}),
    )

    done = subprocess.run(
        [
            sdk_venv / "bin" / "sweeper",
            "--kubeconfig",
            kubeconfig,
            "-n",
            namespace,
            "--action",
            "fail",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    [record] = w.report_jobs(done.stdout)
    assert (record["name"], record["decision"], record["result"]) == ("sdk-job", "fail", "done")
    seen = json.loads(run_in(sdk_venv, READ, kubeconfig, namespace, "sdk-job"))
    assert seen["failed"] is True
    by_type = {c[0]: c for c in seen["conditions"]}
    assert by_type["Failed"][1:3] == ["True", "PyTorchJobFailed"]
    assert "active longer than specified deadline" in by_type["Failed"][3]
    assert by_type["Running"][1] == "False"
