"""The sweeper against each Training Operator release and Kubernetes minor users run.

Every test runs once per pair of ``PAIRS`` (``conftest.py``), on that pair's real
kube-apiserver and real operator binary:

- the seed with the CLI's defaults: stable pods overrun the deadline, the operator alone
  misses it, and a sweeper touch makes that release fail the job with its own reason; v1.7.0
  to v1.9.3 then delete every pod, v1.9.4 follows ``cleanPodPolicy`` (unset: ``None``) and
  keeps them, and the next run, with the defaults still, deletes the Running and Pending ones:
  on every release no pod of the deadline-failed job keeps running;
- a sweeper ``--action fail`` that the operator keeps on its next reconcile;
- ``--terminate-pods policy`` against what the release keeps;
- MXJob where the release serves it (up to v1.8.x);
- a job suspended and resumed (``runPolicy.suspend``) is never failed on its old startTime.

Two parts wait for the compat-semantics work and are written so that enabling them is one
line each: ``SWEEPER_KNOWS_OPERATOR_VERSION`` (the sweeper's ``--operator-version``, which
makes ``--terminate-pods policy`` mean what the release keeps) and ``SWEEPER_SWEEPS_MXJOB``
(MXJob in the sweeper's kinds table). Until then each test checks what the sweeper does
today, so flipping a constant without the feature, or shipping the feature without flipping
it, fails a test.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest

from devcluster import jobs
from devcluster.kubelet import Transition
from tests.compat.conftest import PairCluster, annotate, overdue, reconciled
from tests.e2e.conftest_operator import (
    OPERATOR_DEADLINE_MESSAGE,
    SWEEPER_DEADLINE_MESSAGE,
    RunningJob,
    entry_for,
    poll,
)

pytestmark = [pytest.mark.compat]

# Enable when the sweeper has --operator-version (compat-semantics): --terminate-pods policy
# then deletes what the release deletes (every pod before v1.9.4).
SWEEPER_KNOWS_OPERATOR_VERSION = True
# Enable when the sweeper's kinds table has MXJob (compat-semantics).
SWEEPER_SWEEPS_MXJOB = True

ADS = 8
# The resume scenario's deadline: long enough that the checks after the startTime reset (a
# sweeper start each, seconds on a loaded machine) are still before the new deadline.
RESUME_ADS = 30
# Every pod Running at 1 s, then nothing changes: nothing wakes the operator at the deadline.
STABLE = [Transition(1, "Running")]
TOUCH_MARKER = "kubeflow-deadline-sweeper.github.io/touched-at"
PYTORCH_PODS = ["train-master-0", "train-worker-0", "train-worker-1", "train-worker-2"]
# A name no other job of the pair has, so that the operator's log lines about it are its own.
KEPT = "kept-by-the-operator"


def failed_condition(job: jobs.JobView) -> tuple[Any, ...]:
    condition = job.condition("Failed") or {}
    return (condition.get("status"), condition.get("reason"), condition.get("message"))


def names(pods: list[Any]) -> list[str]:
    return sorted(p.metadata.name for p in pods)


def suspend(pair: PairCluster, job: RunningJob, value: bool) -> None:
    """Set ``spec.runPolicy.suspend``, as Kueue does on an eviction and a re-admission."""
    plural = jobs.ALL_KINDS[job.kind].plural
    pair.cp.request(
        "PATCH",
        f"/apis/kubeflow.org/v1/namespaces/{job.namespace}/{plural}/{job.name}",
        {"spec": {"runPolicy": {"suspend": value}}},
        content_type="application/merge-patch+json",
    )


def assert_pods_as_the_release_handles_them(pair: PairCluster, job: RunningJob) -> None:
    """After the operator's own deadline failure: none left before v1.9.4, all kept on v1.9.4."""
    if pair.pair.deletes_every_pod_on_deadline:
        poll(lambda: not job.pods(), what=f"{pair.pair.operator} to delete every pod")
        assert job.services() == [], "its services go with the pods"
    else:
        assert names(job.active_pods()) == names(job.pods()) != [], (
            "v1.9.4 follows cleanPodPolicy, unset means None: it keeps every pod"
        )


def test_with_the_defaults_the_operator_fails_the_job_and_no_pod_keeps_running(pair, pair_jobs):
    job = pair_jobs("PyTorchJob", ads=ADS, timeline=STABLE)
    overdue([job])

    # Nothing but the defaults (-o json is only how the test reads the report): a touch.
    report = pair.sweep("-n", job.namespace)

    entry = entry_for(report, job)
    assert (entry["decision"], entry["reason"], entry["result"]) == ("touch", "overdue", "done")
    failed = job.wait_failed(timeout=30)
    assert failed_condition(failed) == (
        "True",
        "PyTorchJobFailed",
        OPERATOR_DEADLINE_MESSAGE.format(name=job.name),
    )
    assert TOUCH_MARKER in failed.annotations
    assert_pods_as_the_release_handles_them(pair, job)

    # The next run, still with the defaults, reclaims what the release kept (v1.9.4: all).
    again = entry_for(pair.sweep("-n", job.namespace), job)

    if pair.pair.deletes_every_pod_on_deadline:
        assert (again["decision"], again["reason"], again["detail"]) == (
            "skip",
            "finished",
            "Failed; no pods left to terminate",
        ), again
    else:
        assert (again["decision"], again["reason"], again["result"]) == (
            "terminate-pods",
            "failed-by-deadline",
            "done",
        ), again
        assert sorted(again["deleted"]["pods"]) == PYTORCH_PODS, again
    poll(lambda: not job.active_pods(), what="no Running or Pending pod of the failed job")
    assert job.view().conditions == failed.conditions, "the operator's Failed status stays"


