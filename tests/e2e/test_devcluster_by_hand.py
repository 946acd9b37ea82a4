"""``scripts/devcluster pods-running``: the stuck job, by hand, on the real operator.

The devcluster has no node, so a newcomer's job never starts; ``pods-running`` reports its pods
Running as a kubelet would, and the real Training Operator v1.9.4 then marks the job Running
(with its ``startTime``): from there the deadline counts, and nothing wakes the operator again.
"""

from __future__ import annotations

import pytest

from devcluster import ControlPlane, fields, jobs, running
from devcluster.operator import Operator
from tests.e2e.conftest_operator import poll

pytestmark = [pytest.mark.e2e, pytest.mark.operator]


def test_pods_running_makes_the_operator_start_the_job(
    control_plane: ControlPlane,
    namespace: str,
    operator: Operator,
    capsys: pytest.CaptureFixture[str],
) -> None:
    del operator  # running beside the control plane: it creates the pods and starts the job
    api = control_plane.api()
    body = jobs.manifest("PyTorchJob", "train", active_deadline_seconds=3600, workers=2)
    jobs.create(api, namespace, body)

    code = running.main(control_plane.kubeconfig, f"{namespace}/train", timeout=120)

    assert code == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        f"pod {namespace}/train-master-0 Running",
        f"pod {namespace}/train-worker-0 Running",
        f"pod {namespace}/train-worker-1 Running",
    ]
    assert {fields.status(p).phase for p in jobs.pods(api, namespace, "train")} == {"Running"}

    def started() -> jobs.JobView | None:
        view = jobs.get(api, "PyTorchJob", namespace, "train")
        return view if view.phase == "Running" and view.start_time else None

    assert poll(started, what="the operator to mark the job Running").start_time is not None


def test_a_job_that_does_not_exist_exits_one_naming_it(
    control_plane: ControlPlane, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = running.main(control_plane.kubeconfig, f"{namespace}/absent", timeout=1)

    assert code == 1
    assert capsys.readouterr().err == f'devcluster: no Kubeflow job "{namespace}/absent"\n'
