"""The decision core, as a specification: which job gets which decision, and why."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from sweeper.core.decide import decide, explain, judge
from sweeper.core.families import KINDS, training_operator
from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION
from sweeper.core.families.pods import pods_mode
from sweeper.core.jobs import parse_job, parse_owned
from sweeper.core.kinds import EXCLUDE_ANNOTATION, TOUCHED_AT_ANNOTATION
from sweeper.core.model import (
    Action,
    ActionKind,
    ActionMode,
    Enforcement,
    PodsMode,
    Skip,
    SkipReason,
    Why,
)
from sweeper.core.plan import assemble, execution_order, pods_to_terminate, services_to_delete
from sweeper.core.releases import Release
from tests.unit.objects import KIND, NOW, ago, condition, deadline_failed, job, owned

TOUCH = Enforcement()
FAIL = Enforcement(action=ActionMode.FAIL)
AUTO = Enforcement(action=ActionMode.AUTO)
MAX_GO_SECONDS = (2**63 - 1) // 10**9  # time.Duration(s) * time.Second fits in int64


def verdict(
    raw: dict[str, Any], enforcement: Enforcement = TOUCH, version: str = "v1"
) -> tuple[str, str]:
    entry = judge(parse_job(raw, KIND[raw["kind"]], version), NOW, enforcement)
    return entry.decision, entry.reason


CASES = [
    # job, policy, decision, reason
    pytest.param(job(), TOUCH, "touch", "overdue", id="overdue-by-an-hour"),
    pytest.param(job(started_ago=3600), TOUCH, "touch", "overdue", id="exactly-at-the-deadline"),
    pytest.param(job(started_ago=3599), TOUCH, "skip", "not-yet-due", id="one-second-before"),
    pytest.param(
        job(deadline=0, started_ago=0),
        TOUCH,
        "touch",
        "overdue",
        id="deadline-zero-is-already-past",
    ),
    pytest.param(
        job(started_ago=3629), Enforcement(grace=30), "skip", "not-yet-due", id="within-grace"
    ),
    pytest.param(
        job(started_ago=3630),
        Enforcement(grace=30),
        "touch",
        "overdue",
        id="exactly-at-deadline-plus-grace",
    ),
    pytest.param(job(started_ago=None), TOUCH, "skip", "not-started", id="not-started"),
    pytest.param(job(status=None), TOUCH, "skip", "not-started", id="not-started-without-status"),
    pytest.param(job(deadline=None), TOUCH, "skip", "no-deadline", id="no-deadline"),
    pytest.param(
        job(deadline=None, started_ago=None),
        TOUCH,
        "skip",
        "no-deadline",
        id="no-deadline-not-started",
    ),
    pytest.param(
        job(conditions=[condition("Succeeded")]),
        FAIL,
        "skip",
        "finished",
        id="succeeded",
    ),
    pytest.param(
        job(conditions=[condition("Failed", message="OOM")]),
        FAIL,
        "skip",
        "finished",
        id="failed-for-another-reason",
    ),
    pytest.param(
        job(conditions=[condition("Succeeded", "False")]),
        TOUCH,
        "touch",
        "overdue",
        id="succeeded-false-is-not-finished",
    ),
    pytest.param(
        job(conditions=[condition("Restarting")]),
        TOUCH,
        "touch",
        "overdue",
        id="restarting-is-not-finished",
    ),
    pytest.param(job(suspend=True), FAIL, "skip", "suspended", id="suspended"),
    # Resumed but not reconciled yet: the operator resets startTime before its deadline check.
    *[
        pytest.param(
            job(
                suspend=suspend,
                conditions=[
                    condition("Created"),
                    condition("Running", "False"),
                    condition("Suspended"),
                ],
            ),
            enforcement,
            "skip",
            "resuming",
            id=f"resuming-{flag}-{enforcement.action.value}",
        )
        for flag, suspend in (("suspend-absent", None), ("suspend-false", False))
        for enforcement in (TOUCH, FAIL, AUTO)
    ],
    pytest.param(
        job(
            conditions=[condition("Created"), condition("Running"), condition("Suspended", "False")]
        ),
        FAIL,
        "fail",
        "overdue",
        id="resumed-and-reconciled-is-judged-again",
    ),
    pytest.param(
        job(suspend=True, conditions=[condition("Suspended")]),
        FAIL,
        "skip",
        "suspended",
        id="suspended-with-the-condition",
    ),
    pytest.param(
        job(conditions=[condition("Suspended"), condition("Failed", message="OOM")]),
        FAIL,
        "skip",
        "finished",
        id="finished-wins-over-resuming",
    ),
    # Negative deadlines: the operator's `elapsed >= deadline` is already true.
    pytest.param(
        job(deadline=-30, started_ago=0),
        FAIL,
        "fail",
        "overdue",
        id="negative-deadline-is-due-at-startTime",
    ),
    pytest.param(
        job(deadline=-30, started_ago=None),
        FAIL,
        "skip",
        "not-started",
        id="negative-deadline-not-started",
    ),
    pytest.param(
        job(deadline=MAX_GO_SECONDS),
        FAIL,
        "skip",
        "not-yet-due",
        id="largest-deadline-the-operator-can-hold",
    ),
    # Beyond it, every controller's time.Duration wraps: no controller enforces what it says, so
    # it is longer than any deadline (a platform cap still applies: test_platform.py).
    pytest.param(
        job(deadline=MAX_GO_SECONDS + 1),
        FAIL,
        "skip",
        "not-yet-due",
        id="deadline-overflowing-go-duration-is-never-due",
    ),
    pytest.param(
        job(deadline=-MAX_GO_SECONDS - 1),
        FAIL,
        "skip",
        "not-yet-due",
        id="negative-deadline-overflowing-go-duration-is-never-due",
    ),
    pytest.param(
        job(deadline=22446744074, status={"startTime": "9900-01-01T00:00:00Z"}),
        FAIL,
        "skip",
        "not-yet-due",
        id="overflowing-deadline-needs-no-instant",
    ),
    pytest.param(
        job(deadline=20 * 366 * 24 * 3600),
        FAIL,
        "skip",
        "not-yet-due",
        id="twenty-year-deadline",
    ),
    pytest.param(job(suspend=False), TOUCH, "touch", "overdue", id="suspend-false"),
    pytest.param(job(started_ago=600), TOUCH, "skip", "not-yet-due", id="resumed-startTime-reset"),
    pytest.param(
        job(started_ago=3600, suspend=False),
        TOUCH,
        "touch",
        "overdue",
        id="suspended-past-deadline-then-resumed",
    ),
    pytest.param(
        job(managed_by="kueue.x-k8s.io/multikueue"),
        FAIL,
        "skip",
        "managed-elsewhere",
        id="managed-by-multikueue",
    ),
    pytest.param(
        job(managed_by=training_operator.MANAGED_BY),
        TOUCH,
        "touch",
        "overdue",
        id="managed-by-the-training-operator",
    ),
    pytest.param(
        job("JAXJob", managed_by="kueue.x-k8s.io/multikueue"),
        TOUCH,
        "touch",
        "overdue",
        id="jaxjob-ignores-managedBy",
    ),
    pytest.param(job(deleting=True), FAIL, "skip", "being-deleted", id="being-deleted"),
    pytest.param(
        job(annotations={EXCLUDE_ANNOTATION: "true"}),
        FAIL,
        "skip",
        "opted-out",
        id="opted-out",
    ),
    pytest.param(
        job(annotations={EXCLUDE_ANNOTATION: "True"}),
        FAIL,
        "skip",
        "opted-out",
        id="opted-out-any-case",
    ),
    pytest.param(
        job(annotations={EXCLUDE_ANNOTATION: "false"}),
        TOUCH,
        "touch",
        "overdue",
        id="opt-out-false",
    ),
    pytest.param(job(), FAIL, "fail", "overdue", id="fail-mode"),
    pytest.param(
        job(annotations={TOUCHED_AT_ANNOTATION: ago(10)}),
        FAIL,
        "fail",
        "overdue",
        id="fail-mode-ignores-a-touch",
    ),
    pytest.param(job(started_ago=3660), AUTO, "touch", "overdue", id="auto-untouched"),
    pytest.param(
        job(started_ago=3660, annotations={TOUCHED_AT_ANNOTATION: ago(30)}),
        AUTO,
        "skip",
        "recently-touched",
        id="auto-touched-recently",
    ),
    # Escalation does not need a written touch: the operator's webhooks refuse every update
    # while it is down, so `auto` fails a job --escalate-after past its deadline and grace.
    pytest.param(
        job(started_ago=3720),
        AUTO,
        "fail",
        "escalated",
        id="auto-untouched-escalates-exactly-after-deadline-plus-escalate-after",
    ),
    pytest.param(
        job(started_ago=3719),
        AUTO,
        "touch",
        "overdue",
        id="auto-untouched-one-second-before-escalation",
    ),
    pytest.param(job(), AUTO, "fail", "escalated", id="auto-untouched-long-overdue-fails-at-once"),
    pytest.param(
        job(started_ago=3749),
        Enforcement(action=ActionMode.AUTO, grace=30),
        "touch",
        "overdue",
        id="auto-escalation-counts-from-deadline-plus-grace",
    ),
    pytest.param(
        job(started_ago=3750),
        Enforcement(action=ActionMode.AUTO, grace=30),
        "fail",
        "escalated",
        id="auto-escalation-after-deadline-plus-grace",
    ),
    pytest.param(
        job(annotations={TOUCHED_AT_ANNOTATION: ago(60)}),
        AUTO,
        "fail",
        "escalated",
        id="auto-touched-recently-still-escalates-by-the-deadline",
    ),
    # A touch written before grace ran out (a run with a smaller --grace) escalates on its own.
    pytest.param(
        job(started_ago=3750, annotations={TOUCHED_AT_ANNOTATION: ago(120)}),
        Enforcement(action=ActionMode.AUTO, grace=60),
        "fail",
        "escalated",
        id="auto-escalates-exactly-after-the-touch",
    ),
    pytest.param(
        job(started_ago=3700, annotations={TOUCHED_AT_ANNOTATION: ago(5000)}),
        AUTO,
        "touch",
        "overdue",
        id="auto-touch-before-this-deadline-is-stale",
    ),
    pytest.param(
        job(started_ago=3660, annotations={TOUCHED_AT_ANNOTATION: "soon"}),
        AUTO,
        "touch",
        "overdue",
        id="auto-garbled-touch-annotation",
    ),
    pytest.param(
        job(annotations={TOUCHED_AT_ANNOTATION: ago(10)}),
        TOUCH,
        "skip",
        "recently-touched",
        id="touch-recently-touched",
    ),
    pytest.param(
        job(annotations={TOUCHED_AT_ANNOTATION: ago(120)}),
        TOUCH,
        "touch",
        "touch-again",
        id="touch-again-after-escalate-after",
    ),
    # A stamp later than now by more than the skew tolerated (--grace plus the Date header's
    # whole second) is no touch of the sweeper's: a tenant's would stop every touch.
    pytest.param(
        job(annotations={TOUCHED_AT_ANNOTATION: "2125-01-01T00:00:00Z"}),
        TOUCH,
        "touch",
        "overdue",
        id="touch-a-stamp-in-the-future-counts-as-none",
    ),
    pytest.param(
        job(annotations={TOUCHED_AT_ANNOTATION: ago(-2)}),
        TOUCH,
        "touch",
        "overdue",
        id="touch-a-stamp-two-seconds-ahead-counts-as-none",
    ),
    pytest.param(
        job(annotations={TOUCHED_AT_ANNOTATION: ago(-1)}),
        TOUCH,
        "skip",
        "recently-touched",
        id="touch-a-stamp-within-the-date-headers-second-counts",
    ),
    pytest.param(
        job(annotations={TOUCHED_AT_ANNOTATION: ago(-31)}),
        Enforcement(grace=30),
        "skip",
        "recently-touched",
        id="touch-a-stamp-within-grace-and-a-second-counts",
    ),
    pytest.param(
        job(started_ago=3660, annotations={TOUCHED_AT_ANNOTATION: "2125-01-01T00:00:00Z"}),
        AUTO,
        "touch",
        "overdue",
        id="auto-a-stamp-in-the-future-counts-as-none",
    ),
    # Quick re-touches (--retouch-after 5s, --retouch-limit 3): the operator judges with its own
    # clock, which may not have reached the deadline when a touch written at it arrived.
    pytest.param(
        job(started_ago=3610, annotations={TOUCHED_AT_ANNOTATION: ago(10)}),
        TOUCH,
        "touch",
        "touch-again",
        id="quick-retouch-after-a-touch-at-the-deadline",
    ),
    pytest.param(
        job(started_ago=3605, annotations={TOUCHED_AT_ANNOTATION: ago(5)}),
        TOUCH,
        "touch",
        "touch-again",
        id="quick-retouch-exactly-retouch-after-later",
    ),
    pytest.param(
        job(started_ago=3604, annotations={TOUCHED_AT_ANNOTATION: ago(4)}),
        TOUCH,
        "skip",
        "recently-touched",
        id="no-quick-retouch-before-retouch-after",
    ),
    pytest.param(
        job(started_ago=3629, annotations={TOUCHED_AT_ANNOTATION: ago(15)}),
        TOUCH,
        "touch",
        "touch-again",
        id="last-quick-retouch-after-a-touch-within-the-limit",
    ),
    pytest.param(
        job(started_ago=3630, annotations={TOUCHED_AT_ANNOTATION: ago(15)}),
        TOUCH,
        "skip",
        "recently-touched",
        id="no-quick-retouch-once-limit-times-retouch-after-past-due",
    ),
    pytest.param(
        job(started_ago=3610, annotations={TOUCHED_AT_ANNOTATION: ago(10)}),
        Enforcement(retouch_limit=0),
        "skip",
        "recently-touched",
        id="retouch-limit-zero-turns-quick-touches-off",
    ),
    pytest.param(
        job(started_ago=3610, annotations={TOUCHED_AT_ANNOTATION: ago(10)}),
        Enforcement(escalate_after=5),
        "touch",
        "touch-again",
        id="retouch-after-not-below-escalate-after-is-the-normal-touch-again",
    ),
    pytest.param(
        job(started_ago=3610, annotations={TOUCHED_AT_ANNOTATION: ago(10)}),
        AUTO,
        "touch",
        "touch-again",
        id="auto-quick-retouch-before-escalation",
    ),
    pytest.param(
        job(started_ago=3640, annotations={TOUCHED_AT_ANNOTATION: ago(10)}),
        Enforcement(grace=30),
        "touch",
        "touch-again",
        id="quick-retouch-counts-from-deadline-plus-grace",
    ),
    pytest.param(
        job(started_ago=3700, annotations={TOUCHED_AT_ANNOTATION: ago(10)}),
        Enforcement(grace=30),
        "skip",
        "recently-touched",
        id="no-quick-retouch-for-a-touch-long-after-due",
    ),
    pytest.param(
        job(conditions=deadline_failed()),
        FAIL,
        "terminate-pods",
        "failed-by-deadline",
        id="deadline-failed-fail-mode",
    ),
    pytest.param(
        job(conditions=deadline_failed(by_sweeper=True)),
        AUTO,
        "terminate-pods",
        "failed-by-deadline",
        id="sweeper-failed-auto-mode",
    ),
    # Whatever the action: a touch leaves v1.9.4 to fail the job and keep its pods.
    pytest.param(
        job(conditions=deadline_failed()),
        TOUCH,
        "terminate-pods",
        "failed-by-deadline",
        id="deadline-failed-touch-mode",
    ),
    pytest.param(
        job(conditions=deadline_failed()),
        Enforcement(action=ActionMode.FAIL, terminate_pods=PodsMode.POLICY),
        "skip",
        "finished",
        id="deadline-failed-policy-pods",
    ),
    # The deliberate difference (README, decisions): the deadline wins over cleanPodPolicy
    # None, written or not, and over the age of the failure; --terminate-pods policy opts out.
    pytest.param(
        job(conditions=deadline_failed(), clean_pod_policy="None"),
        AUTO,
        "terminate-pods",
        "failed-by-deadline",
        id="deadline-failed-explicit-None-active-pods",
    ),
    pytest.param(
        job(
            conditions=[
                {**c, "lastTransitionTime": ago(366 * 24 * 3600)} for c in deadline_failed()
            ],
            started_ago=400 * 24 * 3600,
        ),
        FAIL,
        "terminate-pods",
        "failed-by-deadline",
        id="deadline-failed-a-year-ago",
    ),
    pytest.param(
        job(conditions=deadline_failed(), clean_pod_policy="None"),
        Enforcement(action=ActionMode.AUTO, terminate_pods=PodsMode.POLICY),
        "skip",
        "finished",
        id="deadline-failed-explicit-None-policy-pods",
    ),
    # v1.7.0 to v1.9.3 delete every pod at a deadline failure: none is kept, so policy cleans.
    pytest.param(
        job(conditions=deadline_failed(), clean_pod_policy="None"),
        Enforcement(
            action=ActionMode.FAIL,
            terminate_pods=PodsMode.POLICY,
            operator_version=Release(1, 9, 3),
        ),
        "terminate-pods",
        "failed-by-deadline",
        id="deadline-failed-policy-pods-on-v1.9.3",
    ),
    pytest.param(
        job(conditions=deadline_failed()),
        Enforcement(
            action=ActionMode.AUTO,
            terminate_pods=PodsMode.POLICY,
            operator_version=Release(1, 9, 4),
        ),
        "skip",
        "finished",
        id="deadline-failed-policy-pods-on-v1.9.4",
    ),
    pytest.param(
        job(conditions=deadline_failed(), annotations={EXCLUDE_ANNOTATION: "true"}),
        FAIL,
        "skip",
        "opted-out",
        id="deadline-failed-but-opted-out",
    ),
    pytest.param(
        job(deadline="3600", deleting=True),
        FAIL,
        "skip",
        "malformed",
        id="malformed-wins-over-everything",
    ),
]


@pytest.mark.parametrize(
    ("raw", "enforcement", "decision", "reason"),
    CASES,
)
def test_decision(
    raw: dict[str, Any], enforcement: Enforcement, decision: str, reason: str
) -> None:
    assert verdict(raw, enforcement) == (decision, reason)


MALFORMED = [
    pytest.param(
        job(deadline="3600"),
        "spec.runPolicy.activeDeadlineSeconds",
        id="deadline-string",
    ),
    pytest.param(job(deadline=3600.5), "spec.runPolicy.activeDeadlineSeconds", id="deadline-float"),
    pytest.param(job(deadline=True), "spec.runPolicy.activeDeadlineSeconds", id="deadline-bool"),
    pytest.param(
        job(deadline=MAX_GO_SECONDS, status={"startTime": "9900-01-01T00:00:00Z"}),
        "status.startTime",
        id="deadline-after-year-9999",
    ),
    pytest.param(
        job(status={"startTime": "yesterday"}),
        "status.startTime",
        id="startTime-unparsable",
    ),
    pytest.param(job(status={"startTime": 1714564800}), "status.startTime", id="startTime-number"),
    pytest.param(
        job(status={"startTime": "2024-05-01T10:00:00"}),
        "status.startTime",
        id="startTime-without-zone",
    ),
    pytest.param(job(status=["Running"]), "status", id="status-not-an-object"),
    pytest.param(
        job(status={"conditions": {"type": "Running"}}),
        "status.conditions",
        id="conditions-not-a-list",
    ),
    pytest.param(
        job(status={"conditions": ["Running"]}),
        "status.conditions[0]",
        id="condition-not-an-object",
    ),
    pytest.param(
        job(status={"conditions": [{"type": "Failed"}]}),
        "status.conditions[0]",
        id="condition-without-status",
    ),
    pytest.param(job(suspend="true"), "spec.runPolicy.suspend", id="suspend-string"),
    pytest.param(job(managed_by=7), "spec.runPolicy.managedBy", id="managedBy-number"),
    pytest.param(
        job(clean_pod_policy=1),
        "spec.runPolicy.cleanPodPolicy",
        id="cleanPodPolicy-number",
    ),
    pytest.param(
        {**job(), "metadata": {**job()["metadata"], "annotations": ["x"]}},
        "metadata.annotations",
        id="annotations-list",
    ),
    pytest.param({**job(), "spec": {"runPolicy": []}}, "spec.runPolicy", id="runPolicy-list"),
    pytest.param({k: v for k, v in job().items() if k != "spec"}, "spec", id="spec-missing"),
    pytest.param(
        {**job(), "metadata": {"namespace": "a", "uid": "u"}},
        "metadata.name",
        id="name-missing",
    ),
    pytest.param(
        {**job(), "metadata": {"namespace": "a", "name": "n"}},
        "metadata.uid",
        id="uid-missing",
    ),
    pytest.param({**job(), "metadata": "train"}, "metadata", id="metadata-string"),
    pytest.param(["not", "a", "job"], "object", id="object-not-a-mapping"),
]


@pytest.mark.parametrize(("raw", "field"), MALFORMED)
def test_malformed_jobs_are_skipped_naming_the_field(raw: Any, field: str) -> None:
    parsed = parse_job(raw, KIND["PyTorchJob"])
    entry = judge(parsed, NOW, FAIL)
    assert isinstance(entry, Skip)
    assert (entry.why, entry.detail) == (SkipReason.MALFORMED, field)


V1_KINDS = [kind for kind in KINDS if kind.name != "TrainJob"]


@pytest.mark.parametrize("kind", V1_KINDS, ids=[k.name for k in V1_KINDS])
@pytest.mark.parametrize("enforcement", [TOUCH, FAIL], ids=["touch", "fail"])
def test_every_kind_is_enforced(kind: Any, enforcement: Enforcement) -> None:
    decision, reason = verdict(job(kind), enforcement)
    assert (decision, reason) == (enforcement.action.value, "overdue")


def test_an_mpi_operator_mpijob_past_its_deadline_has_its_launcher_read_whatever_the_action() -> (
    None
):
    assert verdict(job("MPIJob"), FAIL, version=MPI_OPERATOR_VERSION) == ("set-deadline", "overdue")


def test_not_yet_due_says_how_long_is_left_and_reports_negative_overdue() -> None:
    entry = judge(parse_job(job(started_ago=3000), KIND["PyTorchJob"]), NOW, Enforcement(grace=60))
    assert isinstance(entry, Skip)
    assert entry.detail == "due in 11m00s"
    assert entry.seconds_overdue == -600


def test_overdue_seconds_are_measured_from_the_deadline_without_grace() -> None:
    entry = judge(parse_job(job(started_ago=3700), KIND["TFJob"]), NOW, Enforcement(grace=30))
    assert isinstance(entry, Action)
    assert entry.seconds_overdue == 100


@pytest.mark.parametrize(
    ("started_ago", "touched_ago", "enforcement", "detail"),
    [
        pytest.param(
            3610,
            5,
            Enforcement(action=ActionMode.AUTO, retouch_limit=0),
            "touched 5s ago; fails in 1m50s",
            id="deadline-plus-escalate-first",
        ),
        pytest.param(
            3640,
            30,
            Enforcement(action=ActionMode.AUTO, retouch_limit=0),
            "touched 30s ago; fails in 1m20s",
            id="the-later-the-sooner",
        ),
        pytest.param(
            3610,
            4,
            AUTO,
            "touched 4s ago; touches again in 1s, fails in 1m50s",
            id="quick-retouch-first",
        ),
        pytest.param(
            3604, 4, TOUCH, "touched 4s ago; touches again in 1s", id="touch-quick-retouch"
        ),
        pytest.param(
            3660, 10, TOUCH, "touched 10s ago; touches again in 1m50s", id="touch-no-quick-left"
        ),
    ],
)
def test_recently_touched_says_what_comes_next(
    started_ago: int, touched_ago: int, enforcement: Enforcement, detail: str
) -> None:
    raw = job(started_ago=started_ago, annotations={TOUCHED_AT_ANNOTATION: ago(touched_ago)})
    entry = judge(parse_job(raw, KIND["PyTorchJob"]), NOW, enforcement)
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
    decisions = Counter(
        e.decision if isinstance(e, Action) else f"skip:{e.reason}" for e in plan.entries
    )
    assert decisions == {"skip:not-yet-due": 3, "touch": 3}


def test_max_actions_keeps_the_most_overdue_and_skips_the_rest() -> None:
    raws = [
        job(name="late", started_ago=4000),
        job(name="latest", started_ago=9000),
        job(name="pods-left", conditions=deadline_failed("pods-left"), started_ago=99999),
        job(name="later", started_ago=5000),
    ]
    jobs = [parse_job(r, KIND["PyTorchJob"]) for r in raws]
    plan = decide(jobs, NOW, Enforcement(action=ActionMode.FAIL, max_actions=2))
    assert {e.job.name: e.reason for e in plan.entries} == {
        "late": "over-max-actions",
        "latest": "overdue",
        "pods-left": "over-max-actions",
        "later": "overdue",
    }
    capped = plan.entries[0]
    assert capped.detail == "would fail (overdue); --max-actions 2 reached"


def test_max_actions_zero_acts_on_nothing() -> None:
    plan = decide([parse_job(job(), KIND["PyTorchJob"])], NOW, Enforcement(max_actions=0))
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
    pytest.param(PodsMode.ACTIVE, None, ["p-pending", "p-running"], id="active"),
    pytest.param(
        PodsMode.ALL,
        None,
        ["p-pending", "p-running", "p-succeeded", "p-failed", "p-unknown"],
        id="all",
    ),
    pytest.param(PodsMode.POLICY, None, [], id="policy-absent-means-None"),
    pytest.param(PodsMode.POLICY, "None", [], id="policy-None"),
    pytest.param(PodsMode.POLICY, "Running", ["p-pending", "p-running"], id="policy-Running"),
    pytest.param(
        PodsMode.POLICY,
        "All",
        ["p-pending", "p-running", "p-succeeded", "p-failed", "p-unknown"],
        id="policy-All",
    ),
    # v1.9.4 special-cases only None and Running; every other value deletes every pod.
    pytest.param(PodsMode.POLICY, "Sometimes", PHASES_LOWER, id="policy-unknown-value-deletes-all"),
    pytest.param(PodsMode.POLICY, "", PHASES_LOWER, id="policy-empty-string-deletes-all"),
    pytest.param(PodsMode.POLICY, "all", PHASES_LOWER, id="policy-lowercase-all"),
    pytest.param(
        PodsMode.POLICY, "running", PHASES_LOWER, id="policy-lowercase-running-is-not-Running"
    ),
    pytest.param(PodsMode.POLICY, "none", PHASES_LOWER, id="policy-lowercase-none-is-not-None"),
]


@pytest.mark.parametrize(("mode", "run_policy", "expected"), POD_CASES)
def test_pods_to_terminate(mode: PodsMode, run_policy: str | None, expected: list[str]) -> None:
    parsed = parse_job(job(clean_pod_policy=run_policy), KIND["PyTorchJob"])
    chosen = pods_to_terminate(pods_in_phases(), parsed, mode)
    assert sorted(p.name for p in chosen) == sorted(expected)


RELEASE_CASES = [
    pytest.param(None, None, [], id="unknown-release-follows-absent-policy"),
    pytest.param(None, "Running", ["p-pending", "p-running"], id="unknown-release-Running"),
    pytest.param(Release(1, 9, 4), None, [], id="v1.9.4-keeps-with-None"),
    pytest.param(Release(1, 9, 3), None, PHASES_LOWER, id="v1.9.3-deletes-all-with-None"),
    pytest.param(Release(1, 9, 0), "Running", PHASES_LOWER, id="v1.9.0-deletes-all-with-Running"),
    pytest.param(Release(1, 8, 1), "None", PHASES_LOWER, id="v1.8.1-deletes-all-with-None"),
    pytest.param(Release(1, 7, 0), None, PHASES_LOWER, id="v1.7.0-deletes-all"),
]


@pytest.mark.parametrize(("release", "run_policy", "expected"), RELEASE_CASES)
def test_policy_keeps_what_that_release_keeps(
    release: Release | None, run_policy: str | None, expected: list[str]
) -> None:
    parsed = parse_job(job(clean_pod_policy=run_policy), KIND["PyTorchJob"])
    enforcement = Enforcement(terminate_pods=PodsMode.POLICY, operator_version=release)
    chosen = pods_to_terminate(pods_in_phases(), parsed, pods_mode(enforcement))
    assert sorted(p.name for p in chosen) == sorted(expected)


@pytest.mark.parametrize("mode", [PodsMode.ACTIVE, PodsMode.ALL])
@pytest.mark.parametrize("release", [None, Release(1, 7, 0), Release(1, 9, 4)])
def test_the_release_changes_only_policy(mode: PodsMode, release: Release | None) -> None:
    assert pods_mode(Enforcement(terminate_pods=mode, operator_version=release)) is mode


MPI_CASES = [
    pytest.param("None", "All", [], id="runPolicy-wins-over-legacy"),
    pytest.param(None, "All", PHASES, id="legacy-used-when-runPolicy-absent"),
    pytest.param("All", None, PHASES, id="runPolicy-alone"),
    pytest.param(None, None, [], id="neither-means-None"),
    pytest.param("", "None", PHASES, id="runPolicy-empty-string-wins-over-legacy-None"),
    pytest.param(None, "Running", ["Pending", "Running"], id="legacy-Running"),
    pytest.param(None, "", PHASES, id="legacy-empty-string-deletes-all"),
]


@pytest.mark.parametrize(
    ("run_policy", "legacy", "expected"),
    MPI_CASES,
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


def test_a_pod_already_being_deleted_is_never_chosen_again() -> None:
    pods = [
        parse_owned(owned("running", OWNER)),
        parse_owned(owned("terminating", OWNER, deleting=True)),
        parse_owned(owned("terminating-done", OWNER, phase="Succeeded", deleting=True)),
    ]
    parsed = parse_job(OWNER, KIND["PyTorchJob"])
    for mode in (PodsMode.ACTIVE, PodsMode.ALL):
        chosen = pods_to_terminate([p for p in pods if p], parsed, mode)
        assert [p.name for p in chosen] == ["running"], mode


def test_the_pod_view_keeps_the_deletion_timestamp() -> None:
    assert parse_owned(owned("w-0", OWNER, deleting=True)).deleting  # type: ignore[union-attr]
    assert not parse_owned(owned("w-0", OWNER)).deleting  # type: ignore[union-attr]


# --- clean-ups planned from the pass's pod listing --------------------------------------------


def failed_long_ago(name: str, failed_ago: float) -> dict[str, Any]:
    return job(name=name, conditions=deadline_failed(name), started_ago=3600 + failed_ago)


def pod_index(raws: list[dict[str, Any]], pods: list[dict[str, Any]]) -> dict[str, Any]:
    index: dict[str, list[Any]] = {raw["metadata"]["uid"]: [] for raw in raws}
    for pod in pods:
        view = parse_owned(pod)
        assert view is not None
        index[view.controller_uid or ""].append(view)
    return {uid: tuple(found) for uid, found in index.items()}


def test_clean_ups_with_nothing_to_delete_are_skips_and_take_no_slot() -> None:
    old = [failed_long_ago(f"old-{i}", 86400 * (10 + i)) for i in range(3)]
    recent = failed_long_ago("recent", 60)
    pods = [owned(f"recent-worker-{i}", recent) for i in range(2)]
    jobs = [parse_job(r, KIND["PyTorchJob"]) for r in [*old, recent]]

    plan = decide(
        jobs,
        NOW,
        Enforcement(action=ActionMode.AUTO, max_actions=3),
        pod_index([*old, recent], pods),
    )

    by_name = {e.job.name: e for e in plan.entries}
    assert [n for n, e in by_name.items() if isinstance(e, Skip)] == ["old-0", "old-1", "old-2"]
    assert {by_name[f"old-{i}"].reason for i in range(3)} == {"finished"}
    assert by_name["old-0"].detail == "Failed; no pods left to terminate"
    [action] = plan.actions
    assert (action.job.name, action.kind) == ("recent", ActionKind.TERMINATE_PODS)
    assert [p.name for p in action.targets or ()] == ["recent-worker-0", "recent-worker-1"]


def test_a_clean_up_whose_pods_are_all_terminating_is_a_skip() -> None:
    failed = failed_long_ago("failed", 60)
    pods = [owned("failed-worker-0", failed, deleting=True)]
    plan = decide([parse_job(failed, KIND["PyTorchJob"])], NOW, FAIL, pod_index([failed], pods))
    assert plan.actions == ()
    assert plan.entries[0].reason == "finished"


def test_a_clean_up_whose_pods_were_not_listed_stays_an_action_without_targets() -> None:
    failed = failed_long_ago("failed", 60)
    plan = decide([parse_job(failed, KIND["PyTorchJob"])], NOW, FAIL, {})
    [action] = plan.actions
    assert action.targets is None


def test_without_a_pod_index_the_plan_is_what_it_was() -> None:
    jobs = [
        parse_job(failed_long_ago("failed", 60), KIND["PyTorchJob"]),
        parse_job(job(), KIND["PyTorchJob"]),
    ]
    assert decide(jobs, NOW, FAIL) == assemble([judge(j, NOW, FAIL) for j in jobs], NOW, FAIL)
    assert [e.decision for e in decide(jobs, NOW, FAIL).entries] == ["terminate-pods", "fail"]


def test_execution_order_runs_touches_and_fails_first_most_overdue_first() -> None:
    raws = [
        failed_long_ago("cleanup-old", 99999),
        job(name="late", started_ago=4000),
        failed_long_ago("cleanup-new", 60),
        job(name="latest", started_ago=9000),
        job(name="later", started_ago=5000, kind="TFJob"),
    ]
    jobs = [parse_job(r, KIND[r["kind"]]) for r in raws]
    plan = decide(jobs, NOW, FAIL)
    order = [plan.entries[i].job.name for i in execution_order(plan)]
    assert order == ["latest", "later", "late", "cleanup-old", "cleanup-new"]
    # The report keeps the listing order.
    assert [e.job.name for e in plan.entries] == [r["metadata"]["name"] for r in raws]


def test_execution_order_holds_only_the_actions() -> None:
    jobs = [
        parse_job(job(name="a", started_ago=10), KIND["PyTorchJob"]),
        parse_job(job(name="b"), KIND["PyTorchJob"]),
    ]
    plan = decide(jobs, NOW, Enforcement(max_actions=0))
    assert execution_order(plan) == ()
    plan = decide(jobs, NOW, TOUCH)
    assert execution_order(plan) == (1,)


def test_explain_says_a_stamp_later_than_now_counts_as_none() -> None:
    raw = job(annotations={TOUCHED_AT_ANNOTATION: "2125-01-01T00:00:00Z"})
    steps, entry = explain(parse_job(raw, KIND["PyTorchJob"]), NOW, TOUCH)
    (step,) = [s for s in steps if s.rule == "overdue"]
    assert "touched at 2125-01-01T00:00:00Z (later than now: counts as none)" in step.seen
    assert (entry.decision, entry.reason) == ("touch", "overdue")
    steps, _ = explain(
        parse_job(job(annotations={TOUCHED_AT_ANNOTATION: ago(10)}), KIND["PyTorchJob"]), NOW, TOUCH
    )
    assert "counts as none" not in next(s for s in steps if s.rule == "overdue").seen
