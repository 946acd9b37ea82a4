"""``--explain``: every rule in order, the value it saw, the one that decided; same as judge."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sweeper.core.decide import RULES, explain, judge
from sweeper.core.jobs import parse_job
from sweeper.core.kinds import EXCLUDE_ANNOTATION, LEGACY_EXCLUDE_ANNOTATION, TOUCHED_AT_ANNOTATION
from sweeper.core.model import ActionMode, Policy
from tests.unit.objects import KIND, NOW, ago, condition, deadline_failed, job
from tests.unit.test_cli import Harness

CASES = [
    pytest.param(job(), "overdue", "touch (overdue): 1h00m past its deadline", id="overdue"),
    pytest.param(job(deadline="x"), "malformed", "skip (malformed)", id="malformed"),
    pytest.param(job(deleting=True), "being-deleted", "skip (being-deleted)", id="deleting"),
    pytest.param(
        job(annotations={EXCLUDE_ANNOTATION: "true"}),
        "opted-out",
        "skip (opted-out)",
        id="opted-out",
    ),
    pytest.param(
        job(annotations={LEGACY_EXCLUDE_ANNOTATION: "true"}),
        "opted-out",
        "skip (opted-out)",
        id="opted-out-by-the-old-key",
    ),
    pytest.param(
        job(managed_by="kueue.x-k8s.io/multikueue"),
        "managed-elsewhere",
        "skip (managed-elsewhere)",
        id="managed",
    ),
    pytest.param(
        job(conditions=[condition("Succeeded")]), "finished", "skip (finished)", id="finished"
    ),
    pytest.param(
        job(conditions=deadline_failed()),
        "finished",
        "terminate-pods (failed-by-deadline)",
        id="failed-by-the-operator",
    ),
    pytest.param(job(suspend=True), "suspended", "skip (suspended)", id="suspended"),
    pytest.param(job(deadline=None), "no-deadline", "skip (no-deadline)", id="no-deadline"),
    pytest.param(job(started_ago=None), "not-started", "skip (not-started)", id="not-started"),
    pytest.param(
        job(started_ago=60), "not-yet-due", "skip (not-yet-due): due in 59m00s", id="not-yet-due"
    ),
    pytest.param(
        job(annotations={TOUCHED_AT_ANNOTATION: ago(30)}),
        "overdue",
        "skip (recently-touched)",
        id="recently-touched",
    ),
]


@pytest.mark.parametrize(("raw", "deciding", "decision"), CASES)
def test_explain_walks_every_rule_and_agrees_with_judge(
    raw: dict[str, Any], deciding: str, decision: str
) -> None:
    view = parse_job(raw, KIND["PyTorchJob"])
    steps, entry = explain(view, NOW, Policy())
    assert entry == judge(view, NOW, Policy())
    assert [s.rule for s in steps] == [r.name for r in RULES]
    (decider,) = [s for s in steps if s.entry is not None]
    assert decider.rule == deciding
    assert f"{entry.decision} ({entry.reason})" == decision.split(":", maxsplit=1)[0]
    before = steps[: steps.index(decider)]
    after = steps[steps.index(decider) + 1 :]
    assert all(s.reached and s.entry is None for s in before)
    assert all(not s.reached for s in after)
    assert all(s.seen for s in steps)


@pytest.mark.parametrize(
    ("annotations", "seen"),
    [
        pytest.param({}, "not true", id="none"),
        pytest.param({EXCLUDE_ANNOTATION: "true"}, "true", id="new-key"),
        pytest.param({LEGACY_EXCLUDE_ANNOTATION: "true"}, "true", id="old-key"),
    ],
)
def test_the_opt_out_step_names_both_keys(annotations: dict[str, str], seen: str) -> None:
    steps, _ = explain(parse_job(job(annotations=annotations), KIND["PyTorchJob"]), NOW, Policy())
    (step,) = [s for s in steps if s.rule == "opted-out"]
    assert step.seen == (
        "kubeflow-deadline-sweeper.github.io/exclude or the old "
        f"deadline-sweeper.kubeflow.org/exclude: {seen}"
    )


def test_the_values_seen_are_the_jobs() -> None:
    view = parse_job(job(started_ago=60, deadline=3600), KIND["TFJob"])
    steps, _ = explain(view, NOW, Policy(grace=30))
    seen = {s.rule: s.seen for s in steps}
    assert seen["no-deadline"] == "activeDeadlineSeconds 3600 (1h00m)"
    assert seen["not-started"] == "startTime 2024-05-01T11:59:00Z"
    assert seen["not-yet-due"] == "deadline 2024-05-01T12:59:00Z (in 59m00s), grace 30s"
    assert seen["suspended"] == "suspend false"


@pytest.mark.parametrize(
    ("policy", "seen"),
    [
        pytest.param(
            Policy(action=ActionMode.AUTO),
            "--action auto, never touched, re-touch after 5s (up to 3x), escalate after 2m00s",
            id="auto",
        ),
        pytest.param(
            Policy(retouch_limit=0),
            "--action touch, never touched, no quick re-touch, escalate after 2m00s",
            id="quick-re-touch-off",
        ),
        pytest.param(
            Policy(retouch_after=300),
            "--action touch, never touched, no quick re-touch, escalate after 2m00s",
            id="re-touch-after-not-before-the-escalation",
        ),
        pytest.param(Policy(action=ActionMode.FAIL), "--action fail, never touched", id="fail"),
    ],
)
def test_the_overdue_step_shows_the_touch_settings_that_apply(policy: Policy, seen: str) -> None:
    steps, _ = explain(parse_job(job(), KIND["PyTorchJob"]), NOW, policy)

    assert steps[-1].seen == seen


def test_the_cli_explains_a_job_and_writes_nothing() -> None:
    harness = Harness()
    harness.fake.add_job(job(name="train", namespace="team-a", started_ago=60))
    result = harness.invoke("--explain", "team-a/train", "--action", "fail")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "PyTorchJob team-a/train at 2024-05-01T12:00:00Z (server clock)"
    assert len(lines) == 1 + len(RULES) + 1
    assert lines[-1] == "Decision: skip (not-yet-due): due in 59m00s"
    assert "not-yet-due" in lines[-3] and lines[-3].endswith("skip (not-yet-due): due in 59m00s")
    assert lines[-2].endswith("not reached")
    assert harness.fake.writes == []


def test_the_cli_explains_in_json_with_exact_seconds() -> None:
    harness = Harness()
    harness.fake.add_job(job(name="train", namespace="team-a"))
    result = harness.invoke(
        "--explain", "team-a/train", "-o", "json", env={"SWEEPER_ACTION": ActionMode.AUTO.value}
    )
    assert result.exit_code == 0, result.output
    (document,) = json.loads(result.stdout)
    assert (document["decision"], document["seconds_overdue"], document["overdue"]) == (
        "fail",
        3600.0,
        "1h00m",  # auto escalates once past deadline + grace + escalate-after
    )
    assert document["rules"][-1]["rule"] == "overdue"


def test_an_excluded_namespace_is_explained_as_out_of_scope() -> None:
    harness = Harness()
    harness.fake.add_job(job(name="train", namespace="team-a"))
    result = harness.invoke("--explain", "team-a/train", "--exclude-namespace", "team-a")
    assert result.exit_code == 0, result.output
    assert "scope: exclude-namespace" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        "Decision: none; the run's scope leaves this job out."
    )


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        pytest.param(
            "team-a/missing", 'no Kubeflow job "team-a/missing" (looked in: TFJob', id="not-found"
        ),
        pytest.param("train", "expected NAMESPACE/NAME, got 'train' (--explain)", id="no-slash"),
        pytest.param("a/b/c", "expected NAMESPACE/NAME, got 'a/b/c' (--explain)", id="two-slashes"),
    ],
)
def test_explain_errors_are_one_line_and_exit_two(reference: str, message: str) -> None:
    result = Harness().invoke("--explain", reference)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"sweeper: error: {message}")
