"""One option of the command line, as data: its names, what it takes, and where it goes.

``sweeper.options.FLAGS`` is a table of ``Flag`` rows; ``sweeper.cli`` turns each
into a click option (its value kind into a click type, ``parse_duration`` for durations)
and ``sweeper.options.build_config`` puts each value where the row says. No click here, and
nothing of the sweeper's but the duration parser (``sweeper.core.clock``): the rows' words
come from the layers above.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sweeper.core import clock

# The one duration parser, shared with the rules file (sweeper.core.platform).
LONGEST_WAIT = clock.LONGEST_WAIT
parse_duration = clock.parse_duration


@dataclass(frozen=True, slots=True)
class Duration:
    """A duration (``parse_duration``); ``longest`` is ``None`` for one never waited for."""

    positive: bool = True
    longest: float | None = LONGEST_WAIT


@dataclass(frozen=True, slots=True)
class Count:
    """An integer from ``minimum`` to ``maximum`` (``None``: no upper bound)."""

    minimum: int
    maximum: int | None = None


@dataclass(frozen=True, slots=True)
class Choice:
    """One of fixed words.

    Taken exactly as written, as the chart's schema takes them (``fail``, not ``Fail``); the log
    levels in any case (``any_case``), as Python's logging names them either way.
    """

    words: tuple[str, ...]
    any_case: bool = False


@dataclass(frozen=True, slots=True)
class DryRunWord:
    """``--dry-run``'s words (``parse_dry_run``)."""


@dataclass(frozen=True, slots=True)
class Switch:
    """A flag that takes no value (``--watch``; ``--a/--no-a`` when its names say so)."""


Value = Duration | Count | Choice | DryRunWord | Switch | None  # None: free text


@dataclass(frozen=True, slots=True)
class Flag:
    """One option of the command.

    Attributes:
        names: The flags, then the parameter's name when it differs from the long flag's.
        value: What it takes; ``None`` for free text.
        default: The default, as the user would type it.
        env: Its environment variables; ``SWEEPER_<LONG FLAG>`` when empty.
        shown_default: ``--help``'s wording of a default that is not a value.
        bare: The value of the flag given without one (``--dry-run`` means ``client``).
        to: Where ``build_config`` puts the value: a ``Config`` attribute, or one of
            its ``policy``, ``watch`` or ``watch.timing`` (``"policy.grace"``); ``None`` for a
            flag that only steers the others (``-A``, ``--watch``).
        read: Turns the parsed value (``None`` when unset) into the attribute's; as it is by
            default. It raises ``ConfigError`` for a value it refuses.
    """

    names: tuple[str, ...]
    help: str
    value: Value = None
    default: object = None
    metavar: str | None = None
    env: tuple[str, ...] = ()
    multiple: bool = False
    shown_default: str | None = None
    bare: str | None = None
    to: str | None = None
    read: Callable[[Any], Any] | None = None

    @property
    def param(self) -> str:
        """The parameter's name, as click derives it from the names."""
        if not self.names[-1].startswith("-"):
            return self.names[-1]
        long = next(n for n in self.names if n.startswith("--"))
        return long.split("/")[0].removeprefix("--").replace("-", "_")

    @property
    def variables(self) -> tuple[str, ...]:
        """The environment twins: ``env``, else the one the long flag names."""
        if self.env:
            return self.env
        long = max((n for n in self.names if n.startswith("--")), key=len)
        return ("SWEEPER_" + long.split("/")[0].removeprefix("--").replace("-", "_").upper(),)
