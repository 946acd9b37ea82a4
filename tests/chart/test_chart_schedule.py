"""intervalSeconds -> the CronJob schedule, the passes inside a run, and the run's time bounds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

SCHEMA = Path(__file__).resolve().parents[2] / "chart" / "values.schema.json"
ALLOWED: list[int] = json.loads(SCHEMA.read_text())["properties"]["intervalSeconds"]["enum"]


@pytest.mark.parametrize(
    ("interval", "expected"),
    [
        pytest.param(30, ("* * * * *", ["--every=30", "--for=45"], 55, 58, 30), id="30s"),
        pytest.param(10, ("* * * * *", ["--every=10", "--for=55"], 55, 58, 30), id="10s"),
        pytest.param(60, ("* * * * *", [], 55, 58, 30), id="60s"),
        pytest.param(300, ("*/5 * * * *", [], 295, 298, 150), id="300s"),
        pytest.param(3600, ("0 * * * *", [], 3595, 3598, 300), id="3600s"),
    ],
)
def test_interval_sets_schedule_passes_and_bounds(render, interval, expected):
    schedule, passes, timeout, deadline, starting = expected
    rendered = render({"intervalSeconds": interval})

    assert rendered.cronjob["spec"]["schedule"] == schedule
    assert [a for a in rendered.args if a.startswith(("--every=", "--for="))] == passes
    assert f"--timeout={timeout}" in rendered.args
    assert rendered.job_spec["activeDeadlineSeconds"] == deadline
    assert rendered.cronjob["spec"]["startingDeadlineSeconds"] == starting


def _flag(args: list[str], name: str) -> int | None:
    values = [int(a.split("=", 1)[1]) for a in args if a.startswith(f"--{name}=")]
    return values[0] if values else None


@pytest.mark.parametrize("interval", ALLOWED, ids=[f"{n}s" for n in ALLOWED])
def test_every_allowed_interval_is_enforced_evenly_and_ends_before_the_next_run(render, interval):
    rendered = render({"intervalSeconds": interval})
    args = rendered.args
    period = max(interval, 60)
    every, for_, timeout = _flag(args, "every"), _flag(args, "for"), _flag(args, "timeout")
    assert timeout is not None

    if interval < 60:
        assert every == interval
        assert for_ is not None
        # Passes start at 0, every, 2*every, ... while less than --for has elapsed (the same
        # count if the bound is inclusive): 60/N of them, the last one N seconds before the
        # next run's first.
        starts = [k * interval for k in range(math.ceil(for_ / interval))]
        assert starts == list(range(0, 60, interval))
        assert starts[-1] < timeout
    else:
        assert every is None
        assert for_ is None
        # One pass per run, runs N seconds apart.
        assert rendered.cronjob["spec"]["schedule"].startswith(("*", "0 "))

    # The sweeper gives up first, then Kubernetes, and both before the next run is due.
    assert timeout < rendered.job_spec["activeDeadlineSeconds"] < period


@pytest.mark.parametrize("interval", [45, 90, 420, 7200], ids=["45s", "90s", "7min", "2h"])
def test_an_uneven_interval_is_refused_even_without_the_schema(render_error, interval):
    error = render_error({"intervalSeconds": interval}, "--skip-schema-validation")

    assert "intervalSeconds must divide a minute" in error
    assert f"got {interval}" in error


def test_starting_deadline_can_be_set(render):
    rendered = render({"startingDeadlineSeconds": 20})

    assert rendered.cronjob["spec"]["startingDeadlineSeconds"] == 20
