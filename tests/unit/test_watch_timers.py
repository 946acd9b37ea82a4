"""The watch mode's timers, fires and resync, driven step by step on the unit fake.

The streams and the Lease need the real kube-apiserver (tests/e2e/test_watch*.py); what is
decided between a timer coming due and the job's next look is pure bookkeeping of the main
loop, so these tests call the loop's steps directly: take a timer, fire it (synchronously),
apply the message the fire sends, and read the timer it left armed.
"""

from __future__ import annotations

import pytest

from sweeper.cli import Seams, command
from sweeper.config import Config, WatchSettings
from sweeper.decide import Policy
from sweeper.errors import ConfigError
from sweeper.run import StopFlag
from tests.cli_runner import runner
from tests.unit.fakes import FakeCluster

# --- C5: --max-actions has no meaning in watch mode, and is refused ----------------------------


def test_watch_refuses_max_actions_instead_of_ignoring_it_in_its_timers() -> None:
    with pytest.raises(ConfigError, match=r"--watch .* does not take --max-actions"):
        Config(watch=WatchSettings(), policy=Policy(max_actions=3))


def test_watch_with_max_actions_is_a_usage_error_exit_two() -> None:
    result = runner().invoke(
        command, ["--watch", "--max-actions", "3"], obj=Seams(connect=_never_connect)
    )
    assert result.exit_code == 2
    assert "--watch acts on each job at its deadline; it does not take --max-actions" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_one_shot_passes_still_take_max_actions() -> None:
    assert Config(policy=Policy(max_actions=3)).policy.max_actions == 3


def _never_connect(config: Config, *, stop: StopFlag) -> FakeCluster:
    raise AssertionError("a usage error never connects")


# --- C11: a quick re-touch is at least a second after the last touch ---------------------------


@pytest.mark.parametrize("seconds", [0.3, 0.999])
def test_sub_second_retouch_after_is_refused_while_quick_touches_are_on(seconds: float) -> None:
    # touched-at has whole seconds: the quick touch would write the value already there.
    with pytest.raises(ConfigError, match="--retouch-after must be at least 1s"):
        Config(policy=Policy(retouch_after=seconds, retouch_limit=2))


def test_sub_second_retouch_after_is_a_usage_error_exit_two() -> None:
    result = runner().invoke(
        command, ["--watch", "--retouch-after", "300ms"], obj=Seams(connect=_never_connect)
    )
    assert result.exit_code == 2
    assert "--retouch-after must be at least 1s" in result.stderr


def test_retouch_after_is_free_when_quick_touches_are_off() -> None:
    assert Config(policy=Policy(retouch_after=0.5, retouch_limit=0)).policy.retouch_after == 0.5
