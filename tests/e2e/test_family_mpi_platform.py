"""A platform cap on mpi-operator's MPIJobs, with mpi-operator and the Job controller real.

An MPIJob whose own deadline (copied into its launcher Job) is longer than its Namespace's
cap: before the cap the sweeper writes nothing; at the cap it writes the cap into the launcher
Job (counted from the launcher's own start), the Job controller fails the launcher at once,
mpi-operator records ``DeadlineExceeded`` with a ``completionTime``, and the next run deletes
the workers mpi-operator keeps. Never before the cap: the launcher's failure is stamped at or
after it. An MPIJob under a cap not yet reached, in another Namespace, is untouched (its
resourceVersion and its launcher's unchanged). A dry run writes nothing.

The sweeper runs with the grants the chart renders for these rules, on the real authorizer.
Pods have no node: the workers are made Running through ``pods/status``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest

from tests.e2e import clusters, families
from tests.e2e.conftest_families import MPICluster
from tests.e2e.conftest_operator import poll, sleep_until
from tests.e2e.workloads import parse_stamp

pytestmark = [pytest.mark.e2e]

TIER = "e2e.example.com/tier"
# The cap: long enough for the workers to be made Running before it, even on a busy machine.
CAP = 8
OWN = 3600
WORKERS = 2
RULES = f"""\
rules:
  - name: gpu
    namespaceSelector: {{matchLabels: {{{TIER}: gpu}}}}
    kinds: [MPIJob]
    maxDeadline: {CAP}s
  - name: long
    namespaceSelector: {{matchLabels: {{{TIER}: long}}}}
    maxDeadline: 1h
"""
# The sweeper runs as this user, bound to the ClusterRole the chart renders for RULES.
# The chart the sweeper is granted as (conftest_families.chart_sweep).
CHART = {
    "family": "mpi-operator",
    "kind": "MPIJob",
    "waits": {"group": "batch", "resource": "jobs", "verb": "patch"},
}
USER = "sweeper-chart-mpi"


def _start(cluster: MPICluster, namespace: str, name: str) -> list[families.Obj]:
    cp = cluster.cp
    families.create(cp, families.MPIJOBS, namespace, families.mpijob(name, ads=OWN))
    workers = poll(
        lambda: w if len(w := families.mpi_workers(cp, namespace, name)) == WORKERS else None,
        what=f"mpi-operator to create the {WORKERS} workers of {name}",
    )
    for pod in workers:
        families.make_running(cp, pod)
    return workers


def _mpijob(cluster: MPICluster, namespace: str, name: str) -> families.Obj:
    found = families.get(cluster.cp, families.MPIJOBS, namespace, name)
    assert found is not None, f"MPIJob {name} is gone"
    return found


def _launcher(cluster: MPICluster, namespace: str, name: str) -> families.Obj:
    return poll(
        lambda: (
            job
            if (job := families.get(cluster.cp, families.JOBS, namespace, f"{name}-launcher"))
            and job.get("status", {}).get("startTime")
            else None
        ),
        what=f"the Job controller to start the launcher of {name}",
    )


def _active_workers(cluster: MPICluster, namespace: str, name: str) -> list[str]:
    return [
        pod["metadata"]["name"]
        for pod in families.mpi_workers(cluster.cp, namespace, name)
        if pod["status"].get("phase") in ("Running", "Pending")
        and not pod["metadata"].get("deletionTimestamp")
    ]


def test_an_mpijob_capped_below_its_own_deadline_loses_its_launcher_and_workers_at_the_cap(
    mpi_cluster: MPICluster,
    chart_sweep: Callable[..., clusters.Sweep],
) -> None:
    cp = mpi_cluster.cp
    capped_ns = cp.create_namespace("mpi-cap", labels={TIER: "gpu"})
    later_ns = cp.create_namespace("mpi-long", labels={TIER: "long"})
    workers = _start(mpi_cluster, capped_ns, "capped")
    _start(mpi_cluster, later_ns, "later")
    launcher = _launcher(mpi_cluster, capped_ns, "capped")
    assert launcher["spec"]["activeDeadlineSeconds"] == OWN, "premise: mpi-operator copied it"
    _launcher(mpi_cluster, later_ns, "later")
    started = parse_stamp(_mpijob(mpi_cluster, capped_ns, "capped")["status"]["startTime"])
    cap_at = started + dt.timedelta(seconds=CAP)
    sleep_until(cap_at + dt.timedelta(seconds=1))
    assert families.condition(_mpijob(mpi_cluster, capped_ns, "capped"), "Failed") is None
    poll(
        lambda: (
            _mpijob(mpi_cluster, later_ns, "later")["status"]
            .get("replicaStatuses", {})
            .get("Worker", {})
            .get("active")
            == WORKERS
            or None
        ),
        what="mpi-operator to count the Running workers of the MPIJob not yet due",
    )
    untouched = families.resource_versions(cp, families.MPIJOBS, later_ns)

    dry = chart_sweep("--dry-run", "-o", "wide")
    assert (dry.result.returncode, families.writes(dry.requests)) == (0, []), dry.explain()
    assert "set-deadline (platform-deadline)" in dry.result.stdout, dry.explain()

    first = chart_sweep()
    assert first.result.returncode == 0, first.explain()
    assert families.writes(first.requests) == [
        ("patch", "jobs", "capped-launcher"),
        ("create", "events", ""),
    ], first.explain()
    written = families.get(cp, families.JOBS, capped_ns, "capped-launcher") or {}
    launched = parse_stamp(launcher["status"]["startTime"])
    seconds = written["spec"]["activeDeadlineSeconds"]
    assert launched + dt.timedelta(seconds=seconds) >= cap_at, "never before the cap"

    failed = poll(
        lambda: (
            job
            if families.condition(job := _mpijob(mpi_cluster, capped_ns, "capped"), "Failed")
            and job["status"].get("completionTime")
            else None
        ),
        timeout=90,
        what="mpi-operator to record the launcher's failure",
    )
    condition = families.condition(failed, "Failed") or {}
    assert condition.get("reason") == "DeadlineExceeded", condition
    job_failed = families.condition(
        families.get(cp, families.JOBS, capped_ns, "capped-launcher"), "Failed"
    )
    assert (job_failed or {}).get("reason") == "DeadlineExceeded", "the Job controller did"
    assert parse_stamp(str((job_failed or {})["lastTransitionTime"])) >= cap_at.replace(
        microsecond=0
    )

    second = chart_sweep()
    assert second.result.returncode == 0, second.explain()
    deleted = [w for verb, resource, w in families.writes(second.requests) if resource == "pods"]
    assert sorted(deleted) == sorted(pod["metadata"]["name"] for pod in workers)
    assert _active_workers(mpi_cluster, capped_ns, "capped") == []
    assert sorted(families.events_on(cp, capped_ns, failed)) == [
        "DeadlinePodsTerminated",
        "DeadlineSet",
    ]

    assert families.resource_versions(cp, families.MPIJOBS, later_ns) == untouched
    later_launcher = families.get(cp, families.JOBS, later_ns, "later-launcher") or {}
    assert later_launcher["spec"]["activeDeadlineSeconds"] == OWN
    assert _active_workers(mpi_cluster, later_ns, "later") != []
    assert families.events_on(cp, later_ns, _mpijob(mpi_cluster, later_ns, "later")) == []
