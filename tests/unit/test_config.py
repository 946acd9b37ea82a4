"""The run's settings: validated once, frozen."""

from __future__ import annotations

import dataclasses

import pytest

from sweeper.config import Config, check_selector
from sweeper.core.errors import ConfigError
from sweeper.core.model import Enforcement
from tests.unit.test_cli import Harness

VALID_SELECTORS = [
    "team=a",
    "team==a",
    "team!=a",
    "team",
    "!team",
    "team=",
    "team in (a,b)",
    "team notin (a, b)",
    "example.com/team=vision,tier in (gpu),!preemptible",
    "  team = a , tier != b ",
    "replicas>1",
    "replicas < 3",
]


@pytest.mark.parametrize("selector", VALID_SELECTORS)
def test_valid_selectors_pass(selector: str) -> None:
    check_selector(selector)


INVALID_SELECTORS = [
    "a in b",
    "team=a=b",
    "team in ()x",
    ",team=a",
    "team=a,",
    "team=-a",
    "-team=a",
    "team=" + "x" * 64,
    "teamin (a)",
    "a b",
    "=a",
]


@pytest.mark.parametrize("selector", INVALID_SELECTORS)
def test_invalid_selectors_are_configuration_errors(selector: str) -> None:
    with pytest.raises(ConfigError, match="invalid label selector"):
        check_selector(selector)


RANGE = "invalid value for {}: {} (see sweeper --help)"
INVALID = [
    pytest.param(
        ["--page-size", "0"],
        RANGE.format("--page-size", "0 is not in the range x>=1."),
        id="page-size-zero",
    ),
    pytest.param(
        ["--grace", "-1"], RANGE.format("--grace", "'-1' must be zero or more"), id="grace"
    ),
    pytest.param(
        ["--escalate-after", "-1"],
        RANGE.format("--escalate-after", "'-1' must be zero or more"),
        id="negative-escalate",
    ),
    pytest.param(
        ["--retouch-after", "0"],
        RANGE.format("--retouch-after", "'0' must be positive"),
        id="zero-retouch-after",
    ),
    pytest.param(
        ["--retouch-limit", "-1"],
        RANGE.format("--retouch-limit", "-1 is not in the range x>=0."),
        id="negative-limit",
    ),
    pytest.param(
        ["--max-actions", "-1"],
        RANGE.format("--max-actions", "-1 is not in the range x>=0."),
        id="negative-max-actions",
    ),
    pytest.param(
        ["--request-timeout", "0"],
        RANGE.format("--request-timeout", "'0' must be positive"),
        id="zero-request-timeout",
    ),
    pytest.param(
        ["--timeout", "0"], RANGE.format("--timeout", "'0' must be positive"), id="zero-timeout"
    ),
    pytest.param(
        ["--log-level", "CHATTY"],
        RANGE.format("--log-level", "'CHATTY' is not one of 'debug', 'info', 'warning', 'error'."),
        id="unknown-log-level",
    ),
    pytest.param(
        ["-n", "Team"], "invalid namespace name 'Team' (--namespace)", id="namespace-uppercase"
    ),
    pytest.param(
        ["-n", "a" * 64],
        f"invalid namespace name '{'a' * 64}' (--namespace)",
        id="namespace-too-long",
    ),
    pytest.param(
        ["--exclude-namespace", "B"],
        "invalid namespace name 'B' (--exclude-namespace)",
        id="excluded-namespace-uppercase",
    ),
    pytest.param(
        ["--watch", "--lease-namespace", "B"],
        "invalid namespace name 'B' (--lease-namespace)",
        id="lease-namespace-uppercase",
    ),
    pytest.param(["-l", "a b"], "invalid label selector 'a b' (--selector)", id="selector"),
    pytest.param(
        ["--pushgateway", "ftp://x"],
        "invalid URL 'ftp://x' (--pushgateway): expected http(s)://HOST[:PORT][/PATH]",
        id="pushgateway-url",
    ),
    pytest.param(["--every", "10"], "--every and --for go together", id="every-alone"),
    pytest.param(["--for", "10"], "--every and --for go together", id="for-alone"),
    pytest.param(
        ["--every", "0", "--for", "10"],
        RANGE.format("--every", "'0' must be positive"),
        id="every-zero",
    ),
]


@pytest.mark.parametrize(("args", "line"), INVALID)
def test_invalid_settings_are_one_line_naming_their_option(args: list[str], line: str) -> None:
    # Each value is checked where its flag's row reads it (its bounds, its read), the
    # combinations by Config: the same line either way, and never a connection.
    harness = Harness()
    result = harness.invoke(*args)
    assert (result.exit_code, result.stderr) == (2, f"sweeper: error: {line}\n")
    assert harness.config is None


def test_the_settings_check_how_flags_combine() -> None:
    with pytest.raises(ConfigError, match="--every and --for go together"):
        Config(every=10.0)
    with pytest.raises(ConfigError, match="both included"):
        Config(namespaces=("a",), exclude_namespaces=("a",))


def test_defaults_are_the_documented_ones() -> None:
    config = Config()
    assert (config.page_size, config.timeout, config.request_timeout) == (500, 45.0, 10.0)
    assert config.enforcement == Enforcement()


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().timeout = 1  # type: ignore[misc]  # the write under test


def test_repetition_within_the_timeout_is_accepted() -> None:
    config = Config(every=10.0, for_seconds=40.0, timeout=55.0)
    assert (config.every, config.for_seconds) == (10.0, 40.0)
