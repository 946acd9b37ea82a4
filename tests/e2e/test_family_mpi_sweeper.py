"""The sweeper on mpi-operator's MPIJobs (v2beta1), with mpi-operator and the Job controller real.

What ``test_family_mpi_alone`` shows is left behind, the sweeper reclaims, run with nothing but
its defaults (no ``--action``):

- an MPIJob failed at its deadline by the launcher Job's controller keeps its Running workers
  (the default ``cleanPodPolicy`` is ``None``): one run deletes them and records
  ``DeadlinePodsTerminated`` on the MPIJob; they stay gone across mpi-operator's full resync
  and the MPIJob stays Failed; a ``cleanPodPolicy: Running`` MPIJob is mpi-operator's to clean;
- a ``WaitForWorkersReady`` gang whose worker never gets ready has no launcher and so no
  deadline: past ``startTime + activeDeadlineSeconds`` the sweeper fails it as mpi-operator
  records a failure, and its workers go; mpi-operator keeps it Failed; a gang not yet due, and
  every object in a dry run, is left as it was;
- ``--watch`` arms both: the workers go when the MPIJob turns Failed, the gang is failed when
  its deadline passes, with no resync in between.
- a deadline added to an MPIJob, or shortened, after mpi-operator created its launcher Job is in
  no launcher (mpi-operator copies it only then): with no rules file and the chart's grant for
  that family, the sweeper writes it into the launcher, the Job controller fails it, and
  mpi-operator records ``DeadlineExceeded``; a dry run writes nothing.
- an MPIJob whose launcher fails by its exit keeps its workers too (mpi-operator#647): reported
  as finished holding pods (one ``GPUsHeld`` Event, nothing else written), then its Running and
  Pending workers deleted under a rule's ``reclaimFailedAfter``; the finished launcher stays.

Pods have no node: the workers are made Running through ``pods/status`` (a gang's second
worker stays Pending, never ready), and a pod without a node is deleted at once.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devcluster import ControlPlane
from tests.e2e import clusters, families
from tests.e2e.conftest_families import MPICluster
from tests.e2e.conftest_operator import poll, sleep_until
from tests.e2e.watchers import Watcher, wait_for
from tests.e2e.workloads import parse_stamp

pytestmark = [pytest.mark.e2e]

# Long enough for the workers to be made Running before it, even on a busy machine.
ADS = 6
WORKERS = 2
# The sweeper bound to the ClusterRole the chart renders for mpi-operator without rules.
CHART_USER = "sweeper-chart-mpi-no-rules"


def _start(
    cp: ControlPlane,
    namespace: str,
    name: str,
    *,
    ads: int = ADS,
    ready: int = WORKERS,
    launcher_creation_policy: str | None = None,
    clean_pod_policy: str | None = None,
) -> list[families.Obj]:
    """``families.start_mpijob`` with this module's deadline and workers."""
    return families.start_mpijob(
        cp,
        namespace,
        name,
        ads=ads,
        workers=WORKERS,
        ready=ready,
        clean_pod_policy=clean_pod_policy,
        launcher_creation_policy=launcher_creation_policy,
    )


def _mpijob(cp: ControlPlane, namespace: str, name: str) -> families.Obj:
    found = families.get(cp, families.MPIJOBS, namespace, name)
    assert found is not None, f"MPIJob {name} is gone"
    return found


def _started_at(cp: ControlPlane, namespace: str, name: str) -> dt.datetime:
    stamp = poll(
        lambda: _mpijob(cp, namespace, name).get("status", {}).get("startTime"),
        what=f"mpi-operator to write the startTime of {name}",
    )
    return parse_stamp(stamp)


def _full_resync(cluster: MPICluster, namespace: str, name: str) -> None:
    """Restart mpi-operator and wait until it has synced the MPIJob once from a fresh list."""
    cluster.mpi_operator.restart()
    cluster.mpi_operator.wait_for_log(
        rf'Finished syncing job "{re.escape(namespace)}/{re.escape(name)}"'
    )


