"""The decision core, as a specification: which job gets which decision, and why."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from sweeper.decide import (
    Action,
    ActionKind,
    ActionMode,
    PodsMode,
    Policy,
    Skip,
    SkipReason,
    Why,
    decide,
    judge,
    pods_to_terminate,
    services_to_delete,
)
from sweeper.jobs import parse_job, parse_owned
from sweeper.kinds import (
    EXCLUDE_ANNOTATION,
    KINDS,
    MPI_OPERATOR_VERSION,
    TOUCHED_AT_ANNOTATION,
    TRAINING_OPERATOR,
)
from tests.unit.objects import KIND, NOW, ago, condition, deadline_failed, job, owned

TOUCH = Policy()
FAIL = Policy(action=ActionMode.FAIL)
AUTO = Policy(action=ActionMode.AUTO)
MAX_GO_SECONDS = (2**63 - 1) // 10**9  # time.Duration(s) * time.Second fits in int64
OVERFLOWS = (
    f"spec.runPolicy.activeDeadlineSeconds: beyond {MAX_GO_SECONDS} either way, it overflows "
    "the operator's time.Duration"
)


def verdict(raw: dict[str, Any], policy: Policy = TOUCH, version: str = "v1") -> tuple[str, str]:
    entry = judge(parse_job(raw, KIND[raw["kind"]], version), NOW, policy)
    return entry.decision, entry.reason


CASES = [
    # (id, job, policy, decision, reason)
    ("overdue-by-an-hour", job(), TOUCH, "touch", "overdue"),
    ("exactly-at-the-deadline", job(started_ago=3600), TOUCH, "touch", "overdue"),
    ("one-second-before", job(started_ago=3599), TOUCH, "skip", "not-yet-due"),
    ("deadline-zero-is-already-past", job(deadline=0, started_ago=0), TOUCH, "touch", "overdue"),
    ("within-grace", job(started_ago=3629), Policy(grace=30), "skip", "not-yet-due"),
    ("exactly-at-deadline-plus-grace", job(started_ago=3630), Policy(grace=30), "touch",
     "overdue"),
    ("not-started", job(started_ago=None), TOUCH, "skip", "not-started"),
    ("not-started-without-status", job(status=None), TOUCH, "skip", "not-started"),
    ("no-deadline", job(deadline=None), TOUCH, "skip", "no-deadline"),
    ("no-deadline-not-started", job(deadline=None, started_ago=None), TOUCH, "skip",
     "no-deadline"),
    ("succeeded", job(conditions=[condition("Succeeded")]), FAIL, "skip", "finished"),
    ("failed-for-another-reason", job(conditions=[condition("Failed", message="OOM")]), FAIL,
     "skip", "finished"),
    ("succeeded-false-is-not-finished", job(conditions=[condition("Succeeded", "False")]),
     TOUCH, "touch", "overdue"),
    ("restarting-is-not-finished", job(conditions=[condition("Restarting")]), TOUCH, "touch",
     "overdue"),
    ("suspended", job(suspend=True), FAIL, "skip", "suspended"),
    # Resumed but not reconciled yet: the operator resets startTime before its deadline check.
    *[
        (f"resuming-{flag}-{policy.action.value}", job(suspend=suspend, conditions=[
            condition("Created"), condition("Running", "False"), condition("Suspended")]),
         policy, "skip", "resuming")
        for flag, suspend in (("suspend-absent", None), ("suspend-false", False))
        for policy in (TOUCH, FAIL, AUTO)
    ],
    ("resumed-and-reconciled-is-judged-again", job(conditions=[
        condition("Created"), condition("Running"), condition("Suspended", "False")]),
     FAIL, "fail", "overdue"),
    ("suspended-with-the-condition", job(suspend=True, conditions=[condition("Suspended")]),
     FAIL, "skip", "suspended"),
    ("finished-wins-over-resuming", job(conditions=[
        condition("Suspended"), condition("Failed", message="OOM")]), FAIL, "skip", "finished"),
    # Negative deadlines: the operator's `elapsed >= deadline` is already true.
    ("negative-deadline-is-due-at-startTime", job(deadline=-30, started_ago=0), FAIL, "fail",
     "overdue"),
    ("negative-deadline-not-started", job(deadline=-30, started_ago=None), FAIL, "skip",
     "not-started"),
    ("largest-deadline-the-operator-can-hold", job(deadline=MAX_GO_SECONDS), FAIL, "skip",
     "not-yet-due"),
    ("twenty-year-deadline", job(deadline=20 * 366 * 24 * 3600), FAIL, "skip", "not-yet-due"),
    ("suspend-false", job(suspend=False), TOUCH, "touch", "overdue"),
    ("resumed-startTime-reset", job(started_ago=600), TOUCH, "skip", "not-yet-due"),
    ("suspended-past-deadline-then-resumed", job(started_ago=3600, suspend=False), TOUCH,
     "touch", "overdue"),
    ("managed-by-multikueue", job(managed_by="kueue.x-k8s.io/multikueue"), FAIL, "skip",
     "managed-elsewhere"),
    ("managed-by-the-training-operator", job(managed_by=TRAINING_OPERATOR), TOUCH, "touch",
     "overdue"),
    ("jaxjob-ignores-managedBy", job("JAXJob", managed_by="kueue.x-k8s.io/multikueue"), TOUCH,
     "touch", "overdue"),
    ("being-deleted", job(deleting=True), FAIL, "skip", "being-deleted"),
    ("opted-out", job(annotations={EXCLUDE_ANNOTATION: "true"}), FAIL, "skip", "opted-out"),
    ("opted-out-any-case", job(annotations={EXCLUDE_ANNOTATION: "True"}), FAIL, "skip",
     "opted-out"),
    ("opt-out-false", job(annotations={EXCLUDE_ANNOTATION: "false"}), TOUCH, "touch", "overdue"),
    ("fail-mode", job(), FAIL, "fail", "overdue"),
    ("fail-mode-ignores-a-touch", job(annotations={TOUCHED_AT_ANNOTATION: ago(10)}), FAIL,
     "fail", "overdue"),
    ("auto-untouched", job(started_ago=3660), AUTO, "touch", "overdue"),
    ("auto-touched-recently", job(started_ago=3660, annotations={TOUCHED_AT_ANNOTATION: ago(30)}),
     AUTO, "skip", "recently-touched"),
    # Escalation does not need a written touch: the operator's webhooks refuse every update
    # while it is down, so `auto` fails a job --escalate-after past its deadline and grace.
    ("auto-untouched-escalates-exactly-after-deadline-plus-escalate-after",
     job(started_ago=3720), AUTO, "fail", "escalated"),
    ("auto-untouched-one-second-before-escalation", job(started_ago=3719), AUTO, "touch",
     "overdue"),
    ("auto-untouched-long-overdue-fails-at-once", job(), AUTO, "fail", "escalated"),
    ("auto-escalation-counts-from-deadline-plus-grace", job(started_ago=3749),
     Policy(action=ActionMode.AUTO, grace=30), "touch", "overdue"),
    ("auto-escalation-after-deadline-plus-grace", job(started_ago=3750),
     Policy(action=ActionMode.AUTO, grace=30), "fail", "escalated"),
    ("auto-touched-recently-still-escalates-by-the-deadline",
     job(annotations={TOUCHED_AT_ANNOTATION: ago(60)}), AUTO, "fail", "escalated"),
    # A touch written before grace ran out (a run with a smaller --grace) escalates on its own.
    ("auto-escalates-exactly-after-the-touch",
     job(started_ago=3750, annotations={TOUCHED_AT_ANNOTATION: ago(120)}),
     Policy(action=ActionMode.AUTO, grace=60), "fail", "escalated"),
    ("auto-touch-before-this-deadline-is-stale",
     job(started_ago=3700, annotations={TOUCHED_AT_ANNOTATION: ago(5000)}), AUTO, "touch",
     "overdue"),
    ("auto-garbled-touch-annotation",
     job(started_ago=3660, annotations={TOUCHED_AT_ANNOTATION: "soon"}), AUTO, "touch",
     "overdue"),
    ("touch-recently-touched", job(annotations={TOUCHED_AT_ANNOTATION: ago(10)}), TOUCH, "skip",
     "recently-touched"),
    ("touch-again-after-escalate-after", job(annotations={TOUCHED_AT_ANNOTATION: ago(120)}),
     TOUCH, "touch", "touch-again"),
    ("deadline-failed-fail-mode", job(conditions=deadline_failed()), FAIL, "terminate-pods",
     "failed-by-deadline"),
    ("sweeper-failed-auto-mode", job(conditions=deadline_failed(by_sweeper=True)), AUTO,
     "terminate-pods", "failed-by-deadline"),
    ("deadline-failed-touch-mode", job(conditions=deadline_failed()), TOUCH, "skip",
     "finished"),
    ("deadline-failed-policy-pods", job(conditions=deadline_failed()),
     Policy(action=ActionMode.FAIL, terminate_pods=PodsMode.POLICY), "skip", "finished"),
    # The deliberate difference (README, decisions): the deadline wins over cleanPodPolicy
    # None, written or not, and over the age of the failure; --terminate-pods policy opts out.
    ("deadline-failed-explicit-None-active-pods", job(
        conditions=deadline_failed(), clean_pod_policy="None"), AUTO, "terminate-pods",
     "failed-by-deadline"),
    ("deadline-failed-a-year-ago", job(conditions=[
        {**c, "lastTransitionTime": ago(366 * 24 * 3600)} for c in deadline_failed()],
        started_ago=400 * 24 * 3600), FAIL, "terminate-pods", "failed-by-deadline"),
    ("deadline-failed-explicit-None-policy-pods", job(
        conditions=deadline_failed(), clean_pod_policy="None"),
     Policy(action=ActionMode.AUTO, terminate_pods=PodsMode.POLICY), "skip", "finished"),
    ("deadline-failed-but-opted-out",
     job(conditions=deadline_failed(), annotations={EXCLUDE_ANNOTATION: "true"}), FAIL, "skip",
     "opted-out"),
    ("malformed-wins-over-everything", job(deadline="3600", deleting=True), FAIL, "skip",
     "malformed"),
]


@pytest.mark.parametrize(
    ("raw", "policy", "decision", "reason"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_decision(raw: dict[str, Any], policy: Policy, decision: str, reason: str) -> None:
    assert verdict(raw, policy) == (decision, reason)


MALFORMED = [
    ("deadline-string", job(deadline="3600"), "spec.runPolicy.activeDeadlineSeconds"),
    ("deadline-float", job(deadline=3600.5), "spec.runPolicy.activeDeadlineSeconds"),
    ("deadline-bool", job(deadline=True), "spec.runPolicy.activeDeadlineSeconds"),
    ("deadline-overflows-go-duration", job(deadline=MAX_GO_SECONDS + 1), OVERFLOWS),
    ("negative-deadline-overflows-go-duration", job(deadline=-MAX_GO_SECONDS - 1), OVERFLOWS),
    ("deadline-after-year-9999", job(deadline=MAX_GO_SECONDS,
                                     status={"startTime": "9900-01-01T00:00:00Z"}),
     "status.startTime"),
    ("startTime-unparsable", job(status={"startTime": "yesterday"}), "status.startTime"),
    ("startTime-number", job(status={"startTime": 1714564800}), "status.startTime"),
    ("startTime-without-zone", job(status={"startTime": "2024-05-01T10:00:00"}),
     "status.startTime"),
    ("status-not-an-object", job(status=["Running"]), "status"),
    ("conditions-not-a-list", job(status={"conditions": {"type": "Running"}}),
     "status.conditions"),
    ("condition-not-an-object", job(status={"conditions": ["Running"]}), "status.conditions[0]"),
    ("condition-without-status", job(status={"conditions": [{"type": "Failed"}]}),
     "status.conditions[0]"),
    ("suspend-string", job(suspend="true"), "spec.runPolicy.suspend"),
    ("managedBy-number", job(managed_by=7), "spec.runPolicy.managedBy"),
    ("cleanPodPolicy-number", job(clean_pod_policy=1), "spec.runPolicy.cleanPodPolicy"),
    ("annotations-list", {**job(), "metadata": {**job()["metadata"], "annotations": ["x"]}},
     "metadata.annotations"),
    ("runPolicy-list", {**job(), "spec": {"runPolicy": []}}, "spec.runPolicy"),
    ("spec-missing", {k: v for k, v in job().items() if k != "spec"}, "spec"),
    ("name-missing", {**job(), "metadata": {"namespace": "a", "uid": "u"}}, "metadata.name"),
    ("uid-missing", {**job(), "metadata": {"namespace": "a", "name": "n"}}, "metadata.uid"),
    ("metadata-string", {**job(), "metadata": "train"}, "metadata"),
    ("object-not-a-mapping", ["not", "a", "job"], "object"),
]


@pytest.mark.parametrize(
    ("raw", "field"), [case[1:] for case in MALFORMED], ids=[case[0] for case in MALFORMED]
)
def test_malformed_jobs_are_skipped_naming_the_field(raw: Any, field: str) -> None:
    parsed = parse_job(raw, KIND["PyTorchJob"])
    entry = judge(parsed, NOW, FAIL)
    assert isinstance(entry, Skip)
    assert (entry.why, entry.detail) == (SkipReason.MALFORMED, field)


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
@pytest.mark.parametrize("policy", [TOUCH, FAIL], ids=["touch", "fail"])
def test_every_kind_is_enforced(kind: Any, policy: Policy) -> None:
    decision, reason = verdict(job(kind), policy)
    assert (decision, reason) == (policy.action.value, "overdue")


def test_an_mpi_operator_mpijob_is_reported_never_acted_on() -> None:
    assert verdict(job("MPIJob"), FAIL, version=MPI_OPERATOR_VERSION) == (
        "skip", "operator-enforced",
    )


def test_not_yet_due_says_how_long_is_left_and_reports_negative_overdue() -> None:
    entry = judge(parse_job(job(started_ago=3000), KIND["PyTorchJob"]), NOW, Policy(grace=60))
    assert isinstance(entry, Skip)
    assert entry.detail == "due in 11m00s"
    assert entry.seconds_overdue == -600


def test_overdue_seconds_are_measured_from_the_deadline_without_grace() -> None:
    entry = judge(parse_job(job(started_ago=3700), KIND["TFJob"]), NOW, Policy(grace=30))
    assert isinstance(entry, Action)
    assert entry.seconds_overdue == 100


@pytest.mark.parametrize(
    ("started_ago", "touched_ago", "detail"),
    [
        pytest.param(3610, 5, "touched 5s ago; fails in 1m50s", id="deadline-plus-escalate-first"),
        pytest.param(3640, 30, "touched 30s ago; fails in 1m20s", id="the-later-the-sooner"),
    ],
)
def test_recently_touched_says_when_auto_escalates(
    started_ago: int, touched_ago: int, detail: str
) -> None:
    raw = job(started_ago=started_ago, annotations={TOUCHED_AT_ANNOTATION: ago(touched_ago)})
    entry = judge(parse_job(raw, KIND["PyTorchJob"]), NOW, AUTO)
    assert entry.detail == detail


def test_a_negative_deadline_counts_overdue_from_the_start_time() -> None:
    entry = judge(parse_job(job(deadline=-600, started_ago=50), KIND["PyTorchJob"]), NOW, FAIL)
    assert isinstance(entry, Action)
    assert entry.seconds_overdue == 50
    assert entry.job.deadline == NOW - timedelta(seconds=50)


def test_decide_gives_every_job_one_entry_in_listing_order() -> None:
    raws = [job(name=f"j{i}", started_ago=3000 + 200 * i) for i in range(6)]
    plan = decide([parse_job(r, KIND["PyTorchJob"]) for r in raws], NOW, TOUCH)
    assert [e.job.name for e in plan.entries] == [f"j{i}" for i in range(6)]
    assert plan.counts() == {"skip:not-yet-due": 3, "touch": 3}


def test_max_actions_keeps_the_most_overdue_and_skips_the_rest() -> None:
    raws = [
        job(name="late", started_ago=4000),
        job(name="latest", started_ago=9000),
        job(name="pods-left", conditions=deadline_failed("pods-left"), started_ago=99999),
        job(name="later", started_ago=5000),
    ]
    jobs = [parse_job(r, KIND["PyTorchJob"]) for r in raws]
    plan = decide(jobs, NOW, Policy(action=ActionMode.FAIL, max_actions=2))
    assert {e.job.name: e.reason for e in plan.entries} == {
        "late": "over-max-actions",
        "latest": "overdue",
        "pods-left": "over-max-actions",
        "later": "overdue",
    }
    capped = plan.entries[0]
    assert capped.detail == "would fail (overdue); --max-actions 2 reached"


def test_max_actions_zero_acts_on_nothing() -> None:
    plan = decide([parse_job(job(), KIND["PyTorchJob"])], NOW, Policy(max_actions=0))
    assert plan.actions == ()
    assert plan.entries[0].reason == SkipReason.OVER_MAX_ACTIONS


def test_escalation_is_a_fail_action() -> None:
    raw = job(annotations={TOUCHED_AT_ANNOTATION: ago(500)})
    entry = judge(parse_job(raw, KIND["PyTorchJob"]), NOW, AUTO)
    assert isinstance(entry, Action)
    assert (entry.kind, entry.why) == (ActionKind.FAIL, Why.ESCALATED)


def test_decide_does_not_read_the_clock() -> None:
    # The same inputs an hour apart in real time give the same plan: only `now` matters.
    jobs = [parse_job(job(started_ago=3599), KIND["PyTorchJob"])]
    assert decide(jobs, NOW, TOUCH) == decide(jobs, NOW, TOUCH)
    assert decide(jobs, NOW + timedelta(seconds=1), TOUCH).actions != ()


# --- which pods and services go ---------------------------------------------------------------

OWNER = job(clean_pod_policy=None)
PHASES = ["Pending", "Running", "Succeeded", "Failed", "Unknown"]
PHASES_LOWER = [f"p-{phase.lower()}" for phase in PHASES]


def pods_in_phases() -> list[Any]:
    return [parse_owned(owned(f"p-{phase.lower()}", OWNER, phase=phase)) for phase in PHASES]


POD_CASES = [
    ("active", None, None, ["p-pending", "p-running"]),
    ("all", None, None, ["p-pending", "p-running", "p-succeeded", "p-failed", "p-unknown"]),
    ("policy-absent-means-None", None, None, []),
    ("policy-None", "None", None, []),
    ("policy-Running", "Running", None, ["p-pending", "p-running"]),
    ("policy-All", "All", None, ["p-pending", "p-running", "p-succeeded", "p-failed",
                                  "p-unknown"]),
    # v1.9.4 special-cases only None and Running; every other value deletes every pod.
    ("policy-unknown-value-deletes-all", "Sometimes", None, PHASES_LOWER),
    ("policy-empty-string-deletes-all", "", None, PHASES_LOWER),
    ("policy-lowercase-all", "all", None, PHASES_LOWER),
    ("policy-lowercase-running-is-not-Running", "running", None, PHASES_LOWER),
    ("policy-lowercase-none-is-not-None", "none", None, PHASES_LOWER),
]


@pytest.mark.parametrize(
    ("mode", "run_policy", "legacy", "expected"),
    [(c[0].split("-")[0], c[1], c[2], c[3]) for c in POD_CASES],
    ids=[c[0] for c in POD_CASES],
)
def test_pods_to_terminate(
    mode: str, run_policy: str | None, legacy: str | None, expected: list[str]
) -> None:
    parsed = parse_job(job(clean_pod_policy=run_policy), KIND["PyTorchJob"])
    chosen = pods_to_terminate(pods_in_phases(), parsed, PodsMode(mode))
    assert sorted(p.name for p in chosen) == sorted(expected)


MPI_CASES = [
    ("runPolicy-wins-over-legacy", "None", "All", []),
    ("legacy-used-when-runPolicy-absent", None, "All", PHASES),
    ("runPolicy-alone", "All", None, PHASES),
    ("neither-means-None", None, None, []),
    ("runPolicy-empty-string-wins-over-legacy-None", "", "None", PHASES),
    ("legacy-Running", None, "Running", ["Pending", "Running"]),
    ("legacy-empty-string-deletes-all", None, "", PHASES),
]


@pytest.mark.parametrize(
    ("run_policy", "legacy", "expected"),
    [c[1:] for c in MPI_CASES],
    ids=[c[0] for c in MPI_CASES],
)
def test_mpijob_legacy_clean_pod_policy(
    run_policy: str | None, legacy: str | None, expected: list[str]
) -> None:
    raw = job("MPIJob", clean_pod_policy=run_policy, legacy_clean_pod_policy=legacy)
    parsed = parse_job(raw, KIND["MPIJob"])
    pods = [parse_owned(owned(f"p-{p.lower()}", raw, phase=p)) for p in PHASES]
    chosen = pods_to_terminate([p for p in pods if p], parsed, PodsMode.POLICY)
    assert sorted(p.name for p in chosen) == sorted(f"p-{p.lower()}" for p in expected)


def test_only_mpijob_reads_the_legacy_field() -> None:
    parsed = parse_job(job(legacy_clean_pod_policy="All"), KIND["PyTorchJob"])
    assert parsed.clean_pod_policy is None


def test_pods_of_another_owner_or_without_controller_ref_are_never_chosen() -> None:
    pods = [
        parse_owned(owned("mine", OWNER)),
        parse_owned(owned("same-name-other-job", OWNER, owner_uid="someone-else")),
        parse_owned(owned("not-controller", OWNER, controller=False)),
    ]
    parsed = parse_job(OWNER, KIND["PyTorchJob"])
    chosen = pods_to_terminate([p for p in pods if p], parsed, PodsMode.ALL)
    assert [p.name for p in chosen] == ["mine"]


def test_services_go_with_their_pods_when_the_job_owns_them() -> None:
    services = [
        parse_owned(owned("w-0", OWNER, phase=None)),
        parse_owned(owned("w-1", OWNER, phase=None)),
        parse_owned(owned("w-2", OWNER, phase=None, owner_uid="other")),
    ]
    parsed = parse_job(OWNER, KIND["PyTorchJob"])
    chosen = services_to_delete([s for s in services if s], parsed, ["w-0", "w-2"])
    assert [s.name for s in chosen] == ["w-0"]
