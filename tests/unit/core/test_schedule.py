"""The watch mode's timer schedule: one timer per job, re-armed by every event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.core.schedule import Schedule

T0 = datetime(2031, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("events", "now", "fired", "left"),
    [
        pytest.param([("a", 5)], 4.999999, [], ["a"], id="not-yet"),
        pytest.param([("a", 5)], 5, ["a"], [], id="due-at-its-instant"),
        pytest.param([("a", 5), ("a", 9)], 6, [], ["a"], id="re-armed-later-by-an-edit"),
        pytest.param([("a", 9), ("a", 5)], 6, ["a"], [], id="re-armed-earlier-by-an-edit"),
        pytest.param([("a", 5), ("a", None)], 6, [], [], id="disarmed-by-a-finish-or-suspend"),
        pytest.param([("b", 3), ("a", 1), ("c", 8)], 5, ["a", "b"], ["c"], id="earliest-first"),
        pytest.param([("a", 5), ("a", 5)], 5, ["a"], [], id="the-same-instant-twice-fires-once"),
    ],
)
def test_events_arm_and_re_arm(
    events: list[tuple[str, float | None]], now: float, fired: list[str], left: list[str]
) -> None:
    schedule: Schedule[str] = Schedule()
    for key, due in events:
        schedule.arm(key, None if due is None else at(due))

    taken = schedule.pop_due(at(now))

    assert [key for key, _ in taken] == fired
    assert sorted(schedule) == left
    assert schedule.pop_due(at(now)) == []  # a taken timer stays gone until re-armed


def test_a_deleted_job_is_dropped_and_a_relist_drops_vanished_jobs() -> None:
    schedule: Schedule[str] = Schedule()
    for key, due in (("a", 1), ("b", 2), ("c", 3)):
        schedule.arm(key, at(due))

    schedule.drop("a")
    vanished = schedule.drop_where(lambda key: key != "c")

    assert vanished == ["b"]
    assert list(schedule) == ["c"]
    assert schedule.next_due() == at(3)
    assert schedule.due_keys(at(2)) == []
    assert schedule.due_keys(at(3)) == ["c"]


# One operation: arm a key at an instant or disarm it (None), drop it, or take what is due.
operations = st.lists(
    st.one_of(
        st.tuples(st.just("arm"), st.integers(0, 5), st.none() | st.integers(0, 50)),
        st.tuples(st.just("drop"), st.integers(0, 5), st.none()),
        st.tuples(st.just("pop"), st.none(), st.integers(0, 50)),
    ),
    max_size=200,
)


@settings(deadline=None)
@given(operations)
def test_the_schedule_behaves_like_a_dict_of_instants(
    ops: list[tuple[str, int | None, int | None]],
) -> None:
    schedule: Schedule[int] = Schedule()
    model: dict[int, datetime] = {}
    for op, key, value in ops:
        if op == "arm":
            assert key is not None
            schedule.arm(key, None if value is None else at(value))
            if value is None:
                model.pop(key, None)
            else:
                model[key] = at(value)
        elif op == "drop":
            assert key is not None
            schedule.drop(key)
            model.pop(key, None)
        else:
            assert value is not None
            now = at(value)
            expected = sorted(((k, d) for k, d in model.items() if d <= now), key=lambda i: i[1])
            taken = schedule.pop_due(now)
            assert sorted(taken, key=lambda i: (i[1], i[0])) == sorted(
                expected, key=lambda i: (i[1], i[0])
            )
            assert [d for _, d in taken] == sorted(d for _, d in taken)  # earliest first
            for k, _ in expected:
                del model[k]
        assert len(schedule) == len(model)
        assert schedule.next_due() == (min(model.values()) if model else None)
        assert all(schedule.when(k) == d for k, d in model.items())
