"""The sweeper closes the gap, with the real Training Operator v1.9.4 doing the failing.

Every job here is past its deadline with stable pods: the case the operator alone misses
(``test_operator_alone.py``). A touch (an annotation patch on the job) is an update event, so
the operator reconciles the job, finds it past its deadline and fails it with its own reason
and message. The sweeper only has to touch at the right time, in one pass for every kind, and
clean up the pods that v1.9.4 keeps by default.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from devcluster import jobs
from devcluster.kubelet import Transition, staggered
from devcluster.operator import Operator
from tests.e2e.clusters import RunSweeper
from tests.e2e.conftest_operator import (
    OPERATOR_DEADLINE_MESSAGE,
    Figures,
    RunningJob,
    entry_for,
    poll,
    seconds,
    sleep_until,
    sweeper_passes,
)

pytestmark = [pytest.mark.e2e, pytest.mark.operator]


# The experiment's pods, minus the master's completion: nothing would ever wake the operator.
STABLE_FROM_7S = staggered(master_running=1, workers_running=[3, 5, 7])
TOUCH_MARKER = "kubeflow-deadline-sweeper.github.io/touched-at"
# The seed: a PyTorchJob whose pods are all there and stable by 4 s, one of them finished (a
# worker that Succeeded: the master alone decides a PyTorchJob's success) and one never
# scheduled (Pending). SEED_PHASES: its pods from then on, until something deletes them.
SEED = [
    Transition(1, "Running", "Master"),
    Transition(2, "Running", "Worker", 0),
    Transition(4, "Succeeded", "Worker", 0),
    Transition(3, "Running", "Worker", 1),
]
SEED_FINISHED = "train-worker-0"
SEED_PHASES = {
    "train-master-0": "Running",
    SEED_FINISHED: "Succeeded",
    "train-worker-1": "Running",
    "train-worker-2": "Pending",
}
SEED_ACTIVE = sorted(pod for pod, phase in SEED_PHASES.items() if phase != "Succeeded")


def assert_failed_by_operator(job: jobs.JobView) -> None:
    """The Failed condition is the operator's own: ``<Kind>Failed`` and its exact message."""
    condition = job.condition("Failed") or {}
    assert (condition.get("status"), condition.get("reason"), condition.get("message")) == (
        "True",
        f"{job.kind}Failed",
        OPERATOR_DEADLINE_MESSAGE.format(name=job.name),
    ), f"expected the operator's deadline failure on {job.kind} {job.name}: {job.conditions}"


def phases(job: RunningJob) -> dict[str, str]:
    """Each pod of the job not being deleted, and its phase."""
    return {
        p.metadata.name: p.status.phase for p in job.pods() if p.metadata.deletion_timestamp is None
    }


def seed_settled(job: RunningJob) -> None:
    """Wait until the seed's pods are in their final phases (none changes after that)."""
    poll(
        lambda: phases(job) == SEED_PHASES, what=f"the pods of {job.name} to settle: {SEED_PHASES}"
    )


def report_row(stdout: str, job: RunningJob) -> str:
    """The one row of the text report's table about ``job`` (its namespace is its own)."""
    rows = [line.rstrip() for line in stdout.splitlines() if f" {job.namespace} " in line]
    assert len(rows) == 1, f"expected one row about {job.namespace}/{job.name}:\n{stdout}"
    return rows[0]


def sweep(run_sweeper: RunSweeper, *args: str) -> list[dict[str, Any]]:
    """Run the sweeper with ``-o json``; it must exit 0. Returns its passes."""
    completed = run_sweeper(*args, "-o", "json")
    assert completed.returncode == 0, (
        f"sweeper {' '.join(args)} exited {completed.returncode}: {completed.stderr[-2000:]}"
    )
    return sweeper_passes(completed.stdout)


