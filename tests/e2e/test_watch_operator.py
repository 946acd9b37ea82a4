"""``sweeper --watch`` with the real Training Operator v1.9.4: the touch path, on time.

The job's pods are stable (nothing wakes the operator at the deadline); the watcher touches
the job when its deadline passes and the operator, reconciling the touch, fails it with its
own reason and message. v1.9.4 keeps the pods of the job it failed (``cleanPodPolicy`` unset
means ``None``): the Failed event reaches the watcher, which deletes the Running and Pending
ones. No timing assertion: the benchmarks measure how soon.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest

from devcluster import jobs
from devcluster.kubelet import staggered
from devcluster.operator import Operator
from tests.e2e.conftest_operator import Figures, RunningJob, poll
from tests.e2e.test_operator_sweeper import (
    SEED,
    SEED_ACTIVE,
    SEED_FINISHED,
    TOUCH_MARKER,
    assert_failed_by_operator,
    phases,
    seed_settled,
)
from tests.e2e.watchers import Watcher, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.operator]

STABLE_FROM_7S = staggered(master_running=1, workers_running=[3, 5, 7])


def resyncs(watcher: Watcher) -> float:
    """The full passes ``--resync`` has run so far, whatever their result."""
    text = watcher.metrics()
    assert "# TYPE deadline_sweeper_resyncs_total counter" in text, "the resync counter is served"
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("deadline_sweeper_resyncs_total{")
    )


def test_with_the_defaults_the_watcher_gets_the_seed_failed_and_its_pods_reclaimed_at_once(
    operator: Operator,
    kubeflow_jobs: Callable[..., RunningJob],
    sweeper_kubeconfig: Path,
    tmp_path: Path,
    figures: Figures,
) -> None:
    # Every flag at its default but the scope and where the Lease lives (the Deployment's
    # own namespace in the chart; here the job's, so no other module's watcher waits on it).
    job = kubeflow_jobs("PyTorchJob", ads=20, timeline=SEED)
    watcher = Watcher(
        sweeper_kubeconfig, tmp_path, "-n", job.namespace, "--lease-namespace", job.namespace
    )
    try:
        watcher.wait_ready()
        deadline = job.started().deadline
        assert deadline is not None
        seed_settled(job)

        failed = job.wait_failed(timeout=120)
        poll(lambda: not job.active_pods(), what="the Running and Pending pods to be gone")
        reclaimed = dt.datetime.now(dt.UTC)

        assert_failed_by_operator(failed)
        touched_at = jobs.parse_time(failed.annotations.get(TOUCH_MARKER))
        assert touched_at is not None, watcher.explain()
        assert touched_at >= deadline.replace(microsecond=0), "touched before the deadline"
        assert phases(job) == {SEED_FINISHED: "Succeeded"}, "the finished pod stays (its logs)"
        assert resyncs(watcher) == 0, "the watch stream's event did it, not a --resync pass"
        # The operator can fail the job before the watcher has logged the touch it answered.
        wait_for(
            lambda: len([e for e in watcher.logs() if e.get("action")]) >= 2,
            "the touch and the clean-up logged",
            watcher,
        )
        actions = [
            (e["action"], e["reason"], e["result"]) for e in watcher.logs() if e.get("action")
        ]
        assert actions == [
            ("touch", "overdue", "done"),
            ("terminate-pods", "failed-by-deadline", "done"),
        ], watcher.explain()
        assert job.view().conditions == failed.conditions
        figures.add(
            "watch: the seed, defaults, ADS 20 s",
            f"deadline -> Failed {failed.late_by:.0f} s; deadline -> {len(SEED_ACTIVE)} "
            f"pods gone {(reclaimed - deadline).total_seconds():.1f} s (polled every 0.2 s)",
        )
    finally:
        watcher.stop()


def test_a_touch_the_operators_clock_finds_early_is_repeated_until_the_operator_fails_the_job(
    operator: Operator,
    kubeflow_jobs: Callable[..., RunningJob],
    sweeper_kubeconfig: Path,
    tmp_path: Path,
) -> None:
    # The sweeper's clock runs 3 s ahead of the operator's: its touch at the deadline reaches
    # an operator for which the job still has 3 s to run, so the operator does not fail it and
    # (its AddAfter a fake) never looks at it again. The quick re-touches, 2 s apart, bring a
    # touch after the deadline by the operator's clock, and the operator fails the job.
    job = kubeflow_jobs("PyTorchJob", ads=20, timeline=STABLE_FROM_7S)
    watcher = Watcher(
        sweeper_kubeconfig,
        tmp_path,
        "-n",
        job.namespace,
        "--no-leader-elect",
        "--clock=local",
        "--retouch-after=2s",
        "--retouch-limit=3",
        clock_ahead_s=3.0,
    )
    try:
        watcher.wait_ready()
        deadline = job.started().deadline
        assert deadline is not None

        failed = job.wait_failed(timeout=120)

        assert_failed_by_operator(failed)
        wait_for(
            lambda: len([e for e in watcher.logs() if e.get("action") == "touch"]) >= 2,
            "the first and a quick touch logged",
            watcher,
        )
        touches = [e for e in watcher.logs() if e.get("action") == "touch"]
        assert [e["result"] for e in touches][:2] == ["done", "done"], watcher.explain()
        assert 2 <= len(touches) <= 4, watcher.explain()  # the first, and at most 3 quick ones
        assert {e["reason"] for e in touches[1:]} == {"touch-again"}, watcher.explain()
    finally:
        watcher.stop()