def test_one_run_with_the_defaults_deletes_the_workers_mpi_operator_keeps_and_they_stay_gone(
    mpi_cluster: MPICluster, family_namespace: str, family_sweep: Callable[..., clusters.Sweep]
) -> None:
    cp, namespace = mpi_cluster.cp, family_namespace
    kept = _start(cp, namespace, "kept")
    _start(cp, namespace, "cleaned", clean_pod_policy="Running")
    early = families.condition(_mpijob(cp, namespace, "kept"), "Failed")
    assert early is None, "premise: the workers ran before the deadline (a slow machine?)"
    failed = families.mpijob_failed(cp, namespace, "kept")
    families.mpijob_failed(cp, namespace, "cleaned")
    reason = (families.condition(failed, "Failed") or {}).get("reason")
    assert reason == "DeadlineExceeded", "premise: the launcher Job's deadline failed it"
    launcher = families.get(cp, families.JOBS, namespace, "kept-launcher")
    job_failed = families.condition(launcher, "Failed") or {}
    assert job_failed.get("reason") == "DeadlineExceeded", "premise: the Job controller did"
    names = [pod["metadata"]["name"] for pod in kept]
    assert families.active_mpi_workers(cp, namespace, "kept") == names, (
        "premise: the workers stayed"
    )

    dry = family_sweep("-n", namespace, "--dry-run", "-o", "wide")
    assert (dry.result.returncode, families.writes(dry.requests)) == (0, []), dry.explain()
    rows = {
        line.split()[2]: line
        for line in dry.result.stdout.splitlines()
        if line.startswith("MPIJob ")
    }
    assert f"planned: pods {', '.join(names)}" in rows["kept"], dry.explain()
    # mpi-operator deletes these workers itself (it may not have yet): never the sweeper's.
    assert "cleanPodPolicy Running: mpi-operator deletes" in rows["cleaned"], dry.explain()

    run = family_sweep("-n", namespace)

    assert run.result.returncode == 0, run.explain()
    assert sorted(families.writes(run.requests)) == [
        ("create", "events", ""),
        *(("delete", "pods", name) for name in names),
    ], run.explain()
    row = next(line for line in run.result.stdout.splitlines() if " kept " in line)
    assert f"done: pods {', '.join(names)}" in row, run.explain()
    assert families.mpi_workers(cp, namespace, "kept") == []
    assert families.events_on(cp, namespace, failed) == ["DeadlinePodsTerminated"]

    _full_resync(mpi_cluster, namespace, "kept")
    assert families.mpi_workers(cp, namespace, "kept") == [], "mpi-operator re-created a worker"
    still = families.condition(_mpijob(cp, namespace, "kept"), "Failed") or {}
    assert still.get("reason") == "DeadlineExceeded", "the MPIJob stays Failed"
    assert _mpijob(cp, namespace, "kept")["status"].get("completionTime")
    # The second run finds nothing left: the workers are gone for good, not re-created.
    again = family_sweep("-n", namespace)
    assert (again.result.returncode, families.writes(again.requests)) == (0, []), again.explain()


