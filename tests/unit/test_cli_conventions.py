"""Habits users bring from kubectl: durations, -A, excluded namespaces, log format, error lines."""

from __future__ import annotations

import pytest

from sweeper import options
from sweeper.config import LogFormat
from tests.unit.objects import job
from tests.unit.test_cli import Harness


@pytest.mark.parametrize(
    ("flag", "text", "seconds"),
    [
        pytest.param("--grace", "30s", 30.0, id="seconds-unit"),
        pytest.param("--grace", "5m", 300.0, id="minutes"),
        pytest.param("--escalate-after", "1h", 3600.0, id="hours"),
        pytest.param("--escalate-after", "1h30m", 5400.0, id="compound"),
        pytest.param("--request-timeout", "250ms", 0.25, id="milliseconds"),
        pytest.param("--timeout", "90", 90.0, id="plain-seconds"),
        pytest.param("--timeout", "1.5", 1.5, id="plain-fractional-seconds"),
        pytest.param("--grace", "0", 0.0, id="zero-grace"),
    ],
)
def test_durations_take_units_or_plain_seconds(flag: str, text: str, seconds: float) -> None:
    harness = Harness()
    result = harness.invoke(flag, text)
    assert result.exit_code == 0, result.output
    assert harness.config is not None
    attribute = {"--grace": "grace", "--escalate-after": "escalate_after"}.get(flag)
    if attribute:
        assert getattr(harness.config.enforcement, attribute) == seconds
    else:
        assert getattr(harness.config, flag[2:].replace("-", "_")) == seconds


def test_durations_from_the_environment_and_for_every_and_for() -> None:
    harness = Harness()
    # --timeout 1s: the run ends after its first pass (no pass starts at or after --timeout),
    # instead of sleeping through the 15 s grid for 30 s; the parsing is the same.
    result = harness.invoke("--timeout", "1s", env={"SWEEPER_EVERY": "15s", "SWEEPER_FOR": "1m"})
    assert result.exit_code == 0, result.output
    assert harness.config is not None
    assert (harness.config.every, harness.config.for_seconds) == (15.0, 60.0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--grace", "5 minutes"], "'5 minutes' is not a duration", id="words"),
        pytest.param(["--grace", "-5m"], "'-5m' must be zero or more", id="negative"),
        pytest.param(["--timeout", "0s"], "'0s' must be positive", id="zero-timeout"),
        pytest.param(["--timeout", "nan"], "'nan' is not a finite duration", id="nan"),
    ],
)
def test_a_bad_duration_is_one_usage_line(args: list[str], message: str) -> None:
    result = Harness().invoke(*args)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"sweeper: error: invalid value for {args[0]}: {message}")


# Every duration that becomes a wait (a socket timeout, a thread's sleep, a Lease's clock):
# 1e10 s used to overflow Python's waits (exit 70, or a dead thread in --watch).
WAITS = (
    "--every",
    "--for",
    "--request-timeout",
    "--timeout",
    "--resync",
    "--watch-timeout",
    "--lease-duration",
    "--renew-deadline",
    "--retry-period",
)


@pytest.mark.parametrize("flag", WAITS)
@pytest.mark.parametrize("text", ["1e10", "8761h"])
def test_a_wait_longer_than_a_year_is_one_usage_line(flag: str, text: str) -> None:
    harness = Harness()
    result = harness.invoke(flag, text)
    assert result.exit_code == 2
    assert result.stderr == (
        f"sweeper: error: invalid value for {flag}: '{text}' must be at most 8760h (a year) "
        "(see sweeper --help)\n"
    )
    assert harness.config is None


def test_a_year_is_the_longest_wait_and_its_twin_is_bounded_too() -> None:
    harness = Harness()
    assert harness.invoke("--timeout", "8760h").exit_code == 0
    assert harness.config is not None
    assert harness.config.timeout == 365 * 24 * 3600
    result = Harness().invoke(env={"SWEEPER_REQUEST_TIMEOUT": "1e10"})
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "sweeper: error: invalid value for --request-timeout (from SWEEPER_REQUEST_TIMEOUT): "
        "'1e10' must be at most 8760h"
    )


