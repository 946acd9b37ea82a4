"""Time: the one clock a run is handed, and the formats Kubernetes speaks.

A run reads time through one ``Clock``, chosen at its entry point (``SYSTEM_CLOCK``, or a
test's) and handed to every part: the wall clock for instants, the monotonic clock for
durations and deadlines. Pure functions receive ``now`` as an aware UTC datetime. The API
server's clock comes from the ``Date`` header of its responses (RFC 7231, whole seconds).
"""

from __future__ import annotations

import email.utils
import math
import reprlib
import time
from datetime import UTC, datetime
from typing import Protocol

import durationpy

# Python's waits and socket timeouts overflow past some 292 years (threading.TIMEOUT_MAX).
LONGEST_WAIT = 365 * 24 * 3600.0
# The API server's Date header has whole seconds: its clock may be this far past what it says.
DATE_RESOLUTION_S = 1.0


class Clock(Protocol):
    """The two readings every part of a run takes from the one clock it is handed."""

    def now(self) -> datetime:
        """The wall clock, aware, in UTC: the instant jobs are judged at, Lease records."""

    def monotonic(self) -> float:
        """Seconds on a clock that never steps: timers, timeouts, the Lease's expiry."""


class SystemClock:
    """The machine's clocks: the only place that reads them."""

    def now(self) -> datetime:
        """Read the wall clock (the only place that does)."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Read ``time.monotonic`` as it is at each call (a test may patch it)."""
        return time.monotonic()


SYSTEM_CLOCK: Clock = SystemClock()


def parse_http_date(value: str | None) -> datetime | None:
    """Parse an HTTP ``Date`` header; ``None`` when it is missing or unparsable."""
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
        if parsed.tzinfo is None:
            # RFC 7231 dates are GMT; "-0000" parses as naive.
            parsed = parsed.replace(tzinfo=UTC)
        # Inside the try: "Fri, 31 Dec 9999 23:59:59 -0100" is after year 9999 in UTC.
        return parsed.astimezone(UTC)
    except (TypeError, ValueError, OverflowError):
        return None


def parse_rfc3339(value: object) -> datetime | None:
    """Parse a Kubernetes timestamp (``2024-01-02T03:04:05Z``); ``None`` for anything else.

    Never raises: every time the sweeper reads comes through here, from anyone's writes.
    """
    if not isinstance(value, str) or "T" not in value.upper():
        return None
    try:
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            return None
        # Inside the try: "0001-01-01T00:00:00+01:00" and "9999-12-31T23:59:59-01:00" are
        # valid RFC 3339 (Go reads them) but fall before year 1 or after 9999 in UTC.
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def format_rfc3339(moment: datetime) -> str:
    """Format a time as the operator (``metav1.Time``) does: UTC, whole seconds, ``Z``."""
    # isoformat is C; strftime parses its format at every call (twice per job in a report).
    return moment.astimezone(UTC).replace(microsecond=0, tzinfo=None).isoformat() + "Z"


def human(seconds: float | None) -> str:
    """Signed seconds to two units (``45s``, ``5m03s``, ``1h02m``, ``2d03h``; ``0.4s``; ``-``)."""
    if seconds is None:
        return "-"
    sign = "-" if seconds < 0 else ""
    value = abs(seconds)
    if value < 10 and not float(value).is_integer():  # noqa: PLR2004 - sub-10 s keep a decimal
        return f"{sign}{value:.1f}s"
    whole = int(value)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days}d{hours:02d}h"
    if hours:
        return f"{sign}{hours}h{minutes:02d}m"
    if minutes:
        return f"{sign}{minutes}m{secs:02d}s"
    return f"{sign}{secs}s"


def parse_duration(value: object, *, positive: bool, longest: float | None = None) -> float:
    """Read a duration as kubectl takes one (``30s``, ``5m``, ``1h30m``, ``250ms``) or seconds.

    The one duration parser (flags, twins, rules file); ``ValueError`` worded as a usage error.
    """
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an integer past any float (a rules file's 400 digits)
            seconds = math.inf
    else:
        text = str(value).strip()
        try:
            seconds = float(text)
        except ValueError:
            try:
                seconds = durationpy.from_str(text).total_seconds()
            except durationpy.DurationError:
                raise ValueError(
                    f"{reprlib.repr(value)} is not a duration (e.g. 30s, 5m, 1h30m, or seconds)"
                ) from None
    if not math.isfinite(seconds):
        raise ValueError(f"{reprlib.repr(value)} is not a finite duration")
    if seconds < 0 or (positive and seconds == 0):
        raise ValueError(
            f"{reprlib.repr(value)} must be {'positive' if positive else 'zero or more'}"
        )
    if longest is not None and seconds > longest:
        raise ValueError(f"{reprlib.repr(value)} must be at most {longest / 3600:g}h (a year)")
    return seconds
