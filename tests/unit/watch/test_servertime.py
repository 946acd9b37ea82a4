"""The server clock estimate from Date headers: it narrows, and it never runs ahead."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.watch.servertime import DRIFT, ServerClock

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def date_header(server_seconds: float) -> datetime:
    # Go's http server formats time.Now() with whole seconds: truncation.
    return EPOCH + timedelta(seconds=math.floor(server_seconds))


def test_nothing_is_known_before_the_first_response() -> None:
    assert ServerClock().now(100.0) is None


@pytest.mark.parametrize(
    ("offset", "latency"),
    [
        pytest.param(1.7e9 + 0.0, 0.002, id="aligned"),
        pytest.param(1.7e9 + 0.25, 0.010, id="quarter-past"),
        pytest.param(1.7e9 + 0.999, 0.050, id="just-before-the-tick"),
    ],
)
def test_responses_across_second_boundaries_narrow_the_estimate(
    offset: float, latency: float
) -> None:
    clock = ServerClock()
    for step in range(40):
        sent = 1000.0 + step * 2.137  # renewals every ~2 s land at every phase of a second
        received = sent + latency
        clock.observe(date_header(sent + latency / 2 + offset), sent, received)

    bounds = clock.bounds(1100.0)
    assert bounds is not None
    assert bounds.low <= offset <= bounds.high
    assert bounds.high - bounds.low < 0.2
    server_now = clock.now(1100.0)
    assert server_now is not None
    assert server_now <= EPOCH + timedelta(seconds=1100.0 + offset)


def test_a_stepped_server_clock_restarts_the_estimate() -> None:
    clock = ServerClock()
    clock.observe(date_header(5000.0), 10.0, 10.1)
    clock.observe(date_header(5000.0 + 3600 + 20.0), 20.0, 20.1)  # an hour's step

    bounds = clock.bounds(20.1)
    assert bounds is not None
    # Only the newest response counts: [8620 - 20.1, 8621 - 20.0].
    assert bounds.low == pytest.approx(8599.9)
    assert bounds.high == pytest.approx(8601.0)


@settings(deadline=None)
@given(
    offset=st.floats(-1e6, 1e9, allow_nan=False),
    rate=st.floats(-DRIFT * 0.9, DRIFT * 0.9),
    requests=st.lists(
        st.tuples(st.floats(0.0, 30.0), st.floats(0.0, 0.5), st.floats(0.0, 1.0)),
        min_size=1,
        max_size=60,
    ),
)
def test_the_estimate_never_runs_ahead_of_the_servers_clock(
    offset: float, rate: float, requests: list[tuple[float, float, float]]
) -> None:
    """Whatever the latencies, phases and a drift below DRIFT, the lower bound is never late.

    The server's clock at local monotonic m is offset + m * (1 + rate); it answers at some
    point inside each request's round trip.
    """
    clock = ServerClock()
    mono = 100.0

    def server(m: float) -> float:
        return offset + m * (1 + rate)

    for gap, latency, where in requests:
        mono += gap
        answered = mono + latency * where
        clock.observe(date_header(server(answered)), mono, mono + latency)
        mono += latency
        estimate = clock.now(mono)
        assert estimate is not None
        truth = EPOCH + timedelta(seconds=server(mono))
        # Never ahead (a timer by it never fires early); a microsecond of float rounding.
        assert estimate <= truth + timedelta(microseconds=2)
