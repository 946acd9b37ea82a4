"""The command line through click's CliRunner: flags, their SWEEPER_* twins, exit codes."""

from __future__ import annotations

import json
import os
import runpy
import signal
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner, Result
from freezegun import freeze_time

from sweeper import __version__
from sweeper.cli import Seams, command
from sweeper.config import ClockMode, Config, DryRun, LogFormat, OutputFormat
from sweeper.core.errors import ApiError, ConfigError, Gone, RequestRef
from sweeper.core.families.mpi_operator import MPIJOB
from sweeper.core.families.training_operator import PYTORCHJOB
from sweeper.core.kinds import LEGACY_TOUCHED_AT_ANNOTATION, TOUCHED_AT_ANNOTATION
from sweeper.core.model import ActionMode, PodsMode
from sweeper.core.releases import Release
from sweeper.stop import Stop
from tests.cli_runner import runner
from tests.unit.fakes import FakeWatchCluster, Request
from tests.unit.objects import NOW, job

ALL_ENV = [
    "SWEEPER_KUBECONFIG",
    "SWEEPER_CONTEXT",
    "SWEEPER_NAMESPACE",
    "SWEEPER_KIND",
    "SWEEPER_FAMILY",
    "SWEEPER_SELECTOR",
    "SWEEPER_PAGE_SIZE",
    "SWEEPER_POLICY",
    "SWEEPER_GRACE",
    "SWEEPER_CLOCK",
    "SWEEPER_ACTION",
    "SWEEPER_TERMINATE_PODS",
    "SWEEPER_OPERATOR_VERSION",
    "SWEEPER_ESCALATE_AFTER",
    "SWEEPER_RETOUCH_AFTER",
    "SWEEPER_RETOUCH_LIMIT",
    "SWEEPER_MAX_ACTIONS",
    "SWEEPER_EVERY",
    "SWEEPER_FOR",
    "SWEEPER_DRY_RUN",
    "SWEEPER_OUTPUT",
    "SWEEPER_LOG_FORMAT",
    "SWEEPER_LOG_LEVEL",
    "SWEEPER_REQUEST_TIMEOUT",
    "SWEEPER_TIMEOUT",
    "SWEEPER_PUSHGATEWAY",
    "SWEEPER_PUSHGATEWAY_JOB",
    "SWEEPER_ALL_NAMESPACES",
    "SWEEPER_EXCLUDE_NAMESPACE",
    "SWEEPER_EXPLAIN",
    "SWEEPER_LOG_LEVEL",
    "SWEEPER_REQUEST_TIMEOUT",
    "SWEEPER_TIMEOUT",
    "SWEEPER_WATCH",
    "SWEEPER_RESYNC",
    "SWEEPER_WATCH_TIMEOUT",
    "SWEEPER_LEADER_ELECT",
    "SWEEPER_LEASE_NAME",
    "SWEEPER_LEASE_NAMESPACE",
    "SWEEPER_IDENTITY",
    "SWEEPER_LEASE_DURATION",
    "SWEEPER_RENEW_DEADLINE",
    "SWEEPER_RETRY_PERIOD",
    "SWEEPER_HEALTH_ADDRESS",
    "SWEEPER_HEALTH_PORT",
]


class Harness:
    """Runs the command against a fake cluster and keeps the configuration it built."""

    def __init__(self, fake: FakeWatchCluster | None = None) -> None:
        self.fake = fake or FakeWatchCluster(date=NOW)
        self.config: Config | None = None

    def connect(self, config: Config, *, stop: Stop) -> FakeWatchCluster:
        self.config = config
        return self.fake

    def invoke(self, *args: str, env: dict[str, str] | None = None) -> Result:
        clean = dict.fromkeys([*ALL_ENV, "KUBECONFIG"])  # None removes them
        return runner().invoke(
            command,
            list(args),
            obj=Seams(connect=self.connect),
            env={**clean, **(env or {})},
            catch_exceptions=False,
        )


@pytest.fixture
def harness() -> Harness:
    return Harness()


def test_version_is_fast_to_get_and_needs_no_cluster() -> None:
    result = runner().invoke(command, ["--version"])
    assert (result.exit_code, result.output) == (0, f"sweeper, version {__version__}\n")


