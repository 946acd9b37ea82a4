"""Suite-wide hooks: how the tests spread over pytest-xdist workers, and their figures.

``scripts/test`` runs the suite on two workers (``-n 2``): each worker is a session of its own,
with its own control plane, operator and namespaces, so tests never see another worker's
objects. The node tier shares one real node (one network namespace, one containerd), so the
scheduler below sends it to one worker as one unit; the modules of each controller family
(``tests/e2e/test_family_<family>_*.py``) likewise, so that each module starts its controllers
once and two modules never wait on each other for a machine-wide lock (mpi-operator's).
Without ``-n`` (a single file, a debugger) everything runs in one process, as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import summary

_NODE = Path(__file__).parent / "node"
_NODE_PREFIX = "tests/node/"  # how node ids of the node tier start (ids are rootdir-relative)
# The families' modules: each starts a control plane and controllers of its own (module scope);
# the word after the prefix names the family (``mpi``, ``trainer``, ``devcluster``).
_FAMILY_PREFIX = "tests/e2e/test_family_"
# Other modules with a control plane of their own for all their tests (module scope): one unit
# each, or every worker that runs one of their tests would start one.
_OWN_CONTROL_PLANE = ("tests/e2e/test_policy_admission.py",)
_WORKER_KEY = "summary"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Spread tests one by one, except the node tier and each family's modules: one unit each.

    So are the modules of ``_OWN_CONTROL_PLANE``.

    pytest-xdist's own ``--dist loadgroup`` does not group on pytest 9 (the worker's nodeid
    rename has no effect), so the grouping is this scheduler's: each test is its own unit of
    work, every test under ``tests/node/`` shares one, and so do the tests of one family's
    modules (``test_family_mpi_alone.py`` and ``test_family_mpi_sweeper.py``): only one
    mpi-operator runs per machine, so on two workers one module would wait for the other.
    """
    from xdist.scheduler import (  # type: ignore[import-untyped]  # noqa: PLC0415 - only under -n
        LoadScopeScheduling,
    )

    class NodeTierTogether(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(_NODE_PREFIX):
                return _NODE_PREFIX
            if nodeid.split("::", 1)[0] in _OWN_CONTROL_PLANE:
                return nodeid.split("::", 1)[0]
            if nodeid.startswith(_FAMILY_PREFIX):
                module = nodeid.split("::", 1)[0].removesuffix(".py")
                return _FAMILY_PREFIX + module[len(_FAMILY_PREFIX) :].split("_", 1)[0]
            return nodeid

    return NodeTierTogether(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the node tier first.

    It is the longest stretch of the run (minutes of CronJob schedules): at the front, one
    worker takes it while the other works through the rest; at the end it would leave one
    worker idle.
    """
    del config
    node = [item for item in items if _NODE in item.path.parents]
    if node:
        items[:] = node + [item for item in items if _NODE not in item.path.parents]


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
