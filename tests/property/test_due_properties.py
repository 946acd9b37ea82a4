"""Properties tying ``due_at`` to ``judge`` (issue 13): the timer a watcher arms is exact.

For every generated job and policy, ``due_at`` names the instant from which ``judge`` acts:
never an action before it, an action at it, and still one after it (the job unchanged). A job
``due_at`` calls never due is never acted on at any clock. So a timer armed at ``due_at``
fires neither early (nothing lost to an early write) nor late (the watch mode's point).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given, note
from hypothesis import strategies as st

from sweeper.decide import ALWAYS, Action, ActionMode, Policy, due_at, judge
from sweeper.jobs import Job, parse_job
from sweeper.kinds import lookup
from tests.property.strategies import ORIGIN, JobCase, boundary_offsets, clocks, job_cases, policies

TINY = timedelta(microseconds=1)


@st.composite
def job_and_policy(draw: st.DrawFn) -> tuple[Job, JobCase, Policy]:
    policy = draw(policies)
    case = draw(job_cases(ORIGIN, policy.grace, overdue=draw(st.booleans())))
    return parse_job(case.raw(), lookup(case.kind.name)), case, policy


def acts(job: Job, now: datetime, policy: Policy) -> bool:
    entry = judge(job, now, policy)
    note(f"judge at {now.isoformat()}: {entry.decision} ({entry.reason})")
    return isinstance(entry, Action)


@given(job_and_policy(), boundary_offsets)
def test_judge_acts_at_the_due_instant_and_never_before(
    drawn: tuple[Job, JobCase, Policy], offset: float
) -> None:
    job, _case, policy = drawn
    due = due_at(job, policy)
    note(f"due_at = {due}")
    if due is None or due == ALWAYS:
        return
    assert acts(job, due, policy), "not due at due_at"
    assert not acts(job, due - TINY, policy), "due a microsecond before due_at"
    earlier = due - timedelta(seconds=abs(offset)) - TINY
    assert not acts(job, earlier, policy), "due before due_at"
    assert acts(job, due + timedelta(seconds=abs(offset)), policy), "no longer due after due_at"


@given(job_and_policy(), clocks)
def test_a_job_never_due_is_never_acted_on_and_always_due_at_any_time(
    drawn: tuple[Job, JobCase, Policy], now: datetime
) -> None:
    job, _case, policy = drawn
    due = due_at(job, policy)
    if due is None:
        assert not acts(job, now, policy)
    elif due == ALWAYS:
        assert acts(job, now, policy)


@given(job_and_policy(), st.sampled_from([0.1, 0.3, 1e-7, 0.1234567, 2.5e-6, 119.9999999]))
def test_the_escalation_boundary_survives_sub_microsecond_settings(
    drawn: tuple[Job, JobCase, Policy], escalate: float
) -> None:
    job, _case, policy = drawn
    policy = Policy(action=ActionMode.AUTO, grace=policy.grace, escalate_after=escalate)
    due = due_at(job, policy)
    if due is None or due == ALWAYS:
        return
    assert acts(job, due, policy)
    assert not acts(job, due - TINY, policy)
