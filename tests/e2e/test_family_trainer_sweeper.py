"""The sweeper on Trainer v2's TrainJobs, with the trainer, JobSet and the Job controller real.

What ``test_family_trainer_alone`` shows is left behind, the sweeper reclaims: the JobSet of a
TrainJob failed at its deadline, whose delete the API server refused then (a
ValidatingAdmissionPolicy, as a cluster admin's policy or a webhook would). While the refusal
stands, the sweeper's delete is refused too: one error, exit 1, nothing else written. Once it
is lifted, dry runs (client and server) name the JobSet and write nothing, a run deletes it,
the TrainJob stays Failed and the trainer does not re-create the JobSet. A TrainJob failed for
another reason (its JobSet failed) and a running one before its deadline are left as they
were. ``--watch`` arms the JobSet's timer (``--reclaim-grace`` after the failure) and deletes
it with no resync in between.

GPUs held for nothing: a TrainJob's pods are its JobSet's Jobs' (JobSet's label names them), so
a TrainJob with one of its two nodes placed is reported stuck starting; a rule's
``startDeadline`` never ends it (nothing written but the ``GPUsHeld`` Event), because the
trainer drops a failure that is not its deadline's and applies a JobSet it misses: deleted, the
JobSet of a TrainJob failed otherwise comes back. A Complete TrainJob whose JobSet could not
delete its active Job (a policy refused it) is reported finished holding pods, and under a
rule's ``reclaimFailedAfter`` its JobSet is deleted, its pods go with it, the TrainJob stays
Complete and the trainer re-creates nothing.

Pods have no node and stay Pending; nothing here needs them to run.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devcluster import ControlPlane
from devcluster.admin import ADMIN_USER, ApiError
from tests.e2e import clusters, families
from tests.e2e.conftest_families import TrainerCluster
from tests.e2e.conftest_operator import poll
from tests.e2e.watchers import Watcher, wait_for

pytestmark = [pytest.mark.e2e]

# Long enough for the trainer to make the JobSet and the policy to take effect before it.
ADS = 8
# JobSet's reason when a child Job fails (jobset's api/jobset/v1alpha2, FailedJobsReason).
JOBSET_FAILED_REASON = "FailedJobs"
# The label JobSet v0.12.0 gives its Jobs' pods (labelAndAnnotateObject).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


def _trainjob(cp: ControlPlane, namespace: str, name: str) -> families.Obj:
    found = families.get(cp, families.TRAINJOBS, namespace, name)
    assert found is not None, f"TrainJob {name} is gone"
    return found


def _failed_reason(cp: ControlPlane, namespace: str, name: str) -> str | None:
    failed = families.condition(_trainjob(cp, namespace, name), "Failed")
    return None if failed is None else str(failed["reason"])


def _fail_jobset(cp: ControlPlane, namespace: str, name: str) -> None:
    """Write the JobSet Failed through ``jobsets/status``, as its controller does when a Job fails.

    The JobSet controller then keeps it finished, and the trainer copies the condition, its
    reason included, into the TrainJob.
    """
    message = "jobset failed due to one or more job failures"
    _finish_jobset(cp, namespace, name, "Failed", reason=JOBSET_FAILED_REASON, message=message)


def _finish_jobset(
    cp: ControlPlane, namespace: str, name: str, kind: str, *, reason: str, message: str
) -> None:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
    }
    cp.request(
        "PATCH",
        f"{families.JOBSETS.format(namespace=namespace)}/{name}/status",
        {"status": {"conditions": [condition]}},
        content_type="application/merge-patch+json",
    )


def _reconciles(cluster: TrainerCluster, namespace: str, name: str) -> int:
    """How many times the trainer has reconciled one TrainJob since it started (its V(2) log)."""
    key = re.compile(
        rf'"Reconciling TrainJob".*"trainJob":\{{"name":"{re.escape(name)}",'
        rf'"namespace":"{re.escape(namespace)}"\}}'
    )
    return len(key.findall(cluster.trainer.log_since_start()))


def _deletes_by(cp: ControlPlane, user: str, namespace: str, name: str, since: int) -> list[int]:
    """The status of each real (not dry-run) DELETE of the JobSet by ``user`` since an offset."""
    return [
        event.get("responseStatus", {}).get("code", 0)
        for event in cp.audit_events(user=user, since=since)
        if event["verb"] == "delete"
        and event.get("objectRef", {}).get("resource") == "jobsets"
        and event["objectRef"].get("namespace") == namespace
        and event["objectRef"].get("name") == name
        and "dryRun" not in event["requestURI"]
    ]


def test_a_jobset_left_by_a_refused_delete_goes_once_the_refusal_is_lifted_and_no_other(
    trainer_cluster: TrainerCluster,
    family_namespace: str,
    family_sweep: Callable[..., clusters.Sweep],
) -> None:
    cp, namespace = trainer_cluster.cp, family_namespace
    grace = ("--reclaim-grace", "0s")
    since = cp.audit_offset()

    with families.refusing_jobset_deletes(cp, namespace):
        families.start_trainjob(cp, namespace, "train", ads=ADS)
        families.start_trainjob(cp, namespace, "running", ads=3600)
        families.start_trainjob(cp, namespace, "other", ads=3600)
        poll(
            lambda: families.jobset_delete_refused(cp, namespace, "train"),
            what="the policy to refuse deleting the JobSet",
        )
        assert _failed_reason(cp, namespace, "train") is None, "premise: refused in time"
        _fail_jobset(cp, namespace, "other")
        poll(
            lambda: _failed_reason(cp, namespace, "other") == JOBSET_FAILED_REASON,
            what="the trainer to fail the TrainJob whose JobSet failed",
        )
        poll(
            lambda: _failed_reason(cp, namespace, "train") == "DeadlineExceeded",
            what="the trainer to fail the TrainJob at its deadline",
        )
        assert _deletes_by(cp, ADMIN_USER, namespace, "train", since) == [403], "premise"
        trainjobs = families.resource_versions(cp, families.TRAINJOBS, namespace)
        jobsets = families.resource_versions(cp, families.JOBSETS, namespace)

        refused = family_sweep("-n", namespace, *grace)

        assert refused.result.returncode == 1, refused.explain()
        assert families.writes(refused.requests) == [("delete", "jobsets", "train")]
        [row] = [line for line in refused.result.stdout.splitlines() if " train " in line]
        assert "error" in row, refused.explain()
        assert f"deleting JobSets is refused in namespace {namespace}" in row, refused.explain()
        assert families.resource_versions(cp, families.JOBSETS, namespace) == jobsets

    poll(
        lambda: not families.jobset_delete_refused(cp, namespace, "train"),
        what="the lifted policy to stop refusing",
    )
    for dry_run, sent in (("client", []), ("server", ["create?dryRun", "delete?dryRun"])):
        dry = family_sweep("-n", namespace, *grace, f"--dry-run={dry_run}")
        assert dry.result.returncode == 0, dry.explain()
        assert sorted(verb for verb, _, _ in families.writes(dry.requests)) == sent
        row = next(line for line in dry.result.stdout.splitlines() if " train " in line)
        assert "jobset train" in row, dry.explain()
    assert families.resource_versions(cp, families.JOBSETS, namespace) == jobsets
    reconciled = _reconciles(trainer_cluster, namespace, "train")

    run = family_sweep("-n", namespace, *grace)

    assert run.result.returncode == 0, run.explain()
    assert sorted(families.writes(run.requests)) == [
        ("create", "events", ""),
        ("delete", "jobsets", "train"),
    ], run.explain()
    poll(
        lambda: families.get(cp, families.JOBSETS, namespace, "train") is None,
        what="the deleted JobSet to be gone",
    )
    # The JobSet's deletion is an event of the TrainJob that owns it: the trainer reconciles.
    poll(
        lambda: _reconciles(trainer_cluster, namespace, "train") > reconciled,
        what="the trainer to reconcile the TrainJob after its JobSet went",
    )
    assert families.get(cp, families.JOBSETS, namespace, "train") is None, "re-created"
    assert _failed_reason(cp, namespace, "train") == "DeadlineExceeded", "no longer Failed"
    train = _trainjob(cp, namespace, "train")
    assert families.events_on(cp, namespace, train) == ["DeadlineJobSetDeleted"]
    after = families.resource_versions(cp, families.TRAINJOBS, namespace)
    assert {name: after[name] for name in ("running", "other")} == {
        name: trainjobs[name] for name in ("running", "other")
    }
    left = families.resource_versions(cp, families.JOBSETS, namespace)
    assert left == {name: jobsets[name] for name in ("running", "other")}


def _two_nodes(cp: ControlPlane, namespace: str, name: str) -> list[families.Obj]:
    """A TrainJob of two nodes: its JobSet's two pods, the first Running (placed), the other
    Pending on no node."""
    body = families.trainjob(name, ads=3600)
    body["spec"]["trainer"]["numNodes"] = 2
    families.create(cp, families.TRAINJOBS, namespace, body)
    selector = f"{JOBSET_NAME_LABEL}={name}"
    pods = poll(
        lambda: found if len(found := families.pods(cp, namespace, selector)) == 2 else None,
        what="the Job controller to create the two pods of the JobSet's node Job",
    )
    families.make_running(cp, pods[0])
    return pods


def test_a_trainjob_with_half_its_nodes_placed_is_reported_stuck_and_never_ended(
    trainer_cluster: TrainerCluster,
    family_namespace: str,
    family_sweep: Callable[..., clusters.Sweep],
    tmp_path: Path,
) -> None:
    cp, namespace = trainer_cluster.cp, family_namespace
    pods = _two_nodes(cp, namespace, "gang")
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {name: gpu-tenants, startDeadline: 1s}\n")
    time.sleep(1.5)  # past the rule's startDeadline, counted from the placed pod's scheduling

    run = family_sweep("-n", namespace, "-o", "json", "--policy", str(rules))

    assert run.result.returncode == 0, run.explain()
    document = json.loads(run.result.stdout)
    (held,) = document["held"]
    assert (held["name"], held["state"], held["placed"], held["waiting"]) == (
        "gang",
        "stuck-starting",
        1,
        [pods[1]["metadata"]["name"]],
    ), run.explain()
    assert [job["decision"] for job in document["jobs"]] == ["skip"], run.explain()
    created = [(verb, what) for verb, what, _ in families.writes(run.requests)]
    assert created == [("create", "events")], run.explain()
    assert families.events_on(cp, namespace, _trainjob(cp, namespace, "gang")) == ["GPUsHeld"]
    assert _failed_reason(cp, namespace, "gang") is None


def _complete_jobset(cp: ControlPlane, namespace: str, name: str) -> None:
    """Write the JobSet Completed, as its controller does once its success policy is met."""
    message = "jobset completed successfully"
    _finish_jobset(cp, namespace, name, "Completed", reason="AllJobsCompleted", message=message)


def _foreground_delete_refused(cp: ControlPlane, namespace: str, job: str) -> bool:
    # A DELETE with a body takes its options from the body alone: the dry run goes there too.
    options = {"propagationPolicy": "Foreground", "dryRun": ["All"]}
    path = f"{families.JOBS.format(namespace=namespace)}/{job}"
    try:
        cp.request("DELETE", path, options, expect=(200, 202))
    except ApiError as e:
        if e.status == 403:  # Forbidden: the policy's answer
            return True
        raise
    return False


def test_a_complete_trainjob_still_holding_pods_loses_its_jobset_under_reclaim_failed_after(
    trainer_cluster: TrainerCluster,
    family_namespace: str,
    family_sweep: Callable[..., clusters.Sweep],
    tmp_path: Path,
) -> None:
    # JobSet deletes a finished JobSet's active Jobs (foreground); a policy refuses it here.
    cp, namespace = trainer_cluster.cp, family_namespace
    selector = f"{JOBSET_NAME_LABEL}=done"
    with families.refusing_foreground_job_deletes(cp, namespace):
        pods = _two_nodes(cp, namespace, "done")
        poll(
            lambda: _foreground_delete_refused(cp, namespace, "done-node-0"),
            what="the policy to refuse JobSet's delete of its Job",
        )
        _complete_jobset(cp, namespace, "done")
        poll(
            lambda: families.condition(_trainjob(cp, namespace, "done"), "Complete"),
            what="the trainer to copy the JobSet's Completed",
        )
        names = [pod["metadata"]["name"] for pod in pods]
        active = [p["metadata"]["name"] for p in families.pods(cp, namespace, selector)]
        assert active == names, "premise: JobSet could not delete its Job"

        seen = family_sweep("-n", namespace, "-o", "json", "--reclaim-grace", "0s")
        assert seen.result.returncode == 0, seen.explain()
        (held,) = json.loads(seen.result.stdout)["held"]
        assert (held["name"], held["state"], held["pods"]) == (
            "done",
            "finished-holding",
            2,
        ), seen.explain()
        created = [(verb, what) for verb, what, _ in families.writes(seen.requests)]
        assert created == [("create", "events")], seen.explain()

        rules = tmp_path / "rules.yaml"
        rules.write_text("rules:\n  - {name: gpu-tenants, reclaimFailedAfter: 1s}\n")
        time.sleep(1.5)  # past reclaimFailedAfter, counted from the Complete condition
        reconciled = _reconciles(trainer_cluster, namespace, "done")
        run = family_sweep("-n", namespace, "-o", "json", "--policy", str(rules))

        assert run.result.returncode == 0, run.explain()
        (done,) = json.loads(run.result.stdout)["jobs"]
        assert (done["decision"], done["reason"], done["result"]) == (
            "delete-jobset",
            "finished-holding",
            "done",
        ), run.explain()
        deleted = [w for w in families.writes(run.requests) if w[1] != "events"]
        assert deleted == [("delete", "jobsets", "done")], run.explain()
        # The garbage collector deletes the JobSet's Job (in the background), then its pods.
        poll(
            lambda: not families.pods(cp, namespace, selector),
            what="the JobSet's pods to go with it",
        )
    poll(
        lambda: _reconciles(trainer_cluster, namespace, "done") > reconciled,
        what="the trainer to reconcile the TrainJob after its JobSet went",
    )
    assert families.get(cp, families.JOBSETS, namespace, "done") is None, "re-created"
    done_job = _trainjob(cp, namespace, "done")
    assert families.condition(done_job, "Complete"), "the TrainJob stays Complete"
    assert families.events_on(cp, namespace, done_job) == ["GPUsHeld", "HeldPodsDeleted"]


def test_the_trainer_re_creates_the_jobset_of_a_trainjob_failed_otherwise(
    trainer_cluster: TrainerCluster, family_namespace: str
) -> None:
    # Why a rule's reclaimFailedAfter leaves such a TrainJob's JobSet alone (recreates_pods).
    cp, namespace = trainer_cluster.cp, family_namespace
    families.start_trainjob(cp, namespace, "other", ads=3600)
    _fail_jobset(cp, namespace, "other")
    poll(
        lambda: _failed_reason(cp, namespace, "other") == JOBSET_FAILED_REASON,
        what="the trainer to fail the TrainJob whose JobSet failed",
    )
    first = families.get(cp, families.JOBSETS, namespace, "other") or {}
    cp.request("DELETE", f"{families.JOBSETS.format(namespace=namespace)}/other")
    poll(
        lambda: (
            (again := families.get(cp, families.JOBSETS, namespace, "other"))
            and again["metadata"]["uid"] != first["metadata"]["uid"]
        ),
        what="the trainer to apply the JobSet it misses",
    )


@pytest.fixture
def watcher(
    trainer_cluster: TrainerCluster, family_namespace: str, tmp_path: Path
) -> Iterator[Watcher]:
    """``sweeper --watch`` on the module's cluster, with a resync too far off to ever run."""
    kubeconfig = trainer_cluster.cp.user_kubeconfig(clusters.SWEEPER_USER, ["system:masters"])
    started = Watcher(
        kubeconfig,
        tmp_path,
        "-n",
        family_namespace,
        "--resync",
        "1h",
        "--reclaim-grace",
        "5s",
    )
    yield started
    started.stop()


