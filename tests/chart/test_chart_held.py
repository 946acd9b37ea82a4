"""The chart and GPUs held for nothing: the rules file's two keys, and the alert on the GPUs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.chart.conftest import Rendered
from tests.chart.test_chart_alerts import (
    PUSHED,
    SUCCESS,
    WATCH,
    promtool,
    promtool_test,
    pushed,
    rules_of,
    scraped,
)

__all__ = ["promtool"]  # the fixture, used by name

HELD = {"family": "training-operator", "kind": "TFJob"}


@pytest.mark.parametrize(
    ("values", "series", "expect"),
    [
        pytest.param(
            PUSHED,
            {
                SUCCESS: "0+60x20",
                pushed("deadline_sweeper_held_gpus", **HELD, reason="stuck-starting"): "0 0 4x20",
                # A waiting job's pods hold no GPU: never the finished jobs' alert.
                pushed("deadline_sweeper_held_pods", **HELD, reason="waiting"): "3x22",
            },
            [
                ("DeadlineSweeperGPUsHeldForNothing", "11m", False),
                ("DeadlineSweeperGPUsHeldForNothing", "12m", True),
                ("DeadlineSweeperPodsHeldByFinishedJobs", "20m", False),
            ],
            id="gpus-held-for-10-runs",
        ),
        pytest.param(
            WATCH,
            {scraped("deadline_sweeper_held_gpus", **HELD, reason="finished-holding"): "2x40"},
            [
                ("DeadlineSweeperGPUsHeldForNothing", "29m", False),
                ("DeadlineSweeperGPUsHeldForNothing", "30m", True),
            ],
            id="watch-gpus-held-for-30-minutes",
        ),
    ],
)
def test_the_gpus_held_alert_fires_when_it_should(  # noqa: PLR0917 - fixtures and table columns
    render: Callable[..., Rendered],
    promtool: Path,
    tmp_path: Path,
    values: dict[str, Any],
    series: dict[str, str],
    expect: list[tuple[str, str, Any]],
) -> None:
    promtool_test(promtool, tmp_path, rules_of(render(values)), series, expect)


def test_the_rules_file_takes_start_deadline_and_reclaim_failed_after(
    render: Callable[..., Rendered], render_error: Callable[..., str]
) -> None:
    rule = {"name": "gpu", "startDeadline": "15m", "reclaimFailedAfter": "1h"}
    rendered = render({"policy": {"rules": [rule]}})
    assert "startDeadline: 15m" in str(rendered)
    refused = render_error({"policy": {"rules": [{**rule, "startDeadlin": "15m"}]}})
    assert "startDeadlin" in refused
