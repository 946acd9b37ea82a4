"""The house's sizes and shape, as CONTRIBUTING.md states them, checked on every run.

A module over 500 lines or a class over 250 is where a newcomer stops reading; the import
contract's layers are the architecture, so there are few of them and each one is a folder or a
module of the edge. These limits are the ones the reshaping reached; a change that breaks one
splits the module (or the class) rather than raising the number.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "sweeper"
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 250
MAX_LAYERS = 8
FOLDERS = ("core", "k8s", "oneshot", "watch")


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _house_layers() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (house,) = [c for c in contracts if c["type"] == "layers" and c["containers"] == ["sweeper"]]
    return list(house["layers"])


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_500_lines(path: Path) -> None:
    assert path.read_text().count("\n") <= MAX_MODULE_LINES


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_class_is_over_250_lines(path: Path) -> None:
    tree = ast.parse(path.read_text())
    sizes = {
        node.name: (node.end_lineno or node.lineno) - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }
    assert {name: n for name, n in sizes.items() if n > MAX_CLASS_LINES} == {}


def test_the_house_has_at_most_eight_layers_and_each_folder_is_one() -> None:
    layers = _house_layers()
    assert len(layers) <= MAX_LAYERS
    parts = {part.strip() for layer in layers for part in layer.split("|")}
    assert set(FOLDERS) <= parts
    assert all((PACKAGE / folder / "__init__.py").is_file() for folder in FOLDERS)
