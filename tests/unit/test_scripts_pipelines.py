"""The shell scripts never end a pipeline early under ``set -o pipefail``.

A reader that stops before its input ends (``head``, ``grep -q``, ``grep -m``, ``sed q``)
closes the pipe while the writer may still be writing; the writer then dies of SIGPIPE and
``pipefail`` makes the whole pipeline exit 141, at random, depending on how the two
processes were scheduled. ``scripts/build-image`` did that with ``du | sort -rn | head -8``.
Read to the end instead (``awk 'NR <= 8'``, or a command substitution tested with ``[[ ]]``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(
    p
    for p in [*(REPO / "scripts").iterdir(), REPO / ".ci" / "run"]
    if p.is_file() and p.read_text(errors="replace").startswith("#!/usr/bin/env bash")
)
# A pipe (not ||) followed by a reader that may exit before its input ends.
_EARLY_READER = re.compile(
    r"(?<![|])\|(?![|])\s*(head\b|grep\s+(-\w*[qm]\w*\b|--quiet|--max-count)|sed\s+-?\w*\s*'?\d*q)"
)


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of a script that are not comments, numbered from 1."""
    return [
        (number, line)
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if not line.lstrip().startswith("#")
    ]


def test_the_scripts_are_found() -> None:
    names = {p.name for p in SCRIPTS}
    assert {"build-image", "build-binaries", "test", "run"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_pipeline_is_closed_early(script: Path) -> None:
    found = [
        f"{script.relative_to(REPO)}:{number}: {line.strip()}"
        for number, line in _code_lines(script)
        if _EARLY_READER.search(line)
    ]
    assert not found, "a reader that exits early makes pipefail exit 141:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    ["du -s * | sort -rn | head -8", "dpkg-query -W x | grep -q ok", "ls | grep -m1 x"],
)
def test_the_pattern_catches_the_shapes_that_broke(line: str) -> None:
    assert _EARLY_READER.search(line)


@pytest.mark.parametrize(
    "line", ["a || head -1 b", "sort -rn | awk 'NR <= 8'", "x | grep -v y", "x | sed -n p"]
)
def test_the_pattern_leaves_safe_lines_alone(line: str) -> None:
    assert not _EARLY_READER.search(line)
