"""Figures the suite prints at its end, gathered from every pytest-xdist worker.

A fixture that measures something (how long a control plane took to start, deadline to
Failed) records a line with :func:`record`; the terminal summary prints the lines under their
section. Under ``pytest -n`` each worker is a session of its own whose terminal nobody sees, so
a worker hands its lines to the controller (``workeroutput``, see ``tests/conftest.py``),
which prints them with its own. Figures, never assertions.
"""

from __future__ import annotations

import pytest

Sections = dict[str, list[str]]

_KEY = pytest.StashKey[Sections]()


def record(config: pytest.Config, section: str, line: str) -> None:
    """Add one line to a section of the end-of-run summary.

    Args:
        config: The session's configuration (``request.config``).
        section: The section's title, e.g. ``"Training Operator v1.9.4: measured"``.
        line: The figure, one line.
    """
    config.stash.setdefault(_KEY, {}).setdefault(section, []).append(line)


def recorded(config: pytest.Config) -> Sections:
    """The sections this process recorded (the controller's own, or a worker's)."""
    return config.stash.get(_KEY, {})


def merge(config: pytest.Config, sections: Sections) -> None:
    """Add a worker's sections to this process's (in the controller)."""
    for section, lines in sections.items():
        for line in lines:
            record(config, section, line)
