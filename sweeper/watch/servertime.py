"""The API server's clock, estimated from ``Date`` headers so that a timer never fires early.

A ``Date`` header says the server's clock read between ``D`` and ``D + 1 s`` (whole seconds,
truncated) at some instant between the request's sending and its answer's arrival, ``sent``
and ``received`` on the local monotonic clock. So the offset ``server - monotonic`` lies in
``[D - received, D + 1 - sent]``. Each response narrows the interval: the estimate is the
intersection of all of them, which tightens well below a second once responses straddle the
server's second boundaries (lease renewals every few seconds are enough).

The two clocks tick at slightly different rates, so an old bound loosens with its age by
``DRIFT`` (200 ppm, far above what a quartz or an NTP-disciplined clock does): the lower
bound decays as ``lo - DRIFT * age``. All lower bounds decay alike, so the largest one stays
the largest and the state is two numbers. Timers use the lower bound: the server's clock is
at least that, so a deadline judged by it has passed for the server too (never early). An
empty intersection means a clock was stepped; the estimate then restarts from the newest
response. Pure: the caller passes every instant in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

DRIFT = 200e-6
RESOLUTION_S = 1.0


@dataclass(frozen=True, slots=True)
class Bounds:
    """The interval the offset ``server epoch seconds - local monotonic seconds`` lies in."""

    low: float
    high: float

    @property
    def width(self) -> float:
        """How uncertain the estimate is, in seconds."""
        return self.high - self.low


class ServerClock:
    """The intersection of every ``Date`` header's bounds, loosened by drift with age."""

    def __init__(self) -> None:
        self._low: float | None = None
        self._low_at = 0.0
        self._high: float | None = None
        self._high_at = 0.0
        self.resets = 0

    def observe(self, date: datetime, sent: float, received: float) -> None:
        """Narrow the estimate with one response sent and received at those monotonic seconds.

        ``sent`` is read just before the request was sent, ``received`` just after its answer's
        headers arrived.
        """
        server = date.timestamp()
        low, high = server - received, server + RESOLUTION_S - sent
        current = self.bounds(received)
        if current is not None and (low > current.high or high < current.low):
            # Disjoint: a clock was stepped (or the server changed). Start over from here.
            self.resets += 1
            current = None
        if current is None:
            self._low, self._low_at, self._high, self._high_at = low, received, high, received
            return
        if low > current.low:
            self._low, self._low_at = low, received
        if high < current.high:
            self._high, self._high_at = high, received

    def bounds(self, at: float) -> Bounds | None:
        """The interval at a monotonic instant, loosened by drift since each bound was set.

        ``None`` before the first response.
        """
        if self._low is None or self._high is None:
            return None
        low = self._low - DRIFT * max(at - self._low_at, 0.0)
        high = self._high + DRIFT * max(at - self._high_at, 0.0)
        return Bounds(low, high)

    def now(self, at: float) -> datetime | None:
        """The earliest time the server's clock can show at a monotonic instant.

        ``None`` before the first response, and when the server's clock is past what a datetime
        holds (a ``Date`` header in the year 9999): the caller's fallback, the local clock,
        then decides, rather than an OverflowError.
        """
        bounds = self.bounds(at)
        if bounds is None:
            return None
        try:
            return datetime.fromtimestamp(0, UTC) + timedelta(seconds=at + bounds.low)
        except OverflowError:
            return None
