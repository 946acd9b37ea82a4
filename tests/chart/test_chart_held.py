"""The chart's rules file takes the keys of GPUs held for nothing (the alert: test_chart_alerts)."""

from __future__ import annotations

from collections.abc import Callable

from tests.chart.conftest import Rendered


def test_the_rules_file_takes_start_deadline_and_reclaim_failed_after(
    render: Callable[..., Rendered], render_error: Callable[..., str]
) -> None:
    rule = {"name": "gpu", "startDeadline": "15m", "reclaimFailedAfter": "1h"}
    rendered = render({"policy": {"rules": [rule]}})
    assert "startDeadline: 15m" in str(rendered)
    refused = render_error({"policy": {"rules": [{**rule, "startDeadlin": "15m"}]}})
    assert "startDeadlin" in refused
