"""The Grafana dashboard: a ConfigMap for the sidecar, and every panel's query run by promtool.

Each panel's expression is taken out of the dashboard the chart renders, its Grafana variables
replaced (``$job`` by the release's job label, ``$__rate_interval`` by 5m), and evaluated by
``promtool test rules`` (``promql_expr_test``) over synthetic series shaped like the metrics
each mode exports: the CronJob's pushed gauges (job label = the Pushgateway job) and watch
mode's /metrics (job label = the metrics Service, one series per replica). The expected values
are worked out by hand below, so a query that selects nothing, aggregates the wrong label or
reads a metric that does not exist fails. Every metric name a panel reads must be one that
sweeper/metrics.py defines.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from sweeper import metrics
from tests.chart.conftest import Rendered
from tests.chart.test_chart_alerts import JOB, SCRAPED_JOB, promtool  # noqa: F401 - fixture

CHART = Path(__file__).resolve().parents[2] / "chart"
DASHBOARD = CHART / "dashboards" / "deadline-sweeper.json"


def dashboard_of(rendered: Rendered) -> dict[str, Any]:
    (configmap,) = [
        d for d in rendered.of_kind("ConfigMap") if d["metadata"]["name"].endswith("-dashboard")
    ]
    (text,) = configmap["data"].values()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def exprs(dashboard: dict[str, Any]) -> dict[str, str]:
    """Every query of the dashboard, by "panel title / refId"."""
    found = {}
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            found[f"{panel['title']} / {target['refId']}"] = target["expr"]
    return found


def test_the_dashboard_is_off_by_default(render: Callable[..., Rendered]) -> None:
    assert render().of_kind("ConfigMap") == []


def test_the_dashboard_is_a_configmap_for_the_grafana_sidecar(
    render: Callable[..., Rendered],
) -> None:
    rendered = render({"grafanaDashboard": {"enabled": True}})
    (configmap,) = rendered.of_kind("ConfigMap")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["namespace"] == "sweeper"
    # The chart ships the file as it is: Grafana's variables are not the chart's templates.
    assert dashboard_of(rendered) == json.loads(DASHBOARD.read_text(encoding="utf-8"))


def test_its_labels_annotations_and_namespace_can_be_changed(
    render: Callable[..., Rendered],
) -> None:
    rendered = render(
        {
            "mode": "watch",
            "grafanaDashboard": {
                "enabled": True,
                "namespace": "monitoring",
                "labels": {"grafana_dashboard": "sweeper", "team": "ml-platform"},
                "annotations": {"grafana_folder": "Kubeflow"},
            },
        }
    )
    (configmap,) = rendered.of_kind("ConfigMap")
    meta = configmap["metadata"]
    assert meta["namespace"] == "monitoring"
    assert meta["labels"]["grafana_dashboard"] == "sweeper"
    assert meta["labels"]["team"] == "ml-platform"
    assert meta["annotations"] == {"grafana_folder": "Kubeflow"}


def test_the_schema_refuses_bad_dashboard_values(render_error: Callable[..., str]) -> None:
    for values in (
        {"grafanaDashboard": {"enable": True}},
        {"grafanaDashboard": {"labels": {"grafana_dashboard": 1}}},
        {"grafanaDashboard": {"namespace": "Monitoring"}},
    ):
        assert "values don't meet the specifications of the schema" in render_error(values)


def test_every_metric_a_panel_reads_is_defined_by_the_sweeper() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    defined = {m.name for m in metrics.METRICS} | {
        m.name
        for m in (
            metrics.WATCH_ACTIONS,
            metrics.WATCH_OVERDUE,
            metrics.LATENESS,
            metrics.TRACKED,
            metrics.WATCH_RESTARTS,
            metrics.RELISTS,
            metrics.CLOCK_OFFSET,
            metrics.LEADER,
            metrics.RESYNCS,
        )
    }
    # What the exposition adds: _total to counters, _bucket/_sum/_count to histograms.
    exposed = defined | {f"{n}_total" for n in defined} | {f"{metrics.LATENESS.name}_bucket"}
    used = set()
    for expr in [*exprs(dashboard).values(), _variable_query(dashboard)]:
        used |= set(re.findall(r"\bdeadline_sweeper_\w+", expr))
    assert used, "no metric in the dashboard"
    assert used <= exposed, sorted(used - exposed)
    counters = {
        metrics.WATCH_ACTIONS.name,
        metrics.WATCH_RESTARTS.name,
        metrics.RELISTS.name,
        metrics.RESYNCS.name,
    }
    for expr in exprs(dashboard).values():
        for name in re.findall(r"\bdeadline_sweeper_\w+_total\b", expr):
            assert name.removesuffix("_total") in counters, name


def _variable_query(dashboard: dict[str, Any]) -> str:
    (job,) = [v for v in dashboard["templating"]["list"] if v["name"] == "job"]
    query: str = job["query"]["query"]
    return query


def pushed(name: str, **labels: str) -> str:
    every = {"job": JOB, "instance": "", **labels}
    return name + "{" + ", ".join(f'{k}="{v}"' for k, v in every.items()) + "}"


def scraped(name: str, pod: str, **labels: str) -> str:
    every = {"job": SCRAPED_JOB, "namespace": "sweeper", "pod": pod, **labels}
    return name + "{" + ", ".join(f'{k}="{v}"' for k, v in every.items()) + "}"


# Series over 20 minutes, one sample a minute; every query is evaluated at 10m.
CRONJOB_SERIES = {
    pushed("deadline_sweeper_overdue_jobs", kind="PyTorchJob"): "2x20",
    pushed("deadline_sweeper_overdue_jobs", kind="TFJob"): "0x20",
    pushed("deadline_sweeper_actions", kind="PyTorchJob", action="touch", result="done"): "1x20",
    pushed("deadline_sweeper_actions", kind="TFJob", action="touch", result="done"): "2x20",
    pushed("deadline_sweeper_actions", kind="TFJob", action="fail", result="error"): "1x20",
    # A success each minute until 7m, then none (the Pushgateway keeps the last one).
    pushed("deadline_sweeper_last_success_timestamp_seconds"): "0+60x7 420x13",
    pushed("deadline_sweeper_last_exit_code"): "0x7 1x13",
    pushed("deadline_sweeper_overdue_seconds_max"): "0x5 90x15",
    pushed("deadline_sweeper_last_run_duration_seconds"): "1.5x20",
    pushed("deadline_sweeper_jobs", kind="PyTorchJob", decision="touch"): "1x20",
    pushed("deadline_sweeper_jobs", kind="TFJob", decision="skip"): "5x20",
    pushed("deadline_sweeper_jobs", kind="PyTorchJob", decision="skip"): "3x20",
    pushed("deadline_sweeper_skipped_jobs", kind="TFJob", reason="opted-out"): "4x20",
    pushed("deadline_sweeper_skipped_jobs", kind="PyTorchJob", reason="opted-out"): "1x20",
    pushed("deadline_sweeper_deadline_failed_jobs", kind="TFJob", by="operator"): "6x20",
    pushed("deadline_sweeper_deadline_failed_jobs", kind="TFJob", by="sweeper"): "2x20",
    **{
        pushed("deadline_sweeper_held_gpus", family="training-operator", kind=kind, reason=r): v
        for kind, r, v in (
            ("TFJob", "stuck-starting", "4x20"),
            ("PyTorchJob", "stuck-starting", "0x20"),
            ("PyTorchJob", "finished-holding", "2x20"),
        )
    },
}

# Two replicas: "a" leads and acts, "b" stands by with the same view.
WATCH_SERIES = {
    scraped("deadline_sweeper_overdue_jobs", "a", kind="JAXJob"): "0x20",
    scraped("deadline_sweeper_overdue_jobs", "b", kind="JAXJob"): "3x20",
    # One touch a minute on a, nothing on b: 5 in 5 minutes.
    scraped(
        "deadline_sweeper_actions_total", "a", kind="JAXJob", action="touch", result="done"
    ): "0+1x20",
    scraped(
        "deadline_sweeper_actions_total", "b", kind="JAXJob", action="touch", result="done"
    ): "0x20",
    # The leader's resync pass counts them; a standby holds nothing.
    scraped(
        "deadline_sweeper_held_gpus",
        "a",
        family="trainer",
        kind="TrainJob",
        reason="stuck-starting",
    ): "8x20",
    scraped(
        "deadline_sweeper_held_gpus",
        "b",
        family="trainer",
        kind="TrainJob",
        reason="stuck-starting",
    ): "0x20",
    scraped("deadline_sweeper_leader", "a"): "1x20",
    scraped("deadline_sweeper_leader", "b"): "0x20",
    scraped("deadline_sweeper_tracked_jobs", "a"): "40x20",
    scraped("deadline_sweeper_tracked_jobs", "b"): "42x20",
    scraped("deadline_sweeper_clock_offset_seconds", "a", bound="low"): "-0.25x20",
    scraped("deadline_sweeper_clock_offset_seconds", "b", bound="low"): "-0.5x20",
    scraped("deadline_sweeper_clock_offset_seconds", "a", bound="high"): "0.5x20",
    # Reopens: 2 a minute closed by the server, 1 a minute after an error.
    scraped("deadline_sweeper_watch_restarts_total", "a", reason="closed"): "0+2x20",
    scraped("deadline_sweeper_watch_restarts_total", "a", reason="error"): "0+1x20",
    scraped("deadline_sweeper_watch_relists_total", "a"): "0+1x20",
    scraped("deadline_sweeper_resyncs_total", "a", result="ok"): "0+1x20",
    # Ten decisions a minute, every one between 0.1 s and 0.25 s late.
    **{
        scraped("deadline_sweeper_lateness_seconds_bucket", "a", le=le): (
            "0x20" if le == "0.1" else "0+10x20"
        )
        for le in ("0.1", "0.25", "+Inf")
    },
}

EXPECTED: dict[str, list[tuple[dict[str, str], float]]] = {
    "Overdue jobs / A": [
        ({"kind": "JAXJob"}, 3),
        ({"kind": "PyTorchJob"}, 2),
        ({"kind": "TFJob"}, 0),
    ],
    "Actions (CronJob: last pass) / A": [
        ({"action": "fail", "result": "error"}, 1),
        ({"action": "touch", "result": "done"}, 3),
    ],
    # increase over 5m of a counter growing 1 a minute, both replicas summed (b adds 0).
    "Actions (watch: per interval) / A": [({"action": "touch", "result": "done"}, 5)],
    "GPUs held for nothing / A": [
        ({"reason": "finished-holding"}, 2),
        ({"reason": "stuck-starting"}, 4 + 8),
    ],
    "Since the last successful run / A": [({}, 600 - 420)],
    "Last exit code / A": [({}, 1)],
    "Most overdue job / A": [({}, 90)],
    "Run duration / A": [({}, 1.5)],
    "Jobs by decision / A": [({"decision": "skip"}, 8), ({"decision": "touch"}, 1)],
    "Skipped jobs by reason / A": [({"reason": "opted-out"}, 5)],
    "Failed by their deadline, by whom / A": [({"by": "operator"}, 6), ({"by": "sweeper"}, 2)],
    "Replicas holding the Lease / A": [({}, 1)],
    # Every observation in (0.1, 0.25]: the 99th percentile interpolates to 0.1 + 0.99 * 0.15.
    "Enforcement lateness p99 / A": [({}, 0.2485)],
    "Tracked jobs / A": [({}, 42)],
    "Clock offset / A": [({"bound": "high"}, 0.5), ({"bound": "low"}, -0.25)],
    "Watch restarts and relists / A": [({"reason": "closed"}, 10), ({"reason": "error"}, 5)],
    "Watch restarts and relists / B": [({}, 5)],
    "Resync passes / A": [({"result": "ok"}, 5)],
}


def concrete(expr: str, job: str) -> str:
    """The expression Grafana would send, with the dashboard's variables filled in."""
    return expr.replace("$__rate_interval", "5m").replace("$job", job)