def test_a_gang_past_its_deadline_is_failed_and_its_workers_go_after_dry_runs_wrote_nothing(
    mpi_cluster: MPICluster, family_namespace: str, family_sweep: Callable[..., clusters.Sweep]
) -> None:
    cp, namespace = mpi_cluster.cp, family_namespace
    waits = "WaitForWorkersReady"
    # One worker of each never gets ready: no launcher, so nothing else enforces a deadline.
    gang = _start(cp, namespace, "gang", ready=1, launcher_creation_policy=waits)
    _start(cp, namespace, "later", ads=3600, ready=1, launcher_creation_policy=waits)
    sleep_until(_started_at(cp, namespace, "gang") + dt.timedelta(seconds=ADS + 1))
    _started_at(cp, namespace, "later")
    assert families.get(cp, families.JOBS, namespace, "gang-launcher") is None, "premise"
    assert families.condition(_mpijob(cp, namespace, "gang"), "Failed") is None, "premise"
    names = [pod["metadata"]["name"] for pod in gang]
    assert families.active_mpi_workers(cp, namespace, "gang") == names, (
        "premise: Running and Pending"
    )
    before = families.resource_versions(cp, families.MPIJOBS, namespace)
    pods_before = families.resource_versions(cp, families.PODS, namespace)

    client = family_sweep("-n", namespace, "--dry-run")
    server = family_sweep("-n", namespace, "--dry-run=server")

    for run, sent in ((client, []), (server, [("patch?dryRun", "mpijobs/status", "gang")])):
        assert run.result.returncode == 0, run.explain()
        dry_writes = [w for w in families.writes(run.requests) if w[1] != "events"]
        assert sorted(dry_writes) == sorted(
            sent + [("delete?dryRun", "pods", name) for name in names if sent]
        ), run.explain()
        assert all("?dryRun" in verb for verb, _, _ in families.writes(run.requests))
        row = next(line for line in run.result.stdout.splitlines() if " gang " in line)
        assert f"pods {', '.join(names)}" in row, run.explain()
    assert families.resource_versions(cp, families.MPIJOBS, namespace) == before
    assert families.resource_versions(cp, families.PODS, namespace) == pods_before

    # The chart's `families: [training-operator]`: MPIJob v2beta1 is not that family's.
    other = family_sweep("-n", namespace, "--family", "training-operator", "--kind", "MPIJob")
    assert (other.result.returncode, families.writes(other.requests)) == (0, []), other.explain()
    assert " gang " not in other.result.stdout, other.explain()
    assert "by the mpi-operator family, which --family leaves out" in other.result.stderr
    assert families.resource_versions(cp, families.MPIJOBS, namespace) == before

    run = family_sweep("-n", namespace)

    assert run.result.returncode == 0, run.explain()
    failed = _mpijob(cp, namespace, "gang")
    condition = families.condition(failed, "Failed") or {}
    assert condition.get("reason") == "DeadlineExceeded", run.explain()
    assert failed["status"].get("completionTime"), run.explain()
    assert families.mpi_workers(cp, namespace, "gang") == [], run.explain()
    assert families.events_on(cp, namespace, failed) == ["DeadlineExceeded"]
    later = families.resource_versions(cp, families.MPIJOBS, namespace)["later"]
    assert later == before["later"], "a gang not yet due was written to"

    _full_resync(mpi_cluster, namespace, "gang")
    kept = families.condition(_mpijob(cp, namespace, "gang"), "Failed") or {}
    assert kept.get("reason") == "DeadlineExceeded", "mpi-operator undid the failure"
    assert families.mpi_workers(cp, namespace, "gang") == [], "mpi-operator re-created a worker"
    assert families.get(cp, families.JOBS, namespace, "gang-launcher") is None


def _fail_launcher(cp: ControlPlane, namespace: str, name: str) -> None:
    """Report the launcher's one pod Failed (exit 1), as its kubelet would."""
    selector = f"batch.kubernetes.io/job-name={name}-launcher"
    (pod,) = poll(
        lambda: families.pods(cp, namespace, selector) or None,
        what=f"the Job controller to create the launcher pod of {name}",
    )
    families.report_phase(cp, pod, "Failed")


