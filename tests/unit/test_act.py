"""The executor against an in-memory fake of the project's own Cluster interface."""

from __future__ import annotations

from typing import Any

import pytest

from sweeper.act.cleanup import leftovers_by_owner
from sweeper.act.executor import Executor, refused
from sweeper.config import DryRun
from sweeper.core.clock import SYSTEM_CLOCK
from sweeper.core.decide import decide
from sweeper.core.errors import ApiError, Interrupted, NotFound, RequestRef, SweeperError
from sweeper.core.jobs import parse_job
from sweeper.core.kinds import COMPONENT, TOUCHED_AT_ANNOTATION
from sweeper.core.model import ActionMode, Enforcement, Outcome, PodsMode, Result
from sweeper.stop import Stop
from tests.unit.fakes import FakeCluster, Request
from tests.unit.objects import KIND, NOW, condition, deadline_failed, job, owned

FAIL = Enforcement(action=ActionMode.FAIL)
TOUCH = Enforcement()


def cluster_with(*raws: dict[str, Any]) -> FakeCluster:
    fake = FakeCluster()
    for raw in raws:
        fake.add_job(raw)
    return fake


def with_pods(fake: FakeCluster, raw: dict[str, Any], phases: dict[str, str]) -> None:
    for name, phase in phases.items():
        fake.add_pod(owned(name, raw, phase=phase))
        fake.add_service(owned(name, raw, phase=None))


def execute(
    fake: FakeCluster,
    enforcement: Enforcement = TOUCH,
    dry_run: DryRun | None = None,
    stop: Stop | None = None,
) -> list[Outcome]:
    jobs = [parse_job(raw, KIND[raw["kind"]]) for raw in fake.jobs.values()]
    plan = decide(jobs, NOW, enforcement)
    execution = Executor(fake, dry_run=dry_run, stop=stop or Stop(SYSTEM_CLOCK)).execute(plan)
    return list(execution.outcomes)


def only(outcomes: list[Outcome], name: str = "train") -> Outcome:
    return next(o for o in outcomes if o.entry.job.name == name)


# --- touch -------------------------------------------------------------------------------------


def test_touch_patches_the_annotation_and_records_a_normal_event() -> None:
    fake = cluster_with(job())
    outcome = only(execute(fake))
    assert outcome.result is Result.DONE
    assert fake.methods() == ["patch", "create-event"]
    annotations = fake.job("pytorchjobs", "team-a", "train")["metadata"]["annotations"]
    assert annotations == {TOUCHED_AT_ANNOTATION: "2024-05-01T12:00:00Z"}
    event = fake.events[0]
    assert (event["type"], event["reason"]) == ("Normal", "DeadlineTouched")
    assert event["reportingComponent"] == event["source"]["component"] == COMPONENT
    assert event["involvedObject"]["uid"] == "uid-PyTorchJob-team-a-train"
    assert "1h00m past its activeDeadlineSeconds" in event["message"]


def test_touch_reports_the_patch_it_sent() -> None:
    fake = cluster_with(job())
    outcome = only(execute(fake))
    assert outcome.body == fake.writes[0].body


# --- fail --------------------------------------------------------------------------------------


def test_fail_writes_the_status_then_deletes_active_pods_and_their_services() -> None:
    raw = job()
    fake = cluster_with(raw)
    with_pods(fake, raw, {"w-0": "Running", "w-1": "Pending", "w-2": "Succeeded"})
    outcome = only(execute(fake, FAIL))
    assert outcome.result is Result.DONE
    assert fake.methods() == [
        "get",
        "patch-status",
        "list-pods",
        "list-services",
        "delete-pod",
        "delete-service",
        "delete-pod",
        "delete-service",
        "create-event",
    ]
    assert (outcome.pods, outcome.services) == (("w-0", "w-1"), ("w-0", "w-1"))
    assert set(fake.pods) == {("team-a", "w-2")}
    status = fake.job("pytorchjobs", "team-a", "train")["status"]
    assert status["conditions"][-1]["reason"] == "PyTorchJobFailed"
    assert fake.events[0]["type"] == "Warning"
    assert fake.events[0]["reason"] == "DeadlineExceeded"


