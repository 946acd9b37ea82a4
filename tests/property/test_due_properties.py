"""Properties tying ``due_at`` to ``judge`` (issue 13): the timer a watcher arms is exact.

For every generated job and policy, ``due_at`` names the instant from which ``judge`` acts:
never an action before it, an action at it, and still one after it (the job unchanged). A job
``due_at`` calls never due is never acted on at any clock. So a timer armed at ``due_at``
fires neither early (nothing lost to an early write) nor late (the watch mode's point).

One exception, on one side only: at an instant its touch stamp is ahead of (later than the
instant by more than ``--grace`` and a second: a tenant's, never the sweeper's), ``judge``
counts that stamp as none while ``due_at``, which has no instant, counts it. There ``judge``
may act before ``due_at``, never after it: a timer is late for such a job, never early.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import example, given, note
from hypothesis import strategies as st

from sweeper.core.decide import ALWAYS, due_at, judge
from sweeper.core.families import lookup
from sweeper.core.jobs import Job, parse_job
from sweeper.core.model import Action, ActionKind, ActionMode, Policy
from tests.property.strategies import ORIGIN, JobCase, boundary_offsets, clocks, job_cases, policies

TINY = timedelta(microseconds=1)


@st.composite
def job_and_policy(draw: st.DrawFn) -> tuple[Job, JobCase, Policy]:
    policy = draw(policies)
    case = draw(job_cases(ORIGIN, policy.grace, overdue=draw(st.booleans())))
    return parse_job(case.raw(), lookup(case.kind.name)), case, policy


def ahead(job: Job, moment: datetime, policy: Policy) -> bool:
    """Whether the job's touch stamp is later than ``moment`` by more than judge tolerates."""
    touched = job.touched_at
    return touched is not None and (touched - moment).total_seconds() > policy.grace + 1


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
    before = due - TINY
    assert ahead(job, before, policy) or not acts(job, before, policy), "due a µs before due_at"
    earlier = due - timedelta(seconds=abs(offset)) - TINY
    assert ahead(job, earlier, policy) or not acts(job, earlier, policy), "due before due_at"
    try:
        later = due + timedelta(seconds=abs(offset))
    except OverflowError:  # due_at within offset of datetime.max: no later instant to judge at
        return
    assert acts(job, later, policy), "no longer due after due_at"


@given(job_and_policy(), clocks)
def test_a_job_never_due_is_never_acted_on_and_always_due_at_any_time(
    drawn: tuple[Job, JobCase, Policy], now: datetime
) -> None:
    job, _case, policy = drawn
    due = due_at(job, policy)
    if due is None:
        assert ahead(job, now, policy) or not acts(job, now, policy)
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
    assert ahead(job, due - TINY, policy) or not acts(job, due - TINY, policy)


@given(
    st.sampled_from([ActionMode.TOUCH, ActionMode.AUTO]),
    st.sampled_from([0.0, 30.0]),
    st.one_of(st.sampled_from([5.0, 0.1234567, 1.0]), st.integers(1, 200).map(float)),
    st.integers(0, 5),
    st.lists(st.sampled_from([0.0, 1e-6, 0.01, 0.3, 2.0]), min_size=8, max_size=8),
)
@example(ActionMode.AUTO, 0.0, 100.0, 3, [0.0] * 8)
@example(ActionMode.TOUCH, 30.0, 100.0, 3, [0.0] * 8)
@example(ActionMode.AUTO, 30.0, 5.0, 3, [0.0] * 8)
def test_quick_touches_are_bounded_by_the_limit_and_all_come_when_on_time(
    action: ActionMode, grace: float, retouch_after: float, limit: int, lags: list[float]
) -> None:
    # A watcher touching each time the job's timer fires, each write a lag late: the touches
    # that follow the previous one sooner than --escalate-after are the quick ones.
    policy = Policy(action=action, grace=grace, retouch_after=retouch_after, retouch_limit=limit)
    job = Job(
        kind=lookup("PyTorchJob"),
        version="v1",
        namespace="ns",
        name="job",
        uid="uid",
        start_time=ORIGIN,
        deadline_seconds=60,
    )
    due = due_at(job, policy)
    assert due is not None
    touched = due + timedelta(seconds=lags[0])
    quick = 0
    for lag in lags[1:]:
        job = replace(job, touched_at=touched)
        following = due_at(job, policy)
        assert following is not None
        entry = judge(job, following, policy)
        assert isinstance(entry, Action)
        if entry.kind is not ActionKind.TOUCH or following - touched >= timedelta(
            seconds=policy.escalate_after
        ):
            break
        quick += 1
        touched = following + timedelta(seconds=lag)
    assert quick <= limit
    if all(lag == 0 for lag in lags) and (
        limit * retouch_after < policy.escalate_after
        or (action is ActionMode.TOUCH and retouch_after < policy.escalate_after)
    ):
        # On time, every quick touch the limit allows is made (8 draws cover 5), unless auto's
        # escalation comes first.
        assert quick == min(limit, len(lags) - 1)
