"""Locate the binaries that ``scripts/build-binaries`` builds into its cache.

One source for what is built at which version: ``tools/binaries.txt`` names each binary, its
wrapper module under ``tools/`` and its Go package; the version is the one that module's
``go.mod`` requires for the package's Go module, which is what ``go build`` uses. The build
script gets its rows from this module (``python3 -P devcluster/binaries.py``), so neither side
parses the other. The cache directory comes from the script (``--print-dir``), so the
environment overrides it honours (``SWEEPER_BIN_CACHE``, ``XDG_CACHE_HOME``) apply here too.

Other versions: the Training Operator from v1.7.0 and the Kubernetes binaries of a minor from
1.32 to 1.37 can be chosen instead of the pinned ones (``scripts/build-binaries
--operator-version`` / ``--kubernetes-version``; in Python, :func:`select`). The committed
wrapper module builds only the pinned version, so for another one the build script asks this
module for a wrapper of its own (:func:`prepare_wrapper`), generated from the same pattern in a
work directory of the cache, never in the repository. etcd stays the pinned v3.6 for every
minor: the etcd v3 API that kube-apiserver 1.32 to 1.37 use is served by it.

Standard library only: the build script runs this file with any ``python3``.
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = REPO_ROOT / "scripts" / "build-binaries"
TOOLS = REPO_ROOT / "tools"
TABLE = TOOLS / "binaries.txt"

OPERATOR = "training-operator"
# The binaries built from k8s.io/kubernetes: one version for all of them, chosen together.
KUBERNETES = (
    "kube-apiserver",
    "kubectl",
    "kubelet",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
)
# What may be asked for: Training Operator v1 from v1.7.0 (the first with runPolicy.suspend
# and the <Kind>Failed reason, and the oldest Kueue supports); the Kubernetes minors managed
# clusters run in late 2026.
OPERATOR_OLDEST = (1, 7, 0)
KUBERNETES_MINORS = range(32, 38)
# Work directories of the wrapper modules generated for other versions, inside the cache.
WRAPPERS = "_modules"

_SEMVER = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
# The versions chosen instead of the pinned ones (select), by binary name.
_chosen: dict[str, str] = {}


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


class VersionError(ValueError):
    """A version that cannot be chosen; the message says why in one line."""


def operator_version(text: str) -> str:
    """Check a Training Operator version and spell it as its Go module tag.

    Args:
        text: ``v1.7.0`` or ``1.7.0``.

    Returns:
        The tag, e.g. ``v1.7.0``.

    Raises:
        VersionError: Not a release version, or older than v1.7.0, or not v1.
    """
    match = _SEMVER.fullmatch(text.strip())
    if match is None:
        raise VersionError(
            f"training-operator version {text!r} is not a release version such as v1.9.3"
        )
    release = tuple(int(part) for part in match.groups())
    if release[0] != 1 or release < OPERATOR_OLDEST:
        raise VersionError(
            f"training-operator {text} is out of range: v1 releases from "
            f"v{'.'.join(map(str, OPERATOR_OLDEST))} are supported (v1.7.0 ... v1.9.x)"
        )
    return "v" + ".".join(match.groups())


def kubernetes_version(text: str) -> str:
    """Check a Kubernetes version and spell it as the ``k8s.io/kubernetes`` tag.

    Args:
        text: ``v1.32.13`` or ``1.32.13``: a whole release, so that a build is reproducible.

    Returns:
        The tag, e.g. ``v1.32.13``.

    Raises:
        VersionError: Not a release version, or a minor outside 1.32 to 1.37.
    """
    match = _SEMVER.fullmatch(text.strip())
    if match is None:
        raise VersionError(
            f"Kubernetes version {text!r} is not a release version such as v1.32.13 "
            "(a patch release, not a minor alone)"
        )
    major, minor, _ = (int(part) for part in match.groups())
    if major != 1 or minor not in KUBERNETES_MINORS:
        raise VersionError(
            f"Kubernetes {text} is out of range: minors 1.{KUBERNETES_MINORS[0]} "
            f"to 1.{KUBERNETES_MINORS[-1]} are supported"
        )
    return "v" + ".".join(match.groups())


def chosen(*, operator: str | None = None, kubernetes: str | None = None) -> dict[str, str]:
    """The versions to use instead of the pinned ones, by binary name (checked).

    Args:
        operator: A Training Operator version, or None for the pinned one.
        kubernetes: A Kubernetes version for every binary of ``KUBERNETES``, or None.

    Raises:
        VersionError: A version is malformed or out of range.
    """
    versions: dict[str, str] = {}
    if operator:
        versions[OPERATOR] = operator_version(operator)
    if kubernetes:
        versions.update(dict.fromkeys(KUBERNETES, kubernetes_version(kubernetes)))
    return versions


def select(*, operator: str | None = None, kubernetes: str | None = None) -> None:
    """Use these versions in this process (``version``, ``path``, ``find`` and their callers).

    Called once at the edge (``scripts/devcluster``'s flags, the e2e fixtures' environment),
    before a control plane or operator starts. None keeps (or restores) the pinned version.

    Raises:
        VersionError: A version is malformed or out of range; nothing is changed then.
    """
    versions = chosen(operator=operator, kubernetes=kubernetes)
    _chosen.clear()
    _chosen.update(versions)


def build_flags(name: str) -> list[str]:
    """The ``scripts/build-binaries`` options that build ``name`` at its selected version."""
    if name not in _chosen:
        return []
    if name == OPERATOR:
        return ["--operator-version", _chosen[name]]
    return ["--kubernetes-version", _chosen[name]]


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


def module_path(package: str, go_mod: str) -> str:
    """The path of the required Go module that holds ``package`` (the longest that does).

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
    return max(holders, key=len)


