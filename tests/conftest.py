"""Suite-wide hooks: how the tests spread over pytest-xdist workers, and their figures.

``scripts/test`` runs the suite on two workers (``-n 2 --dist loadgroup``): each worker is a
session of its own, with its own control plane, operator and namespaces, so tests never see
another worker's objects. The node tier shares one real node (one network namespace, one
containerd), so it is one ``xdist_group`` and runs on one worker. Without ``-n`` (a single
file, a debugger) everything runs in one process, as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import summary

_NODE = Path(__file__).parent / "node"
_WORKER_KEY = "summary"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the node tier on one worker, and start it first.

    The node tier shares one real node, so it is one group. It is also the longest stretch of
    the run (minutes of CronJob schedules), so it goes to the front: one worker takes it while
    the other works through the rest; at the end it would leave one worker idle.
    """
    del config
    node = [item for item in items if _NODE in item.path.parents]
    for item in node:
        item.add_marker(pytest.mark.xdist_group("node"))
    if node:
        rest = [item for item in items if _NODE not in item.path.parents]
        items[:] = node + rest


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On a worker, hand the recorded figures to the controller."""
    output: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if output is not None:
        output[_WORKER_KEY] = summary.recorded(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the controller, take a finished worker's figures (pytest-xdist's hook)."""
    del error
    sections = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if sections:
        summary.merge(node.config, sections)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Print every section of figures the run recorded, on any worker."""
    for section, lines in summary.recorded(config).items():
        terminalreporter.section(section)
        for line in lines:
            terminalreporter.write_line(line)
