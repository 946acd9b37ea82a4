"""With the operator down, the sweeper fails an overdue job itself, and the operator agrees.

``--action fail`` writes the Failed status the way the operator would (docs/operator.md,
"What the operator does on the deadline"), then deletes the pods. When the operator comes back
it must see a finished job: keep its status as it is, and recreate nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from devcluster.kubelet import staggered
from devcluster.operator import Operator
from tests.e2e.clusters import RunSweeper
from tests.e2e.conftest_operator import (
    SWEEPER_DEADLINE_MESSAGE,
    Figures,
    RunningJob,
    entry_for,
    poll,
    sleep_until,
    sweeper_passes,
)

pytestmark = [pytest.mark.e2e, pytest.mark.operator]


def test_a_job_failed_by_the_sweeper_while_the_operator_is_down_stays_failed_after_restart(
    operator: Operator,
    kubeflow_jobs: Callable[..., RunningJob],
    run_sweeper: RunSweeper,
    figures: Figures,
) -> None:
    job = kubeflow_jobs(
        "PyTorchJob",
        name="overdue-while-down",  # unique: the restarted operator's log is searched for it
        ads=15,
        timeline=staggered(master_running=1, workers_running=[3, 5, 7]),
    )
    deadline = job.started().deadline
    assert deadline is not None
    job.pods_settled(4)
    job.wait(lambda v: v.is_true("Running"), "the job to be Running")
    operator.stop()
    sleep_until(deadline + dt.timedelta(seconds=2))
    assert not job.view().failed

    completed = run_sweeper("--action", "fail", "-n", job.namespace, "-o", "json")

    assert completed.returncode == 0, completed.stderr[-2000:]
    [report] = sweeper_passes(completed.stdout)
    entry = entry_for(report, job)
    assert (entry["decision"], entry["reason"], entry["result"]) == ("fail", "overdue", "done")
    failed = job.view()
    failed_condition = failed.condition("Failed") or {}
    assert (
        failed_condition.get("status"),
        failed_condition.get("reason"),
        failed_condition.get("message"),
    ) == (
        "True",
        "PyTorchJobFailed",
        SWEEPER_DEADLINE_MESSAGE.format(name=job.name),
    )
    assert (failed.condition("Running") or {}).get("status") == "False"
    assert failed.obj["status"].get("completionTime"), (
        "completionTime is set, as the operator would"
    )
    assert sorted(entry["deleted"]["pods"]) == [
        f"{job.name}-master-0",
        f"{job.name}-worker-0",
        f"{job.name}-worker-1",
        f"{job.name}-worker-2",
    ]
    poll(lambda: not job.pods(), what="the pods to be gone")
    assert job.services() == []

    operator.restart()
    operator.wait_for_log(rf'msg="Reconciling for job {job.name}"')
    poll(lambda: operator.idle("pytorchjob"), what="that reconcile to end")

    after = job.view()
    assert after.conditions == failed.conditions, "the operator wrote no condition of its own"
    assert after.obj["metadata"]["resourceVersion"] == failed.obj["metadata"]["resourceVersion"], (
        "the restarted operator did not write the job at all"
    )
    assert after.obj["status"].get("completionTime") == failed.obj["status"].get("completionTime")
    assert job.pods() == [], "the operator recreated no pod"
    assert job.services() == [], "the operator recreated no service"
    figures.add(
        "4 ADS 15 s, operator down, --action fail at deadline+2 s",
        f"deadline -> Failed {failed.late_by:.0f} s; after the restart the operator reconciled "
        "it, kept its conditions and recreated 0 pods",
    )