def test_python_dash_m_sweeper_is_the_same_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["sweeper", "--version"])
    with pytest.raises(SystemExit) as exited:
        runpy.run_module("sweeper", run_name="__main__")
    assert (exited.value.code, capsys.readouterr().out) == (0, f"sweeper, version {__version__}\n")


def test_help_documents_every_option_with_its_environment_variable() -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(command, ["--help"], terminal_width=200)
    assert result.exit_code == 0
    for variable in ALL_ENV:
        assert variable in result.output, variable
    assert "KUBECONFIG" in result.output


FLAGS = [
    pytest.param(
        [],
        {},
        lambda c: (
            (
                c.enforcement.action,
                c.clock,
                c.dry_run,
                c.output,
                c.page_size,
                c.timeout,
                c.request_timeout,
                c.enforcement.escalate_after,
                c.enforcement.max_actions,
                c.enforcement.terminate_pods,
            )
            == (
                ActionMode.TOUCH,
                ClockMode.SERVER,
                None,
                OutputFormat.TEXT,
                500,
                45.0,
                10.0,
                120.0,
                None,
                PodsMode.ACTIVE,
            )
        ),
        id="defaults",
    ),
    pytest.param(
        ["--dry-run"],
        {},
        lambda c: c.dry_run is DryRun.CLIENT,
        id="bare-dry-run-is-client",
    ),
    pytest.param(
        ["--dry-run=server"],
        {},
        lambda c: c.dry_run is DryRun.SERVER,
        id="dry-run-server",
    ),
    pytest.param(
        [],
        {"SWEEPER_DRY_RUN": "server"},
        lambda c: c.dry_run is DryRun.SERVER,
        id="dry-run-env",
    ),
    pytest.param(
        [],
        {"SWEEPER_DRY_RUN": "true"},
        lambda c: c.dry_run is DryRun.CLIENT,
        id="dry-run-env-true",
    ),
    pytest.param(
        [],
        {"SWEEPER_ACTION": "auto"},
        lambda c: c.enforcement.action is ActionMode.AUTO,
        id="action-env",
    ),
    pytest.param(
        ["--action", "fail"],
        {"SWEEPER_ACTION": "auto"},
        lambda c: c.enforcement.action is ActionMode.FAIL,
        id="action-flag-wins-over-env",
    ),
    pytest.param(
        ["-n", "a", "--namespace", "b"],
        {},
        lambda c: c.namespaces == ("a", "b"),
        id="namespaces-repeat",
    ),
    pytest.param(
        [],
        {"SWEEPER_NAMESPACE": "a b"},
        lambda c: c.namespaces == ("a", "b"),
        id="namespaces-env-space-separated",
    ),
    pytest.param(
        ["--kind", "pytorchjob", "--kind", "MPIJobs"],
        {},
        lambda c: c.kinds == (PYTORCHJOB, MPIJOB),
        id="kinds-by-name-or-plural",
    ),
    pytest.param(
        [],
        {"SWEEPER_KIND": "PyTorchJob"},
        lambda c: c.kinds == (PYTORCHJOB,),
        id="kind-env",
    ),
    pytest.param(
        [],
        {"SWEEPER_SELECTOR": "team=a,tier in (gpu)"},
        lambda c: c.selector == "team=a,tier in (gpu)",
        id="selector-env",
    ),
    pytest.param([], {"SWEEPER_GRACE": "30"}, lambda c: c.enforcement.grace == 30, id="grace-env"),
    pytest.param(
        [],
        {"SWEEPER_CLOCK": "local"},
        lambda c: c.clock is ClockMode.LOCAL,
        id="clock-env",
    ),
    pytest.param(
        [],
        {"SWEEPER_TERMINATE_PODS": "policy"},
        lambda c: c.enforcement.terminate_pods is PodsMode.POLICY,
        id="terminate-pods-env",
    ),
    pytest.param(
        [], {}, lambda c: c.enforcement.operator_version is None, id="operator-version-unset"
    ),
    pytest.param(
        ["--operator-version", "v1.9.3"],
        {},
        lambda c: c.enforcement.operator_version == Release(1, 9, 3),
        id="operator-version-flag",
    ),
    pytest.param(
        [],
        {"SWEEPER_OPERATOR_VERSION": "1.7.0"},
        lambda c: c.enforcement.operator_version == Release(1, 7, 0),
        id="operator-version-env-without-v",
    ),
    pytest.param(
        [],
        {"SWEEPER_ESCALATE_AFTER": "5"},
        lambda c: c.enforcement.escalate_after == 5,
        id="escalate-after-env",
    ),
    pytest.param(
        [],
        {"SWEEPER_RETOUCH_AFTER": "2s", "SWEEPER_RETOUCH_LIMIT": "1"},
        lambda c: (c.enforcement.retouch_after, c.enforcement.retouch_limit) == (2, 1),
        id="retouch-env",
    ),
    pytest.param(
        ["--retouch-after=500ms", "--retouch-limit=0"],
        {},
        lambda c: (c.enforcement.retouch_after, c.enforcement.retouch_limit) == (0.5, 0),
        id="retouch-flags",
    ),
    pytest.param(
        [],
        {"SWEEPER_MAX_ACTIONS": "3"},
        lambda c: c.enforcement.max_actions == 3,
        id="max-actions-env",
    ),
    pytest.param(
        [],
        {"SWEEPER_EVERY": "0.01", "SWEEPER_FOR": "0.02"},
        lambda c: (c.every, c.for_seconds) == (0.01, 0.02),
        id="every-for-env",
    ),
    pytest.param(
        [],
        {"SWEEPER_OUTPUT": "json"},
        lambda c: c.output is OutputFormat.JSON,
        id="output-env",
    ),
    pytest.param(
        [],
        {"SWEEPER_LOG_FORMAT": "text"},
        lambda c: c.log_format is LogFormat.TEXT,
        id="log-format-env",
    ),
    pytest.param(
        [],
        {"SWEEPER_LOG_LEVEL": "debug"},
        lambda c: c.log_level == "DEBUG",
        id="log-level-env",
    ),
    pytest.param(
        [],
        {"SWEEPER_REQUEST_TIMEOUT": "3", "SWEEPER_TIMEOUT": "30"},
        lambda c: (c.request_timeout, c.timeout) == (3, 30),
        id="timeouts-env",
    ),
    pytest.param([], {"SWEEPER_PAGE_SIZE": "50"}, lambda c: c.page_size == 50, id="page-size-env"),
    pytest.param(
        [],
        {"SWEEPER_KUBECONFIG": "/k"},
        lambda c: c.kubeconfig == "/k",
        id="kubeconfig-env",
    ),
    pytest.param([], {"KUBECONFIG": "/a:/b"}, lambda c: c.kubeconfig == "/a:/b", id="KUBECONFIG"),
    pytest.param([], {"SWEEPER_CONTEXT": "prod"}, lambda c: c.context == "prod", id="context-env"),
]