def to_compare(expr: str) -> str:
    """The panel's query rounded to 1e-4: promtool compares floats exactly, and the value
    interpolated in a histogram bucket is a float or two away from its decimal."""
    return f"round({expr}, 0.0001)"


def test_every_panel_query_returns_the_expected_values(
    render: Callable[..., Rendered],
    promtool: Path,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    dashboard = dashboard_of(render({"grafanaDashboard": {"enabled": True}}))
    queries = exprs(dashboard)
    assert set(queries) == set(EXPECTED), "a panel without an expected value, or the reverse"
    # The job variable's "All": both the pushed and the scraped job label.
    job = f"{JOB}|{SCRAPED_JOB}"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": []}))
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": name, "values": values}
                    for name, values in {**CRONJOB_SERIES, **WATCH_SERIES}.items()
                ],
                "promql_expr_test": [
                    {
                        "expr": to_compare(concrete(queries[panel], job)),
                        "eval_time": "10m",
                        "exp_samples": [
                            {"labels": _labels(labels), "value": value}
                            for labels, value in EXPECTED[panel]
                        ],
                    }
                    for panel in sorted(queries)
                ],
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(tests))
    done = subprocess.run(
        [str(promtool), "test", "rules", "test.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _labels(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def test_every_query_selects_the_job_variable() -> None:
    # A query that ignored $job would mix every sweeper's series on one Grafana.
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for title, expr in exprs(dashboard).items():
        assert expr.count("deadline_sweeper_") == expr.count('job=~"$job"'), title
