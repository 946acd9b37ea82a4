"""The agenda wakes a job's timer for its ``DeadlineApproaching`` warning once per deadline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sweeper.core.families import KINDS
from sweeper.k8s.cluster import ServedKind
from sweeper.watch.agenda import Agenda
from sweeper.watch.inbox import Ending, Event, Fired, JobKey, Listed, Pending, Scope
from tests.unit.watch.harness import Clock

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
DUE = T0 + timedelta(minutes=30)
KEY = JobKey("PyTorchJob", "team-a", "train")
WARN = Pending(T0 + timedelta(minutes=20), DUE, "train.deadline-approaching.0123456789")
SCOPE = Scope(ServedKind(next(k for k in KINDS if k.name == "PyTorchJob"), "v1"), "team-a")


def agenda() -> Agenda:
    return Agenda(Clock(wall=T0))


def test_the_timer_wakes_for_the_warning_before_the_due_instant() -> None:
    book = agenda()
    book.apply(Event(KEY, DUE, WARN))
    assert book.when(KEY) == WARN.at


def test_a_listed_job_wakes_for_its_warning_too() -> None:
    book = agenda()
    book.apply(Listed(SCOPE, {KEY: DUE}, relist=False, pending={KEY: WARN}))
    assert book.when(KEY) == WARN.at


def test_once_warned_the_timer_wakes_only_for_the_due_instant() -> None:
    book = agenda()
    book.apply(Event(KEY, DUE, WARN))
    assert book.take_due(WARN.at) == [(KEY, WARN.at)]
    book.apply(Fired(KEY, DUE, warned=WARN.name))
    assert book.when(KEY) == DUE
    assert book.warned(KEY) == WARN.name  # what a resync pass asks before recording it
    # The job changes (a status update) with the same deadline: no second wake-up for it.
    book.apply(Event(KEY, DUE, WARN))
    assert book.when(KEY) == DUE


def test_a_new_deadline_wakes_for_its_own_warning() -> None:
    book = agenda()
    book.apply(Event(KEY, DUE, WARN))
    book.take_due(WARN.at)
    book.apply(Fired(KEY, DUE, warned=WARN.name))
    later = Pending(
        WARN.at + timedelta(hours=1), DUE + timedelta(hours=1), "train.deadline-approaching.ab"
    )
    book.apply(Event(KEY, DUE + timedelta(hours=1), later))
    assert book.when(KEY) == later.at


def test_a_failed_warning_is_tried_again_after_the_backoff() -> None:
    book = agenda()
    book.apply(Event(KEY, DUE, WARN))
    book.take_due(WARN.at)
    book.apply(Fired(KEY, None, Ending.FAILED))
    retry = book.when(KEY)
    assert retry is not None
    assert T0 < retry < DUE
    book.apply(Event(KEY, DUE, WARN))  # not warned yet: the warning's instant again
    assert book.when(KEY) == WARN.at


def test_a_job_that_is_gone_forgets_its_warning() -> None:
    book = agenda()
    book.apply(Event(KEY, DUE, WARN))
    book.take_due(WARN.at)
    book.apply(Fired(KEY, DUE, warned=WARN.name))
    book.apply(Event(KEY, None))  # deleted
    book.apply(Event(KEY, DUE, WARN))  # a namesake with the same instants (the name differs)
    assert book.when(KEY) == WARN.at


def test_a_warning_due_after_the_action_is_not_waited_for() -> None:
    # The fire acts first too, and warns at the job's next look (test_watch_warnings.py).
    book = agenda()
    book.apply(Event(KEY, DUE, Pending(DUE, DUE, WARN.name)))
    assert book.when(KEY) == DUE


def test_a_warning_whose_deadline_came_does_not_wake_the_timer() -> None:
    # A controller's own deadline (no due instant of the sweeper's): events after the deadline
    # must not wake the timer for a warning that can no longer be given.
    book = Agenda(Clock(wall=DUE))
    book.apply(Event(KEY, None, WARN))
    assert book.when(KEY) is None
    book.apply(Event(KEY, DUE + timedelta(minutes=2), WARN))
    assert book.when(KEY) == DUE + timedelta(minutes=2)