def test_an_mpijob_whose_launcher_fails_keeps_its_workers_reported_then_freed_under_a_rule(
    mpi_cluster: MPICluster,
    family_namespace: str,
    family_sweep: Callable[..., clusters.Sweep],
    tmp_path: Path,
) -> None:
    """mpi-operator#647: a launcher failed by its exit (not its deadline) leaves the workers."""
    cp, namespace = mpi_cluster.cp, family_namespace
    body = families.mpijob("crash", ads=3600, workers=WORKERS)
    body["spec"]["runPolicy"]["backoffLimit"] = 0  # copied into the launcher Job
    families.create(cp, families.MPIJOBS, namespace, body)
    workers = poll(
        lambda: w if len(w := families.mpi_workers(cp, namespace, "crash")) == WORKERS else None,
        what="mpi-operator to create the workers of crash",
    )
    families.make_running(cp, workers[0])  # the other stays Pending
    _fail_launcher(cp, namespace, "crash")
    failed = families.mpijob_failed(cp, namespace, "crash")
    reason = (families.condition(failed, "Failed") or {}).get("reason", "")
    assert reason.startswith("BackoffLimitExceeded"), "premise: failed by its launcher's exit"
    names = [pod["metadata"]["name"] for pod in workers]
    assert families.active_mpi_workers(cp, namespace, "crash") == names, "premise: kept"

    seen = family_sweep("-n", namespace, "-o", "json", "--reclaim-grace", "0s")
    assert seen.result.returncode == 0, seen.explain()
    (held,) = json.loads(seen.result.stdout)["held"]
    assert (held["name"], held["state"], held["pods"], held["placed"], held["waiting"]) == (
        "crash",
        "finished-holding",
        2,
        1,
        names[1:],
    ), seen.explain()
    # Without a rule nothing is written but the one GPUsHeld Event.
    created = [(verb, what) for verb, what, _ in families.writes(seen.requests)]
    assert created == [("create", "events")], seen.explain()
    assert families.events_on(cp, namespace, failed) == ["GPUsHeld"]
    assert families.active_mpi_workers(cp, namespace, "crash") == names

    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {name: gpu-tenants, reclaimFailedAfter: 1s}\n")
    # The rule counts from the Failed condition's second: let that second and the next pass.
    ended = parse_stamp((families.condition(failed, "Failed") or {})["lastTransitionTime"])
    sleep_until(ended + dt.timedelta(seconds=2))
    dry = family_sweep("-n", namespace, "--policy", str(rules), "--dry-run", "-o", "wide")
    assert (dry.result.returncode, families.writes(dry.requests)) == (0, []), dry.explain()
    row = next(line for line in dry.result.stdout.splitlines() if " crash " in line)
    assert f"planned: pods {', '.join(names)}" in row, dry.explain()

    run = family_sweep("-n", namespace, "--policy", str(rules))

    assert run.result.returncode == 0, run.explain()
    deleted = [w for w in families.writes(run.requests) if w[1] != "events"]
    assert sorted(deleted) == [("delete", "pods", name) for name in names], run.explain()
    assert families.active_mpi_workers(cp, namespace, "crash") == [], run.explain()
    assert families.events_on(cp, namespace, failed) == ["GPUsHeld", "HeldPodsDeleted"]
    launcher = families.get(cp, families.JOBS, namespace, "crash-launcher")
    assert families.condition(launcher, "Failed"), "the finished launcher Job stays"
    _full_resync(mpi_cluster, namespace, "crash")
    assert families.mpi_workers(cp, namespace, "crash") == [], "mpi-operator re-created a worker"
    again = family_sweep("-n", namespace, "--policy", str(rules))
    assert again.result.returncode == 0, again.explain()
    assert families.writes(again.requests) == [], again.explain()


def _launcher(cp: ControlPlane, namespace: str, name: str) -> families.Obj:
    return poll(
        lambda: (
            job
            if (job := families.get(cp, families.JOBS, namespace, f"{name}-launcher"))
            and job.get("status", {}).get("startTime")
            else None
        ),
        what=f"the Job controller to start the launcher of {name}",
    )


def test_a_deadline_added_or_shortened_after_the_launcher_exists_is_written_into_it(
    mpi_cluster: MPICluster, family_namespace: str, family_sweep: Callable[..., clusters.Sweep]
) -> None:
    cp, namespace = mpi_cluster.cp, family_namespace
    _start(cp, namespace, "shortened", ads=3600)
    added = families.mpijob("added", ads=ADS, workers=WORKERS)
    del added["spec"]["runPolicy"]["activeDeadlineSeconds"]
    families.create(cp, families.MPIJOBS, namespace, added)
    for pod in poll(
        lambda: w if len(w := families.mpi_workers(cp, namespace, "added")) == WORKERS else None,
        what="mpi-operator to create the workers of added",
    ):
        families.make_running(cp, pod)
    launchers = {name: _launcher(cp, namespace, name) for name in ("added", "shortened")}
    assert launchers["shortened"]["spec"]["activeDeadlineSeconds"] == 3600, "premise: copied"
    assert "activeDeadlineSeconds" not in launchers["added"]["spec"], "premise: none to copy"
    for name in launchers:
        cp.request(
            "PATCH",
            f"{families.MPIJOBS.format(namespace=namespace)}/{name}",
            {"spec": {"runPolicy": {"activeDeadlineSeconds": ADS}}},
            content_type="application/merge-patch+json",
        )
    starts = {name: _started_at(cp, namespace, name) for name in launchers}
    sleep_until(max(starts.values()) + dt.timedelta(seconds=ADS + 1))
    for name in launchers:
        # mpi-operator synced the change (it may have, in the second slept) and copied nothing.
        now = families.get(cp, families.JOBS, namespace, f"{name}-launcher") or {}
        assert now["spec"].get("activeDeadlineSeconds") == launchers[name]["spec"].get(
            "activeDeadlineSeconds"
        ), "premise: mpi-operator left the launcher as it was"
        assert families.condition(_mpijob(cp, namespace, name), "Failed") is None, "premise"

    # As the chart runs it with no rules: its grant alone must let the launchers be written.
    chart = {"families": ["mpi-operator"]}
    waits = {"group": "batch", "resource": "jobs", "verb": "patch"}
    kubeconfig = families.chart_user(cp, CHART_USER, chart, waits=waits)

    def sweep(*args: str) -> clusters.Sweep:
        return family_sweep(
            "-n",
            namespace,
            "--family",
            "mpi-operator",
            *args,
            kubeconfig=kubeconfig,
            user=CHART_USER,
        )

    dry = sweep("--dry-run", "-o", "wide")
    assert (dry.result.returncode, families.writes(dry.requests)) == (0, []), dry.explain()
    assert dry.result.stdout.count("set-deadline (overdue)") == 2, dry.explain()

    run = sweep()

    assert run.result.returncode == 0, run.explain()
    assert sorted(families.writes(run.requests)) == [
        ("create", "events", ""),
        ("create", "events", ""),
        ("patch", "jobs", "added-launcher"),
        ("patch", "jobs", "shortened-launcher"),
    ], run.explain()
    for name, launcher in launchers.items():
        written = families.get(cp, families.JOBS, namespace, f"{name}-launcher") or {}
        seconds = written["spec"]["activeDeadlineSeconds"]
        launched = parse_stamp(launcher["status"]["startTime"])
        deadline = starts[name] + dt.timedelta(seconds=ADS)
        assert launched + dt.timedelta(seconds=seconds) >= deadline, "never before its deadline"
        failed = families.mpijob_failed(cp, namespace, name)
        reason = (families.condition(failed, "Failed") or {}).get("reason")
        assert reason == "DeadlineExceeded", run.explain()
        assert families.events_on(cp, namespace, failed) == ["DeadlineSet"]


