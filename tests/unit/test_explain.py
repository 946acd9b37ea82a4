"""``--explain``: every rule in order, the value it saw, the one that decided; same as judge."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sweeper.core.decide import explain, judge
from sweeper.core.errors import ApiError, RequestRef
from sweeper.core.families import family_of, table
from sweeper.core.jobs import parse_job
from sweeper.core.kinds import (
    EXCLUDE_ANNOTATION,
    LEGACY_EXCLUDE_ANNOTATION,
    TOUCHED_AT_ANNOTATION,
    Resource,
)
from sweeper.core.model import ActionMode, Enforcement
from tests.unit.objects import KIND, NOW, ago, condition, deadline_failed, job, owned, trainjob
from tests.unit.test_cli import Harness

# The Training Operator v1's whole table, as --explain walks it for a v1 job.
RULES = table(family_of(KIND["PyTorchJob"], "v1"))

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
    steps, entry = explain(view, NOW, Enforcement())
    assert entry == judge(view, NOW, Enforcement())
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
    steps, _ = explain(
        parse_job(job(annotations=annotations), KIND["PyTorchJob"]), NOW, Enforcement()
    )
    (step,) = [s for s in steps if s.rule == "opted-out"]
    assert step.seen == (
        "kubeflow-deadline-sweeper.github.io/exclude or the old "
        f"deadline-sweeper.kubeflow.org/exclude: {seen}"
    )


def test_the_values_seen_are_the_jobs() -> None:
    view = parse_job(job(started_ago=60, deadline=3600), KIND["TFJob"])
    steps, _ = explain(view, NOW, Enforcement(grace=30))
    seen = {s.rule: s.seen for s in steps}
    assert seen["no-deadline"] == "activeDeadlineSeconds 3600 (1h00m)"
    assert seen["not-started"] == "startTime 2024-05-01T11:59:00Z"
    assert seen["not-yet-due"] == "deadline 2024-05-01T12:59:00Z (in 59m00s), grace 30s"
    assert seen["suspended"] == "suspend false"


@pytest.mark.parametrize(
    ("enforcement", "seen"),
    [
        pytest.param(
            Enforcement(action=ActionMode.AUTO),
            "--action auto, never touched, re-touch after 5s (up to 3x), escalate after 2m00s",
            id="auto",
        ),
        pytest.param(
            Enforcement(retouch_limit=0),
            "--action touch, never touched, no quick re-touch, escalate after 2m00s",
            id="quick-re-touch-off",
        ),
        pytest.param(
            Enforcement(retouch_after=300),
            "--action touch, never touched, no quick re-touch, escalate after 2m00s",
            id="re-touch-after-not-before-the-escalation",
        ),
        pytest.param(
            Enforcement(action=ActionMode.FAIL), "--action fail, never touched", id="fail"
        ),
    ],
)
def test_the_overdue_step_shows_the_touch_settings_that_apply(
    enforcement: Enforcement, seen: str
) -> None:
    steps, _ = explain(parse_job(job(), KIND["PyTorchJob"]), NOW, enforcement)

    assert steps[-1].seen == seen


def test_the_cli_explains_a_job_and_writes_nothing() -> None:
    harness = Harness()
    harness.fake.add_job(job(name="train", namespace="team-a", started_ago=60))
    result = harness.invoke("--explain", "team-a/train", "--action", "fail")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "PyTorchJob team-a/train at 2024-05-01T12:00:00Z (server clock)"
    numbered = [line for line in lines if line[:4].strip().rstrip(".").isdigit()]
    assert len(numbered) == len(RULES)  # the family's last rule included
    assert lines[-1] == "Decision: skip (not-yet-due): due in 59m00s"
    assert "not-yet-due" in numbered[-2] and numbered[-2].endswith("skip (not-yet-due)")
    assert numbered[-1].endswith("not reached")
    assert harness.fake.writes == []


@pytest.mark.parametrize(
    ("args", "caveat"),
    [
        pytest.param([], None, id="max-actions-unset"),
        pytest.param(
            ["--max-actions", "3"],
            "(--max-actions 3 may still defer it behind more overdue jobs)",
            id="max-actions-set",
        ),
    ],
)
def test_the_text_fits_100_columns_and_names_max_actions_only_when_set(
    args: list[str], caveat: str | None
) -> None:
    harness = Harness()
    harness.fake.add_job(job(name="train", namespace="team-a"))
    result = harness.invoke("--explain", "team-a/train", "--exclude-namespace", "x", *args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert [line for line in lines if "--max-actions" in line] == ([caveat] if caveat else [])
    assert "kubeflow-deadline-sweeper.github.io/exclude" in result.stdout
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


def refuse_gets_but_of(harness: Harness, plural: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Answer 403 to the GET of every kind but ``plural``, as RBAC granting one kind does."""
    get = harness.fake.get

    def refusing(resource: Resource, namespace: str | None, name: str) -> Any:
        if resource.plural != plural:
            ref = RequestRef("get", resource.name, namespace, name)
            raise ApiError(ref, 403, "forbidden by RBAC")
        return get(resource, namespace, name)

    monkeypatch.setattr(harness.fake, "get", refusing)