def test_fail_sends_the_resource_version_it_just_read() -> None:
    fake = cluster_with(job(resource_version="77"))
    execute(fake, FAIL)
    status_write = next(r for r in fake.requests if r.method == "patch-status")
    assert status_write.body["metadata"] == {"resourceVersion": "77"}


@pytest.mark.parametrize(
    ("mode", "clean_pod_policy", "deleted"),
    [
        pytest.param("all", None, ("w-0", "w-1", "w-2"), id="all"),
        pytest.param("policy", None, (), id="policy-absent"),
        pytest.param("policy", "Running", ("w-0", "w-1"), id="policy-Running"),
        pytest.param("policy", "All", ("w-0", "w-1", "w-2"), id="policy-All"),
    ],
)
def test_fail_deletes_pods_per_terminate_pods(
    mode: str, clean_pod_policy: str | None, deleted: tuple[str, ...]
) -> None:
    raw = job(clean_pod_policy=clean_pod_policy)
    fake = cluster_with(raw)
    with_pods(fake, raw, {"w-0": "Running", "w-1": "Pending", "w-2": "Failed"})
    outcome = only(
        execute(fake, Enforcement(action=ActionMode.FAIL, terminate_pods=PodsMode(mode)))
    )
    assert outcome.pods == deleted


def test_pods_of_another_job_with_the_same_label_are_kept() -> None:
    raw = job()
    fake = cluster_with(raw)
    fake.add_pod(owned("impostor", raw, owner_uid="another-uid"))
    only(execute(fake, FAIL))
    assert ("team-a", "impostor") in fake.pods


def test_a_conflict_rereads_decides_again_and_retries() -> None:
    fake = cluster_with(job())
    writes = []

    def operator_writes_before_our_first_write(request: Request) -> None:
        if request.method == "patch-status":
            writes.append(request)
            if len(writes) == 1:  # between our first read and our write
                fake.job("pytorchjobs", "team-a", "train")["metadata"]["resourceVersion"] = "2"

    fake.before = operator_writes_before_our_first_write
    outcome = only(execute(fake, FAIL))
    assert outcome.result is Result.DONE
    assert [m for m in fake.methods() if m in ("get", "patch-status")] == [
        "get",
        "patch-status",
        "get",
        "patch-status",
    ]
    assert fake.job("pytorchjobs", "team-a", "train")["status"]["conditions"][-1]["type"] == (
        "Failed"
    )


def test_a_job_that_keeps_conflicting_is_an_error_after_three_attempts() -> None:
    fake = cluster_with(job())

    def operator_writes_before_each_of_ours(request: Request) -> None:
        if request.method == "patch-status":
            meta = fake.job("pytorchjobs", "team-a", "train")["metadata"]
            meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    fake.before = operator_writes_before_each_of_ours
    outcome = only(execute(fake, FAIL))
    assert outcome.result is Result.ERROR
    assert fake.methods().count("patch-status") == 3
    assert "delete-pod" not in fake.methods()
    assert outcome.errors == (
        "cannot patch pytorchjobs.kubeflow.org/status 'train' in namespace \"team-a\": "
        "conflict (409) on 3 attempts",
    )


def test_a_job_that_finished_meanwhile_is_left_alone() -> None:
    fake = cluster_with(job())

    def succeed_before_get(request: Request) -> None:
        if request.method == "get":
            raw = fake.job("pytorchjobs", "team-a", "train")
            raw["status"]["conditions"].append(condition("Succeeded"))

    fake.before = succeed_before_get
    outcome = only(execute(fake, FAIL))
    assert (outcome.result, outcome.detail) == (
        Result.LEFT_ALONE,
        "re-read: now skip (finished)",
    )
    assert fake.writes == []


def test_a_job_deleted_meanwhile_is_left_alone() -> None:
    fake = cluster_with(job())
    fake.fail("get", "train", NotFound(RequestRef("get", "pytorchjobs"), 404))
    outcome = only(execute(fake, FAIL))
    assert (outcome.result, outcome.detail) == (Result.LEFT_ALONE, "job deleted meanwhile")


