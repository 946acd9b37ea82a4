"""The chart's PrometheusRule, evaluated by the real promtool over synthetic series.

The rules are rendered by helm, taken out of the PrometheusRule, checked with ``promtool check
rules`` (annotation templates included) and tested with ``promtool test rules``: when each
alert fires, and when it must stay quiet. promtool compares annotations exactly, so the tested
copy drops them; the check covers their syntax. Time starts at 0 in promtool, so ``time()`` is
the evaluation time in seconds and a success timestamp of ``600`` means "at 10m".
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.conftest import Rendered, missing

JOB = "sw-kubeflow-deadline-sweeper"  # the release's full name: the default job label
PUSHED = {
    "prometheusRule": {"enabled": True},
    "metrics": {"pushgateway": {"url": "http://pushgateway.monitoring:9091"}},
}


@pytest.fixture(scope="session")
def promtool() -> Path:
    found = shutil.which("promtool")
    if found is None:
        missing(
            "promtool not found (Debian: apt-get install prometheus; scripts/test installs "
            "it when run as root)"
        )
    return Path(found)


def rules_of(rendered: Rendered) -> dict[str, Any]:
    return {"groups": rendered.one("PrometheusRule")["spec"]["groups"]}


def promtool_test(
    promtool: Path,
    tmp_path: Path,
    rules: dict[str, Any],
    series: dict[str, str],
    expect: list[tuple[str, str, Any]],
) -> None:
    """Run ``promtool test rules``: ``expect`` holds (alert, eval time, fires?).

    A firing alert carries ``severity`` only (the expressions aggregate labels away), except
    ``absent()``, which keeps its selector's ``job`` label: "fires" may be that label set.
    """
    checked = tmp_path / "checked.yaml"
    checked.write_text(yaml.safe_dump(rules))
    check = subprocess.run(
        [str(promtool), "check", "rules", str(checked)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    bare = {
        "groups": [
            {**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]}
            for g in rules["groups"]
        ]
    }
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(bare))
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": name, "values": values} for name, values in series.items()
                ],
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": alert,
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "warning",
                                    **(fires if isinstance(fires, dict) else {}),
                                }
                            }
                        ]
                        if fires
                        else [],
                    }
                    for alert, at, fires in expect
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


def pushed(name: str, **labels: str) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in {"job": JOB, "instance": "", **labels}.items())
    return f"{name}{{{inner}}}"


SUCCESS = pushed("deadline_sweeper_last_success_timestamp_seconds")
HELD = {"family": "training-operator", "kind": "TFJob"}
OVERDUE = pushed("deadline_sweeper_overdue_seconds_max")


@pytest.mark.parametrize(
    ("values", "series", "expect"),
    [
        pytest.param(
            PUSHED,
            # A success every minute until 10m, then none (the Pushgateway keeps the last).
            {SUCCESS: "0+60x10 600x20"},
            [
                ("DeadlineSweeperNoSuccessfulRun", "12m", False),
                ("DeadlineSweeperNoSuccessfulRun", "14m", False),  # pending: 240s > 180s
                ("DeadlineSweeperNoSuccessfulRun", "15m", True),
            ],
            id="no-success-for-3-runs",
        ),
        pytest.param(
            PUSHED,
            {SUCCESS: "0+60x30"},
            [("DeadlineSweeperNoSuccessfulRun", "30m", False)],
            id="succeeding-runs-are-quiet",
        ),
        pytest.param(
            PUSHED,
            # Nothing ever pushed (a wrong URL, a job label mismatch).
            {pushed("deadline_sweeper_last_run_timestamp_seconds", job="other"): "0+60x10"},
            [
                ("DeadlineSweeperNoSuccessfulRun", "0m", False),
                ("DeadlineSweeperNoSuccessfulRun", "1m", {"job": JOB}),
            ],
            id="never-pushed",
        ),
        pytest.param(
            {
                **PUSHED,
                "intervalSeconds": 300,
                "prometheusRule": {"enabled": True, "missedRuns": 2},
            },
            {SUCCESS: "0 0x30"},  # runs every 5 min: 2 missed = 600 s
            [
                ("DeadlineSweeperNoSuccessfulRun", "15m", False),
                ("DeadlineSweeperNoSuccessfulRun", "16m", True),
            ],
            id="five-minute-runs",
        ),
        pytest.param(
            PUSHED,
            # A job 60 s overdue at the first run, still running 8 minutes on.
            {SUCCESS: "0+60x10", OVERDUE: "60+60x10"},
            [
                ("DeadlineSweeperJobsOverdue", "2m", False),  # 180 s: not above 3 intervals
                ("DeadlineSweeperJobsOverdue", "3m", False),  # 240 s: pending
                ("DeadlineSweeperJobsOverdue", "4m", True),
            ],
            id="overdue-for-3-intervals",
        ),
        pytest.param(
            {**PUSHED, "grace": 300},
            {SUCCESS: "0+60x10", OVERDUE: "60+60x10"},
            [
                ("DeadlineSweeperJobsOverdue", "7m", False),  # 480 s <= 300 + 180
                ("DeadlineSweeperJobsOverdue", "9m", True),
            ],
            id="grace-moves-the-overdue-threshold",
        ),
        pytest.param(
            PUSHED,
            # A touched job the operator fails at once: never overdue for long.
            {SUCCESS: "0+60x10", OVERDUE: "60 0x10"},
            [("DeadlineSweeperJobsOverdue", "10m", False)],
            id="overdue-once-is-quiet",
        ),
        pytest.param(
            PUSHED,
            {
                SUCCESS: "0+60x10",
                pushed(
                    "deadline_sweeper_actions", kind="PyTorchJob", action="fail", result="error"
                ): "0 0 1 1 1 1 1",
                pushed(
                    "deadline_sweeper_actions", kind="TFJob", action="touch", result="error"
                ): "0 0 0 0 0 0 1",
            },
            [
                ("DeadlineSweeperActionsFailed", "3m", False),
                ("DeadlineSweeperActionsFailed", "4m", True),
            ],
            id="actions-failing-for-2-runs",
        ),
        pytest.param(
            PUSHED,
            {
                SUCCESS: "0+60x10",
                pushed(
                    "deadline_sweeper_actions", kind="PyTorchJob", action="fail", result="error"
                ): "0 1 0 1 0 1 0",
            },
            [("DeadlineSweeperActionsFailed", "6m", False)],
            id="an-occasional-failed-action-is-quiet",
        ),
        pytest.param(
            PUSHED,
            {
                SUCCESS: "0+60x20",
                pushed(
                    "deadline_sweeper_held_pods",
                    family="training-operator",
                    kind="PyTorchJob",
                    reason="policy",
                ): "0 0 2x20",
            },
            [
                ("DeadlineSweeperPodsHeldByFinishedJobs", "11m", False),  # 9 min: pending
                ("DeadlineSweeperPodsHeldByFinishedJobs", "12m", True),
            ],
            id="pods-held-for-10-runs",
        ),
        pytest.param(
            PUSHED,
            {
                SUCCESS: "0+60x20",
                pushed(
                    "deadline_sweeper_held_pods",
                    family="mpi-operator",
                    kind="MPIJob",
                    reason="finished",
                ): "2x8 0x12",
            },
            [("DeadlineSweeperPodsHeldByFinishedJobs", "20m", False)],
            id="pods-reclaimed-before-10-runs-are-quiet",
        ),
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
            {"prometheusRule": {"enabled": True}},
            {
                'kube_cronjob_status_last_successful_time{namespace="sweeper", '
                f'cronjob="{JOB}"}}': "0+60x10 600x20"
            },
            [
                ("DeadlineSweeperNoSuccessfulRun", "14m", False),
                ("DeadlineSweeperNoSuccessfulRun", "15m", True),
            ],
            id="kube-state-metrics-without-pushgateway",
        ),
    ],
)
def test_alerts_fire_when_they_should(  # noqa: PLR0917 - fixtures and table columns
    render: Callable[..., Rendered],
    promtool: Path,
    tmp_path: Path,
    values: dict[str, Any],
    series: dict[str, str],
    expect: list[tuple[str, str, Any]],
) -> None:
    promtool_test(promtool, tmp_path, rules_of(render(values)), series, expect)


def test_without_a_pushgateway_only_the_cronjob_alert_is_rendered(
    render: Callable[..., Rendered],
) -> None:
    rules = rules_of(render({"prometheusRule": {"enabled": True}}))
    assert [r["alert"] for r in rules["groups"][0]["rules"]] == ["DeadlineSweeperNoSuccessfulRun"]


def test_the_rule_is_off_by_default_and_the_push_reaches_the_cronjob_only(
    render: Callable[..., Rendered],
) -> None:
    assert render().of_kind("PrometheusRule") == []
    rendered = render({"metrics": {"pushgateway": {"url": "http://pg:9091", "job": "team-a"}}})
    assert "--pushgateway=http://pg:9091" in rendered.args
    assert "--pushgateway-job=team-a" in rendered.args
    assert not [
        a
        for a in rendered.test_pod["spec"]["containers"][0]["args"]
        if a.startswith("--pushgateway")
    ]


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"metrics": {"pushgateway": {"url": "pushgateway:9091"}}}, id="no-scheme"),
        pytest.param({"metrics": {"pushgateway": {"address": "x"}}}, id="unknown-key"),
        pytest.param({"prometheusRule": {"enabled": True, "missedRuns": 0}}, id="zero-runs"),
        pytest.param({"prometheusRule": {"severity": "page"}}, id="unknown-rule-key"),
        pytest.param(
            {"prometheusRule": {"watch": {"noLeaderMinutes": 0}}}, id="zero-no-leader-minutes"
        ),
        pytest.param({"prometheusRule": {"watch": {"quorum": 2}}}, id="unknown-watch-rule-key"),
    ],
)
def test_the_schema_refuses_bad_metrics_values(
    render_error: Callable[..., str], values: dict[str, Any]
) -> None:
    assert "values don't meet the specifications of the schema" in render_error(values)


def test_the_metrics_page_shows_the_rules_the_chart_renders(
    render: Callable[..., Rendered],
) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text(encoding="utf-8")
    block = "groups:\n" + page.split("```yaml\ngroups:\n", 1)[1]
    shown = yaml.safe_load(block.split("```", 1)[0])
    rendered = render(
        {
            **PUSHED,
            "metrics": {"pushgateway": {"url": "http://prometheus-pushgateway.monitoring:9091"}},
        }
    )
    rules = rules_of(rendered)["groups"]
    for group in rules:
        for rule in group["rules"]:
            rule.pop("annotations")
    expected = [
        {**g, "rules": [{**r, "expr": r["expr"].replace(JOB, DOCS_JOB)} for r in g["rules"]]}
        for g in rules
    ]
    assert shown == {"groups": expected}


DOCS_JOB = "kubeflow-deadline-sweeper"  # release "kubeflow-deadline-sweeper": not doubled


WATCH = {"mode": "watch", "prometheusRule": {"enabled": True}}
SCRAPED_JOB = f"{JOB}-metrics"  # the metrics Service's name: a ServiceMonitor's job label


def scraped(name: str, pod: str = "a", **labels: str) -> str:
    every = {"job": SCRAPED_JOB, "namespace": "sweeper", "pod": pod, **labels}
    return name + "{" + ", ".join(f'{k}="{v}"' for k, v in every.items()) + "}"


LEADER = "deadline_sweeper_leader"


def lateness_buckets(slow: bool) -> dict[str, str]:
    # Ten decisions a minute, all within 0.25 s, or all between 2 s and 5 s.
    edges = ("0.25", "2.0", "5.0", "+Inf")
    counted = ("5.0", "+Inf") if slow else edges
    return {
        scraped("deadline_sweeper_lateness_seconds_bucket", le=le): (
            "0+10x40" if le in counted else "0x40"
        )
        for le in edges
    }


@pytest.mark.parametrize(
    ("values", "series", "expect"),
    [
        pytest.param(
            WATCH,
            {scraped(LEADER, "a"): "0x20", scraped(LEADER, "b"): "0x20"},
            [
                ("DeadlineSweeperNoLeader", "4m", False),  # pending
                ("DeadlineSweeperNoLeader", "5m", True),
            ],
            id="no-replica-leads",
        ),
        pytest.param(
            WATCH,
            {scraped(LEADER, "a"): "0x20", scraped(LEADER, "b"): "1x20"},
            [("DeadlineSweeperNoLeader", "20m", False)],
            id="one-leader-is-quiet",
        ),
        pytest.param(
            WATCH,
            {scraped(LEADER, job="other"): "1x20"},
            [
                ("DeadlineSweeperNoLeader", "4m", False),
                (
                    "DeadlineSweeperNoLeader",
                    "5m",
                    {"job": SCRAPED_JOB, "namespace": "sweeper"},
                ),
            ],
            id="never-scraped",
        ),
        pytest.param(
            {**WATCH, "prometheusRule": {"enabled": True, "watch": {"noLeaderMinutes": 2}}},
            {scraped(LEADER): "0x20"},
            [("DeadlineSweeperNoLeader", "1m", False), ("DeadlineSweeperNoLeader", "2m", True)],
            id="no-leader-minutes",
        ),
        pytest.param(
            WATCH,
            # Two failing reopens a minute: 20 in 10 minutes, above 10.
            {scraped("deadline_sweeper_watch_restarts_total", reason="error"): "0+2x40"},
            [("DeadlineSweeperWatchRestarts", "30m", True)],
            id="restart-storm",
        ),
        pytest.param(
            WATCH,
            {scraped("deadline_sweeper_watch_relists_total"): "0+2x40"},
            [("DeadlineSweeperWatchRestarts", "30m", True)],
            id="relist-storm",
        ),
        pytest.param(
            WATCH,
            # The server's regular close at the watch timeout is no failure.
            {scraped("deadline_sweeper_watch_restarts_total", reason="closed"): "0+2x40"},
            [("DeadlineSweeperWatchRestarts", "30m", False)],
            id="regular-closes-are-quiet",
        ),
        pytest.param(
            WATCH,
            # Streams cut at once by something in between (a proxy): a storm, not a timeout.
            {scraped("deadline_sweeper_watch_restarts_total", reason="short"): "0+2x40"},
            [("DeadlineSweeperWatchRestarts", "30m", True)],
            id="short-watch-storm",
        ),
        pytest.param(
            WATCH,
            lateness_buckets(slow=True),
            [("DeadlineSweeperLateEnforcement", "30m", True)],
            id="late-enforcement",
        ),
        pytest.param(
            WATCH,
            lateness_buckets(slow=False),
            [("DeadlineSweeperLateEnforcement", "30m", False)],
            id="prompt-enforcement-is-quiet",
        ),
        pytest.param(
            WATCH,
            {scraped("deadline_sweeper_overdue_jobs", kind="TFJob"): "2x20"},
            [
                ("DeadlineSweeperJobsOverdue", "4m", False),
                ("DeadlineSweeperJobsOverdue", "5m", True),
            ],
            id="jobs-due-and-not-handled",
        ),
        pytest.param(
            WATCH,
            # Due now and then, handled within the minute: never due for 5 minutes on end.
            {scraped("deadline_sweeper_overdue_jobs", kind="TFJob"): "1 0 1 0 1 0 1 0 1 0 1"},
            [("DeadlineSweeperJobsOverdue", "10m", False)],
            id="handled-jobs-are-quiet",
        ),
        pytest.param(
            WATCH,
            {
                scraped(
                    "deadline_sweeper_held_pods",
                    family="mpi-operator",
                    kind="MPIJob",
                    reason="policy",
                ): "2x40",
                scraped(
                    "deadline_sweeper_held_pods",
                    "b",  # a standby: nothing
                    family="mpi-operator",
                    kind="MPIJob",
                    reason="policy",
                ): "0x40",
            },
            [
                ("DeadlineSweeperPodsHeldByFinishedJobs", "29m", False),
                ("DeadlineSweeperPodsHeldByFinishedJobs", "30m", True),
            ],
            id="pods-held-for-30-minutes",
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
def test_watch_mode_alerts_fire_when_they_should(  # noqa: PLR0917 - fixtures and table columns
    render: Callable[..., Rendered],
    promtool: Path,
    tmp_path: Path,
    values: dict[str, Any],
    series: dict[str, str],
    expect: list[tuple[str, str, Any]],
) -> None:
    promtool_test(promtool, tmp_path, rules_of(render(values)), series, expect)


def test_watch_mode_renders_its_own_alerts_only(render: Callable[..., Rendered]) -> None:
    # No CronJob and nothing pushed in watch mode: the run-based alerts would never resolve.
    rules = rules_of(render({**WATCH, **{"metrics": PUSHED["metrics"]}}))
    assert [r["alert"] for r in rules["groups"][0]["rules"]] == [
        "DeadlineSweeperNoLeader",
        "DeadlineSweeperWatchRestarts",
        "DeadlineSweeperLateEnforcement",
        "DeadlineSweeperJobsOverdue",
        "DeadlineSweeperPodsHeldByFinishedJobs",
        "DeadlineSweeperGPUsHeldForNothing",
    ]
