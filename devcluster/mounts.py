"""Run a controller in a mount namespace of its own, where a directory shows another one.

Two controllers the harness runs hard-code a directory: the Training Operator its webhook
certificates (``/tmp/k8s-webhook-server``, shared by the whole machine, so two operators
would read each other's), Kueue its metrics certificate (``/etc/kueue/metrics/certs``, which
only root can write and which would be left behind). As root, ``private_mounts`` wraps the
controller's argv so that it runs in a mount namespace of its own with a directory of the
harness's bind-mounted on that path: nothing is shared between runs or left on the machine.
``private_mounts_available`` says, once per process, whether that works here; without it the
callers fall back to the real paths (the operator takes turns through a file lock).
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

log = logging.getLogger(__name__)

_UNSHARE = ("unshare", "--mount", "--propagation", "private", "--")


def private_mounts(
    binds: Mapping[Path, Path], argv: Sequence[str], *, scratch: Path | None = None
) -> list[str]:
    """A command line that runs ``argv`` with each path of ``binds`` showing another directory.

    The child gets a mount namespace of its own (``unshare --mount``, private propagation), in
    which each target (the key) is bind-mounted from its source (the value), and then becomes
    ``argv`` (``exec``: the pid started is the controller's). Nothing changes outside it, and
    the mounts go with the child. A target that does not exist on the machine is made inside
    the namespace only: its nearest existing ancestor is covered by an overlay whose upper
    layer lives on a tmpfs mounted on ``scratch``, the target is created in it, then bound.
    The overlay shows the ancestor's own file system: mounts below the ancestor are not carried
    into it (none of the paths a controller here reads).

    Args:
        binds: Target path → source directory; sources must exist.
        argv: The controller's command line.
        scratch: An empty directory the child's tmpfs covers; needed for missing targets only.

    Returns:
        The whole command line (root only; see ``private_mounts_available``).

    Raises:
        ValueError: A target is missing and no ``scratch`` was given.
    """
    missing = [target for target in binds if not target.exists()]
    covered = list(dict.fromkeys(_nearest_existing(target) for target in missing))
    steps: list[str] = []
    if covered:
        if scratch is None:
            raise ValueError(f"private_mounts: {', '.join(map(str, missing))} needs a scratch")
        steps += _overlays(covered, scratch)
    for target, source in binds.items():
        if target in missing:
            steps.append(f"mkdir -p {shlex.quote(str(target))}")
        steps.append(f"mount --bind {shlex.quote(str(source))} {shlex.quote(str(target))}")
    script = " && ".join([*steps, 'exec "$@"'])
    return [*_UNSHARE, "/bin/sh", "-c", script, "devcluster-mounts", *argv]


def _overlays(ancestors: Sequence[Path], scratch: Path) -> list[str]:
    # A tmpfs on scratch holds each overlay's upper and work directories: what is created in
    # an ancestor lands there, never on the machine's file system.
    q = shlex.quote
    steps = [f"mount -t tmpfs devcluster {q(str(scratch))}"]
    for number, ancestor in enumerate(ancestors):
        upper, work = scratch / f"{number}-upper", scratch / f"{number}-work"
        options = f"lowerdir={ancestor},upperdir={upper},workdir={work}"
        steps.append(f"mkdir {q(str(upper))} {q(str(work))}")
        steps.append(f"mount -t overlay devcluster -o {q(options)} {q(str(ancestor))}")
    return steps


def _nearest_existing(path: Path) -> Path:
    return next(parent for parent in path.parents if parent.exists())


@cache
def private_mounts_available() -> bool:
    """Whether ``private_mounts`` works here: root, ``unshare`` and ``mount``, tried once.

    The trial is one child that binds a directory on an existing one and on a missing one
    (the overlay), and checks that both show the source's file; a scratch directory holds it.
    """
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("mount")):
        return False
    with tempfile.TemporaryDirectory(prefix="devcluster-mounts-") as tmp:
        root = Path(tmp)
        source, there, covered, scratch = (root / d for d in ("source", "there", "covered", "s"))
        for directory in (source, there, covered, scratch):
            directory.mkdir()
        (source / "probe").write_bytes(b"")
        missing = covered / "missing" / "deep"
        check = ["/bin/sh", "-c", 'test -f "$0/probe" && test -f "$1/probe"', str(there)]
        check.append(str(missing))
        argv = private_mounts({there: source, missing: source}, check, scratch=scratch)
        try:
            done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
    if done.returncode != 0:
        log.debug("no private mounts: %s", done.stderr.decode("utf-8", "replace").strip())
    return done.returncode == 0
