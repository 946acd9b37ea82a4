"""No module outside ``core/families/`` names a controller family or one of its kinds.

A family is one module: the engines, the executor, the boundary, the report and the metrics ask
a job's family (``family_of``) what it needs, never whether it is a TrainJob or an MPIJob at
``v2beta1``. Code is read, not comments and docstrings: the names it uses and the strings it
compares or sends.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sweeper.core.families import FAMILIES
from sweeper.core.kinds import Kind

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "sweeper"
# Each family module declares its kinds (and their groups and versions).
KIND_ROWS = {
    name: value
    for family in FAMILIES
    for name, value in vars(family).items()
    if isinstance(value, Kind)
}
NAMES = {
    "MPI_OPERATOR_VERSION",
    "TRAINER_VERSION",
    "TRAINER_GROUP",
    "JOBSET_GROUP",
    "JOBSET_VERSION",
    "TRAINING_OPERATOR",
    "MPI_OPERATOR",
    "TRAINER",
    "training_operator",
    "mpi_operator",
    "trainer",
    *KIND_ROWS,
}
WORDS = {f.NAME for f in FAMILIES} | {f.MANAGED_BY for f in FAMILIES}
WORDS |= {kind.name for kind in KIND_ROWS.values()}


def _outside() -> list[Path]:
    families = PACKAGE / "core" / "families"
    return sorted(p for p in PACKAGE.rglob("*.py") if families not in p.parents)


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(id(value))
    return found


def named(source: str) -> list[str]:
    """The family and kind names a module's code uses, as identifiers or as strings."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in NAMES:
            found.append(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in NAMES:
            found.append(node.attr)
        elif isinstance(node, ast.alias) and (node.asname or node.name).split(".")[-1] in NAMES:
            found.append(node.name)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1] in NAMES:
            found.append(node.module or "")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and node.value in WORDS
        ):
            found.append(repr(node.value))
    return found


@pytest.mark.parametrize("path", _outside(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_family_or_kind_is_named_outside_the_families(path: Path) -> None:
    assert named(path.read_text()) == []


@pytest.mark.parametrize(
    "line",
    [
        "from sweeper.core.families.trainer import TRAINJOB",
        "ok = job.kind is trainer.TRAINJOB",
        "v2 = version == MPI_OPERATOR_VERSION",
        "from sweeper.core.families import trainer",
        "from sweeper.core.families.trainer import due_at",
        "x = family == 'trainer'",
        "y = kind.name == 'MPIJob'",
    ],
)
def test_each_way_of_naming_one_is_seen(line: str) -> None:
    assert named(line) != []


def test_a_docstring_may_say_what_a_family_does() -> None:
    assert named('"""trainer"""\ndef f() -> None:\n    """MPIJob"""\n') == []