def test_a_sweeper_fail_is_kept_by_the_operator_on_its_next_reconcile(pair, pair_jobs):
    job = pair_jobs("PyTorchJob", ads=ADS, timeline=STABLE, name=KEPT)
    overdue([job])

    report = pair.sweep("--action", "fail", "-n", job.namespace)

    entry = entry_for(report, job)
    assert (entry["decision"], entry["result"]) == ("fail", "done"), entry
    assert len(entry["deleted"]["pods"]) == len(PYTORCH_PODS), "--terminate-pods active: all 4"
    failed = job.view()
    assert failed_condition(failed) == (
        "True",
        "PyTorchJobFailed",
        SWEEPER_DEADLINE_MESSAGE.format(name=job.name),
    )
    reconciled(pair, job, lambda: annotate(pair, job, "compat.test/poke", "1"))
    after = job.view()
    assert after.conditions == failed.conditions, (
        f"{pair.pair.operator} rewrote the sweeper's Failed status on its next reconcile"
    )
    assert after.obj["status"].get("completionTime") == failed.obj["status"]["completionTime"]
    assert job.pods() == [], f"{pair.pair.operator} recreated pods of a job the sweeper failed"


def test_terminate_pods_policy_deletes_what_the_release_deletes(pair, pair_jobs):
    job = pair_jobs("PyTorchJob", ads=ADS, timeline=STABLE)
    overdue([job])
    versioned = ["--operator-version", pair.pair.operator] if SWEEPER_KNOWS_OPERATOR_VERSION else []

    report = pair.sweep(
        "--action", "fail", "--terminate-pods", "policy", *versioned, "-n", job.namespace
    )

    entry = entry_for(report, job)
    assert (entry["decision"], entry["result"]) == ("fail", "done"), entry
    deleted = sorted((entry.get("deleted") or {}).get("pods") or [])
    if pair.pair.deletes_every_pod_on_deadline and SWEEPER_KNOWS_OPERATOR_VERSION:
        assert deleted == PYTORCH_PODS, f"{pair.pair.operator} deletes every pod: so must policy"
    elif pair.pair.deletes_every_pod_on_deadline:
        # Today: policy reads cleanPodPolicy as v1.9.4 does (unset = None), so it keeps the pods
        # this release would have deleted (releases.md T3; compat-semantics fixes it).
        assert deleted == [], "without --operator-version, policy follows cleanPodPolicy"
    else:
        assert deleted == [], "v1.9.4 keeps the pods of cleanPodPolicy None, so does policy"
    assert names(job.pods()) == sorted(set(PYTORCH_PODS) - set(deleted))


def test_mxjob_where_served(pair, pair_jobs):
    if not pair.pair.serves_mxjob:
        pytest.skip(f"{pair.pair.operator} does not serve MXJob (removed in v1.9.0)")
    by_hand = pair_jobs("MXJob", ads=ADS, timeline=STABLE, name="by-hand")
    by_sweeper = pair_jobs("MXJob", ads=ADS, timeline=STABLE, name="by-sweeper")
    overdue([by_hand, by_sweeper])

    # The touch itself, as the sweeper sends it: this release fails an MXJob like the others.
    annotate(pair, by_hand, TOUCH_MARKER, dt.datetime.now(dt.UTC).isoformat())
    failed = by_hand.wait_failed(timeout=30)
    assert failed_condition(failed) == (
        "True",
        "MXJobFailed",
        OPERATOR_DEADLINE_MESSAGE.format(name=by_hand.name),
    )
    assert_pods_as_the_release_handles_them(pair, by_hand)

    report = pair.sweep("--action", "touch", "-n", by_sweeper.namespace)

    listed = [e for e in report["jobs"] if e["name"] == by_sweeper.name]
    if SWEEPER_SWEEPS_MXJOB:
        [entry] = listed
        assert (entry["decision"], entry["result"]) == ("touch", "done"), entry
        assert failed_condition(by_sweeper.wait_failed(timeout=30))[1] == "MXJobFailed"
    else:
        assert listed == [], "the sweeper now lists MXJob: set SWEEPER_SWEEPS_MXJOB = True"
        assert not by_sweeper.view().failed


def test_a_resumed_job_is_never_failed_on_its_old_start_time(pair, pair_jobs):
    job = pair_jobs("PyTorchJob", ads=RESUME_ADS, timeline=STABLE)
    first = job.started()
    assert first.start_time is not None
    suspend(pair, job, True)
    job.wait(lambda v: v.is_true("Suspended"), "the operator to mark the job Suspended")
    poll(lambda: not job.pods(), what="the operator to delete the suspended job's pods")
    old_deadline = first.start_time + dt.timedelta(seconds=RESUME_ADS)
    delay = (old_deadline + dt.timedelta(seconds=2) - dt.datetime.now(dt.UTC)).total_seconds()
    if delay > 0:
        time.sleep(delay)

    while_suspended = entry_for(pair.sweep("--action", "fail", "-n", job.namespace), job)
    suspend(pair, job, False)
    just_resumed = entry_for(pair.sweep("--action", "fail", "-n", job.namespace), job)
    resumed = job.wait(
        lambda v: v.start_time is not None and v.start_time > first.start_time,
        "the operator to reset startTime on the resume",
    )
    after_reset = entry_for(pair.sweep("--action", "fail", "-n", job.namespace), job)

    assert (while_suspended["decision"], while_suspended["reason"]) == ("skip", "suspended")
    assert just_resumed["decision"] == "skip", just_resumed
    assert just_resumed["reason"] in {"resuming", "not-yet-due"}, just_resumed
    assert (after_reset["decision"], after_reset["reason"]) == ("skip", "not-yet-due")
    assert not job.view().failed
    assert resumed.start_time is not None
    assert resumed.start_time > old_deadline, "the deadline now counts from the resume"
