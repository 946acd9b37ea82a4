"""intervalSeconds -> the CronJob schedule, the passes inside a run, and the run's time bounds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

SCHEMA = Path(__file__).resolve().parents[2] / "chart" / "values.schema.json"
ALLOWED: list[int] = json.loads(SCHEMA.read_text())["properties"]["intervalSeconds"]["enum"]
MOST_ALLOWANCE: int = json.loads(SCHEMA.read_text())["properties"]["startupAllowanceSeconds"][
    "maximum"
]
# The documented default of startupAllowanceSeconds: the seconds from a run's Job start
# (activeDeadlineSeconds' origin) to the sweeper's (--for's and --timeout's) that a run must
# survive. Measured pod start-up is 1 s with the image on the node, plus Python's start.
DEFAULT_ALLOWANCE = 5
# From --timeout to the process gone: the report and the exit.
EXIT_S = 1
# What the last pass of a run keeps, at least, before --timeout.
LAST_PASS_S = 2
# What the metrics push gets at least after --timeout (sweeper/oneshot/run.py, PUSH_FLOOR_S).
PUSH_S = 1
PUSHGATEWAY = {"metrics": {"pushgateway": {"url": "http://pushgateway.monitoring:9091"}}}


@pytest.mark.parametrize(
    ("interval", "expected"),
    [
        pytest.param(30, ("* * * * *", ["--every=30", "--for=45"], 52, 58, 30), id="30s"),
        pytest.param(10, ("* * * * *", ["--every=10", "--for=52"], 52, 58, 30), id="10s"),
        pytest.param(60, ("* * * * *", [], 52, 58, 30), id="60s"),
        pytest.param(300, ("*/5 * * * *", [], 292, 298, 150), id="300s"),
        pytest.param(3600, ("0 * * * *", [], 3592, 3598, 300), id="3600s"),
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


def _pass_starts(interval: int, every: int | None, for_: int | None, timeout: int) -> list[int]:
    """When the passes of a run start, on the sweeper's clock (sweeper/oneshot/run.py)."""
    if every is None or for_ is None:
        return [0]
    return [k * every for k in range(math.ceil(for_ / every)) if k * every < timeout]


def _most_allowance(interval: int, push: int = 0) -> int:
    """The largest allowance the template takes: the last pass keeps LAST_PASS_S."""
    last_start = 60 - interval if interval < 60 else 0
    return max(interval, 60) - 2 - EXIT_S - push - last_start - LAST_PASS_S


def _allowances() -> list[object]:
    cases: list[object] = []
    for interval in ALLOWED:
        for push in (0, PUSH_S):
            most = min(_most_allowance(interval, push), MOST_ALLOWANCE)
            for allowance in (None, 0, 2, most):
                if allowance is None and most < DEFAULT_ALLOWANCE:
                    continue  # refused at render time (below)
                name = "default" if allowance is None else f"{allowance}s"
                pushing = "-pushing" if push else ""
                cases.append(
                    pytest.param(
                        interval, allowance, push, id=f"{interval}s-allowance-{name}{pushing}"
                    )
                )
    return cases


@pytest.mark.parametrize(("interval", "allowance", "push"), _allowances())
def test_a_run_that_starts_late_within_the_allowance_ends_before_the_job_deadline(
    render, interval, allowance, push
):
    values: dict[str, object] = {"intervalSeconds": interval, **(PUSHGATEWAY if push else {})}
    if allowance is not None:
        values["startupAllowanceSeconds"] = allowance
    rendered = render(values)
    tolerated = DEFAULT_ALLOWANCE if allowance is None else allowance
    args = rendered.args
    every, for_, timeout = _flag(args, "every"), _flag(args, "for"), _flag(args, "timeout")
    assert timeout is not None
    deadline = rendered.job_spec["activeDeadlineSeconds"]
    starts = _pass_starts(interval, every, for_, timeout)

    # Every pass of a normal start is kept: 60/N below a minute, one otherwise.
    assert starts == (list(range(0, 60, interval)) if interval < 60 else [0])
    assert starts[-1] + LAST_PASS_S <= timeout
    # On the Job's clock, a sweeper that starts `late` seconds after its Job ends at the latest
    # at late + --timeout (no pass starts at or after it, a pass in progress is cut there),
    # pushes its metrics (exit 5 included) for at least PUSH_S more, and is gone a second
    # later: before Kubernetes' deadline, for every start-up allowed.
    assert ("--pushgateway=http://pushgateway.monitoring:9091" in args) == bool(push)
    for late in range(tolerated + 1):
        ends = late + timeout + push + EXIT_S
        assert ends <= deadline, f"killed when starting {late} s late"
    # And the deadline still ends a hung run before the next one is due.
    assert deadline < max(interval, 60)


@pytest.mark.parametrize("push", [0, PUSH_S], ids=["", "pushing"])
@pytest.mark.parametrize("interval", [10, 12, 15, 20, 30, 60])
def test_an_allowance_that_leaves_the_last_pass_no_time_is_refused_naming_its_limit(
    render_error, interval, push
):
    most = _most_allowance(interval, push)
    error = render_error(
        {
            "intervalSeconds": interval,
            "startupAllowanceSeconds": most + 1,
            **(PUSHGATEWAY if push else {}),
        }
    )

    assert f"startupAllowanceSeconds {most + 1} leaves the last pass of a run" in error
    assert f"with intervalSeconds {interval} it can be at most {most}" in error
    assert ("kept for the metrics push" in error) == bool(push)


def test_a_run_that_pushes_its_metrics_keeps_a_second_for_the_push_after_its_timeout(render):
    # The push after a run that --timeout stopped outlasted activeDeadlineSeconds: the pod was
    # killed, and the run's exit code 5 never reached the Pushgateway (issue 31, B5).
    rendered = render({"intervalSeconds": 60, **PUSHGATEWAY})

    assert "--timeout=51" in rendered.args
    assert rendered.job_spec["activeDeadlineSeconds"] == 58


def test_the_default_allowance_is_the_documented_one():
    values = (SCHEMA.parent / "values.yaml").read_text(encoding="utf-8")
    assert f"\nstartupAllowanceSeconds: {DEFAULT_ALLOWANCE}\n" in values


@pytest.mark.parametrize("interval", [45, 90, 420, 7200], ids=["45s", "90s", "7min", "2h"])
def test_an_uneven_interval_is_refused_even_without_the_schema(render_error, interval):
    error = render_error({"intervalSeconds": interval}, "--skip-schema-validation")

    assert "intervalSeconds must divide a minute" in error
    assert f"got {interval}" in error


def test_starting_deadline_can_be_set(render):
    rendered = render({"startingDeadlineSeconds": 20})

    assert rendered.cronjob["spec"]["startingDeadlineSeconds"] == 20