def module_version(package: str, go_mod: str) -> str:
    """The version ``go.mod`` requires for the Go module that holds ``package``.

    Raises:
        ValueError: No required module holds the package.
    """
    return required_versions(go_mod)[module_path(package, go_mod)]


def staging_replaces(upstream_go_mod: str, version: str) -> dict[str, str]:
    """The published releases to put in place of a module's own local-path replaces.

    ``k8s.io/kubernetes`` requires its staging modules at v0.0.0 and replaces them by
    ``./staging/src/...`` directories, which only works inside its repository. Each staging
    module is published at ``v0.<minor>.<patch>`` for release ``v1.<minor>.<patch>``, which is
    what a wrapper module maps it to. The list is read from the release's own go.mod, so a
    minor that adds or drops a staging module needs no change here.

    Args:
        upstream_go_mod: The go.mod of the module being built (e.g. k8s.io/kubernetes).
        version: Its release, e.g. ``v1.32.13``.

    Returns:
        Module path to version, for ``replace path => path version`` lines.
    """
    staging = "v0." + version.split(".", 1)[1]
    replaced: dict[str, str] = {}
    in_block = False
    for line in upstream_go_mod.splitlines():
        words = line.split("//")[0].split()
        if words[:2] == ["replace", "("]:
            in_block = True
            continue
        if in_block and words == [")"]:
            in_block = False
            continue
        if words[:1] == ["replace"]:
            words = words[1:]
        elif not in_block:
            continue
        local = len(words) == len(("path", "=>", "dir")) and words[2].startswith(("./", "../"))
        if local and words[1] == "=>":
            replaced[words[0]] = staging
    return replaced


def wrapper_go_mod(
    module: str, packages: Sequence[str], holder: str, version: str, replaces: dict[str, str]
) -> str:
    """The go.mod of a wrapper module that builds ``packages`` from ``holder`` at ``version``.

    The same pattern as the committed ones under ``tools/``: ``tool`` lines keep the
    requirement through ``go mod tidy``, which then resolves the rest exactly as minimal
    version selection does for the upstream release.
    """
    lines = [
        f"// Generated by scripts/build-binaries: {holder} {version}, outside the repository.",
        f"module github.com/kubeflow-deadline-sweeper/tools/{module}",
        "",
        "go 1.26.0",
        "",
        *(f"tool {package}" for package in packages),
        "",
        f"require {holder} {version}",
    ]
    if replaces:
        lines.append("")
        lines += [f"replace {path} => {path} {v}" for path, v in sorted(replaces.items())]
    return "\n".join(lines) + "\n"


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
    """The version of one binary in use: the selected one, or the pinned one.

    E.g. ``version("etcd") == "v3.6.16"``.

    Raises:
        KeyError: ``name`` is not in the build table.
    """
    return _chosen.get(name) or targets()[name].version


def pinned(name: str) -> bool:
    """Whether the version in use is the one the committed wrapper module pins."""
    return version(name) == targets()[name].version


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
    return cache_dir() / f"{name}-{version(name)}" / targets()[name].name


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
        command = " ".join(["scripts/build-binaries", *build_flags(name), name])
        raise BinaryMissing(
            f"{name} {version(name)} is not built (expected {binary}); "
            f"run {command} (needs Go 1.26) to build it"
        )
    return binary


# --- the build script's side ---------------------------------------------------------------------


