"""Properties tying ``due_at`` to ``judge`` (issue 13): the timer a watcher arms is exact.

For every generated job and policy, and every instant a watcher arms the job's timer at,
``due_at`` names the instant from which ``judge`` acts: never an action from the arming until
it, an action at it. At any instant, ``judge`` acts exactly when ``due_at`` judged there is not
after it, so a fire that finds nothing to do re-arms for a later instant, never a past one. A
job ``due_at`` calls never due is never acted on from the arming on. So a timer armed at
``due_at`` fires neither early (nothing lost to an early write) nor late (the watch mode's
point), a touch stamp ahead of the clock (a tenant's, counted as none) included.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import example, given, note
from hypothesis import strategies as st

from sweeper.core.decide import ALWAYS, due_at, judge
from sweeper.core.families import lookup
from sweeper.core.jobs import Job, parse_job
from sweeper.core.model import Action, ActionKind, ActionMode, Enforcement
from tests.property.strategies import ORIGIN, JobCase, boundary_offsets, clocks, job_cases, policies

TINY = timedelta(microseconds=1)
# The instant a timer is armed at: long before the job's deadline (the due instant itself is
# then the boundary checked), or anywhere around it.
armings = st.one_of(st.just(-4 * 86400.0), boundary_offsets).map(
    lambda s: ORIGIN + timedelta(seconds=s)
)


@st.composite
def job_and_policy(draw: st.DrawFn) -> tuple[Job, JobCase, Enforcement]:
    enforcement = draw(policies)
    case = draw(job_cases(ORIGIN, enforcement.grace, overdue=draw(st.booleans())))
    return parse_job(case.raw(), lookup(case.kind.name)), case, enforcement


def acts(job: Job, now: datetime, enforcement: Enforcement) -> bool:
    entry = judge(job, now, enforcement)
    note(f"judge at {now.isoformat()}: {entry.decision} ({entry.reason})")
    return isinstance(entry, Action)


@given(job_and_policy(), armings, boundary_offsets)
def test_judge_acts_when_the_timer_fires_and_never_between_its_arming_and_then(
    drawn: tuple[Job, JobCase, Enforcement], armed: datetime, offset: float
) -> None:
    job, _case, enforcement = drawn
    due = due_at(job, armed, enforcement)
    note(f"armed at {armed.isoformat()}: due_at = {due}")
    try:
        moment = armed + timedelta(seconds=abs(offset))
    except OverflowError:  # no later instant to judge at
        moment = armed
    if due is None:
        assert not acts(job, moment, enforcement), "never due, yet acted on"
        return
    if due == ALWAYS:
        assert acts(job, moment, enforcement), "always due, yet left alone"
        return
    fires = max(armed, due)
    assert acts(job, fires, enforcement), "not due when the timer fires"
    for before in (fires - TINY, fires - timedelta(seconds=abs(offset)) - TINY):
        assert before < armed or not acts(job, before, enforcement), "due before due_at"


@given(job_and_policy(), clocks)
def test_judge_acts_at_an_instant_exactly_when_due_at_judged_there_is_reached(
    drawn: tuple[Job, JobCase, Enforcement], now: datetime
) -> None:
    job, _case, enforcement = drawn
    due = due_at(job, now, enforcement)
    note(f"due_at = {due}")
    assert acts(job, now, enforcement) is (due is not None and due <= now)


@given(job_and_policy(), st.sampled_from([0.1, 0.3, 1e-7, 0.1234567, 2.5e-6, 119.9999999]))
def test_the_escalation_boundary_survives_sub_microsecond_settings(
    drawn: tuple[Job, JobCase, Enforcement], escalate: float
) -> None:
    job, _case, enforcement = drawn
    enforcement = Enforcement(
        action=ActionMode.AUTO, grace=enforcement.grace, escalate_after=escalate
    )
    armed = ORIGIN - timedelta(days=4)
    due = due_at(job, armed, enforcement)
    if due is None or due == ALWAYS or due <= armed:
        return
    assert acts(job, due, enforcement)
    assert not acts(job, due - TINY, enforcement)


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
    enforcement = Enforcement(
        action=action, grace=grace, retouch_after=retouch_after, retouch_limit=limit
    )
    job = Job(
        kind=lookup("PyTorchJob"),
        version="v1",
        namespace="ns",
        name="job",
        uid="uid",
        start_time=ORIGIN,
        deadline_seconds=60,
    )
    due = due_at(job, ORIGIN, enforcement)
    assert due is not None
    touched = due + timedelta(seconds=lags[0])
    quick = 0
    for lag in lags[1:]:
        job = replace(job, touched_at=touched)
        following = due_at(job, touched, enforcement)  # armed by the touch's own event
        assert following is not None
        entry = judge(job, following, enforcement)
        assert isinstance(entry, Action)
        if entry.kind is not ActionKind.TOUCH or following - touched >= timedelta(
            seconds=enforcement.escalate_after
        ):
            break
        quick += 1
        touched = following + timedelta(seconds=lag)
    assert quick <= limit
    if all(lag == 0 for lag in lags) and (
        limit * retouch_after < enforcement.escalate_after
        or (action is ActionMode.TOUCH and retouch_after < enforcement.escalate_after)
    ):
        # On time, every quick touch the limit allows is made (8 draws cover 5), unless auto's
        # escalation comes first.
        assert quick == min(limit, len(lags) - 1)