def test_a_job_replaced_by_a_namesake_is_left_alone() -> None:
    fake = cluster_with(job())

    def replace_before_the_re_read(request: Request) -> None:
        if request.method == "get":
            fake.job("pytorchjobs", "team-a", "train")["metadata"]["uid"] = "new"

    fake.before = replace_before_the_re_read
    outcome = only(execute(fake, FAIL))
    assert outcome.result is Result.LEFT_ALONE
    assert fake.writes == []


# --- terminate-pods ----------------------------------------------------------------------------


def test_a_deadline_failed_job_with_running_pods_gets_them_terminated() -> None:
    raw = job(conditions=deadline_failed())
    fake = cluster_with(raw)
    with_pods(fake, raw, {"w-0": "Running", "w-1": "Succeeded"})
    outcome = only(execute(fake, FAIL))
    assert (outcome.entry.decision, outcome.result) == ("terminate-pods", Result.DONE)
    assert outcome.pods == ("w-0",)
    assert fake.events[0]["reason"] == "DeadlinePodsTerminated"


def test_a_deadline_failed_job_without_pods_is_left_alone_without_writes() -> None:
    fake = cluster_with(job(conditions=deadline_failed()))
    outcome = only(execute(fake, FAIL))
    assert (outcome.result, outcome.detail) == (Result.LEFT_ALONE, "no pods left to terminate")
    assert fake.writes == []


def test_a_pod_replaced_under_the_same_name_is_not_deleted_and_not_an_error() -> None:
    raw = job(conditions=deadline_failed())
    fake = cluster_with(raw)
    with_pods(fake, raw, {"w-0": "Running"})

    def recreate_after_the_list(request: Request) -> None:
        if request.method == "delete-pod":
            fake.pods[("team-a", "w-0")]["metadata"]["uid"] = "recreated"

    fake.before = recreate_after_the_list
    outcome = only(execute(fake, FAIL))
    assert (outcome.result, outcome.pods, outcome.errors) == (Result.LEFT_ALONE, (), ())
    assert ("team-a", "w-0") in fake.pods


# --- dry runs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "enforcement",
    [Enforcement(), FAIL, Enforcement(action=ActionMode.AUTO)],
    ids=["touch", "fail", "auto"],
)
def test_client_dry_run_sends_no_write_and_reports_the_body(enforcement: Enforcement) -> None:
    raw = job()
    failed = job(name="failed", conditions=deadline_failed("failed"))
    fake = cluster_with(raw, failed)
    with_pods(fake, raw, {"w-0": "Running"})
    with_pods(fake, failed, {"f-0": "Running"})
    outcomes = execute(fake, enforcement, dry_run=DryRun.CLIENT)
    assert fake.writes == []
    acted = [o for o in outcomes if o.result is not Result.SKIPPED]
    assert acted
    assert all(o.result is Result.PLANNED for o in acted)
    assert all(o.body is not None for o in acted if o.entry.decision != "terminate-pods")


def test_client_dry_run_of_fail_names_the_pods_it_would_delete() -> None:
    raw = job()
    fake = cluster_with(raw)
    with_pods(fake, raw, {"w-0": "Running"})
    outcome = only(execute(fake, FAIL, dry_run=DryRun.CLIENT))
    assert (outcome.pods, outcome.services) == (("w-0",), ("w-0",))
    assert outcome.body is not None
    assert outcome.body["status"]["conditions"][-1]["type"] == "Failed"


def test_server_dry_run_sends_every_write_with_dry_run_and_changes_nothing() -> None:
    raw = job()
    fake = cluster_with(raw, job(name="other", started_ago=4000))
    with_pods(fake, raw, {"w-0": "Running"})
    before = repr((fake.jobs, fake.pods, fake.services))
    outcomes = execute(fake, FAIL, dry_run=DryRun.SERVER)
    assert fake.writes
    assert all(request.dry_run for request in fake.writes)
    assert repr((fake.jobs, fake.pods, fake.services)) == before
    assert fake.events == []
    assert {o.result for o in outcomes} == {Result.DRY_RUN}


