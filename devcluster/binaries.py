"""Locate the binaries that ``scripts/build-binaries`` builds into its cache.

The versions are not repeated here: the ``targets=(...)`` table of ``scripts/build-binaries``
is the one source of truth, and this module parses its rows. The cache directory comes from
the same script (``--print-dir``), so the environment overrides it honours
(``SWEEPER_BIN_CACHE``, ``XDG_CACHE_HOME``) apply here too.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-binaries"

# One row of the bash table: "name|wrapper module|Go package|version".
_ROW = re.compile(
    r'^\s*"(?P<name>[^|"]+)\|(?P<module>[^|"]+)\|(?P<package>[^|"]+)\|(?P<version>[^|"]+)"'
)


class BinaryMissing(RuntimeError):  # noqa: N818 - the name is part of the shared contract
    """A binary the control plane needs has not been built yet; the message says how to build it."""


@dataclass(frozen=True)
class Target:
    """One row of the build table.

    Attributes:
        name: Binary name, e.g. ``kube-apiserver``.
        module: Wrapper Go module directory under ``tools/``.
        package: Go package built into the binary.
        version: Pinned upstream version, e.g. ``v1.36.3``.
    """

    name: str
    module: str
    package: str
    version: str


def parse_targets(script_text: str) -> dict[str, Target]:
    """Parse the ``targets=(...)`` rows of the build script.

    Args:
        script_text: The text of ``scripts/build-binaries``.

    Returns:
        The targets keyed by binary name, in the script's order.

    Raises:
        ValueError: The script has no ``targets=(`` table.
    """
    lines = iter(script_text.splitlines())
    for line in lines:
        if line.strip().startswith("targets=("):
            break
    else:
        raise ValueError("no targets=( table in the build script")
    targets: dict[str, Target] = {}
    for line in lines:
        if line.strip() == ")":
            break
        match = _ROW.match(line)
        if match:
            targets[match["name"]] = Target(**match.groupdict())
    return targets


@functools.cache
def targets() -> dict[str, Target]:
    """The build table of ``scripts/build-binaries``, keyed by binary name."""
    return parse_targets(BUILD_SCRIPT.read_text(encoding="utf-8"))


def version(name: str) -> str:
    """The pinned version of one binary, e.g. ``version("etcd") == "v3.6.16"``.

    Raises:
        KeyError: ``name`` is not in the build table.
    """
    return targets()[name].version


@functools.cache
def cache_dir() -> Path:
    """The binary cache directory, as ``scripts/build-binaries --print-dir`` reports it."""
    out = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print-dir"],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    return Path(out.stdout.strip())


def path(name: str) -> Path:
    """Where the binary lives once built, whether or not it exists yet."""
    target = targets()[name]
    return cache_dir() / f"{target.name}-{target.version}" / target.name


def find(name: str) -> Path:
    """The path of a built binary.

    Args:
        name: A name from the build table (``etcd``, ``kube-apiserver``, ``kubectl``, ``helm``,
            ``training-operator``).

    Returns:
        The executable's path.

    Raises:
        BinaryMissing: It has not been built; the message names the command that builds it.
        KeyError: ``name`` is not in the build table.
    """
    binary = path(name)
    if not os.access(binary, os.X_OK):
        raise BinaryMissing(
            f"{name} {version(name)} is not built (expected {binary}); "
            f"run scripts/build-binaries {name} (needs Go 1.26) to build it"
        )
    return binary