@pytest.mark.parametrize("flag", ["--grace", "--escalate-after", "--retouch-after"])
def test_a_duration_never_waited_for_has_no_upper_bound(flag: str) -> None:
    # A huge --grace means "never due", a huge --escalate-after "never escalate".
    harness = Harness()
    harness.fake.add_job(job())
    result = harness.invoke(flag, "1e10", "--dry-run")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("args", "line"),
    [
        # click words this one differently across 8.x releases; the shape is what matters.
        pytest.param(["--no-such-flag"], None, id="unknown-option"),
        pytest.param(
            ["--action", "delete"],
            "sweeper: error: invalid value for --action: "
            "'delete' is not one of 'touch', 'fail', 'auto'. (see sweeper --help)",
            id="bad-choice",
        ),
        pytest.param(["--kind", "Deployment"], None, id="program-error"),
    ],
)
def test_usage_errors_and_the_programs_errors_read_alike(args: list[str], line: str | None) -> None:
    result = Harness().invoke(*args)
    assert result.exit_code == 2
    (only,) = result.stderr.splitlines()
    assert only.startswith("sweeper: error: ")
    if args[0].startswith("--no-such"):
        assert "No such option" in only
        assert only.endswith(" (see sweeper --help)")
    if line is not None:
        assert only == line


def test_a_bad_value_from_the_environment_names_the_variable() -> None:
    result = Harness().invoke(env={"SWEEPER_GRACE": "soon"})
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "sweeper: error: invalid value for --grace (from SWEEPER_GRACE): 'soon' is not a duration"
    )


def test_all_namespaces_is_the_default_spelled_out() -> None:
    harness = Harness()
    assert harness.invoke("-A").exit_code == 0
    assert harness.config is not None
    assert harness.config.namespaces == ()
    assert Harness().invoke(env={"SWEEPER_ALL_NAMESPACES": "true"}).exit_code == 0


def test_all_namespaces_and_a_namespace_contradict() -> None:
    result = Harness().invoke("-A", "-n", "team-a")
    assert result.exit_code == 2
    assert result.stderr == (
        "sweeper: error: -A/--all-namespaces and -n/--namespace contradict each other\n"
    )


def test_excluded_namespaces_are_never_acted_on_nor_reported() -> None:
    harness = Harness()
    for namespace in ("team-a", "team-b", "kube-system"):
        harness.fake.add_job(job(namespace=namespace, name="late"))
    result = harness.invoke(
        "--exclude-namespace",
        "team-b",
        "-o",
        "json",
        env={"SWEEPER_EXCLUDE_NAMESPACE": "kube-system"},
    )
    # The flag wins over its environment twin, as click does for every option.
    assert result.exit_code == 0, result.output
    assert [w.namespace for w in harness.fake.writes if w.method == "patch"] == [
        "kube-system",
        "team-a",
    ]
    both = Harness()
    for namespace in ("team-a", "team-b", "kube-system"):
        both.fake.add_job(job(namespace=namespace, name="late"))
    assert both.invoke(env={"SWEEPER_EXCLUDE_NAMESPACE": "team-b kube-system"}).exit_code == 0
    assert [w.namespace for w in both.fake.writes if w.method == "patch"] == ["team-a"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["-n", "a", "--exclude-namespace", "a"],
            "namespace 'a' is both included (-n) and excluded (--exclude-namespace)",
            id="both",
        ),
        pytest.param(
            ["--exclude-namespace", "Bad_Name"],
            "invalid namespace name 'Bad_Name' (--exclude-namespace)",
            id="invalid",
        ),
    ],
)
def test_bad_exclusions_are_usage_errors(args: list[str], message: str) -> None:
    result = Harness().invoke(*args)
    assert (result.exit_code, result.stderr) == (2, f"sweeper: error: {message}\n")


@pytest.mark.parametrize(
    ("flag", "tty", "expected"),
    [
        pytest.param(None, True, LogFormat.TEXT, id="auto-on-a-terminal"),
        pytest.param(None, False, LogFormat.JSON, id="auto-in-a-pod"),
        pytest.param("json", True, LogFormat.JSON, id="json-asked-on-a-terminal"),
        pytest.param("text", False, LogFormat.TEXT, id="text-asked-in-a-pod"),
    ],
)
def test_logs_are_text_on_a_terminal_and_json_otherwise(
    monkeypatch: pytest.MonkeyPatch, flag: str | None, tty: bool, expected: LogFormat
) -> None:
    monkeypatch.setattr(options, "stderr_is_tty", lambda: tty)
    harness = Harness()
    harness.invoke(*(["--log-format", flag] if flag else []))
    assert harness.config is not None
    assert harness.config.log_format is expected
