"""A pass and the GPUs held for nothing: reported always, reclaimed only where a rule says so."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from sweeper.config import Config, DryRun, OutputFormat
from sweeper.core.errors import ApiError, Conflict, RequestRef
from sweeper.core.families import KIND_NAMES
from sweeper.core.families.training_operator import TFJOB
from sweeper.core.jobs import Job
from sweeper.core.model import Action, ActionKind, Enforcement, Outcome, Result, Why
from sweeper.core.platform import load_platform
from sweeper.core.tally import Tally
from sweeper.oneshot.run import run
from sweeper.stop import Stop
from tests.unit.fakes import FakeCluster, Request
from tests.unit.objects import NOW, condition, job, jobset, owned, stamp, trainjob
from tests.unit.oneshot.test_run import Ticker, server_at, sweep

RULES = """
rules:
  - name: gpu-tenants
    startDeadline: 15m
    reclaimFailedAfter: 1h
"""


def gpu_pod(
    name: str,
    owner: dict[str, Any],
    *,
    phase: str = "Running",
    placed: bool = True,
    scheduled_ago: float = 3600,
    gpus: int = 1,
) -> dict[str, Any]:
    """A pod of ``owner`` asking for ``gpus`` GPUs: placed on a node, or Pending unschedulable."""
    pod = owned(name, owner, phase=phase)
    limits = {"nvidia.com/gpu": gpus} if gpus else {}
    pod["spec"] = {"containers": [{"name": "main", "resources": {"limits": limits}}]}
    if placed:
        pod["spec"]["nodeName"] = "node-a"
        at = stamp(NOW - timedelta(seconds=scheduled_ago))
        scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": at}
    else:
        scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    pod["status"]["conditions"] = [scheduled]
    return pod


def stuck(fake: FakeCluster, name: str = "gang", labels: dict[str, str] | None = None) -> None:
    """A TFJob without a deadline: chief and a worker placed (a GPU each), one worker Pending."""
    raw = job("TFJob", name=name, deadline=None)
    raw["metadata"]["labels"] = labels or {}
    fake.add_job(raw)
    fake.add_pod(gpu_pod(f"{name}-chief-0", raw))
    fake.add_pod(gpu_pod(f"{name}-worker-0", raw, scheduled_ago=1200))
    fake.add_pod(gpu_pod(f"{name}-worker-1", raw, phase="Pending", placed=False))


def failed(fake: FakeCluster, name: str = "done") -> None:
    """A TFJob failed by a worker's exit two hours ago, its chief still Running, a pod done."""
    ended = condition("Failed", reason="TFJobFailed") | {
        "lastTransitionTime": stamp(NOW - timedelta(hours=2))
    }
    raw = fake.add_job(job("TFJob", name=name, deadline=None, conditions=[ended]))
    fake.add_pod(gpu_pod(f"{name}-chief-0", raw, gpus=2))
    fake.add_pod(gpu_pod(f"{name}-ps-0", raw, gpus=0))
    fake.add_pod(gpu_pod(f"{name}-worker-0", raw, phase="Failed"))


def text(fake: FakeCluster, config: Config) -> str:
    def connect(config: Config, *, stop: Stop) -> FakeCluster:
        return fake

    out = io.StringIO()
    run(config, connect, out, clock=Ticker())
    return out.getvalue()


def server() -> FakeCluster:
    fake = server_at(NOW)
    fake.add_namespace("team-a", {})
    return fake


def with_rules(**fields: Any) -> Config:
    return Config(platform=load_platform(RULES, "--policy r.yaml", KIND_NAMES), **fields)


def events_only(fake: FakeCluster) -> list[str]:
    """The reasons of the Events written, asserting that nothing else was."""
    assert all(w.method == "create-event" for w in fake.writes), fake.writes
    return sorted(w.body["reason"] for w in fake.writes)


def test_the_text_report_says_the_gpus_held_at_a_glance_and_writes_only_events() -> None:
    fake = server()
    stuck(fake)
    failed(fake)
    report = text(fake, Config())
    assert (
        "GPUs held for nothing: 2 by jobs stuck starting (3 pods), "
        "2 by finished jobs (2 pods)\n" in report
    )
    assert "Held:" not in report  # one line; -o wide names the jobs
    assert events_only(fake) == ["GPUsHeld", "GPUsHeld"]


