"""Time: the one place that reads the local clock, and the formats Kubernetes speaks.

Everything else receives ``now`` as an aware UTC datetime. The API
server's clock comes from the ``Date`` header of its responses (RFC 7231, whole seconds).
"""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime


def local_now() -> datetime:
    """Read the local clock (the only place that does).

    Returns:
        The current time, aware, in UTC.
    """
    return datetime.now(UTC)


def parse_http_date(value: str | None) -> datetime | None:
    """Parse an HTTP ``Date`` header.

    Args:
        value: For example ``Tue, 02 Jan 2024 03:04:05 GMT``, or ``None``.

    Returns:
        The aware UTC time, or ``None`` when the header is missing or unparsable.
    """
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if parsed.tzinfo is None:
        # RFC 7231 dates are GMT; "-0000" parses as naive.
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def parse_rfc3339(value: object) -> datetime | None:
    """Parse a Kubernetes timestamp (``metav1.Time``).

    Args:
        value: A JSON value, expected to be a string such as ``2024-01-02T03:04:05Z``.

    Returns:
        The aware UTC time, or ``None`` when the value is not an RFC 3339 string with a zone.
    """
    if not isinstance(value, str) or "T" not in value.upper():
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(UTC)


def format_seconds(value: float) -> str:
    """Render seconds in a message: whole ones as ``90s``, others to a tenth (``12.5s``).

    The table's ``OVERDUE BY`` column uses :func:`sweeper.report.duration` instead: hours and
    minutes read better in a column than in a sentence.
    """
    return f"{value:.0f}s" if float(value).is_integer() else f"{value:.1f}s"


def format_rfc3339(moment: datetime) -> str:
    """Format a time as the operator (``metav1.Time``) does: UTC, whole seconds, ``Z``.

    Args:
        moment: An aware datetime.

    Returns:
        For example ``2024-01-02T03:04:05Z``.
    """
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
