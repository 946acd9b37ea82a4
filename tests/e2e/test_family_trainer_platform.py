"""A platform rule's deadlines on Trainer v2's TrainJobs, with the trainer, JobSet and the Job
controller real.

- A TrainJob without ``activeDeadlineSeconds`` in a Namespace whose rule sets a default gets
  the default written into its spec (the CRD accepts adding it); the trainer then fails it on
  its own clock, at creation + the default and never before, and deletes its JobSet.
- A TrainJob whose own deadline is longer than its Namespace's cap is failed at the cap by the
  sweeper, as the trainer writes its deadline failure, and its JobSet deleted; the trainer
  keeps it Failed and does not re-create the JobSet.
- A TrainJob whose own deadline is within its rule is left as it was: no write of the sweeper's
  (the audit log), its spec, labels, annotations and conditions unchanged.

The sweeper runs with the grants the chart renders for these rules, on the real authorizer.
Pods have no node and stay Pending; nothing here needs them to run.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

import pytest

from devcluster import ControlPlane
from tests.e2e import clusters, families
from tests.e2e.conftest_families import TrainerCluster
from tests.e2e.conftest_operator import poll, sleep_until
from tests.e2e.workloads import parse_stamp

pytestmark = [pytest.mark.e2e]

TIER = "e2e.example.com/tier"
# Long enough for the trainer to make the JobSet before it.
DEADLINE = 8
RULES = f"""\
rules:
  - name: default
    namespaceSelector: {{matchLabels: {{{TIER}: default}}}}
    kinds: [TrainJob]
    defaultDeadline: {DEADLINE}s
    maxDeadline: 1h
  - name: gpu
    namespaceSelector: {{matchLabels: {{{TIER}: gpu}}}}
    maxDeadline: {DEADLINE}s
