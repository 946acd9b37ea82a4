"""Time parsing and formatting as Kubernetes and HTTP speak them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from sweeper.clock import format_rfc3339, local_now, parse_http_date, parse_rfc3339

MOMENT = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)

HTTP_DATES = [
    ("rfc7231", "Wed, 01 May 2024 12:00:00 GMT", MOMENT),
    ("numeric-zone", "Wed, 01 May 2024 14:00:00 +0200", MOMENT),
    ("minus-zero-zone", "Wed, 01 May 2024 12:00:00 -0000", MOMENT),
    ("missing", None, None),
    ("empty", "", None),
    ("garbage", "yesterday", None),
]


@pytest.mark.parametrize(
    ("header", "expected"), [c[1:] for c in HTTP_DATES], ids=[c[0] for c in HTTP_DATES]
)
def test_parse_http_date(header: str | None, expected: datetime | None) -> None:
    parsed = parse_http_date(header)
    assert parsed == expected
    if parsed is not None:
        assert parsed.tzinfo is UTC


RFC3339 = [
    ("zulu", "2024-05-01T12:00:00Z", MOMENT),
    ("offset", "2024-05-01T13:00:00+01:00", MOMENT),
    ("fraction", "2024-05-01T12:00:00.5Z", MOMENT + timedelta(milliseconds=500)),
    ("naive-is-rejected", "2024-05-01T12:00:00", None),
    ("date-only-is-rejected", "2024-05-01", None),
    ("number-is-rejected", 1714564800, None),
    ("none", None, None),
    ("garbage", "soon", None),
]


@pytest.mark.parametrize(
    ("value", "expected"), [c[1:] for c in RFC3339], ids=[c[0] for c in RFC3339]
)
def test_parse_rfc3339(value: object, expected: datetime | None) -> None:
    assert parse_rfc3339(value) == expected


def test_format_rfc3339_is_utc_whole_seconds_with_z() -> None:
    moment = datetime(2024, 5, 1, 14, 0, 0, 999999, tzinfo=timezone(timedelta(hours=2)))
    assert format_rfc3339(moment) == "2024-05-01T12:00:00Z"


def test_local_now_is_aware_utc() -> None:
    assert local_now().tzinfo is UTC
