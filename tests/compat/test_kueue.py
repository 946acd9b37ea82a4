"""The sweeper beside the real Kueue controller (v0.17.0) and the pair's real operator.

Runs on the one pair marked ``kueue`` (``conftest.py``: v1.9.3, the operator Kueue v0.17.0
pins), with Kueue's own webhooks registered, so that Kueue suspends a queued job at creation
and admits it, as in a cluster:

- a low-priority PyTorchJob is admitted and started; a high-priority one preempts it (Kueue
  suspends it, the operator marks it Suspended): the sweeper skips it as suspended and writes
  nothing, although its old deadline has passed;
- the high one goes, Kueue re-admits the low one (``suspend: false``); until the operator
  resumes it (``Suspended=True``, the old ``startTime``) the sweeper never fails it; after the
  resume its deadline counts from the new ``startTime``, and once that has passed the sweeper
  fails it, the operator keeps it Failed and Kueue counts its Workload finished;
- a job that MultiKueue manages (``runPolicy.managedBy``) is left to its manager, however
  overdue.

The window between re-admission and resume is held open by stopping the operator for it: a
race otherwise lost in milliseconds becomes a state the sweeper is run against, then the
operator is started again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from devcluster import BinaryMissing, audit, jobs
from devcluster.kubelet import Transition
from devcluster.kueue import MULTIKUEUE, PRIORITY_LABEL, QUEUE_LABEL, Kueue
from tests.compat.conftest import PairCluster, annotate, reconciled
from tests.e2e import clusters
from tests.e2e.conftest_operator import (
    SWEEPER_DEADLINE_MESSAGE,
    RunningJob,
    entry_for,
    poll,
    sleep_until,
)

pytestmark = [pytest.mark.compat, pytest.mark.kueue]

KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"
# One master and three workers of one CPU each: the ClusterQueue's quota holds one such job.
CPU_PER_POD = 1
PODS = 4
# The low job's deadline: long enough that the preemption (seconds on a loaded machine) comes
# before it, short enough that the old deadline passes while the job is suspended.
LOW_ADS = 20
STABLE = [Transition(1, "Running")]


@pytest.fixture
def kueue(pair: PairCluster) -> Kueue:
    """Kueue beside the pair's operator: started once a pair, stopped before its operator.

    Skips locally and fails in CI when Kueue is not built, like the rest of the tier.
    """
    if pair.kueue is None:
        try:
            clusters.require_binaries("kueue")
            pair.kueue = pair.beside.enter_context(Kueue.start(pair.cp))
        except BinaryMissing as e:
            clusters.binaries_missing(e)
            raise  # unreachable: binaries_missing always raises
    return pair.kueue


@dataclass(frozen=True)
class Queues:
    """The queueing objects of one test: a LocalQueue in ``namespace`` over ClusterQueue ``cq``."""

    namespace: str
    local_queue: str = "lq"
    cluster_queue: str = "cq"


@pytest.fixture
def queues(pair: PairCluster, kueue: Kueue) -> Iterator[Queues]:
    """A ResourceFlavor, a ClusterQueue with CPU for one job, a LocalQueue, two priorities."""
    namespace = pair.cp.create_namespace("kueue")
    made = Queues(namespace)
    created: list[tuple[str, dict[str, Any]]] = [
        ("resourceflavors", {"metadata": {"name": "default-flavor"}, "spec": {}}),
        ("workloadpriorityclasses", {"metadata": {"name": "low"}, "value": 100}),
        ("workloadpriorityclasses", {"metadata": {"name": "high"}, "value": 1000}),
        (
            "clusterqueues",
            {
                "metadata": {"name": made.cluster_queue},
                "spec": {
                    "namespaceSelector": {},
                    "preemption": {"withinClusterQueue": "LowerPriority"},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": "default-flavor",
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": str(CPU_PER_POD * PODS)}
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
        ),
    ]
    kinds = {
        "resourceflavors": "ResourceFlavor",
        "workloadpriorityclasses": "WorkloadPriorityClass",
        "clusterqueues": "ClusterQueue",
    }
    for plural, body in created:
        pair.cp.request(
            "POST",
            f"{KUEUE_API}/{plural}",
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kinds[plural], **body},
        )
    pair.cp.request(
        "POST",
        f"{KUEUE_API}/namespaces/{namespace}/localqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": made.local_queue},
            "spec": {"clusterQueue": made.cluster_queue},
        },
    )
    yield made
    for plural, body in reversed(created):
        pair.cp.request(
            "DELETE", f"{KUEUE_API}/{plural}/{body['metadata']['name']}", expect=(200, 404)
        )


def queued_job(
    pair_jobs: Callable[..., RunningJob], queues: Queues, priority: str, *, ads: int | None
) -> RunningJob:
    """A PyTorchJob ``kueue-<priority>`` as a Kueue user writes it: queue and priority labels
    and CPU requests, in the LocalQueue's namespace."""

    def shape(body: dict[str, Any]) -> None:
        body["metadata"]["labels"] = {QUEUE_LABEL: queues.local_queue, PRIORITY_LABEL: priority}
        for replica in body["spec"]["pytorchReplicaSpecs"].values():
            for container in replica["template"]["spec"]["containers"]:
                container["resources"] = {"requests": {"cpu": str(CPU_PER_POD)}}

    return pair_jobs(
        "PyTorchJob",
        ads=ads,
        timeline=STABLE,
        name=f"kueue-{priority}",
        namespace=queues.namespace,
        shape=shape,
    )


