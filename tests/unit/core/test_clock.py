"""Time parsing and formatting as Kubernetes and HTTP speak them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from sweeper.core.clock import SYSTEM_CLOCK, format_rfc3339, parse_http_date, parse_rfc3339

MOMENT = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)

HTTP_DATES = [
    pytest.param("Wed, 01 May 2024 12:00:00 GMT", MOMENT, id="rfc7231"),
    pytest.param("Wed, 01 May 2024 14:00:00 +0200", MOMENT, id="numeric-zone"),
    pytest.param("Wed, 01 May 2024 12:00:00 -0000", MOMENT, id="minus-zero-zone"),
    pytest.param(None, None, id="missing"),
    pytest.param("", None, id="empty"),
    pytest.param("yesterday", None, id="garbage"),
]


@pytest.mark.parametrize(("header", "expected"), HTTP_DATES)
def test_parse_http_date(header: str | None, expected: datetime | None) -> None:
    parsed = parse_http_date(header)
    assert parsed == expected
    if parsed is not None:
        assert parsed.tzinfo is UTC


RFC3339 = [
    pytest.param("2024-05-01T12:00:00Z", MOMENT, id="zulu"),
    pytest.param("2024-05-01T13:00:00+01:00", MOMENT, id="offset"),
    pytest.param("2024-05-01T12:00:00.5Z", MOMENT + timedelta(milliseconds=500), id="fraction"),
    pytest.param("2024-05-01T12:00:00", None, id="naive-is-rejected"),
    pytest.param("2024-05-01", None, id="date-only-is-rejected"),
    pytest.param(1714564800, None, id="number-is-rejected"),
    pytest.param(None, None, id="none"),
    pytest.param("soon", None, id="garbage"),
]


@pytest.mark.parametrize(("value", "expected"), RFC3339)
def test_parse_rfc3339(value: object, expected: datetime | None) -> None:
    assert parse_rfc3339(value) == expected


def test_format_rfc3339_is_utc_whole_seconds_with_z() -> None:
    moment = datetime(2024, 5, 1, 14, 0, 0, 999999, tzinfo=timezone(timedelta(hours=2)))
    assert format_rfc3339(moment) == "2024-05-01T12:00:00Z"


def test_the_system_clock_reads_aware_utc() -> None:
    assert SYSTEM_CLOCK.now().tzinfo is UTC
