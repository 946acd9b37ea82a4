"""The tally: a pass's outcomes by kind, read summed (the summary) and by kind (metrics)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from sweeper.core.decide import decide, judge
from sweeper.core.families.trainer import TRAINJOB
from sweeper.core.jobs import parse_job, parse_owned
from sweeper.core.kinds import EXCLUDE_ANNOTATION, TOUCHED_AT_ANNOTATION
from sweeper.core.model import Action, Enforcement, Outcome, PodsMode, Result, Skip, SkipReason
from sweeper.core.tally import Tally, failed_by, has_errors, held_reason
from tests.unit.objects import (
    KIND,
    NOW,
    ago,
    condition,
    deadline_failed,
    job,
    owned,
    trainjob,
)


def outcomes(*raws: dict[str, Any], enforcement: Enforcement | None = None) -> list[Outcome]:
    plan = decide([parse_job(r, KIND[r["kind"]]) for r in raws], NOW, enforcement or Enforcement())
    return [
        Outcome(e, Result.SKIPPED if e.decision == "skip" else Result.DONE) for e in plan.entries
    ]


def a_pass() -> list[Outcome]:
    found = outcomes(
        job(name="late", started_ago=7200),  # 1 h overdue: touched
        job(name="later", kind="TFJob", started_ago=9000),  # 1 h 30 overdue: touched, fails
        job(name="touched", annotations={TOUCHED_AT_ANNOTATION: ago(30)}),  # recently touched
        job(name="young", started_ago=60),  # not yet due
        job(name="young-tf", kind="TFJob", started_ago=60),
        job(name="by-operator", conditions=deadline_failed("by-operator")),
        job(name="by-sweeper", conditions=deadline_failed("by-sweeper", by_sweeper=True)),
        job(name="done", conditions=[condition("Succeeded")]),
    )
    return [
        replace(o, result=Result.ERROR, errors=("cannot patch: forbidden (403)",))
        if o.entry.job.name == "later"
        else o
        for o in found
    ]


def test_the_outcomes_are_counted_by_kind_decision_and_result() -> None:
    tally = Tally.of(a_pass())

    assert tally.jobs == 8
    assert tally.outcomes == Counter(
        {
            ("PyTorchJob", "touch", "done"): 1,
            ("PyTorchJob", "terminate-pods", "done"): 2,
            ("PyTorchJob", "skip", "skipped"): 3,
            ("TFJob", "touch", "error"): 1,
            ("TFJob", "skip", "skipped"): 1,
        }
    )
    assert tally.skipped == Counter(
        {
            ("PyTorchJob", "recently-touched"): 1,
            ("PyTorchJob", "not-yet-due"): 1,
            ("PyTorchJob", "finished"): 1,
            ("TFJob", "not-yet-due"): 1,
        }
    )


def test_summed_over_kinds_it_is_the_summary_of_the_pass() -> None:
    tally = Tally.of(a_pass())

    assert tally.decisions() == Counter({"touch": 2, "terminate-pods": 2, "skip": 4})
    assert tally.results() == Counter({"done": 3, "error": 1, "skipped": 4})
    assert tally.reasons() == Counter({"finished": 1, "not-yet-due": 2, "recently-touched": 1})
    assert tally.errors == 1


def test_overdue_counts_the_unfinished_jobs_acted_on_or_still_the_sweepers() -> None:
    tally = Tally.of(a_pass())

    # late and touched (PyTorchJob), later (TFJob); not the young nor the finished ones.
    assert tally.overdue == Counter({"PyTorchJob": 2, "TFJob": 1})
    assert tally.max_overdue_s == 5400


def test_over_max_actions_is_still_overdue() -> None:
    found = outcomes(job(name="a"), job(name="b"), enforcement=Enforcement(max_actions=1))
    tally = Tally.of(found)

    assert [o.entry.reason for o in found] == ["overdue", "over-max-actions"]
    assert tally.overdue == Counter({"PyTorchJob": 2})


def test_an_empty_pass_counts_nothing() -> None:
    tally = Tally.of([])

    assert (tally.jobs, tally.errors, tally.max_overdue_s) == (0, 0, 0.0)
    assert not (tally.decisions() or tally.results() or tally.reasons() or tally.overdue)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(job(conditions=deadline_failed()), "operator", id="operator"),
        pytest.param(
            job(conditions=deadline_failed(by_sweeper=True)), "sweeper", id="sweeper-said-so"
        ),
        pytest.param(
            job(conditions=deadline_failed(), annotations={TOUCHED_AT_ANNOTATION: ago(600)}),
            "operator-after-touch",
            id="touched-this-deadline",
        ),
        pytest.param(
            job(conditions=deadline_failed(), annotations={TOUCHED_AT_ANNOTATION: ago(7300)}),
            "operator",
            id="a-touch-before-the-deadline-woke-nothing",
        ),
    ],
)
def test_who_failed_a_job_by_its_deadline(raw: dict[str, Any], expected: str) -> None:
    (outcome,) = outcomes(raw)
    assert failed_by(outcome.entry.job) == expected
    assert Tally.of([outcome]).deadline_failed == Counter({("PyTorchJob", expected): 1})


@pytest.mark.parametrize(
    ("result", "errors", "expected"),
    [
        pytest.param(Result.DONE, (), False, id="done"),
        pytest.param(Result.ERROR, (), True, id="failed-action"),
        pytest.param(Result.DONE, ("cannot delete pod: 500",), True, id="failed-request"),
    ],
)
def test_an_error_is_a_failed_action_or_a_failed_request(
    result: Result, errors: tuple[str, ...], expected: bool
) -> None:
    (outcome,) = outcomes(job())
    assert isinstance(outcome.entry, Action)
    assert has_errors(replace(outcome, result=result, errors=errors)) is expected


_POLICY_KEEPS = Enforcement(terminate_pods=PodsMode.POLICY)


@pytest.mark.parametrize(
    ("raw", "enforcement", "held"),
    [
        pytest.param(job(conditions=deadline_failed()), _POLICY_KEEPS, "policy", id="policy-keeps"),
        pytest.param(
            job(conditions=[condition("Succeeded")]), Enforcement(), None, id="done-its-own"
        ),
        pytest.param(
            job(conditions=deadline_failed(), deleting=True),
            Enforcement(),
            "being-deleted",
            id="being-deleted",
        ),
        pytest.param(
            job(conditions=deadline_failed(), annotations={EXCLUDE_ANNOTATION: "true"}),
            _POLICY_KEEPS,
            "opted-out",
            id="opted-out-whatever-the-policy",
        ),
        pytest.param(job(started_ago=60), Enforcement(), None, id="running-its-own"),
        pytest.param(
            trainjob(failed="DeadlineExceeded"),
            Enforcement(reclaim_grace=10**6),
            None,
            id="trainjob-jobsets-pods",
        ),
    ],
)
def test_why_a_skipped_job_may_hold_pods(
    raw: dict[str, Any], enforcement: Enforcement, held: str | None
) -> None:
    kind = TRAINJOB if raw["kind"] == "TrainJob" else KIND[raw["kind"]]
    entry = judge(parse_job(raw, kind), NOW, enforcement)
    assert isinstance(entry, Skip)

    assert held_reason(entry, enforcement) == held


def test_held_pods_are_the_running_and_pending_ones_each_holder_controls() -> None:
    holder = job(name="kept", uid="uid-kept", conditions=deadline_failed("kept"))
    capped = job(name="capped", uid="uid-capped", conditions=deadline_failed("capped"))
    pods = [
        owned("kept-0", holder),
        owned("kept-1", holder, phase="Pending"),
        owned("kept-2", holder, phase="Failed"),
        owned("kept-3", holder, deleting=True),
        owned("kept-4", holder, owner_uid="uid-other"),
    ]
    views = [v for v in map(parse_owned, pods) if v is not None]
    over = Skip(parse_job(capped, KIND["PyTorchJob"]), SkipReason.OVER_MAX_ACTIONS, 1.0, "capped")
    tally = Tally()

    tally.hold(
        {"uid-kept": ("training-operator", "PyTorchJob", "policy")},
        [over],
        {"uid-kept": views, "uid-capped": [v for v in map(parse_owned, [owned("c", capped)]) if v]},
    )

    assert tally.held == Counter(
        {
            ("training-operator", "PyTorchJob", "policy"): 2,
            ("training-operator", "PyTorchJob", "over-max-actions"): 1,
        }
    )