def suspended_by_spec(job: RunningJob) -> bool:
    """``spec.runPolicy.suspend``: what Kueue sets on an eviction and clears on admission."""
    return bool(job.view().obj["spec"].get("runPolicy", {}).get("suspend"))


def workload_of(pair: PairCluster, job: RunningJob) -> dict[str, Any] | None:
    """The Workload Kueue made for ``job`` (its owner reference names the job), if any."""
    listed = pair.cp.request("GET", f"{KUEUE_API}/namespaces/{job.namespace}/workloads")
    for workload in listed["items"]:
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o.get("name") == job.name and o.get("kind") == job.kind for o in owners):
            return dict(workload)
    return None


def condition_true(workload: dict[str, Any] | None, kind: str) -> bool:
    """Whether a Workload has condition ``kind`` with status True."""
    conditions = ((workload or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def admitted_workloads(pair: PairCluster, queues: Queues) -> int:
    """How many Workloads the ClusterQueue counts as admitted (holding its quota)."""
    queue = pair.cp.request("GET", f"{KUEUE_API}/clusterqueues/{queues.cluster_queue}")
    return int((queue.get("status") or {}).get("admittedWorkloads", 0))


def delete_with_its_workload(pair: PairCluster, job: RunningJob) -> None:
    """Delete a job, its pods and services, and its Workload, as the garbage collector would."""
    workload = workload_of(pair, job)
    jobs.delete_everything(job.api, job.kind, job.namespace, job.name)
    if workload is not None:
        name = workload["metadata"]["name"]
        pair.cp.request(
            "DELETE", f"{KUEUE_API}/namespaces/{job.namespace}/workloads/{name}", expect=(200, 404)
        )


def sweeper_writes(pair: PairCluster, since: int) -> list[Any]:
    """The sweeper's requests since ``since`` that could change something."""
    events = pair.cp.audit_events(user=clusters.SWEEPER_USER, since=since)
    return [e for e in events if audit.is_write(e)]


def test_a_preempted_and_readmitted_job_is_failed_only_on_its_new_start_time(
    pair, kueue, queues, pair_jobs
):
    low = queued_job(pair_jobs, queues, "low", ads=LOW_ADS)
    # Admitted: Kueue's webhook suspended it at creation, Kueue's admission let it go.
    first = low.started()
    assert first.start_time is not None
    assert not suspended_by_spec(low)
    assert condition_true(workload_of(pair, low), "Admitted")

    high = queued_job(pair_jobs, queues, "high", ads=None)
    # Preempted: Kueue suspends the low job, the operator marks it Suspended and removes its
    # pods, and the high one gets the quota.
    low.wait(
        lambda v: bool(v.obj["spec"]["runPolicy"].get("suspend")) and v.is_true("Suspended"),
        "Kueue to preempt the low job and the operator to suspend it",
    )
    high.started()
    old_deadline = first.start_time + dt.timedelta(seconds=LOW_ADS)
    sleep_until(old_deadline + dt.timedelta(seconds=2))

    since = pair.cp.audit_offset()
    while_preempted = entry_for(pair.sweep("--action", "fail", "-n", low.namespace), low)
    assert (while_preempted["decision"], while_preempted["reason"]) == ("skip", "suspended")
    assert sweeper_writes(pair, since) == [], "a suspended job is never written to"

    # Re-admitted while the operator is down: suspend is false, the job still Suspended=True
    # with the old startTime, past the old deadline.
    pair.operator.pause()
    try:
        delete_with_its_workload(pair, high)
        poll(lambda: not suspended_by_spec(low), what="Kueue to re-admit the low job")
        stale = low.view()
        assert stale.is_true("Suspended")
        assert stale.start_time == first.start_time
        readmitted = entry_for(pair.sweep("--action", "fail", "-n", low.namespace), low)
        assert (readmitted["decision"], readmitted["reason"]) == ("skip", "resuming"), readmitted
        assert not low.view().failed
    finally:
        pair.operator.restart()

    resumed = low.wait(
        lambda v: v.start_time is not None and v.start_time > old_deadline,
        "the operator to resume the job and reset its startTime",
    )
    assert resumed.start_time is not None
    after_resume = entry_for(pair.sweep("--action", "fail", "-n", low.namespace), low)
    assert (after_resume["decision"], after_resume["reason"]) == ("skip", "not-yet-due")

    # Past the deadline counted from the resume: the sweeper fails it; the operator keeps it.
    sleep_until(resumed.start_time + dt.timedelta(seconds=LOW_ADS + 2))
    overdue = entry_for(pair.sweep("--action", "fail", "-n", low.namespace), low)
    assert (overdue["decision"], overdue["result"]) == ("fail", "done"), overdue
    failed = low.wait_failed()
    condition = failed.condition("Failed") or {}
    assert condition.get("reason") == "PyTorchJobFailed"
    assert condition.get("message") == SWEEPER_DEADLINE_MESSAGE.format(name=low.name)
    # Kueue treats Failed as finished: the Workload is Finished and its quota given back.
    poll(
        lambda: condition_true(workload_of(pair, low), "Finished"),
        what="Kueue to mark the low job's Workload Finished",
    )
    poll(
        lambda: admitted_workloads(pair, queues) == 0,
        what="the ClusterQueue to count no admitted Workload",
    )
    reconciled(pair, low, lambda: annotate(pair, low, "compat.test/poke", "1"))
    assert low.view().conditions == failed.conditions, "the operator rewrote the sweeper's Failed"


def test_a_job_that_multikueue_manages_is_left_to_it(pair, kueue, pair_jobs):
    def managed(body: dict[str, Any]) -> None:
        body["spec"]["runPolicy"]["managedBy"] = MULTIKUEUE

    job = pair_jobs("PyTorchJob", ads=5, timeline=STABLE, name="kueue-multikueue", shape=managed)
    # What MultiKueue mirrors from the worker cluster that runs it: started an hour ago.
    long_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pair.cp.request(
        "PATCH",
        f"/apis/kubeflow.org/v1/namespaces/{job.namespace}/pytorchjobs/{job.name}/status",
        {
            "status": {
                "startTime": long_ago,
                "conditions": [
                    {"type": "Running", "status": "True", "reason": "PyTorchJobRunning"}
                ],
            }
        },
        content_type="application/merge-patch+json",
    )
    assert job.view().start_time is not None

    since = pair.cp.audit_offset()
    entry = entry_for(pair.sweep("--action", "fail", "-n", job.namespace), job)

    assert (entry["decision"], entry["reason"]) == ("skip", "managed-elsewhere"), entry
    assert sweeper_writes(pair, since) == []
    assert not job.view().failed
