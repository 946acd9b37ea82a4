"""Leader election's state machine (client-go semantics) with an injected clock.

The unit tests walk through the transitions one by one; the property test runs several
candidates against an in-memory Lease store that enforces resourceVersion preconditions,
with random timings, lost answers and stalls, and checks that two candidates never lead at
the same moment.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from sweeper.config import Timing
from sweeper.core.errors import ConfigError
from sweeper.watch.elector import (
    Create,
    Elector,
    Lease,
    Record,
    Update,
    Wait,
    lease_body,
    micro_time,
    parse_lease,
)

WALL = datetime(2031, 1, 1, tzinfo=UTC)
TIMING = Timing(lease_duration=15, renew_deadline=10, retry_period=2)


def held_by(holder: str, version: str = "7", transitions: int = 3) -> Lease:
    return Lease(Record(holder, 15, WALL, WALL + timedelta(seconds=5), transitions), version)


@pytest.mark.parametrize(
    ("timing", "message"),
    [
        pytest.param((10, 10, 2), "--lease-duration", id="duration-not-above-deadline"),
        pytest.param((15, 2.4, 2), "--renew-deadline", id="deadline-not-above-jittered-retry"),
        pytest.param((15, 10, 0), "--retry-period", id="no-retry-period"),
    ],
)
def test_timings_that_would_let_two_lead_are_refused(
    timing: tuple[float, float, float], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Timing(*timing)


def test_a_missing_lease_is_created_with_no_transitions() -> None:
    step = Elector("a", TIMING).attempt(None, 0.0, WALL)
    assert step == Create(Record("a", 15, WALL, WALL, 0))


def test_a_live_lease_of_another_holder_is_waited_for_then_taken_after_its_duration() -> None:
    elector = Elector("b", TIMING)
    assert elector.attempt(held_by("a"), 100.0, WALL) == Wait("a")
    # Unchanged record: its age counts from when it was first seen, on our clock.
    assert elector.attempt(held_by("a"), 114.999, WALL) == Wait("a")
    step = elector.attempt(held_by("a"), 115.0, WALL)
    assert step == Update(Record("b", 15, WALL, WALL, 4), "7")


def test_a_standby_knows_when_the_lease_it_saw_expires() -> None:
    elector = Elector("b", TIMING)
    assert elector.expires_in(0.0) is None  # nothing seen
    elector.attempt(held_by("a"), 100.0, WALL)
    assert elector.expires_in(104.0) == 11.0
    assert elector.expires_in(120.0) == 0.0
    elector.attempt(Lease(Record("", 1, WALL, WALL, 3), "9"), 121.0, WALL)
    assert elector.expires_in(121.0) is None  # released: take it now


def test_a_renewed_record_restarts_the_wait_whatever_its_times_say() -> None:
    elector = Elector("b", TIMING)
    elector.attempt(held_by("a", "7"), 100.0, WALL)
    renewed = Lease(Record("a", 15, WALL, WALL - timedelta(days=1), 3), "8")  # skewed clock
    assert elector.attempt(renewed, 110.0, WALL) == Wait("a")
    assert elector.attempt(renewed, 124.9, WALL) == Wait("a")
    assert isinstance(elector.attempt(renewed, 125.0, WALL), Update)


def test_a_released_lease_is_taken_at_once() -> None:
    released = Lease(Record("", 1, WALL, WALL, 3), "9")
    step = Elector("b", TIMING).attempt(released, 0.0, WALL)
    assert step == Update(Record("b", 15, WALL, WALL, 4), "9")


def test_the_leader_leads_until_the_renew_deadline_after_its_last_sent_write() -> None:
    elector = Elector("a", TIMING)
    written = Lease(Record("a", 15, WALL, WALL, 0), "1")
    elector.succeeded(written, sent=50.0, now=50.3)
    assert elector.leading(50.3)
    assert elector.leading(59.999)
    assert not elector.leading(60.0)
    assert elector.lost(60.0)


def test_a_write_sent_while_leading_ends_before_another_may_lead_and_none_is_sent_after() -> None:
    elector = Elector("a", TIMING)
    assert elector.write_window(0.0) == 0.0  # never led: no write at all
    written = Lease(Record("a", 15, WALL, WALL, 0), "1")
    elector.succeeded(written, sent=50.0, now=50.3)
    # A follower may take over from 50 + 15 at the earliest: an attempt sent now ends by then.
    assert elector.write_window(50.3) == pytest.approx(14.7)
    # Never less than lease duration - renew deadline while leading...
    assert elector.write_window(59.999) == pytest.approx(5.001)
    # ...and none once the renew deadline passed.
    assert elector.write_window(60.0) == 0.0
    elector.succeeded(written, sent=58.0, now=58.2)  # a renewal moves the window
    assert elector.write_window(60.0) == pytest.approx(13.0)
    elector.step_down()
    assert elector.write_window(60.0) == 0.0


def test_a_renewal_keeps_acquire_time_and_transitions_and_carries_the_version() -> None:
    elector = Elector("a", TIMING)
    elector.succeeded(Lease(Record("a", 15, WALL, WALL, 4), "1"), sent=0.0, now=0.1)
    later = WALL + timedelta(seconds=2)
    assert elector.renewal(later) == Update(Record("a", 15, WALL, later, 4), "1")
    # After a read (a failed optimistic renewal), the same rule holds.
    assert elector.attempt(held_by("a", "5", 4), 2.0, later) == Update(
        Record("a", 15, WALL, later, 4), "5"
    )


def test_release_empties_the_holder_with_a_one_second_duration() -> None:
    elector = Elector("a", TIMING)
    assert elector.release(WALL) is None  # never led
    elector.succeeded(Lease(Record("a", 15, WALL, WALL, 4), "3"), sent=0.0, now=0.1)
    assert elector.release(WALL) == Update(Record("", 1, WALL, WALL, 4), "3")
    elector.step_down()
    assert not elector.leading(0.2)
    assert elector.renewal(WALL) is None


def test_a_lease_object_round_trips_through_its_json() -> None:
    record = Record("a_1", 15, WALL, WALL + timedelta(microseconds=123456), 2)
    body = lease_body("ns", "name", record, "42")
    assert body["spec"] == {
        "holderIdentity": "a_1",
        "leaseDurationSeconds": 15,
        "leaseTransitions": 2,
        "acquireTime": "2031-01-01T00:00:00.000000Z",
        "renewTime": "2031-01-01T00:00:00.123456Z",
    }
    assert parse_lease(body) == Lease(record, "42")
    assert micro_time(WALL) == "2031-01-01T00:00:00.000000Z"
    assert parse_lease({"spec": "odd"}) == Lease(Record(), "")


# --- the property: never two leaders ----------------------------------------------------------


@dataclass
class Store:
    """The API server's Lease: resourceVersion-guarded create and update."""

    lease: Lease | None = None
    version: int = 0

    def create(self, record: Record) -> Lease | None:
        if self.lease is not None:
            return None  # 409 AlreadyExists
        self.version += 1
        self.lease = Lease(record, str(self.version))
        return self.lease

    def update(self, record: Record, version: str) -> Lease | None:
        if self.lease is None or self.lease.resource_version != version:
            return None  # 409 Conflict
        self.version += 1
        self.lease = Lease(record, str(self.version))
        return self.lease


