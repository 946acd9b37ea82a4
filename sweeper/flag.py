"""One option of the command line, as data: its names, what it takes, and where it goes.

``sweeper.options.FLAGS`` is a table of ``Flag`` rows; ``sweeper.cli`` turns each into a click
option, and ``sweeper.options.build_config`` puts each value where the row says.
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
    """One of fixed words, as written (as the chart's schema takes them) unless ``any_case``."""

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
    """One option: its flags (then the parameter's name, if not the long flag's), and more.

    ``env`` defaults to ``SWEEPER_<LONG FLAG>``; ``bare`` is the bare flag's value. ``to`` is
    where ``build_config`` puts it (``"enforcement.grace"``; ``None``: it steers others, as ``-A``),
    through ``read`` (``ConfigError`` for a value it refuses).
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
    to: str | None = ""
    read: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        """Fill ``to`` with the parameter's name when it is not given."""
        if self.to == "":
            object.__setattr__(self, "to", self.param)

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