def test_wide_names_each_job_its_gpus_and_the_pods_that_wait() -> None:
    fake = server()
    stuck(fake)
    report = text(fake, Config(output=OutputFormat.WIDE))
    assert (
        "Held: TFJob team-a/gang: stuck-starting; for 1h00m; 2 GPU(s) on 2 placed pod(s); "
        "waiting: gang-worker-1\n"
    ) in report


def test_json_lists_each_job_held_and_sums_them_by_state() -> None:
    fake = server()
    stuck(fake)
    failed(fake)
    waiting = fake.add_job(job("TFJob", name="queued", deadline=None))
    fake.add_pod(gpu_pod("queued-worker-0", waiting, phase="Pending", placed=False))
    code, passes = sweep(fake)
    assert code == 0
    held = {entry["name"]: entry for entry in passes[0]["held"]}
    assert held["gang"]["state"] == "stuck-starting"
    assert held["gang"]["gpus"] == 2
    assert held["gang"]["waiting"] == ["gang-worker-1"]
    assert held["gang"]["since"] == "2024-05-01T11:00:00Z"
    assert held["done"]["state"] == "finished-holding"
    assert (held["done"]["gpus"], held["done"]["pods"]) == (2, 2)
    assert held["queued"]["state"] == "waiting"
    assert passes[0]["summary"]["held"] == {
        "stuck-starting": {"pods": 3, "gpus": 2},
        "finished-holding": {"pods": 2, "gpus": 2},
        "waiting": {"pods": 1, "gpus": 0},
    }
    assert events_only(fake) == ["GPUsHeld", "GPUsHeld"]  # a waiting job holds nothing


def test_within_stuck_after_a_gang_is_not_stuck() -> None:
    fake = server()
    stuck(fake)
    _, passes = sweep(
        fake, Config(output=OutputFormat.JSON, enforcement=Enforcement(stuck_after=3601))
    )
    assert passes[0]["held"] == []


def test_a_kueue_job_is_reported_marked_and_never_ended() -> None:
    fake = server()
    stuck(fake, "kq", {"kueue.x-k8s.io/queue-name": "team-a"})
    code, passes = sweep(fake, with_rules(output=OutputFormat.JSON))
    assert code == 0
    assert passes[0]["held"][0]["kueue"] is True
    assert passes[0]["jobs"][0]["decision"] == "skip"
    assert events_only(fake) == ["GPUsHeld"]


def test_a_dry_run_names_the_job_it_would_end_and_the_pods_it_would_delete() -> None:
    fake = server()
    stuck(fake)
    failed(fake)
    code, passes = sweep(fake, with_rules(output=OutputFormat.JSON, dry_run=DryRun.CLIENT))
    assert code == 0
    jobs = {entry["name"]: entry for entry in passes[0]["jobs"]}
    assert (jobs["gang"]["decision"], jobs["gang"]["reason"]) == ("fail", "start-deadline")
    assert jobs["gang"]["result"] == "planned"
    assert "gang-worker-1" in jobs["gang"]["detail"]
    assert "platform rule gpu-tenants" in jobs["gang"]["detail"]
    assert sorted(jobs["gang"]["deleted"]["pods"]) == [
        "gang-chief-0",
        "gang-worker-0",
        "gang-worker-1",
    ]
    assert (jobs["done"]["decision"], jobs["done"]["reason"]) == (
        "terminate-pods",
        "finished-holding",
    )
    assert sorted(jobs["done"]["deleted"]["pods"]) == ["done-chief-0", "done-ps-0"]
    assert fake.writes == []


def test_start_deadline_fails_the_gang_then_frees_its_pods() -> None:
    fake = server()
    stuck(fake)
    code, passes = sweep(fake, with_rules(output=OutputFormat.JSON))
    assert code == 0
    writes = [(w.method, w.name) for w in fake.writes]
    assert writes[0] == ("patch-status", "gang")
    assert sorted(str(name) for method, name in writes if method == "delete-pod") == [
        "gang-chief-0",
        "gang-worker-0",
        "gang-worker-1",
    ]
    status = fake.job("tfjobs", "team-a", "gang")["status"]
    failed_condition = status["conditions"][-1]
    assert (failed_condition["type"], failed_condition["reason"]) == (
        "Failed",
        "StartDeadlineExceeded",
    )
    assert "startDeadline 15m00s of platform rule gpu-tenants" in failed_condition["message"]
    assert passes[0]["jobs"][0]["result"] == "done"