"""
# The sweeper runs as this user, bound to the ClusterRole the chart renders for RULES.
# The chart the sweeper is granted as (conftest_families.chart_sweep).
CHART = {
    "family": "trainer",
    "kind": "TrainJob",
    "waits": {"group": "trainer.kubeflow.org", "resource": "trainjobs", "verb": "patch"},
}
USER = "sweeper-chart-trainer"


def _create(cp: ControlPlane, namespace: str, name: str, ads: int | None) -> families.Obj:
    """Create a TrainJob (with no deadline for ``ads=None``) and wait for its JobSet."""
    body = families.trainjob(name, ads=ads or 1)
    if ads is None:
        del body["spec"]["activeDeadlineSeconds"]
    created = families.create(cp, families.TRAINJOBS, namespace, body)
    poll(
        lambda: families.get(cp, families.JOBSETS, namespace, name),
        what=f"the trainer to create the JobSet of {name}",
    )
    return created


def _trainjob(cp: ControlPlane, namespace: str, name: str) -> families.Obj:
    found = families.get(cp, families.TRAINJOBS, namespace, name)
    assert found is not None, f"TrainJob {name} is gone"
    return found


def _reconciles(cluster: TrainerCluster, namespace: str, name: str) -> int:
    """How many times the trainer has reconciled one TrainJob since it started (its V(2) log)."""
    key = re.compile(
        rf'"Reconciling TrainJob".*"trainJob":\{{"name":"{re.escape(name)}",'
        rf'"namespace":"{re.escape(namespace)}"\}}'
    )
    return len(key.findall(cluster.trainer.log_since_start()))


def _written(trainjob: families.Obj) -> tuple[object, ...]:
    """What a writer other than the trainer could change: not its resourceVersion, as the
    trainer copies its JobSet's status into it whenever the Jobs' counts move (found racing
    on a busy machine: the JobSet's pods are created after the TrainJob was read)."""
    return (
        trainjob["metadata"].get("annotations"),
        trainjob["metadata"].get("labels"),
        trainjob["spec"],
        trainjob.get("status", {}).get("conditions"),
    )


def _failed(cp: ControlPlane, namespace: str, name: str) -> families.Obj | None:
    return families.condition(_trainjob(cp, namespace, name), "Failed")


def test_a_trainjob_without_a_deadline_gets_the_default_and_the_trainer_ends_it_on_time(
    trainer_cluster: TrainerCluster,
    chart_sweep: Callable[..., clusters.Sweep],
) -> None:
    cp = trainer_cluster.cp
    namespace = cp.create_namespace("tj-default", labels={TIER: "default"})
    created = _create(cp, namespace, "train", None)
    _create(cp, namespace, "own", 3600)
    own = _written(_trainjob(cp, namespace, "own"))

    dry = chart_sweep("--dry-run=server")
    assert dry.result.returncode == 0, dry.explain()
    assert families.writes(dry.requests) == [
        ("patch?dryRun", "trainjobs", "train"),
        ("create?dryRun", "events", ""),
    ], dry.explain()
    assert "activeDeadlineSeconds" not in _trainjob(cp, namespace, "train")["spec"]

    run = chart_sweep()

    assert run.result.returncode == 0, run.explain()
    assert families.writes(run.requests) == [
        ("patch", "trainjobs", "train"),
        ("create", "events", ""),
    ], run.explain()
    # The JobSets' pods, summed for the GPUs they hold, on the chart's read-only grant.
    pod_lists = [
        e.get("responseStatus", {}).get("code")
        for e in run.requests
        if e["verb"] == "list" and e.get("objectRef", {}).get("resource") == "pods"
    ]
    assert pod_lists == [200], run.explain()
    assert _trainjob(cp, namespace, "train")["spec"]["activeDeadlineSeconds"] == DEADLINE
    due = parse_stamp(created["metadata"]["creationTimestamp"]) + dt.timedelta(seconds=DEADLINE)
    failed = poll(
        lambda: _failed(cp, namespace, "train"),
        timeout=60,
        what="the trainer to fail the TrainJob at the default deadline",
    )
    assert failed["reason"] == "DeadlineExceeded", failed
    assert failed["message"] == families.TRAINJOB_DEADLINE_MESSAGE, "the trainer's own"
    assert parse_stamp(failed["lastTransitionTime"]) >= due, "never before the deadline"
    poll(
        lambda: families.get(cp, families.JOBSETS, namespace, "train") is None,
        what="the trainer to delete the JobSet",
    )
    train = _trainjob(cp, namespace, "train")
    assert families.events_on(cp, namespace, train) == ["DeadlineSet"]

    again = chart_sweep()
    assert (again.result.returncode, families.writes(again.requests)) == (0, []), again.explain()
    assert _written(_trainjob(cp, namespace, "own")) == own


def test_a_trainjob_capped_below_its_own_deadline_is_failed_at_the_cap_and_its_jobset_goes(
    trainer_cluster: TrainerCluster,
    chart_sweep: Callable[..., clusters.Sweep],
) -> None:
    cp = trainer_cluster.cp
    namespace = cp.create_namespace("tj-cap", labels={TIER: "gpu"})
    created = _create(cp, namespace, "capped", 3600)
    cap_at = parse_stamp(created["metadata"]["creationTimestamp"]) + dt.timedelta(seconds=DEADLINE)

    early = chart_sweep("-o", "wide")
    if dt.datetime.now(dt.UTC) < cap_at:
        assert families.writes(early.requests) == [], early.explain()
        assert "not-yet-due" in early.result.stdout, early.explain()
    sleep_until(cap_at + dt.timedelta(seconds=1))
    assert _failed(cp, namespace, "capped") is None, "premise: its own deadline is far off"

    reconciled = _reconciles(trainer_cluster, namespace, "capped")
    run = chart_sweep()

    assert run.result.returncode == 0, run.explain()
    assert families.writes(run.requests) == [
        ("patch", "trainjobs/status", "capped"),
        ("delete", "jobsets", "capped"),
        ("create", "events", ""),
    ], run.explain()
    failed = _failed(cp, namespace, "capped") or {}
    assert failed.get("reason") == "DeadlineExceeded", failed
    assert str(failed["message"]).startswith(families.TRAINJOB_DEADLINE_MESSAGE)
    assert "platform rule gpu" in str(failed["message"])
    assert parse_stamp(str(failed["lastTransitionTime"])) >= cap_at.replace(microsecond=0)
    poll(
        lambda: families.get(cp, families.JOBSETS, namespace, "capped") is None,
        what="the deleted JobSet to be gone",
    )
    # The trainer reconciles the TrainJob on its status write and its JobSet's deletion: it
    # keeps the failure and re-creates nothing for a finished TrainJob.
    poll(
        lambda: _reconciles(trainer_cluster, namespace, "capped") > reconciled,
        what="the trainer to reconcile the TrainJob the sweeper failed",
    )
    again = chart_sweep()
    assert (again.result.returncode, families.writes(again.requests)) == (0, []), again.explain()
    assert families.get(cp, families.JOBSETS, namespace, "capped") is None, "re-created"
    assert (_failed(cp, namespace, "capped") or {}).get("reason") == "DeadlineExceeded"
    capped = _trainjob(cp, namespace, "capped")
    assert families.events_on(cp, namespace, capped) == ["DeadlineExceeded"]