def _done(watcher: Watcher) -> list[tuple[str, str]]:
    return [(e["name"], e["action"]) for e in watcher.logs() if e.get("result") == "done"]


def test_watch_deletes_the_jobset_left_behind_when_its_reclaim_grace_has_passed(
    trainer_cluster: TrainerCluster, family_namespace: str, watcher: Watcher
) -> None:
    cp, namespace, name = trainer_cluster.cp, family_namespace, "train"
    watcher.wait_ready()
    since = cp.audit_offset()

    with families.refusing_jobset_deletes(cp, namespace):
        families.start_trainjob(cp, namespace, name, ads=ADS)
        poll(
            lambda: families.jobset_delete_refused(cp, namespace, name),
            what="the policy to refuse deleting the JobSet",
        )
        poll(
            lambda: _failed_reason(cp, namespace, name) == "DeadlineExceeded",
            what="the trainer to fail the TrainJob at its deadline",
        )
        assert _deletes_by(cp, ADMIN_USER, namespace, name, since) == [403], "premise"

    wait_for(lambda: families.get(cp, families.JOBSETS, namespace, name) is None, "JobSet", watcher)
    assert _deletes_by(cp, clusters.SWEEPER_USER, namespace, name, since)[-1:] == [200]
    assert _failed_reason(cp, namespace, name) == "DeadlineExceeded"
    # The action's line comes after its Event, so after the delete seen above: wait for it.
    wait_for(lambda: bool(_done(watcher)), "the delete logged", watcher)
    assert _done(watcher) == [(name, "delete-jobset")], watcher.explain()
    reclaimed = 'deadline_sweeper_reclaimed_total{family="trainer",kind="TrainJob",what="jobsets"}'
    # The count follows the log line: wait for it too.
    wait_for(
        lambda: f"{reclaimed} 1.0" in watcher.metrics().splitlines(), "the JobSet counted", watcher
    )