def test_reclaim_failed_after_deletes_the_active_pods_and_keeps_the_finished_ones() -> None:
    fake = server()
    failed(fake)
    code, _ = sweep(fake, with_rules(output=OutputFormat.JSON))
    assert code == 0
    deleted = sorted(str(w.name) for w in fake.writes if w.method == "delete-pod")
    assert deleted == ["done-chief-0", "done-ps-0"]
    assert all(w.method in ("delete-pod", "create-event") for w in fake.writes)


def test_reclaim_failed_after_says_so_in_its_own_event() -> None:
    # Not the deadline reclaim's DeadlinePodsTerminated: the job was not failed by a deadline.
    fake = server()
    failed(fake)
    sweep(fake, with_rules(output=OutputFormat.JSON))
    (event,) = [e for e in fake.events if e["reason"] != "GPUsHeld"]
    assert event["reason"] == "HeldPodsDeleted"
    assert event["message"].startswith("Deleted pods done-chief-0, done-ps-0 of a job Failed ")
    assert "past reclaimFailedAfter 1h00m of platform rule gpu-tenants" in event["message"]


def test_a_pod_list_refused_reports_nothing_held_and_the_deadlines_go_on() -> None:
    fake = server()
    stuck(fake)
    fake.add_job(job("TFJob", name="late"))
    forbidden = ApiError(RequestRef("list", "pods", None, None), 403, "pods is forbidden")
    fake.fail("list-pods", None, forbidden)
    code, passes = sweep(fake, with_rules(output=OutputFormat.JSON))
    assert code == 0
    assert passes[0]["held"] == []
    assert {j["name"]: j["decision"] for j in passes[0]["jobs"]} == {
        "gang": "skip",
        "late": "touch",
    }


def test_the_event_is_recorded_once_per_episode() -> None:
    fake = server()
    stuck(fake)
    sweep(fake)
    sweep(fake)
    (event,) = fake.events  # the second pass's create is refused: 409, the same name
    assert len(fake.writes) == 2
    assert event["type"] == "Warning"
    assert event["metadata"]["name"].startswith("gang.stuck-starting.")
    assert "stuck starting for 1h00m, 2 pod(s) holding 2 GPU(s)" in event["message"]


def test_a_gang_ended_by_its_start_deadline_is_no_overdue_job() -> None:
    fake = server()
    stuck(fake)
    _, passes = sweep(fake, with_rules(output=OutputFormat.JSON, dry_run=DryRun.CLIENT))
    assert passes[0]["jobs"][0]["reason"] == "start-deadline"
    tally = Tally.of(
        [
            Outcome(
                Action(Job(TFJOB, "v1", "a", "g", "u"), ActionKind.FAIL, Why.START_DEADLINE, 60.0),
                Result.PLANNED,
            )
        ]
    )
    assert not tally.overdue
    assert tally.max_overdue_s == 0


@pytest.mark.parametrize(
    ("make", "enforcement", "reason"),
    [
        pytest.param(stuck, Enforcement(stuck_after=7200), "start-deadline", id="startDeadline"),
        pytest.param(
            failed, Enforcement(reclaim_grace=86400), "finished-holding", id="reclaimFailedAfter"
        ),
    ],
)
def test_a_rule_key_shorter_than_the_flags_grace_acts_at_its_own_instant(
    make: Callable[[FakeCluster], None], enforcement: Enforcement, reason: str
) -> None:
    # The gang's first pod was scheduled an hour ago, the job failed two hours ago: past the
    # rule's keys, within the flags' graces (the node test's first failure: the rule waited).
    fake = server()
    make(fake)
    config = with_rules(output=OutputFormat.JSON, dry_run=DryRun.CLIENT, enforcement=enforcement)
    _, passes = sweep(fake, config)
    assert passes[0]["jobs"][0]["reason"] == reason


def test_warn_before_warns_once_ahead_of_a_start_deadline() -> None:
    # First pod scheduled an hour ago: a 90m startDeadline, warned 45m ahead, is due in 30m.
    fake = server()
    stuck(fake)
    rules = "rules:\n  - {name: gpu-tenants, startDeadline: 90m, warnBefore: 45m}\n"
    config = Config(output=OutputFormat.JSON, platform=load_platform(rules, "r.yaml", KIND_NAMES))
    _, passes = sweep(fake, config)
    sweep(fake, config)
    assert passes[0]["jobs"][0]["decision"] == "skip"
    reasons = sorted(event["reason"] for event in fake.events)
    assert reasons == ["GPUsHeld", "StartDeadlineApproaching"]
    (warning,) = [e for e in fake.events if e["reason"] == "StartDeadlineApproaching"]
    assert "ends it at 2024-05-01T12:30:00Z (startDeadline 1h30m)" in warning["message"]
    assert "1 waiting pod(s)" in warning["message"]