@dataclass
class Candidate:
    elector: Elector
    clock_offset: float  # each process has its own monotonic origin
    intervals: list[tuple[float, float]] = field(default_factory=list)
    # (from, until): a job write sent while leading may be in flight until `until`.
    in_flight: list[tuple[float, float]] = field(default_factory=list)


def simulate(  # noqa: PLR0912, PLR0915 - one event loop reads best in one piece
    seed: int, candidates: int, steps: int, loss: float, stall: float
) -> list[Candidate]:
    """Simulate candidates in true time.

    The server reads or applies each request at one instant between its sending and its
    answer, in the order of those instants.
    """
    rng = random.Random(seed)  # noqa: S311 - a reproducible simulation, not cryptography
    store = Store()
    cands = [Candidate(Elector(f"c{i}", TIMING), rng.uniform(-1e4, 1e4)) for i in range(candidates)]
    queue: list[tuple[float, int, int, str, object]] = []
    counter = 0

    def later(at: float, index: int, what: str, payload: object = None) -> None:
        nonlocal counter
        counter += 1
        heapq.heappush(queue, (at, counter, index, what, payload))

    def latency() -> float:
        delay = rng.uniform(0, 0.3)
        if rng.random() < stall:
            delay += rng.uniform(0, 20)  # a stalled request or answer (GC pause, partition)
        return delay

    for index in range(candidates):
        later(rng.uniform(0, 3), index, "start")
    for _ in range(steps):
        t, _, index, what, payload = heapq.heappop(queue)
        cand = cands[index]
        elector = cand.elector
        local = t + cand.clock_offset
        if what == "start":
            if elector.lost(local):
                elector.step_down()
            renewal = elector.renewal(WALL)
            if renewal is None:
                later(t + latency(), index, "read")
            else:
                later(t + latency(), index, "apply", (renewal, t))
        elif what == "read":
            # The server reads now; the answer arrives later, then the write is sent.
            current = store.lease
            answer_at = t + latency()
            later(answer_at, index, "decide", current)
        elif what == "decide":
            assert payload is None or isinstance(payload, Lease)
            step = elector.attempt(payload, local, WALL)
            if isinstance(step, Wait):
                later(t + TIMING.retry_period * (1 + 1.2 * rng.random()), index, "start")
            else:
                later(t + latency(), index, "apply", (step, t))
        elif what == "apply":
            assert isinstance(payload, tuple)
            step, sent = payload
            if isinstance(step, Create):
                written = store.create(step.record)
            else:
                written = store.update(step.record, step.resource_version)
            later(t + latency(), index, "answer", (written, sent))
        else:  # answer
            assert isinstance(payload, tuple)
            written, sent = payload
            if written is not None and rng.random() >= loss:
                elector.succeeded(written, sent + cand.clock_offset, local)
                if written.record.holder == elector.identity and elector.leading(local):
                    # Leading (in true time) from this answer until renew deadline after send.
                    cand.intervals.append((t, sent + TIMING.renew_deadline))
                    cand.in_flight.append((t, t + elector.write_window(local)))
            later(t + TIMING.retry_period, index, "start")
    return cands


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    candidates=st.integers(2, 4),
    loss=st.sampled_from([0.0, 0.1, 0.4]),
    stall=st.sampled_from([0.0, 0.05, 0.3]),
)
def test_two_candidates_never_lead_at_the_same_moment(
    seed: int, candidates: int, loss: float, stall: float
) -> None:
    cands = simulate(seed, candidates, 300, loss, stall)
    spans = sorted((start, end, c.elector.identity) for c in cands for start, end in c.intervals)
    leaders = {name for _, _, name in spans}
    note(f"leaders: {sorted(leaders)}, spans: {len(spans)}")
    # Each candidate's own windows chain (renewals); across candidates they never overlap.
    by_time = sorted(spans)
    latest_end: dict[str, float] = {}
    for start, end, name in by_time:
        for other, other_end in latest_end.items():
            if other != name:
                assert start >= other_end, f"{name} led at {start}, {other} until {other_end}"
        latest_end[name] = max(latest_end.get(name, end), end)
    # Stronger: a write sent while leading, bounded by the write window, is over before any
    # other candidate leads (no two replicas' writes are ever in flight together).
    for cand in cands:
        for rival in cands:
            if rival is cand:
                continue
            for start, until in cand.in_flight:
                for rival_start, _end in rival.intervals:
                    assert not start <= rival_start < until, (
                        f"{rival.elector.identity} led at {rival_start} while a write of "
                        f"{cand.elector.identity} could be in flight until {until}"
                    )
