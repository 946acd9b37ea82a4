"""click's ``CliRunner`` with stderr kept apart, on every click release the package allows.

click 8.2 always separates stderr and removed ``mix_stderr``; 8.1 (the declared floor, which
the floor CI step installs) mixes it into stdout unless told not to.
"""

from __future__ import annotations

from click.testing import CliRunner


def runner() -> CliRunner:
    """A runner whose ``Result.stderr`` is the command's stderr alone."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2 only
    except TypeError:
        return CliRunner()