def test_pods_its_controller_never_created_wait_and_a_finished_one_was_created() -> None:
    fake = server()
    raw = job("TFJob", name="short", deadline=None)
    raw["spec"]["tfReplicaSpecs"] = {"Chief": {"replicas": 1}, "Worker": {"replicas": 3}}
    fake.add_job(raw)
    fake.add_pod(gpu_pod("short-chief-0", raw))
    fake.add_pod(gpu_pod("short-worker-0", raw, phase="Succeeded"))
    whole = job("TFJob", name="whole", deadline=None)
    whole["spec"]["tfReplicaSpecs"] = {"Worker": {"replicas": 2}}
    fake.add_job(whole)
    fake.add_pod(gpu_pod("whole-worker-0", whole))
    fake.add_pod(gpu_pod("whole-worker-1", whole, phase="Failed"))
    _, passes = sweep(fake)
    (held,) = passes[0]["held"]
    assert (held["name"], held["state"], held["pods"], held["missing"]) == (
        "short",
        "stuck-starting",
        3,
        2,
    )
    wide = text(fake, Config(output=OutputFormat.WIDE))
    assert "TFJob team-a/short: stuck-starting; for 1h00m; 1 GPU(s) on 1 placed pod(s); " in wide
    assert "waiting: 2 not created" in wide


def test_the_pods_are_listed_only_where_a_job_could_hold_them() -> None:
    # A namespace with no job (or whose job list was refused) costs no pod list.
    fake = server()
    stuck(fake)
    sweep(fake, Config(output=OutputFormat.JSON, namespaces=("team-a", "team-b")))
    lists = [r.namespace for r in fake.requests if r.method == "list-pods"]
    assert lists == ["team-a"]