# --- failures stay with their job --------------------------------------------------------------


def forbidden(verb: str, resource: str) -> ApiError:
    return ApiError(RequestRef(verb, resource, "team-a", "a"), 403)


def test_one_failing_job_does_not_stop_the_others() -> None:
    fake = cluster_with(job(name="a"), job(name="b"))
    fake.fail("patch", "a", forbidden("patch", "pytorchjobs.kubeflow.org"))
    outcomes = execute(fake)
    assert only(outcomes, "a").result is Result.ERROR
    assert only(outcomes, "a").errors == (
        "touch refused: cannot patch pytorchjobs.kubeflow.org 'a' in namespace \"team-a\": "
        "forbidden (403)",
    )
    assert only(outcomes, "b").result is Result.DONE


def test_a_failed_pod_delete_is_an_error_of_a_done_fail() -> None:
    raw = job()
    fake = cluster_with(raw)
    with_pods(fake, raw, {"w-0": "Running", "w-1": "Running"})
    fake.fail("delete-pod", "w-0", ApiError(RequestRef("delete", "pods"), 503))
    outcome = only(execute(fake, FAIL))
    assert outcome.result is Result.DONE
    assert outcome.pods == ("w-1",)
    assert len(outcome.errors) == 1


def test_a_failed_event_is_an_error_of_a_done_touch() -> None:
    fake = cluster_with(job())
    fake.fail("create-event", None, forbidden("create", "events"))
    outcome = only(execute(fake))
    assert outcome.result is Result.DONE
    assert outcome.errors


# --- stopping ----------------------------------------------------------------------------------


class StopAfter(Stop):
    """The run's stop, as a signal after ``writes`` writes would set it."""

    def __init__(self, fake: FakeCluster, writes: int) -> None:
        super().__init__(SYSTEM_CLOCK)
        self.fake = fake
        self.writes = writes

    def reason(self) -> SweeperError | None:
        return (
            Interrupted("interrupted by SIGTERM") if len(self.fake.writes) >= self.writes else None
        )


def test_a_signal_lets_the_current_write_finish_and_starts_no_other() -> None:
    fake = cluster_with(job(name="a"), job(name="b"), job(name="c"))
    jobs = [parse_job(r, KIND["PyTorchJob"]) for r in fake.jobs.values()]
    plan = decide(jobs, NOW, Enforcement())
    execution = Executor(fake, dry_run=None, stop=StopAfter(fake, 1)).execute(plan)
    assert [w.method for w in fake.writes] == ["patch"]
    assert [o.result for o in execution.outcomes] == [
        Result.DONE,
        Result.NOT_STARTED,
        Result.NOT_STARTED,
    ]
    assert isinstance(execution.stopped_by, Interrupted)


def test_a_signal_after_the_status_write_leaves_pods_for_the_next_pass() -> None:
    raw = job()
    fake = cluster_with(raw)
    with_pods(fake, raw, {"w-0": "Running"})
    outcome = only(execute(fake, FAIL, stop=StopAfter(fake, 1)))
    assert outcome.result is Result.DONE
    assert "stopped: interrupted by SIGTERM" in outcome.detail
    assert [w.method for w in fake.writes] == ["patch-status"]
    # The next pass sees a deadline-failed job with a running pod: it terminates it.
    outcome = only(execute(fake, FAIL))
    assert (outcome.entry.decision, outcome.pods) == ("terminate-pods", ("w-0",))


def test_skips_write_nothing() -> None:
    fake = cluster_with(job(started_ago=10), job(name="done", conditions=[condition("Succeeded")]))
    outcomes = execute(fake, FAIL)
    assert {o.result for o in outcomes} == {Result.SKIPPED}
    assert fake.methods() == []