def test_a_kind_rbac_refuses_does_not_stop_explaining_a_job_of_a_kind_it_grants(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The chart's kinds: [PyTorchJob] grants no other kind; the first other kind's 403 used to
    # end --explain with exit 3 (issue 31, S4).
    harness = Harness()
    harness.fake.add_job(job(name="train", namespace="team-a"))
    refuse_gets_but_of(harness, "pytorchjobs", monkeypatch)

    result = harness.invoke("--explain", "team-a/train", "--log-format", "text")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith("PyTorchJob team-a/train at ")
    assert result.stdout.splitlines()[-1] == "Decision: touch (overdue): 1h00m past its deadline"
    assert (
        "WARNING cannot get tfjobs.kubeflow.org 'train' in namespace \"team-a\": forbidden (403): "
        "forbidden by RBAC; explaining the job found in another kind" in result.stderr
    )


def test_a_job_found_in_no_kind_while_some_were_refused_is_exit_three_naming_the_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    harness = Harness()
    refuse_gets_but_of(harness, "pytorchjobs", monkeypatch)

    result = harness.invoke("--explain", "team-a/train")

    assert result.exit_code == 3
    assert result.stderr.splitlines()[-1] == (
        "sweeper: error: cannot get tfjobs.kubeflow.org 'train' in namespace \"team-a\": "
        'forbidden (403): forbidden by RBAC (server https://fake.invalid, context "fake")'
    )


@pytest.mark.parametrize(
    ("pods", "decision", "deleted"),
    [
        pytest.param(
            [],
            "Decision: skip (finished): Failed; no pods left to terminate",
            None,
            id="no-pod-left",
        ),
        pytest.param(
            [("w-0", "Succeeded", False), ("w-1", "Running", True)],
            "Decision: skip (finished): Failed; no pods left to terminate",
            None,
            id="only-finished-or-terminating-pods",
        ),
        pytest.param(
            [("w-0", "Running", False), ("w-1", "Pending", False), ("w-2", "Succeeded", False)],
            "Decision: terminate-pods (failed-by-deadline): failed by its deadline; "
            "active pods to terminate",
            "Pods it would delete: w-0, w-1",
            id="active-pods-left",
        ),
    ],
)
def test_explain_gives_the_decision_a_run_makes_for_a_job_failed_by_its_deadline(
    pods: list[tuple[str, str, bool]], decision: str, deleted: str | None
) -> None:
    # --explain said "terminate-pods" where every pass said "skip (finished)": it never looked
    # at the pods (issue 31, B8).
    harness = Harness()
    failed = harness.fake.add_job(job(name="train", conditions=deadline_failed()))
    for name, phase, deleting in pods:
        harness.fake.add_pod(owned(name, failed, phase=phase, deleting=deleting))
    run = Harness(harness.fake).invoke("--action", "auto", "-o", "wide", "--dry-run")
    explained = harness.invoke("--explain", "team-a/train", "--action", "auto")

    assert explained.exit_code == 0, explained.output
    lines = explained.stdout.splitlines()
    assert [line for line in lines if line.startswith(("Decision:", "Pods it"))] == [
        decision,
        *([deleted] if deleted else []),
    ]
    assert "--max-actions" not in explained.stdout  # unset: no pass would defer it
    (row,) = [line for line in run.stdout.splitlines() if " train " in line]
    assert decision.removeprefix("Decision: ").split(":")[0] in row


def test_explain_in_json_names_the_pods_a_clean_up_would_delete() -> None:
    harness = Harness()
    failed = harness.fake.add_job(job(name="train", conditions=deadline_failed()))
    harness.fake.add_pod(owned("w-0", failed))
    result = harness.invoke("--explain", "team-a/train", "--action", "fail", "-o", "json")
    (document,) = json.loads(result.stdout)
    assert (document["decision"], document["pods"]) == ("terminate-pods", ["w-0"])
    assert harness.fake.writes == []


def test_a_kueue_job_stuck_starting_is_explained_as_kueue_s_to_end() -> None:
    harness = Harness()
    raw = job(name="gang", namespace="team-a", deadline=None)
    raw["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    harness.fake.add_job(raw)
    placed = owned("gang-worker-0", raw)
    placed["spec"] = {"nodeName": "node-a", "containers": []}
    placed["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-05-01T11:00:00Z"}
    ]
    harness.fake.add_pod(placed)
    harness.fake.add_pod(owned("gang-worker-1", raw, phase="Pending"))
    result = harness.invoke("--explain", "team-a/gang")
    assert result.exit_code == 0, result.output
    assert "held-gpus" in result.stdout
    assert "waitForPodsReady" in result.stdout
    assert harness.fake.writes == []


def test_a_trainjob_stuck_starting_is_explained_from_its_jobsets_pods() -> None:
    harness = Harness()
    raw = harness.fake.add_job(trainjob("tj", "team-a", deadline=None))
    for name, node in (("tj-node-0-0", "node-a"), ("tj-node-0-1", None)):
        pod = owned(name, raw, phase="Running" if node else "Pending")
        pod["metadata"]["labels"] = {"jobset.sigs.k8s.io/jobset-name": "tj"}
        pod["metadata"]["ownerReferences"][0]["uid"] = "uid-job-tj-node-0"  # its Job's
        if node:
            pod["spec"] = {"nodeName": node, "containers": []}
            pod["status"]["conditions"] = [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": ago(3600)}
            ]
        harness.fake.add_pod(pod)
    result = harness.invoke("--explain", "team-a/tj", "--stuck-after", "1m")
    assert result.exit_code == 0, result.output
    assert "held-gpus            stuck-starting for 1h00m: 1 pod(s) placed" in result.stdout
    lists = [r.name for r in harness.fake.requests if r.method == "list-pods"]
    assert lists == ["jobset.sigs.k8s.io/jobset-name=tj"]
    assert harness.fake.writes == []
