"""scripts/test sets up what the selected tests run, and nothing else.

The fast tier (``-m "not e2e"``, or the folders that need no cluster) must not install the
node's Debian packages nor build the node and the image (some 20 minutes cold, as root), and its
tests must need no network. ``SWEEPER_TEST_PLAN=1`` makes the script print its choice and exit
before it touches anything, which is what is checked here; the choice's consequences (which
binaries are built) are the lines of the script that read it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def plan(*args: str) -> str:
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "test"), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "SWEEPER_TEST_PLAN": "1"},
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("args", "setup"),
    [
        pytest.param([], "node", id="everything"),
        pytest.param(["-m", "not e2e"], "fast", id="fast-tier"),
        pytest.param(["-mnot e2e"], "fast", id="fast-tier-joined"),
        pytest.param(["tests/unit", "tests/chart/test_image.py"], "fast", id="fast-folders"),
        pytest.param(["tests/unit", "tests/e2e/test_sweeper_fail.py"], "node", id="an-e2e-file"),
        pytest.param(["-m", "e2e and not node"], "cluster", id="no-node"),
        pytest.param(["-k", "touch"], "node", id="a-keyword-selects-anything"),
    ],
)
def test_the_set_up_follows_what_the_arguments_select(args: list[str], setup: str) -> None:
    assert plan(*args) == f"set-up: {setup}"


def test_the_fast_set_up_builds_helm_alone_and_installs_nothing_from_debian() -> None:
    script = (REPO / "scripts" / "test").read_text(encoding="utf-8")
    fast = script[script.index("if [[ $setup == fast ]]; then") :]
    fast = fast[: fast.index("\n  else\n")]  # the fast branch alone
    assert "scripts/build-binaries helm" in fast
    assert "install-node-deps" not in fast
    assert "build-image" not in fast
    assert "if ((${#need[@]})) && [[ $setup == fast ]]; then" in script


def test_the_fast_tier_leaves_out_the_test_that_needs_the_package_index() -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q"),
            *("-m", "not e2e", "tests/chart/test_image.py"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert collected
    assert not [line for line in collected if "install_steps" in line]