@pytest.fixture
def watcher(mpi_cluster: MPICluster, family_namespace: str, tmp_path: Path) -> Iterator[Watcher]:
    """``sweeper --watch`` on the module's cluster, with a resync too far off to ever run."""
    kubeconfig = mpi_cluster.cp.user_kubeconfig(clusters.SWEEPER_USER, ["system:masters"])
    started = Watcher(kubeconfig, tmp_path, "-n", family_namespace, "--resync", "1h")
    yield started
    started.stop()


def _done(watcher: Watcher) -> list[tuple[str, str]]:
    return sorted((e["name"], e["action"]) for e in watcher.logs() if e.get("result") == "done")


def test_watch_reclaims_the_workers_when_the_mpijob_fails_and_fails_a_gang_at_its_deadline(
    mpi_cluster: MPICluster, family_namespace: str, watcher: Watcher
) -> None:
    cp, namespace = mpi_cluster.cp, family_namespace
    watcher.wait_ready()

    _start(cp, namespace, "kept")
    _start(cp, namespace, "gang", ready=1, launcher_creation_policy="WaitForWorkersReady")

    wait_for(lambda: not families.mpi_workers(cp, namespace, "gang"), "gang's workers", watcher)
    wait_for(lambda: not families.mpi_workers(cp, namespace, "kept"), "kept's workers", watcher)
    gang = _mpijob(cp, namespace, "gang")
    assert (families.condition(gang, "Failed") or {}).get("reason") == "DeadlineExceeded"
    assert families.get(cp, families.JOBS, namespace, "gang-launcher") is None
    kept = _mpijob(cp, namespace, "kept")
    assert (families.condition(kept, "Failed") or {}).get("reason") == "DeadlineExceeded", (
        "the workers went before mpi-operator failed the MPIJob"
    )
    # A fire that finds nothing left to do is logged too (left-alone): only the writes count.
    # Its line comes after the fire's Event, so after the deletes seen above: wait for it.
    wait_for(lambda: len(_done(watcher)) >= 2, "both actions logged", watcher)
    acted = _done(watcher)
    assert acted == [("gang", "fail"), ("kept", "terminate-pods")], watcher.explain()
    reclaimed = 'deadline_sweeper_reclaimed_total{family="mpi-operator",kind="MPIJob",what="pods"}'
    # The count follows the log line: wait for it too.
    wait_for(
        lambda: f"{reclaimed} {2.0 * WORKERS}" in watcher.metrics().splitlines(),
        "the workers counted",
        watcher,
    )