def test_a_job_failed_by_its_deadline_meanwhile_gets_only_its_pods_terminated() -> None:
    raw = job()
    fake = cluster_with(raw)
    with_pods(fake, raw, {"w-0": "Running"})

    def operator_fails_it(request: Request) -> None:
        if request.method == "get":
            fake.job("pytorchjobs", "team-a", "train")["status"]["conditions"] = deadline_failed()

    fake.before = operator_fails_it
    outcome = only(execute(fake, FAIL))
    assert (outcome.result, outcome.pods) == (Result.DONE, ("w-0",))
    assert outcome.detail == "already failed by its deadline"
    assert "patch-status" not in fake.methods()


# --- a refused touch ---------------------------------------------------------------------------

AUTO = Enforcement(action=ActionMode.AUTO)
PATCH_TRAIN = RequestRef("patch", "pytorchjobs.kubeflow.org", "team-a", "train")
WEBHOOK_DOWN = ApiError(
    PATCH_TRAIN,
    500,
    'Internal error occurred: failed calling webhook "validate.kubeflow.org": connection refused',
)
DENIED = ApiError(PATCH_TRAIN, 422, "denied by policy")


@pytest.mark.parametrize("refusal", [WEBHOOK_DOWN, DENIED], ids=["webhook-down", "denied"])
@pytest.mark.parametrize("dry_run", [None, DryRun.SERVER], ids=["real", "server-dry-run"])
def test_auto_fails_at_once_a_job_whose_touch_is_refused(
    refusal: ApiError, dry_run: DryRun | None
) -> None:
    raw = job(started_ago=3660)  # overdue by 60s: a touch, not yet an escalation
    fake = cluster_with(raw)
    with_pods(fake, raw, {"w-0": "Running"})
    fake.fail("patch", None, refusal)

    outcome = only(execute(fake, AUTO, dry_run=dry_run))

    assert (outcome.entry.decision, outcome.entry.reason) == ("fail", "touch-refused")
    assert outcome.result is (Result.DRY_RUN if dry_run else Result.DONE)
    assert outcome.touch_refused == str(refusal)
    assert outcome.errors == ()
    assert f"touch refused ({refusal}), failed instead" in outcome.detail
    assert [r.method for r in fake.writes] == [
        "patch",
        "patch-status",
        "delete-pod",
        "delete-service",
        "create-event",
    ]
    assert outcome.pods == ("w-0",)


def test_touch_mode_reports_a_refused_touch_as_an_error_and_fails_nothing() -> None:
    fake = cluster_with(job(started_ago=3660))
    fake.fail("patch", None, WEBHOOK_DOWN)
    outcome = only(execute(fake, TOUCH))
    assert outcome.result is Result.ERROR
    assert outcome.errors == (f"touch refused: {WEBHOOK_DOWN}",)
    assert [r.method for r in fake.writes] == ["patch"]


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(
            ApiError(RequestRef("patch", "pytorchjobs.kubeflow.org"), None, "connection refused"),
            id="no-answer",
        ),
        pytest.param(
            NotFound(RequestRef("patch", "pytorchjobs.kubeflow.org"), 404),
            id="job-deleted",
        ),
    ],
)
def test_auto_does_not_escalate_when_the_touch_got_no_refusal(error: ApiError) -> None:
    fake = cluster_with(job(started_ago=3660))
    fake.fail("patch", None, error)
    outcome = only(execute(fake, AUTO))
    assert outcome.entry.decision == "touch"
    assert [r.method for r in fake.writes] == ["patch"]


def test_a_refused_touch_of_a_job_finished_meanwhile_leaves_it_alone() -> None:
    fake = cluster_with(job(started_ago=3660))
    fake.fail("patch", None, DENIED)

    def finish(request: Request) -> None:
        if request.method == "get":
            fake.job("pytorchjobs", "team-a", "train")["status"]["conditions"].append(
                condition("Succeeded")
            )

    fake.before = finish
    outcome = only(execute(fake, AUTO))
    assert outcome.result is Result.LEFT_ALONE
    assert outcome.touch_refused == str(DENIED)
    assert [r.method for r in fake.writes] == ["patch"]


# --- only a refusal escalates (C8) ---------------------------------------------------------


def answered(status: int, detail: str = "") -> ApiError:
    return ApiError(PATCH_TRAIN, status, detail)


