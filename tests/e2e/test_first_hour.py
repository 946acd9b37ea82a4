"""What a newcomer meets in the first hour, against the real kube-apiserver and kubectl.

A cluster without the Training Operator's CRDs is the wrong context a newcomer most often
points the sweeper at; the Quick start's ``kubectl wait`` is the first command they run after
``helm install``, and it must end as soon as the run has ended, whether it succeeded or failed.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from devcluster import ControlPlane, binaries
from tests.e2e import clusters

pytestmark = pytest.mark.e2e

README = Path(__file__).resolve().parents[2] / "README.md"
MANUAL = "kubeflow-deadline-sweeper-manual"


def test_a_cluster_without_the_operators_crds_exits_three_naming_server_and_context() -> None:
    with clusters.start_control_plane(crds=False) as cp:
        kubeconfig = cp.user_kubeconfig(clusters.SWEEPER_USER, ["system:masters"])
        result = clusters.run_sweeper(kubeconfig, "--dry-run")
    assert result.returncode == 3, result.stderr
    message = (
        "the cluster serves no Kubeflow job kind: is the Training Operator installed, and is "
        f"this the right context? (server {cp.server}, context "
    )
    assert result.stderr.splitlines()[-1].startswith(f"sweeper: error: {message}")
    assert "No Kubeflow jobs found." not in result.stdout
    assert message in result.stdout.splitlines()[-1]


def quick_start_wait() -> str:
    """The Quick start's ``kubectl wait`` command, its continuation lines joined."""
    text = README.read_text(encoding="utf-8")
    joined = re.sub(r"\\\n\s*", "", text[text.index("**3. Read a run's report now**") :])
    (line,) = [ln for ln in joined.splitlines() if ln.startswith("kubectl ") and " wait " in ln]
    return line


def a_job(cp: ControlPlane, namespace: str, conditions: list[dict[str, str]]) -> None:
    """A Job named as the Quick start's run, its status as the Job controller would set it."""
    container = {"name": "sweeper", "image": "registry.invalid/sweeper:0"}
    spec = {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": MANUAL}, "spec": spec}
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    cp.request("POST", jobs, body)
    if conditions:
        now = "2026-12-01T10:20:05Z"
        status: dict[str, object] = {
            "startTime": "2026-12-01T10:20:00Z",
            "conditions": [
                {**c, "lastProbeTime": now, "lastTransitionTime": now} for c in conditions
            ],
        }
        if any(c["type"] == "Complete" for c in conditions):
            status |= {"completionTime": now, "succeeded": 1}
        else:
            status |= {"failed": 1}
        cp.request(
            "PATCH",
            f"{jobs}/{MANUAL}/status",
            {"status": status},
            content_type="application/merge-patch+json",
        )


def run_wait(cp: ControlPlane, namespace: str, timeout: str) -> subprocess.CompletedProcess[str]:
    command = quick_start_wait().replace("-n deadline-sweeper", f"-n {namespace}")
    command = command.replace("--timeout=120s", f"--timeout={timeout}")
    kubectl = binaries.find("kubectl")
    env = {
        **os.environ,
        "KUBECONFIG": str(cp.kubeconfig),
        "PATH": f"{kubectl.parent}:/usr/bin:/bin",
    }
    return subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, env=env, timeout=300, check=False
    )


FAILED = [
    {"type": "FailureTarget", "status": "True", "reason": "PodFailurePolicy", "message": "exit 3"},
    {"type": "Failed", "status": "True", "reason": "PodFailurePolicy", "message": "exit 3"},
]
COMPLETE = [
    {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached"},
    {"type": "Complete", "status": "True", "reason": "CompletionsReached"},
]


@pytest.mark.parametrize(
    ("conditions", "printed"),
    [
        pytest.param(FAILED, "FailureTarget Failed", id="failed"),
        pytest.param(COMPLETE, "SuccessCriteriaMet Complete", id="complete"),
    ],
)
def test_the_quick_starts_wait_ends_on_failure_as_on_success(
    control_plane: ControlPlane, namespace: str, conditions: list[dict[str, str]], printed: str
) -> None:
    a_job(control_plane, namespace, conditions)
    # 10 minutes: a wait that ended only on success would run out and fail the test.
    result = run_wait(control_plane, namespace, "600s")
    assert (result.returncode, result.stdout.strip()) == (0, printed), result.stderr


def test_the_quick_starts_wait_times_out_on_a_run_that_never_started(
    control_plane: ControlPlane, namespace: str
) -> None:
    a_job(control_plane, namespace, [])
    result = run_wait(control_plane, namespace, "2s")
    assert result.returncode != 0
    assert "timed out" in result.stderr