@pytest.mark.parametrize(("args", "env", "check"), FLAGS)
def test_flags_and_environment_twins_build_the_config(
    harness: Harness, args: list[str], env: dict[str, str], check: Any
) -> None:
    result = harness.invoke(*args, env=env)
    assert result.exit_code == 0, result.output
    assert harness.config is not None
    assert check(harness.config)


USAGE_ERRORS = [
    pytest.param(["--action", "explode"], "invalid value for --action", id="unknown-action"),
    pytest.param(["--explode"], "No such option", id="unknown-flag"),
    pytest.param(["--kind", "JobSet"], "unknown kind 'JobSet'", id="unknown-kind"),
    pytest.param(
        ["--operator-version", "1.9"],
        "--operator-version: '1.9' is not a release (expected vX.Y.Z",
        id="operator-version-malformed",
    ),
    pytest.param(
        ["--operator-version", "v1.9.4-rc.0"],
        "--operator-version: 'v1.9.4-rc.0' is not a release",
        id="operator-version-prerelease",
    ),
    pytest.param(
        ["--operator-version", "v1.6.0"],
        "--operator-version: v1.6.0 is not a Training Operator v1 release the sweeper knows "
        "(v1.7.0, v1.8.0, v1.8.1, v1.9.0, v1.9.1, v1.9.2, v1.9.3, v1.9.4)",
        id="operator-version-too-old",
    ),
    pytest.param(
        ["--operator-version", "v1.9.5"],
        "v1.9.5 is not a Training Operator v1 release",
        id="operator-version-too-new",
    ),
    pytest.param(
        ["--operator-version", "v1.8.7"],
        "v1.8.7 is not a Training Operator v1 release",
        id="operator-version-no-such-patch",
    ),
    pytest.param(["-l", "a in b"], "invalid label selector 'a in b'", id="bad-selector"),
    pytest.param(["-n", "Not_A_Namespace"], "invalid namespace name", id="bad-namespace"),
    pytest.param(["--every", "10"], "--every and --for go together", id="every-without-for"),
    pytest.param(["--grace", "-1"], "invalid value for --grace", id="negative-grace"),
    pytest.param(["--page-size", "0"], "invalid value for --page-size", id="zero-page-size"),
    pytest.param(["--dry-run=maybe"], "is not one of client, server, none", id="bad-dry-run"),
    pytest.param(
        ["--watch", "--every", "10", "--for", "20"],
        "--watch runs continuously; it does not take --every/--for",
        id="watch-with-every",
    ),
    pytest.param(
        ["--watch", "--pushgateway", "http://pg:9091"],
        "--watch serves /metrics; it does not take --pushgateway",
        id="watch-with-pushgateway",
    ),
    pytest.param(
        ["--watch", "--lease-duration", "5", "--renew-deadline", "10"],
        "--lease-duration must be longer than --renew-deadline",
        id="lease-shorter-than-renewal",
    ),
    pytest.param(
        ["--watch", "--renew-deadline", "2", "--retry-period", "2"],
        "--renew-deadline must be longer than 1.2 x --retry-period",
        id="renewal-within-jittered-retry",
    ),
    pytest.param(
        ["--watch", "--lease-namespace", "Not_OK"],
        "invalid namespace name",
        id="bad-lease-namespace",
    ),
]


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS)
def test_usage_errors_exit_two_with_one_clear_line(
    harness: Harness, args: list[str], message: str
) -> None:
    result = harness.invoke(*args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert harness.config is None  # never connected


def test_missing_kubeconfig_is_one_line_and_exit_two() -> None:
    result = runner().invoke(command, ["--dry-run", "--kubeconfig", "/nonexistent"])
    assert result.exit_code == 2
    assert result.stderr == "sweeper: error: kubeconfig /nonexistent: no such file\n"
    assert result.stdout == ""


def test_broken_kubeconfig_is_one_line_and_exit_two(tmp_path: Any) -> None:
    broken = tmp_path / "config"
    broken.write_text("apiVersion: v1\nclusters: [oops\n")
    result = runner().invoke(command, ["--kubeconfig", str(broken)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"sweeper: error: kubeconfig {broken}: ")
    assert result.stderr.count("\n") == 1


def test_a_forbidden_list_exits_three_naming_verb_resource_and_namespace(
    harness: Harness,
) -> None:
    harness.fake.add_job(job(namespace="a"))
    forbidden = ApiError(RequestRef("list", "pytorchjobs.kubeflow.org", "a"), 403)
    harness.fake.fail("list", None, forbidden)
    result = harness.invoke("-n", "a", "--kind", "PyTorchJob")
    assert result.exit_code == 3
    assert result.stderr.splitlines()[-1] == (
        'sweeper: error: cannot list pytorchjobs.kubeflow.org in namespace "a": forbidden (403) '
        '(server https://fake.invalid, context "fake")'
    )


def refuse_lists(fake: FakeWatchCluster, namespace: str | None, plural: str) -> None:
    """Answer 403 to every list of ``plural`` in ``namespace`` (``None``: cluster-wide), as RBAC."""

    def before(request: Request) -> None:
        if (request.method, request.namespace, request.name) == ("list", namespace, plural):
            kind = f"{plural}.kubeflow.org"
            raise ApiError(RequestRef("list", kind, namespace), 403, f"{kind} is forbidden")

    fake.before = before


@pytest.mark.parametrize(
    ("args", "refused", "listed", "touched"),
    [
        pytest.param(
            ["-n", "a", "-n", "b", "--kind", "PyTorchJob"],
            ("b", "pytorchjobs"),
            'in namespace "b"',
            [("a", "due-in-a")],
            id="a-namespace-deleted-with-its-role",
        ),
        pytest.param(
            ["--kind", "TFJob", "--kind", "PyTorchJob"],
            (None, "tfjobs"),
            "in all namespaces",
            [("a", "due-in-a"), ("b", "due-in-b")],
            id="a-kind-outside-the-grant",
        ),
    ],
)
def test_a_list_rbac_refuses_is_named_and_the_jobs_of_the_others_are_still_acted_on(
    harness: Harness,
    args: list[str],
    refused: tuple[str | None, str],
    listed: str,
    touched: list[tuple[str, str]],
) -> None:
    # One refused list used to stop every pass everywhere: exit 3, nothing acted on.
    harness.fake.add_job(job(namespace="a", name="due-in-a"))
    harness.fake.add_job(job("TFJob", namespace="b", name="due-in-b"))
    harness.fake.add_job(job(namespace="b", name="due-in-b"))
    refuse_lists(harness.fake, *refused)

    result = harness.invoke(*args, "-o", "json")

    assert result.exit_code == 3
    kind = f"{refused[1]}.kubeflow.org"
    error = (
        f"cannot list {kind} {listed}: forbidden (403): {kind} is forbidden "
        '(server https://fake.invalid, context "fake")'
    )
    assert result.stderr.splitlines()[-1] == f"sweeper: error: {error}"
    logged = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert [(r["level"], r["message"]) for r in logged if r["level"] == "ERROR"] == [
        ("ERROR", f"{error}; its jobs are not judged this pass")
    ]
    report = json.loads(result.stdout)
    assert report["summary"]["unlisted"] == [error]
    patched = [(r.namespace, r.name) for r in harness.fake.writes if r.method == "patch"]
    assert patched == touched
    done = [(j["namespace"], j["name"]) for j in report["jobs"] if j["result"] == "done"]
    assert done == touched


def test_refused_lists_are_lines_of_the_text_report_and_the_error_line_counts_them(
    harness: Harness,
) -> None:
    refuse_lists(harness.fake, "b", "pytorchjobs")
    before = harness.fake.before
    assert before is not None

    def also_c(request: Request) -> None:
        before(request)
        if (request.method, request.namespace) == ("list", "c"):
            raise ApiError(RequestRef("list", "pytorchjobs.kubeflow.org", "c"), 403)

    harness.fake.before = also_c

    result = harness.invoke("-n", "b", "-n", "c", "--kind", "PyTorchJob")

    assert result.exit_code == 3
    refused = 'cannot list pytorchjobs.kubeflow.org in namespace "{}": forbidden (403)'
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("Not listed")] == [
        f"Not listed, its jobs not judged: {refused.format('b')}: pytorchjobs.kubeflow.org "
        'is forbidden (server https://fake.invalid, context "fake")',
        f"Not listed, its jobs not judged: {refused.format('c')} "
        '(server https://fake.invalid, context "fake")',
    ]
    assert "No Kubeflow jobs found." not in result.stdout
    assert lines[-1].endswith("; lists refused: 2")
    assert result.stderr.splitlines()[-1] == (
        f"sweeper: error: {refused.format('b')}: pytorchjobs.kubeflow.org is forbidden "
        '(server https://fake.invalid, context "fake") (and 1 more lists refused, each logged)'
    )


def test_failed_actions_exit_one(harness: Harness) -> None:
    harness.fake.add_job(job())
    harness.fake.fail("patch", None, ApiError(RequestRef("patch", "pytorchjobs"), 403))
    assert harness.invoke().exit_code == 1


def test_nothing_overdue_exits_zero(harness: Harness) -> None:
    harness.fake.add_job(job(started_ago=5))
    assert harness.invoke().exit_code == 0


def test_dry_run_writes_nothing_and_reports_the_patch(harness: Harness) -> None:
    harness.fake.add_job(job())
    result = harness.invoke("--dry-run", "-o", "json", "--action", "fail")
    assert result.exit_code == 0
    assert harness.fake.writes == []
    report = json.loads(result.stdout)
    assert report["dry_run"] == "client"
    record = report["jobs"][0]
    assert (record["decision"], record["result"]) == ("fail", "planned")
    assert record["patch"]["status"]["conditions"][-1]["reason"] == "PyTorchJobFailed"


def test_json_report_shape(harness: Harness) -> None:
    harness.fake.add_job(job())
    result = harness.invoke("-o", "json")
    report = json.loads(result.stdout)
    assert set(report) == {"pass", "now", "clock", "dry_run", "action", "jobs", "held", "summary"}
    assert set(report["jobs"][0]) >= {
        "kind",
        "namespace",
        "name",
        "uid",
        "decision",
        "reason",
        "started",
        "deadline",
        "seconds_overdue",
        "result",
        "patch",
    }
    assert report["jobs"][0]["patch"] == {
        "metadata": {
            "annotations": {
                TOUCHED_AT_ANNOTATION: "2024-05-01T12:00:00Z",
                LEGACY_TOUCHED_AT_ANNOTATION: None,
            }
        }
    }
    assert {"errors", "duration_s"} <= set(report["summary"])


def test_logs_go_to_stderr_as_json_lines_and_stdout_holds_only_the_report(
    harness: Harness,
) -> None:
    harness.fake.add_job(job())
    result = harness.invoke("-o", "json")
    json.loads(result.stdout)  # exactly one JSON document
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    action = next(line for line in lines if line.get("action") == "touch")
    assert {
        k: action[k]
        for k in ("kind", "namespace", "name", "action", "reason", "seconds_overdue", "dry_run")
    } == {
        "kind": "PyTorchJob",
        "namespace": "team-a",
        "name": "train",
        "action": "touch",
        "reason": "overdue",
        "seconds_overdue": 3600.0,
        "dry_run": None,
    }
    assert lines[-1]["message"].startswith("pass 1: 1 job: 1 touch")


def test_text_logs_for_humans(harness: Harness) -> None:
    harness.fake.add_job(job())
    result = harness.invoke("--log-format", "text")
    assert "INFO    PyTorchJob team-a/train: touch (overdue) -> done" in result.stderr


def test_text_report_is_a_table(harness: Harness) -> None:
    harness.fake.add_job(job())
    lines = harness.invoke().stdout.splitlines()
    assert lines[1].split() == [
        "KIND",
        "NAMESPACE",
        "NAME",
        "STARTED",
        "DEADLINE",
        "OVERDUE",
        "BY",
        "DECISION",
        "RESULT",
    ]
    assert lines[2].split() == [
        "PyTorchJob",
        "team-a",
        "train",
        "2024-05-01T10:00:00Z",
        "2024-05-01T11:00:00Z",
        "1h00m",
        "touch",
        "(overdue)",
        "done",
    ]


@freeze_time("2024-05-01T12:00:00Z")
def test_local_clock_decides_by_this_machine_and_warns_about_skew() -> None:
    # The API server is an hour behind: by its clock the job is not due; by ours it is.
    harness = Harness(FakeWatchCluster(date=NOW - timedelta(hours=1)))
    harness.fake.add_job(job(started_ago=3700))
    result = harness.invoke("--clock", "local", "-o", "json", "--log-format", "text")
    report = json.loads(result.stdout)
    assert (report["now"], report["jobs"][0]["decision"]) == ("2024-05-01T12:00:00Z", "touch")
    assert "the local clock is 1h00m ahead of the API server's" in result.stderr


@freeze_time("2024-05-01T12:00:00Z")
def test_server_clock_ignores_a_skewed_local_clock() -> None:
    harness = Harness(FakeWatchCluster(date=NOW - timedelta(hours=1)))
    harness.fake.add_job(job(started_ago=3700))
    result = harness.invoke("-o", "json")
    report = json.loads(result.stdout)
    assert (report["now"], report["jobs"][0]["reason"]) == ("2024-05-01T11:00:00Z", "not-yet-due")
    assert harness.fake.writes == []


def test_sigterm_finishes_the_current_write_reports_and_exits_four(harness: Harness) -> None:
    for name in ("a", "b", "c"):
        harness.fake.add_job(job(name=name))

    def terminate_on_first_write(request: Request) -> None:
        if request.method == "patch":
            os.kill(os.getpid(), signal.SIGTERM)

    harness.fake.before = terminate_on_first_write
    before = signal.getsignal(signal.SIGTERM)  # the e2e harness may have chained its own
    result = harness.invoke("-o", "json")
    assert result.exit_code == 4
    report = json.loads(result.stdout)
    assert [j["result"] for j in report["jobs"]] == ["done", "not-started", "not-started"]
    assert report["summary"]["stopped_by"] == "interrupted by SIGTERM"
    assert [w.method for w in harness.fake.writes] == ["patch"]
    assert signal.getsignal(signal.SIGTERM) is before


def test_an_unexpected_bug_exits_70_with_one_line_and_its_traceback_logged_at_error(
    harness: Harness,
) -> None:
    def explode(_request: Request) -> None:
        raise RuntimeError("boom")

    harness.fake.before = explode
    result = harness.invoke()
    assert result.exit_code == 70
    lines = result.stderr.splitlines()
    assert lines[-1] == "sweeper: internal error: RuntimeError: boom"
    [logged] = [json.loads(line) for line in lines if line.startswith("{") and "boom" in line]
    assert (logged["level"], logged["message"]) == ("ERROR", "internal error: RuntimeError: boom")
    assert logged["exc_info"].startswith("Traceback (most recent call last):")
    assert logged["exc_info"].rstrip().endswith("RuntimeError: boom")


def test_a_list_that_expires_twice_exits_three_with_the_pass_reported(harness: Harness) -> None:
    harness.fake.add_job(job())
    gone = Gone(RequestRef("list", "pytorchjobs.kubeflow.org"), 410, "expired")
    harness.fake.fail("list", "pytorchjobs", gone, gone)
    result = harness.invoke("-o", "json", "--kind", "PyTorchJob")
    assert result.exit_code == 3
    report = json.loads(result.stdout)
    assert report["jobs"] == []
    assert report["summary"]["stopped_by"] == (
        "cannot list pytorchjobs.kubeflow.org in all namespaces: gone (410): expired "
        "(the list expired again after starting over)"
    )
    assert result.stderr.splitlines()[-1] == f"sweeper: error: {report['summary']['stopped_by']}"
    assert harness.fake.writes == []


def test_the_cli_imports_no_http_library_until_a_run_starts() -> None:
    # --version and --help stay fast: urllib3, ssl and the kubeconfig's YAML are for runs.
    code = (
        "import sys, sweeper.cli; "
        "print(sorted(m for m in sys.modules if m.startswith(('urllib3', 'ssl', 'yaml'))))"
    )
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "[]"


def test_no_run_imports_the_kubernetes_client() -> None:
    # Its kubernetes.config alone took ~0.45 s of every pass's start (docs/benchmarks.md).
    code = (
        "import sys, sweeper.cli, sweeper.k8s.connection.client, sweeper.oneshot.run, "
        "sweeper.watch.engine; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('kubernetes', 'requests_oauthlib', 'oauthlib', 'pydantic', 'dateutil')))"
    )
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "[]"


WATCH_FLAGS = [
    (
        "watch-defaults",
        ["--watch"],
        {},
        lambda w: (
            (
                w.resync,
                w.watch_timeout,
                w.leader_elect,
                w.lease_name,
                w.lease_namespace,
                w.timing.lease_duration,
                w.timing.renew_deadline,
                w.timing.retry_period,
                w.health_port,
            )
            == (300.0, 90.0, True, "kubeflow-deadline-sweeper", None, 15.0, 10.0, 2.0, 8080)
        ),
    ),
    ("watch-env", [], {"SWEEPER_WATCH": "true"}, lambda w: w.leader_elect),
    (
        "health-address-ipv6-bracketed",
        ["--watch", "--health-address", "[::1]"],
        {},
        lambda w: w.health_address == "::1",
    ),
    (
        "health-address-ipv6-twin",
        ["--watch"],
        {"SWEEPER_HEALTH_ADDRESS": "::"},
        lambda w: w.health_address == "::",
    ),
    (
        "health-address-ipv6-bracketed-twin",
        ["--watch"],
        {"SWEEPER_HEALTH_ADDRESS": "[::]"},
        lambda w: w.health_address == "::",
    ),
    (
        "health-address-host-name",
        ["--watch", "--health-address", "localhost"],
        {},
        lambda w: w.health_address == "localhost",
    ),
    ("identity-default-is-unique", ["--watch"], {}, lambda w: "_" in w.identity),
    (
        "watch-settings-env",
        ["--watch"],
        {
            "SWEEPER_RESYNC": "60",
            "SWEEPER_WATCH_TIMEOUT": "30",
            "SWEEPER_LEADER_ELECT": "false",
            "SWEEPER_LEASE_NAME": "l",
            "SWEEPER_LEASE_NAMESPACE": "ops",
            "SWEEPER_IDENTITY": "me",
            "SWEEPER_LEASE_DURATION": "30",
            "SWEEPER_RENEW_DEADLINE": "20",
            "SWEEPER_RETRY_PERIOD": "4",
            "SWEEPER_HEALTH_ADDRESS": "127.0.0.1",
            "SWEEPER_HEALTH_PORT": "0",
        },
        lambda w: (
            (
                w.resync,
                w.watch_timeout,
                w.leader_elect,
                w.lease_name,
                w.lease_namespace,
                w.identity,
                w.timing.lease_duration,
                w.timing.renew_deadline,
                w.timing.retry_period,
                w.health_address,
                w.health_port,
            )
            == (60.0, 30.0, False, "l", "ops", "me", 30.0, 20.0, 4.0, "127.0.0.1", 0)
        ),
    ),
]


@pytest.mark.parametrize(
    ("args", "env", "check"), [f[1:] for f in WATCH_FLAGS], ids=[f[0] for f in WATCH_FLAGS]
)
def test_watch_flags_and_their_twins_build_the_watch_settings(
    args: list[str], env: dict[str, str], check: Any
) -> None:
    seen: list[Config] = []

    def connect(config: Config, /, *, stop: Stop) -> FakeWatchCluster:
        seen.append(config)
        raise ConfigError("stop here: the settings are what this test checks")

    clean = dict.fromkeys([*ALL_ENV, "KUBECONFIG"])
    result = runner().invoke(
        command,
        list(args),
        obj=Seams(connect=connect),
        env={**clean, **env},
        catch_exceptions=False,
    )
    assert result.exit_code == 2, result.output
    (config,) = seen
    assert config.watch is not None
    assert check(config.watch)


@pytest.mark.parametrize(
    ("args", "env"),
    [
        pytest.param(["--health-address", "[::1]:8080"], {}, id="bracketed-with-port"),
        pytest.param(["--health-address", "127.0.0.1:8080"], {}, id="ipv4-with-port"),
        pytest.param(["--health-address", "::1::2"], {}, id="two-double-colons"),
        pytest.param(["--health-address", "[::1"], {}, id="unclosed-bracket"),
        pytest.param(["--health-address", "[127.0.0.1]"], {}, id="bracketed-ipv4"),
        pytest.param(["--health-address", "10.0.0.300"], {}, id="ipv4-out-of-range"),
        pytest.param([], {"SWEEPER_HEALTH_ADDRESS": "fe80::zz"}, id="twin-bad-ipv6"),
    ],
)
def test_a_bad_health_address_is_one_line_and_exit_2_before_connecting(
    harness: Harness, args: list[str], env: dict[str, str]
) -> None:
    result = harness.invoke("--watch", *args, env=env)

    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("sweeper: error: invalid address ")
    assert "(--health-address/SWEEPER_HEALTH_ADDRESS)" in line
    assert harness.config is None


def test_without_watch_there_are_no_watch_settings(harness: Harness) -> None:
    result = harness.invoke()
    assert result.exit_code == 0
    assert harness.config is not None
    assert harness.config.watch is None


def test_policy_without_a_release_says_what_older_releases_would_delete(harness: Harness) -> None:
    result = harness.invoke("--action", "fail", "--terminate-pods", "policy", "--log-format=text")
    assert result.exit_code == 0, result.output
    assert result.stderr.count("releases v1.7.0 to v1.9.3 delete every pod") == 1


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(
            ["--action", "fail", "--terminate-pods", "policy", "--operator-version", "v1.9.3"],
            id="known-release",
        ),
        pytest.param(
            ["--action", "touch", "--terminate-pods", "policy"], id="touch-deletes-nothing"
        ),
        pytest.param(["--action", "auto"], id="active"),
    ],
)
def test_no_release_warning_when_the_release_is_known_or_unused(
    harness: Harness, args: list[str]
) -> None:
    result = harness.invoke(*args, "--log-format=text")
    assert result.exit_code == 0, result.output
    assert "--operator-version" not in result.stderr