REFUSALS = [
    pytest.param(answered(400, "bad request"), id="400"),
    pytest.param(answered(403), id="403-rbac"),
    pytest.param(
        answered(403, 'admission webhook "validator.pytorchjob.kubeflow.org" denied the request'),
        id="403-webhook-denial",
    ),
    pytest.param(answered(422, "denied by policy"), id="422-validating-admission-policy"),
    pytest.param(WEBHOOK_DOWN, id="500-failed-calling-webhook"),
]
NOT_REFUSALS = [
    pytest.param(answered(429, "too many requests, please try again later"), id="429"),
    pytest.param(answered(503, "the server is currently unable to handle the request"), id="503"),
    pytest.param(answered(504, "Timeout: request did not complete within 60s"), id="504"),
    pytest.param(answered(500, "etcdserver: request timed out"), id="500-not-a-webhook"),
    pytest.param(answered(401), id="401"),
]


@pytest.mark.parametrize("error", REFUSALS)
def test_a_refusal_is_one(error: ApiError) -> None:
    assert refused(error)


@pytest.mark.parametrize("error", NOT_REFUSALS)
def test_throttling_and_server_errors_are_no_refusal(error: ApiError) -> None:
    assert not refused(error)


@pytest.mark.parametrize("error", NOT_REFUSALS)
def test_auto_leaves_a_throttled_touch_for_the_next_attempt(error: ApiError) -> None:
    raw = job(started_ago=3601)  # 1 s past its deadline: inside the quick re-touch window
    fake = cluster_with(raw)
    with_pods(fake, raw, {"w-0": "Running"})
    fake.fail("patch", None, error)

    outcome = only(execute(fake, AUTO))

    assert (outcome.entry.decision, outcome.entry.reason) == ("touch", "overdue")
    assert outcome.result is Result.ERROR
    assert outcome.errors == (str(error),)
    assert outcome.touch_refused == ""
    assert [r.method for r in fake.writes] == ["patch"]
    assert ("team-a", "w-0") in fake.pods


# --- a fail whose answer was lost (S6) ------------------------------------------------------


def lose_the_first_status_answer(fake: FakeCluster) -> None:
    """The first status write is applied, then its answer lost: the retry gets 409."""
    seen: list[Request] = []

    def apply_then_conflict(request: Request) -> None:
        if request.method == "patch-status":
            seen.append(request)
            if len(seen) == 1:
                raw = fake.job("pytorchjobs", "team-a", "train")
                raw["status"].update(request.body["status"])
                meta = raw["metadata"]
                meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    fake.before = apply_then_conflict


@pytest.mark.parametrize("mode", [PodsMode.ACTIVE, PodsMode.POLICY], ids=["active", "policy"])
def test_a_fail_whose_answer_was_lost_is_done_with_its_event(mode: PodsMode) -> None:
    raw = job()
    fake = cluster_with(raw)
    with_pods(fake, raw, {"w-0": "Running"})
    lose_the_first_status_answer(fake)

    outcome = only(execute(fake, Enforcement(action=ActionMode.FAIL, terminate_pods=mode)))

    assert (outcome.entry.decision, outcome.result) == ("fail", Result.DONE)
    assert outcome.pods == (() if mode is PodsMode.POLICY else ("w-0",))
    assert [e["reason"] for e in fake.events] == ["DeadlineExceeded"]
    assert fake.methods().count("patch-status") == 1


def test_a_job_failed_by_the_operator_meanwhile_is_still_not_ours() -> None:
    raw = job()
    fake = cluster_with(raw)

    def operator_fails_it_first(request: Request) -> None:
        if request.method == "patch-status":
            stored = fake.job("pytorchjobs", "team-a", "train")
            stored["status"]["conditions"] = deadline_failed()
            stored["metadata"]["resourceVersion"] = "2"

    fake.before = operator_fails_it_first
    outcome = only(
        execute(fake, Enforcement(action=ActionMode.FAIL, terminate_pods=PodsMode.POLICY))
    )
    assert outcome.result is Result.LEFT_ALONE
    assert fake.events == []


