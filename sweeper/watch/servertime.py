"""The API server's clock, estimated from ``Date`` headers so that a timer never fires early.

A ``Date`` header says the server's clock read between ``D`` and ``D + 1 s`` at some instant
between ``sent`` and ``received`` (local monotonic seconds), so the offset ``server -
monotonic`` lies in ``[D - received, D + 1 - sent]``. The estimate is the intersection of every
answer's interval, well below a second once answers straddle the server's second boundaries.
An old bound loosens with its age by ``DRIFT`` (200 ppm, far above a quartz clock's); all decay
alike, so the state is two numbers. Timers use the lower bound: a deadline judged by it has
passed for the server too. An empty intersection means a clock was stepped: the estimate
restarts from the newest answer. Pure: the caller passes every instant in.
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


class ServerClock:
    """The intersection of every ``Date`` header's bounds, loosened by drift with age."""

    def __init__(self) -> None:
        self._low: float | None = None
        self._low_at = 0.0
        self._high: float | None = None
        self._high_at = 0.0

    def observe(self, date: datetime, sent: float, received: float) -> None:
        """Narrow the estimate with one answer: ``sent`` before its request, ``received`` after."""
        server = date.timestamp()
        low, high = server - received, server + RESOLUTION_S - sent
        current = self.bounds(received)
        if current is not None and (low > current.high or high < current.low):
            # Disjoint: a clock was stepped (or the server changed). Start over from here.
            current = None
        if current is None:
            self._low, self._low_at, self._high, self._high_at = low, received, high, received
            return
        if low > current.low:
            self._low, self._low_at = low, received
        if high < current.high:
            self._high, self._high_at = high, received

    def bounds(self, at: float) -> Bounds | None:
        """The interval at a monotonic instant, loosened by drift; ``None`` before any answer."""
        if self._low is None or self._high is None:
            return None
        low = self._low - DRIFT * max(at - self._low_at, 0.0)
        high = self._high + DRIFT * max(at - self._high_at, 0.0)
        return Bounds(low, high)

    def now(self, at: float) -> datetime | None:
        """The earliest time the server's clock can show at a monotonic instant.

        ``None`` before any answer, and past what a datetime holds (a ``Date`` in the year 9999):
        the caller's fallback, the local clock, then decides, rather than an OverflowError.
        """
        bounds = self.bounds(at)
        if bounds is None:
            return None
        try:
            return datetime.fromtimestamp(0, UTC) + timedelta(seconds=at + bounds.low)
        except OverflowError:
            return None
