"""The run's settings: validated once, frozen."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from sweeper.config import Config, check_selector
from sweeper.core.errors import ConfigError
from sweeper.core.model import Policy

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


INVALID = [
    pytest.param({"page_size": 0}, "--page-size", id="page-size-zero"),
    pytest.param({"policy": Policy(grace=-1)}, "--grace", id="negative-grace"),
    pytest.param({"policy": Policy(escalate_after=-1)}, "--escalate-after", id="negative-escalate"),
    pytest.param({"policy": Policy(retouch_after=0)}, "--retouch-after", id="zero-retouch-after"),
    pytest.param({"policy": Policy(retouch_limit=-1)}, "--retouch-limit", id="negative-limit"),
    pytest.param({"policy": Policy(max_actions=-1)}, "--max-actions", id="negative-max-actions"),
    pytest.param({"request_timeout": 0}, "--request-timeout", id="zero-request-timeout"),
    pytest.param({"timeout": 0}, "--timeout", id="zero-timeout"),
    pytest.param({"log_level": "CHATTY"}, "--log-level", id="unknown-log-level"),
    pytest.param({"namespaces": ("Team",)}, "--namespace", id="namespace-uppercase"),
    pytest.param({"namespaces": ("a" * 64,)}, "--namespace", id="namespace-too-long"),
    pytest.param({"every": 10.0}, "--every and --for", id="every-alone"),
    pytest.param({"for_seconds": 10.0}, "--every and --for", id="for-alone"),
    pytest.param({"every": 0.0, "for_seconds": 10.0}, "must be positive", id="every-zero"),
]


@pytest.mark.parametrize(("changes", "message"), INVALID)
def test_invalid_settings_name_their_option(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Config(**changes)


def test_defaults_are_the_documented_ones() -> None:
    config = Config()
    assert (config.page_size, config.timeout, config.request_timeout) == (500, 45.0, 10.0)
    assert config.policy == Policy()


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().timeout = 1  # type: ignore[misc]  # the write under test


def test_repetition_within_the_timeout_is_accepted() -> None:
    config = Config(every=10.0, for_seconds=40.0, timeout=55.0)
    assert (config.every, config.for_seconds) == (10.0, 40.0)