# --- clean-ups: the pass's pod listing, terminating pods (C3, C4) ----------------------------


def test_a_clean_up_planned_with_its_pods_deletes_those_without_listing_pods() -> None:
    raw = job(conditions=deadline_failed())
    fake = cluster_with(raw)
    with_pods(fake, raw, {"w-0": "Running", "w-1": "Running"})
    jobs = [parse_job(raw, KIND["PyTorchJob"])]
    index = leftovers_by_owner(fake, decide(jobs, NOW, FAIL).actions, ())
    plan = decide(jobs, NOW, FAIL, index)

    outcome = Executor(fake, dry_run=None, stop=Stop(SYSTEM_CLOCK)).execute(plan).outcomes[0]

    assert (outcome.result, outcome.pods) == (Result.DONE, ("w-0", "w-1"))
    assert fake.methods().count("list-pods") == 1  # the pass's one list, none per job


def test_leftovers_by_owner_lists_once_per_scope_and_indexes_every_clean_up() -> None:
    failed = [
        job(name=f"f-{i}", namespace=ns, conditions=deadline_failed(f"f-{i}"))
        for i, ns in enumerate(["a", "a", "b"])
    ]
    fake = cluster_with(*failed, job(name="due", namespace="c"))
    fake.add_pod(owned("f-0-worker-0", failed[0]))
    actions = decide(
        [parse_job(r, KIND["PyTorchJob"]) for r in fake.jobs.values()], NOW, FAIL
    ).actions

    cluster_wide = leftovers_by_owner(fake, actions, ())
    assert [(r.method, r.namespace, r.name) for r in fake.requests] == [
        ("list-pods", None, "training.kubeflow.org/job-name")
    ]
    assert {uid: [p.name for p in pods] for uid, pods in cluster_wide.items()} == {
        failed[0]["metadata"]["uid"]: ["f-0-worker-0"],
        failed[1]["metadata"]["uid"]: [],
        failed[2]["metadata"]["uid"]: [],
    }
    fake.requests.clear()
    assert leftovers_by_owner(fake, actions, ("a", "b", "c")) == cluster_wide
    assert sorted(r.namespace or "" for r in fake.requests) == ["a", "b"]


def test_a_pod_list_that_fails_leaves_its_clean_ups_to_list_their_own() -> None:
    raw = job(conditions=deadline_failed())
    fake = cluster_with(raw)
    fake.fail("list-pods", None, ApiError(RequestRef("list", "pods"), 403))
    actions = decide([parse_job(raw, KIND["PyTorchJob"])], NOW, FAIL).actions
    assert leftovers_by_owner(fake, actions, ()) == {}


def test_a_terminating_pod_is_not_deleted_again_nor_reported() -> None:
    raw = job(conditions=deadline_failed())
    fake = cluster_with(raw)
    fake.add_pod(owned("w-0", raw, deleting=True))
    fake.add_service(owned("w-0", raw, phase=None))
    outcome = only(execute(fake, FAIL))  # listed by the executor itself (watch mode's path)
    assert outcome.result is Result.LEFT_ALONE
    assert fake.writes == []
    assert fake.events == []


# --- execution order (S7) -----------------------------------------------------------------


def test_the_most_overdue_run_first_and_the_report_keeps_the_listing_order() -> None:
    fake = cluster_with(
        job(name="a", started_ago=5000),
        job(name="b", started_ago=4000),
        job(name="c", started_ago=9000),
    )
    jobs = [parse_job(r, KIND["PyTorchJob"]) for r in fake.jobs.values()]
    plan = decide(jobs, NOW, Enforcement(max_actions=2))

    execution = Executor(fake, dry_run=None, stop=StopAfter(fake, 1)).execute(plan)

    # Stopped after one write: the most overdue of the chosen two is the one done.
    assert [w.name for w in fake.writes] == ["c"]
    assert [(o.entry.job.name, o.result) for o in execution.outcomes] == [
        ("a", Result.NOT_STARTED),
        ("b", Result.SKIPPED),
        ("c", Result.DONE),
    ]