def test_with_the_defaults_the_seed_ends_failed_by_the_operator_with_its_pods_reclaimed(
    operator: Operator,
    kubeflow_jobs: Callable[..., RunningJob],
    run_sweeper: RunSweeper,
    figures: Figures,
) -> None:
    # No --action, no --terminate-pods, no -o: the CLI as a new user runs it.
    job = kubeflow_jobs("PyTorchJob", ads=12, timeline=SEED)
    deadline = job.started().deadline
    assert deadline is not None
    seed_settled(job)
    sleep_until(deadline + dt.timedelta(seconds=3))
    assert not job.view().failed, "premise: the operator alone has not failed it"

    touch = run_sweeper("-n", job.namespace)

    assert touch.returncode == 0, touch.stderr[-2000:]
    assert report_row(touch.stdout, job).endswith("touch (overdue)  done"), touch.stdout
    failed = job.wait_failed(timeout=30)
    assert_failed_by_operator(failed)
    touched_at = jobs.parse_time(failed.annotations.get(TOUCH_MARKER))
    assert touched_at is not None, "the touch marker stays on the job"
    # The leak: v1.9.4 sets Failed before it cleans up, so cleanPodPolicy applies, and unset
    # means None. Nothing else deletes pods here, so what the operator left stays.
    assert phases(job) == SEED_PHASES, "v1.9.4 keeps every pod; if not, the operator changed"
    kept = len(job.active_pods())

    reclaim = run_sweeper("-n", job.namespace)

    assert reclaim.returncode == 0, reclaim.stderr[-2000:]
    row = report_row(reclaim.stdout, job)
    assert "terminate-pods (failed-by-deadline)" in row, reclaim.stdout
    assert row.endswith(f"done: pods {', '.join(SEED_ACTIVE)}"), reclaim.stdout
    poll(lambda: not job.active_pods(), what="the Running and Pending pods to be gone")
    assert phases(job) == {SEED_FINISHED: "Succeeded"}, "the finished pod stays (its logs)"
    assert job.services() == [SEED_FINISHED], "only the finished pod's service stays"
    after = job.view()
    assert after.conditions == failed.conditions, "the sweeper leaves the operator's status alone"
    figures.add(
        "3 the seed, defaults, ADS 12 s, first run at deadline+3 s",
        f"deadline -> Failed {failed.late_by:.0f} s; touch -> Failed "
        f"{seconds(touched_at, failed.failed_at):.0f} s; Running and Pending pods kept by the "
        f"operator: {kept}, deleted by the second run; the Succeeded one kept",
    )


def test_terminate_pods_policy_keeps_what_v194_keeps_and_the_report_says_why(
    operator: Operator,
    kubeflow_jobs: Callable[..., RunningJob],
    run_sweeper: RunSweeper,
) -> None:
    job = kubeflow_jobs("PyTorchJob", ads=10, timeline=SEED)
    deadline = job.started().deadline
    assert deadline is not None
    seed_settled(job)
    sleep_until(deadline + dt.timedelta(seconds=3))
    [touch] = sweep(run_sweeper, "--terminate-pods", "policy", "-n", job.namespace)
    assert entry_for(touch, job)["result"] == "done", touch
    assert_failed_by_operator(job.wait_failed(timeout=30))

    kept = run_sweeper("--terminate-pods", "policy", "-o", "wide", "-n", job.namespace)

    assert kept.returncode == 0, kept.stderr[-2000:]
    assert report_row(kept.stdout, job).endswith(
        "skip (finished)  Failed; --terminate-pods policy keeps its pods"
    ), kept.stdout
    [again] = sweep(run_sweeper, "--terminate-pods", "policy", "-n", job.namespace)
    entry = entry_for(again, job)
    assert (entry["decision"], entry["reason"], entry["result"]) == ("skip", "finished", "skipped")
    assert "deleted" not in entry, entry
    assert phases(job) == SEED_PHASES, "cleanPodPolicy unset is None: every pod is kept"