def _go(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GOWORK="off", GOFLAGS="-mod=mod")
    return subprocess.run(
        ["go", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def _first_error(output: str) -> str:
    """The line of go's output that says why, for a one-line message.

    go prints an import chain (``... imports``) before the failing module, and the proxy's
    answer on the next line; both are joined into one line.
    """
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if line.startswith(("go: downloading", "go: finding")) or line.endswith(" imports"):
            continue
        after = lines[i + 1] if i + 1 < len(lines) else ""
        return f"{line} ({after})" if after.startswith("server response:") else line
    return lines[-1] if lines else "go gave no reason"


def tools_of(go_mod: str) -> set[str]:
    """The packages of a go.mod's ``tool`` directives (one-line and block forms)."""
    tools: set[str] = set()
    in_block = False
    for line in go_mod.splitlines():
        words = line.split("//")[0].split()
        if words[:2] == ["tool", "("]:
            in_block = True
        elif in_block and words == [")"]:
            in_block = False
        elif in_block and len(words) == 1:
            tools.add(words[0])
        elif words[:1] == ["tool"] and len(words) == len(("tool", "package")):
            tools.add(words[1])
    return tools


def prepare_wrapper(module: str, version: str, directory: Path, packages: Sequence[str]) -> None:
    """Generate and resolve the wrapper module that builds ``packages`` at ``version``.

    Writes ``go.mod`` and ``go.sum`` into ``directory`` (in the cache, never the repository):
    the module holding the packages comes from the committed wrapper; the local-path replaces
    of the upstream go.mod become published releases (``staging_replaces``); ``go mod tidy``
    resolves the rest. A resolved module that has the packages already is kept; one that lacks
    some gets them added, and keeps what it had should that fail (a package whose
    dependencies the proxy does not serve cannot be built, the others still can).

    Raises:
        VersionError: The Go module proxy does not serve that version, or the packages
            cannot be resolved; the message is the one line that says why.
    """
    directory.mkdir(parents=True, exist_ok=True)
    # Two builds of the same release (kube-apiserver here, kubectl there) take turns.
    with (directory.parent / f"{directory.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _prepare_locked(module, version, directory, packages)


def _prepare_locked(module: str, version: str, directory: Path, packages: Sequence[str]) -> None:
    go_mod, go_sum = directory / "go.mod", directory / "go.sum"
    have = tools_of(go_mod.read_text(encoding="utf-8")) if go_sum.is_file() else set()
    if set(packages) <= have:
        return
    pinned_go_mod = (TOOLS / module / "go.mod").read_text(encoding="utf-8")
    holder = module_path(packages[0], pinned_go_mod)
    download = _go(["mod", "download", "-json", f"{holder}@{version}"], directory)
    try:
        info = json.loads(download.stdout)
    except ValueError:
        info = {"Error": _first_error(download.stderr)}
    if download.returncode != 0 or "Error" in info:
        reason = info.get("Error") or _first_error(download.stderr)
        raise VersionError(f"{holder}@{version} cannot be fetched: {reason}")
    upstream = Path(info["GoMod"]).read_text(encoding="utf-8")
    kept = {path: path.read_bytes() for path in (go_mod, go_sum) if path.is_file()}
    text = wrapper_go_mod(
        module, sorted(have | set(packages)), holder, version, staging_replaces(upstream, version)
    )
    go_sum.unlink(missing_ok=True)
    go_mod.write_text(text, encoding="utf-8")
    tidy = _go(["mod", "tidy"], directory)
    if tidy.returncode != 0:
        go_sum.unlink(missing_ok=True)
        for path, data in kept.items():
            path.write_bytes(data)
        raise VersionError(
            f"{' '.join(p.rsplit('/', 1)[-1] for p in packages)} {version} cannot be built: "
            f"{_first_error(tidy.stderr)}"
        )


def wrapper_dir(cache: Path, module: str, version: str) -> Path:
    """Where the generated wrapper module for ``module`` at ``version`` lives in the cache."""
    return cache / WRAPPERS / f"{module}-{version}"


def _main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="devcluster/binaries.py")
    commands = parser.add_subparsers(dest="command")
    rows = commands.add_parser("rows", help="name|module|package|version|kind|module directory")
    rows.add_argument("--cache", type=Path)
    rows.add_argument("--operator-version")
    rows.add_argument("--kubernetes-version")
    prepare = commands.add_parser("prepare", help="generate and resolve a wrapper module")
    prepare.add_argument("module")
    prepare.add_argument("version")
    prepare.add_argument("directory", type=Path)
    prepare.add_argument("packages", nargs="+")
    args = parser.parse_args(argv)
    try:
        if args.command == "prepare":
            prepare_wrapper(args.module, args.version, args.directory, args.packages)
            return 0
        versions = {}
        if args.command == "rows":
            versions = chosen(operator=args.operator_version, kubernetes=args.kubernetes_version)
    except VersionError as e:
        sys.stderr.write(f"build-binaries: {e}\n")
        return 2
    for target in targets().values():
        wanted = versions.get(target.name, target.version)
        if wanted == target.version:
            where, kind = TOOLS / target.module, "pinned"
        else:
            where = wrapper_dir(args.cache or Path(), target.module, wanted)
            kind = "generated"
        sys.stdout.write(
            f"{target.name}|{target.module}|{target.package}|{wanted}|{kind}|{where}\n"
        )
    return 0


if __name__ == "__main__":
    # scripts/build-binaries reads its rows from here: name|module|package|version|kind|dir.
    sys.exit(_main(sys.argv[1:]))