def jobset_pod(name: str, trainjob: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A pod of the TrainJob's JobSet: controlled by one of its Jobs, named by JobSet's label."""
    pod = gpu_pod(name, trainjob, **fields)
    meta = pod["metadata"]
    meta["labels"] = {"jobset.sigs.k8s.io/jobset-name": trainjob["metadata"]["name"]}
    meta["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "uid": f"uid-job-{name}", "controller": True}
    ]
    return pod


def test_a_trainjobs_pods_are_its_jobsets_listed_once_in_its_namespace() -> None:
    fake = server()
    stuck(fake)
    tj = fake.add_job(trainjob("tj", "team-b", deadline=None))
    fake.add_pod(jobset_pod("tj-node-0-0", tj))
    fake.add_pod(jobset_pod("tj-node-0-1", tj, phase="Pending", placed=False))
    other = trainjob("other", "team-b", deadline=None)  # no such TrainJob: its pods count for none
    fake.add_pod(jobset_pod("other-node-0-0", other))
    _, passes = sweep(fake, Config(output=OutputFormat.JSON, namespaces=("team-a", "team-b")))
    lists = sorted((r.namespace, r.name) for r in fake.requests if r.method == "list-pods")
    assert lists == [
        ("team-a", "training.kubeflow.org/job-name"),
        ("team-b", "jobset.sigs.k8s.io/jobset-name"),
    ]
    held = {entry["name"]: entry for entry in passes[0]["held"]}
    assert (held["tj"]["state"], held["tj"]["gpus"], held["tj"]["waiting"]) == (
        "stuck-starting",
        1,
        ["tj-node-0-1"],
    )
    assert "other" not in held


def _finished_trainjob(fake: FakeCluster, **fields: Any) -> dict[str, Any]:
    tj = trainjob("tj", deadline=None, **fields)
    for ended in tj["status"]["conditions"]:
        ended["lastTransitionTime"] = stamp(NOW - timedelta(hours=2))
    fake.add_job(tj)
    fake.add_pod(jobset_pod("tj-node-0-0", tj, gpus=2))
    fake.jobsets[("team-a", "tj")] = jobset(tj)
    return tj


def test_a_complete_trainjob_holding_pods_loses_its_jobset_under_reclaim_failed_after() -> None:
    fake = server()
    _finished_trainjob(fake, complete=True)
    assert [h["state"] for h in sweep(fake)[1][0]["held"]] == ["finished-holding"]
    assert events_only(fake) == ["GPUsHeld"]

    code, passes = sweep(fake, with_rules(output=OutputFormat.JSON))

    assert code == 0
    (done,) = passes[0]["jobs"]
    assert (done["decision"], done["reason"], done["result"]) == (
        "delete-jobset",
        "finished-holding",
        "done",
    )
    assert [w.name for w in fake.writes if w.method == "delete-jobset"] == ["tj"]
    assert fake.jobsets == {}
    (event,) = [e for e in fake.events if e["reason"] == "HeldPodsDeleted"]
    assert event["message"].startswith("Deleted jobsets tj of a job Complete 2h00m ago")


def test_a_trainjob_failed_otherwise_than_by_its_deadline_is_reported_only() -> None:
    # The trainer drops such a Failed condition and re-creates a JobSet it then misses.
    fake = server()
    _finished_trainjob(fake, failed="JobSetFailed")
    code, passes = sweep(fake, with_rules(output=OutputFormat.JSON))
    assert code == 0
    assert [(h["name"], h["state"]) for h in passes[0]["held"]] == [("tj", "finished-holding")]
    assert passes[0]["jobs"][0]["decision"] == "skip"
    assert events_only(fake) == ["GPUsHeld"]


def test_a_trainjob_stuck_starting_is_never_failed_by_a_start_deadline() -> None:
    # The trainer drops a Failed condition not its deadline's, and re-applies its JobSet.
    fake = server()
    tj = fake.add_job(trainjob("tj", deadline=None))
    fake.add_pod(jobset_pod("tj-node-0-0", tj))
    fake.add_pod(jobset_pod("tj-node-0-1", tj, phase="Pending", placed=False))
    code, passes = sweep(fake, with_rules(output=OutputFormat.JSON))
    assert code == 0
    assert [(h["name"], h["state"]) for h in passes[0]["held"]] == [("tj", "stuck-starting")]
    assert passes[0]["jobs"][0]["decision"] == "skip"
    assert events_only(fake) == ["GPUsHeld"]


def _on_reread(fake: FakeCluster, change: Callable[[], None]) -> None:
    # Once the executor reads the gang again (a pass lists, it never gets), ``change`` it.
    def before(request: Request) -> None:
        if request.method == "get" and request.name == "gang":
            change()

    fake.before = before


def _placed(fake: FakeCluster) -> None:
    fake.pods[("team-a", "gang-worker-1")] = gpu_pod(
        "gang-worker-1", fake.job("tfjobs", "team-a", "gang")
    )


def _replaced(fake: FakeCluster) -> None:
    fake.job("tfjobs", "team-a", "gang")["metadata"]["uid"] = "uid-new"


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        pytest.param(_placed, "re-read: not stuck starting", id="its-last-pod-placed"),
        pytest.param(_replaced, "job replaced by a new one of the same name", id="replaced"),
    ],
)
def test_a_gang_no_longer_stuck_when_read_again_is_left_alone(
    change: Callable[[FakeCluster], None], detail: str
) -> None:
    fake = server()
    stuck(fake)
    _on_reread(fake, lambda: change(fake))
    code, passes = sweep(fake, with_rules(output=OutputFormat.JSON))
    assert code == 0
    (gang,) = passes[0]["jobs"]
    assert (gang["result"], gang["detail"]) == ("left-alone", detail)
    assert events_only(fake) == ["GPUsHeld"]


def test_a_gang_changed_under_its_start_deadline_fail_is_judged_again_next_pass() -> None:
    fake = server()
    stuck(fake)
    fake.fail(
        "patch-status", "gang", Conflict(RequestRef("patch", "tfjobs", "team-a", "gang"), 409)
    )
    code, passes = sweep(fake, with_rules(output=OutputFormat.JSON))
    assert code == 0
    (gang,) = passes[0]["jobs"]
    assert gang["result"] == "left-alone"
    assert gang["detail"] == "changed while being failed: judged again next pass"
    assert [w.method for w in fake.writes] == ["patch-status", "create-event"]


def test_a_refused_held_event_is_one_warning_line_and_the_pass_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = server()
    stuck(fake)
    refused = ApiError(RequestRef("create", "events", "team-a"), 403, "events is forbidden")
    fake.fail("create-event", None, refused)
    code, passes = sweep(fake, Config(output=OutputFormat.JSON))
    assert code == 0
    assert [h["name"] for h in passes[0]["held"]] == ["gang"]
    assert "TFJob team-a/gang: an Event of the GPUs it holds was refused" in caplog.text
