"""The repository stands alone: nothing in it reads or names a directory beside the clone.

A user's clone has nothing next to it, so a path that climbs out of the repository (to a
sibling ``shared`` directory, say) works only on the machine it was written on. Upstream data
the tests need (the Training Operator's CRDs) comes from the Go module the build downloads,
into a cache outside the repository, and is never committed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Spelt in pieces so that this file does not match itself.
_SIBLING = re.compile("|".join([r"\.\./" + "shared", "SWEEPER_" + "SHARED_DIR"]))
_CRD_KIND = re.compile(r"^kind:\s*" + "CustomResource" + "Definition", re.MULTILINE)


def _tracked_files() -> list[Path]:
    """Every file git tracks (or would: untracked and not ignored), else every file below."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=REPO,
            check=True,
            capture_output=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        skipped = {".git", ".venv", "node_modules", "__pycache__"}
        return [
            p
            for p in REPO.rglob("*")
            if p.is_file() and not skipped.intersection(p.relative_to(REPO).parts)
        ]
    return [REPO / name for name in out.decode().split("\0") if name]


def _texts() -> list[tuple[str, str]]:
    texts = []
    for path in _tracked_files():
        try:
            texts.append((str(path.relative_to(REPO)), path.read_text(encoding="utf-8")))
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
    return texts


def test_the_file_list_is_the_repository() -> None:
    names = {name for name, _ in _texts()}

    assert {"README.md", "pyproject.toml", "scripts/test", "sweeper/core/decide.py"} <= names
    assert not any(name.startswith(".venv") for name in names)


def test_no_file_refers_to_a_directory_beside_the_clone() -> None:
    offenders = [
        f"{name}:{text.count(chr(10), 0, match.start()) + 1}: {match.group()}"
        for name, text in _texts()
        for match in _SIBLING.finditer(text)
    ]

    assert offenders == []


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("crds = REPO.parent / '../" + "shared/crds'", id="a-relative-path"),
        pytest.param("os.environ['SWEEPER_" + "SHARED_DIR']", id="the-old-override"),
    ],
)
def test_the_check_catches_a_reference(text: str) -> None:
    assert _SIBLING.search(text)


def test_no_upstream_crd_is_committed() -> None:
    copies = [name for name, text in _texts() if _CRD_KIND.search(text)]

    assert copies == []