def test_repeated_passes_enforce_a_deadline_within_one_interval(
    operator: Operator,
    kubeflow_jobs: Callable[..., RunningJob],
    run_sweeper: RunSweeper,
    figures: Figures,
) -> None:
    every = 2
    job = kubeflow_jobs(
        "PyTorchJob", ads=10, timeline=staggered(master_running=1, workers_running=[2, 3, 4])
    )
    deadline = job.started().deadline
    assert deadline is not None

    passes = sweep(
        run_sweeper, "--every", str(every), "--for", "30", "--action", "touch", "-n", job.namespace
    )

    entries = [entry_for(p, job) for p in passes]
    decisions = [(e["decision"], e["reason"]) for e in entries]
    first_touch = decisions.index(("touch", "overdue"))
    assert first_touch > 0, f"premise: the run began before the deadline: {decisions}"
    assert set(decisions[:first_touch]) == {("skip", "not-yet-due")}, decisions
    # No second touch: the operator fails the job, the next pass deletes the pods v1.9.4
    # keeps (--action touch is the default), and the passes after it find nothing to do.
    later = decisions[first_touch + 1 :]
    assert ("terminate-pods", "failed-by-deadline") in later, decisions
    reclaimed = later.index(("terminate-pods", "failed-by-deadline"))
    assert set(later[:reclaimed]) <= {("skip", "recently-touched")}, decisions
    assert set(later[reclaimed + 1 :]) <= {("skip", "finished")}, decisions
    assert entries[first_touch + 1 + reclaimed]["result"] == "done", entries
    assert not job.active_pods(), "no Running or Pending pod of the failed job is left"
    overdue_at_touch = entries[first_touch]["seconds_overdue"]
    # Whole-second timestamps on both sides (startTime, the server's Date) blur it by 1 s.
    assert 0 <= overdue_at_touch <= every + 1, (
        f"touched {overdue_at_touch}s after the deadline, more than one {every}s interval"
    )
    failed = job.view()
    assert_failed_by_operator(failed)
    assert failed.late_by is not None
    # One interval, plus the whole-second rounding of the two API timestamps compared.
    assert failed.late_by <= every + 1, f"Failed {failed.late_by}s after the deadline"
    figures.add(
        f"5 ADS 10 s, --every {every} --for 30",
        f"touched {overdue_at_touch:.0f} s after the deadline (pass {first_touch + 1} of "
        f"{len(passes)}); deadline -> Failed {failed.late_by:.0f} s; pods deleted by pass "
        f"{first_touch + 2 + reclaimed}",
    )


def test_one_pass_gets_every_kind_failed_by_the_operator(
    operator: Operator,
    kubeflow_jobs: Callable[..., RunningJob],
    run_sweeper: RunSweeper,
    figures: Figures,
) -> None:
    ads = 6
    every_pod_running_at_1s = [Transition(1, "Running")]
    created = [
        kubeflow_jobs(kind, ads=ads, timeline=every_pod_running_at_1s) for kind in jobs.KINDS
    ]
    started = {job.kind: job.started() for job in created}
    for job in created:
        job.wait(lambda v: v.is_true("Running"), f"{job.kind} to be Running")
    last_deadline = max(v.deadline for v in started.values() if v.deadline is not None)
    sleep_until(last_deadline + dt.timedelta(seconds=3))
    not_failed = {job.kind: not job.view().failed for job in created}
    assert all(not_failed.values()), (
        f"premise: with stable pods the operator misses every kind's deadline: {not_failed}"
    )

    namespaces = [arg for job in created for arg in ("-n", job.namespace)]
    [sweep_pass] = sweep(run_sweeper, "--action", "touch", *namespaces)

    results = {job.kind: entry_for(sweep_pass, job) for job in created}
    assert {kind: (e["decision"], e["result"]) for kind, e in results.items()} == dict.fromkeys(
        jobs.KINDS, ("touch", "done")
    )
    lateness = {}
    for job in created:
        failed = job.wait_failed(timeout=30)
        assert_failed_by_operator(failed)
        touched_at = jobs.parse_time(failed.annotations.get(TOUCH_MARKER))
        lateness[job.kind] = (failed.late_by, seconds(touched_at, failed.failed_at))
    figures.add(
        f"6 every kind, ADS {ads} s, one touch pass at the last deadline+3 s",
        "deadline -> Failed / touch -> Failed: "
        + ", ".join(f"{k} {late:.0f}/{react:.0f} s" for k, (late, react) in lateness.items()),
    )
