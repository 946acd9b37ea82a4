"""Locate the binaries that ``scripts/build-binaries`` builds into its cache.

One source for what is built at which version: ``tools/binaries.txt`` names each binary, its
wrapper module under ``tools/`` and its Go package; the version is the one that module's
``go.mod`` requires for the package's Go module, which is what ``go build`` uses. The build
script gets its rows from this module (``python3 devcluster/binaries.py``), so neither side
parses the other. The cache directory comes from the script (``--print-dir``), so the
environment overrides it honours (``SWEEPER_BIN_CACHE``, ``XDG_CACHE_HOME``) apply here too.

Standard library only: the build script runs this file with any ``python3``.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-binaries"
TOOLS = REPO_ROOT / "tools"
TABLE = TOOLS / "binaries.txt"


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


def required_versions(go_mod: str) -> dict[str, str]:
    """The ``require`` directives of a ``go.mod`` (one-line and block forms), by module path."""
    versions: dict[str, str] = {}
    in_block = False
    for line in go_mod.splitlines():
        words = line.split("//")[0].split()
        if words[:2] == ["require", "("]:
            in_block = True
        elif in_block and words == [")"]:
            in_block = False
        elif in_block and len(words) == len(("path", "version")):
            versions[words[0]] = words[1]
        elif words[:1] == ["require"] and len(words) == len(("require", "path", "version")):
            versions[words[1]] = words[2]
    return versions


def module_version(package: str, go_mod: str) -> str:
    """The version ``go.mod`` requires for the Go module that holds ``package``.

    Raises:
        ValueError: No required module holds the package.
    """
    holders = [
        path
        for path in required_versions(go_mod)
        if package == path or package.startswith(f"{path}/")
    ]
    if not holders:
        raise ValueError(f"no module in go.mod holds {package}")
    return required_versions(go_mod)[max(holders, key=len)]


def parse_targets(table: str, go_mod: Callable[[str], str]) -> dict[str, Target]:
    """Read ``tools/binaries.txt`` rows and give each its version from its module's go.mod.

    Args:
        table: The text of the table (``name|module|package`` rows; ``#`` comments).
        go_mod: The text of ``tools/<module>/go.mod`` for a wrapper module's name.

    Returns:
        The targets keyed by binary name, in the table's order.
    """
    targets: dict[str, Target] = {}
    for line in table.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, module, package = (field.strip() for field in line.split("|"))
        targets[name] = Target(name, module, package, module_version(package, go_mod(module)))
    return targets


@functools.cache
def targets() -> dict[str, Target]:
    """The binaries ``scripts/build-binaries`` builds, keyed by name, with their versions."""
    return parse_targets(
        TABLE.read_text(encoding="utf-8"),
        lambda module: (TOOLS / module / "go.mod").read_text(encoding="utf-8"),
    )


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


if __name__ == "__main__":
    # scripts/build-binaries reads its rows from here: name|module|package|version.
    for target in targets().values():
        sys.stdout.write(f"{target.name}|{target.module}|{target.package}|{target.version}\n")
