"""``scripts/devcluster``: a local control plane for humans, kept running in the background.

Commands:
    up [--node] [--operator] [--mpi-operator] [--trainer] [--operator-version V]
       [--kubernetes-version V]
                      start it in the background (or report the running one); print the
                      kubeconfig path and an ``export KUBECONFIG=...`` line on stdout; with
                      ``--node`` a real node as well (``devcluster.node``: controllers,
                      scheduler, kubelet, containerd, kube-proxy) and ``export SWEEPER_IMAGE=``
                      / ``WORKLOAD_IMAGE=`` lines naming the images loaded on it
    down              stop it and remove its temporary directories
    status            say whether it runs (exit 0) or not (exit 1)
    pods-running NAMESPACE/NAME  that job's pods Running, without a node (``devcluster.running``)
    run [same options as up]
                      run it in the foreground until SIGINT/SIGTERM (``up`` starts this)

``--mpi-operator`` serves MPIJob v2beta1 instead of v1 and runs kube-controller-manager (Job
controller, garbage collector) and mpi-operator; ``--trainer`` runs kube-controller-manager,
JobSet and Trainer v2 with their webhooks on loopback (``devcluster.families``). With
``--operator`` as well, the Training Operator runs without its MPIJob controller.

``--operator-version`` (a Training Operator v1 release from v1.7.0; its CRDs are installed,
and with ``--operator`` it runs) and ``--kubernetes-version`` (a release of a minor from 1.32
to 1.37) choose other versions than the pinned v1.9.4 and v1.36.3; ``up`` builds what is
missing first (``scripts/build-binaries``, progress on stderr). A version out of range, or
one that cannot be built, fails in one line (exit 2).

``up`` starts ``run`` as a detached supervisor process that owns the ``ControlPlane`` (and
the extras, such as the Training Operator) and writes a state file once everything is ready;
``down`` asks that supervisor to stop, so the usual clean-up code runs, and falls back to
killing the recorded process groups if it does not answer. The state is the checkout's own.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from devcluster import binaries, processes, running
from devcluster import node as node_module
from devcluster.controlplane import ControlPlane
from devcluster.families import Controllers, Wanted

log = logging.getLogger("devcluster")

CHECKOUT = Path(__file__).resolve().parents[1]
_UP_TIMEOUT = 600.0  # a node on a busy 2-core machine takes minutes
_DOWN_TIMEOUT = 30.0


class Extra(Protocol):
    """Something started on top of the control plane by ``run`` and stopped before it.

    ``processes`` (optional) lists its child processes, so that ``down`` can still kill them
    should the supervisor itself be gone.
    """

    def stop(self) -> None:
        """Stop it; called once, before the control plane stops."""


def state_dir(checkout: Path = CHECKOUT) -> Path:
    """``~/.cache/.../devcluster/<folder>-<hash of its path>``: no clone stops another's."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(str(checkout.resolve()).encode()).hexdigest()[:8]
    return cache / "kubeflow-deadline-sweeper" / "devcluster" / f"{checkout.name}-{key}"


def _state_file() -> Path:
    return state_dir() / "state.json"


def _stable_kubeconfig() -> Path:
    # A fixed path, so an `export KUBECONFIG=...` keeps working across down/up.
    return state_dir() / "kubeconfig"


def _supervisor_log() -> Path:
    return state_dir() / "supervisor.log"


def _read_state() -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = json.loads(_state_file().read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return state


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline")
            .read_bytes()
            .replace(b"\0", b" ")
            .decode("utf-8", "replace")
        )
    except OSError:
        return ""


def _alive(pid: int, expect: str) -> bool:
    """Whether ``pid`` runs and its command line contains ``expect`` (pids get reused)."""
    return expect in _cmdline(pid)


# --- extras: the hook for --operator, --mpi-operator, --trainer ------------------------------


def start_extras(cp: ControlPlane, wanted: Wanted, *, node: bool = False) -> list[Extra]:
    """Start what runs on top of the control plane: the controllers ``wanted`` names.

    Returns:
        The started extras, stopped in reverse order before the control plane.
    """
    return [Controllers.start(cp, wanted, node=node)] if any(wanted.parts()) else []


# --- run: the supervisor ------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    """The versions this process runs (selected or pinned), as the state file records them."""
    names = ("kube-apiserver", binaries.OPERATOR, "mpi-operator", "trainer", "jobset")
    return {name: binaries.version(name) for name in names}


def cmd_run(wanted: Wanted, node: bool = False) -> int:
    """Run the control plane in the foreground; write the state file once ready.

    The versions are those ``main`` selected (``binaries.select``).
    """
    state_dir().mkdir(parents=True, exist_ok=True)
    # Until it is up, a signal takes the harness's own path (stop everything, die of it).
    the_node: node_module.Node | None = None
    if node:
        try:
            the_node = node_module.Node.start()
        except node_module.NodeUnavailable as e:
            log.error("%s", e)  # noqa: TRY400 - the reason is the message, not a traceback
            return 2
        cp = the_node.control_plane
    else:
        cp = ControlPlane.start()
    # From now on a signal asks for the orderly stop below: extras first, then the control
    # plane (replacing the handlers processes.on_exit chained, which would stop it first).
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    extras: list[Extra] = []
    try:
        extras = start_extras(cp, wanted, node=node)
        shutil.copyfile(cp.kubeconfig, _stable_kubeconfig())
        _stable_kubeconfig().chmod(0o600)
        children = list(cp.processes) + (the_node.processes if the_node else [])
        for extra in extras:
            children += getattr(extra, "processes", [])
        state = {
            "pid": os.getpid(),
            "server": cp.server,
            "kubeconfig": str(_stable_kubeconfig()),
            "workdir": str(cp.workdir),
            "audit_log": str(cp.audit_log),
            "timings": cp.timings,
            **wanted.state(),
            "versions": _versions(),
            "node": node_module.describe(the_node) if the_node else None,
            "processes": [
                {"name": p.name, "pid": p.pid, "argv0": p.argv[0], "log": str(p.log_path)}
                for p in children
            ],
        }
        tmp = _state_file().with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2), encoding="utf-8")
        tmp.replace(_state_file())
        log.info(
            "ready at %s in %s; kubeconfig %s",
            cp.server,
            cp.describe_timings(),
            _stable_kubeconfig(),
        )
        while not stop.wait(1.0):
            dead = [p for p in children if p.poll() is not None]
            if dead:
                log.error(
                    "%s exited (code %s); stopping:\n%s",
                    dead[0].name,
                    dead[0].poll(),
                    dead[0].log_tail(),
                )
                return 1
        log.info("stopping")
        return 0
    finally:
        for extra in reversed(extras):
            try:
                extra.stop()
            except Exception:
                log.exception("stopping %r failed", extra)
        if the_node is not None:
            the_node.stop()
        cp.stop()
        written = _read_state()
        if written is not None and written.get("pid") == os.getpid():
            _state_file().unlink(missing_ok=True)
            _stable_kubeconfig().unlink(missing_ok=True)


# --- up / down / status -------------------------------------------------------------------------


def _print_ready(state: dict[str, Any], note: str) -> None:
    timings = state.get("timings", {})
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items() if k != "total")
    versions = state.get("versions") or _versions()
    print(
        f"devcluster: {note}: kube-apiserver {versions.get('kube-apiserver', '')}"
        + f" at {state['server']}"
        + (f" (started in {timings['total']:.1f}s: {phases})" if "total" in timings else "")
        + Wanted.from_state(state).describe(versions)
        + (f", node {node_module.NODE_NAME} Ready" if state.get("node") else ""),
        file=sys.stderr,
    )
    print(state["kubeconfig"])
    print(f"export KUBECONFIG={state['kubeconfig']}")
    if state.get("node"):
        images = state["node"]["images"]
        print(f"export SWEEPER_IMAGE={images['sweeper']}")
        print(f"export WORKLOAD_IMAGE={images['workload']}")


def _ensure_binaries(wanted: Wanted, node: bool = False) -> int:
    """Build what the selected versions need and is missing; 0, or the build's exit code.

    The build's progress and its one-line reason for a failure go to stderr: stdout carries
    only the kubeconfig lines.
    """
    names = ["etcd", "kube-apiserver", *(node_module.NODE_BINARIES if node else ())]
    missing = []
    for name in names:
        try:
            binaries.find(name)
        except binaries.BinaryMissing:
            missing.append(name)
    # The controllers' binaries, and the manifests copied with each (the operator's CRDs always).
    missing += [name for name in wanted.missing() if name not in missing]
    if not missing:
        return 0
    # The --operator-version / --kubernetes-version options that build the selected versions.
    pairs = {tuple(binaries.build_flags(name)) for name in missing} - {()}
    flags = [word for pair in sorted(pairs) for word in pair]
    command = " ".join(["scripts/build-binaries", *flags, *missing])
    if shutil.which("go") is None:
        print(
            f"devcluster: {', '.join(missing)} not built and Go is not installed; "
            f"install Go 1.26, then run {command}",
            file=sys.stderr,
        )
        return 2
    print(
        f"devcluster: building {' '.join(f'{n} {binaries.version(n)}' for n in missing)}"
        " first (minutes on a cold cache)",
        file=sys.stderr,
    )
    built = subprocess.run(
        [str(binaries.BUILD_SCRIPT), *flags, *missing],
        stdout=sys.stderr,
        check=False,
    )
    return built.returncode


def _can_start(wanted: Wanted, node: bool) -> bool:
    """Build what is missing and check the node's prerequisites; False once it said why not."""
    if _ensure_binaries(wanted, node) != 0:
        return False
    if node:
        reasons = node_module.missing_prerequisites()
        if reasons:
            print("devcluster: cannot run a node here: " + "; ".join(reasons), file=sys.stderr)
            return False
    return True


def _mismatch(state: dict[str, Any], wanted: Wanted, node: bool, requested: dict[str, str]) -> str:
    """What the running cluster lacks of what was asked for (parts, versions), or ''."""
    lacks = [flag for flag in wanted.flags() if flag not in Wanted.from_state(state).flags()]
    lacks += ["--node"] if node and not state.get("node") else []
    if lacks:
        return "already running without " + " ".join(lacks)
    running = state.get("versions") or {}
    asked = {
        name: version
        for name, version in _versions().items()
        if any(name in binaries.chosen(**{k: v}) for k, v in requested.items())
    }
    differ = [
        f"{name} {running.get(name, 'unknown')} runs, {version} asked for"
        for name, version in asked.items()
        if running.get(name) != version
    ]
    return "already running: " + ", ".join(differ) if differ else ""


def cmd_up(wanted: Wanted, node: bool = False, requested: dict[str, str] | None = None) -> int:
    """Start the supervisor in the background unless one runs; print how to use it.

    Args:
        wanted: The controllers to run on it.
        node: Also run a real node.
        requested: The versions asked for (``operator``, ``kubernetes``), already selected by
            ``main``; passed on to the supervisor.
    """
    requested = requested or {}
    state = _read_state()
    if state is not None and _alive(state["pid"], "devcluster"):
        mismatch = _mismatch(state, wanted, node, requested)
        if mismatch:
            print(f"devcluster: {mismatch}; run `down` first", file=sys.stderr)
            return 2
        _print_ready(state, "already running")
        return 0
    if state is not None:
        _clean_leftovers(state)
    if not _can_start(wanted, node):
        return 2
    state_dir().mkdir(parents=True, exist_ok=True)
    supervisor_log = _supervisor_log()
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            filter(None, [str(binaries.REPO_ROOT), os.environ.get("PYTHONPATH")])
        ),
    )
    with supervisor_log.open("wb") as out:
        supervisor = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "devcluster",
                "run",
                *wanted.flags(),
                *(["--node"] if node else []),
                *(f"--{k}-version={v}" for k, v in requested.items()),
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # survives this command and the terminal it ran in
        )
    deadline = time.monotonic() + _UP_TIMEOUT
    while time.monotonic() < deadline:
        state = _read_state()
        if state is not None and state.get("pid") == supervisor.pid:
            _print_ready(state, "up")
            return 0
        if supervisor.poll() is not None:
            print(
                f"devcluster: failed to start; {supervisor_log}:\n"
                + processes.tail(supervisor_log, 60),
                file=sys.stderr,
            )
            return 1
        time.sleep(0.2)
    supervisor.terminate()
    print(f"devcluster: not ready after {_UP_TIMEOUT:.0f}s; see {supervisor_log}", file=sys.stderr)
    return 1


def _clean_leftovers(state: dict[str, Any]) -> None:
    """Kill recorded children still alive and remove the temp dir of a supervisor that is gone."""
    for child in state.get("processes", []):
        if _alive(child["pid"], child["argv0"]):
            log.warning("killing leftover %s (pid %d)", child["name"], child["pid"])
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child["pid"], signal.SIGKILL)
    if state.get("node"):
        node_module.clean_leftovers(Path(state["node"]["workdir"]), state["node"]["netns"])
    if state.get("workdir"):
        shutil.rmtree(state["workdir"], ignore_errors=True)
    _state_file().unlink(missing_ok=True)
    _stable_kubeconfig().unlink(missing_ok=True)


def cmd_down() -> int:
    """Stop the supervisor (and so everything it runs) and remove what it left."""
    state = _read_state()
    if state is None:
        print("devcluster: not running", file=sys.stderr)
        return 0
    pid = state["pid"]
    if _alive(pid, "devcluster"):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + _DOWN_TIMEOUT
        while _alive(pid, "devcluster") and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid, "devcluster"):
            log.warning("supervisor (pid %d) did not stop in %.0fs; killing it", pid, _DOWN_TIMEOUT)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    _clean_leftovers(state)
    print("devcluster: stopped", file=sys.stderr)
    return 0


def cmd_status() -> int:
    """Report whether a control plane runs."""
    state = _read_state()
    if state is None or not _alive(state["pid"], "devcluster"):
        print("devcluster: not running", file=sys.stderr)
        return 1
    _print_ready(state, "running")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m devcluster`` and ``scripts/devcluster``."""
    parser = argparse.ArgumentParser(
        prog="scripts/devcluster", description=__doc__.split("\n\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help_text in [
        ("up", "start in the background; print the kubeconfig path and an export line"),
        ("run", "run in the foreground until interrupted"),
    ]:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--operator", action="store_true", help="also run the Training Operator")
        sub.add_argument(
            "--mpi-operator",
            action="store_true",
            help="also run mpi-operator (MPIJob v2beta1) and kube-controller-manager",
        )
        sub.add_argument(
            "--trainer",
            action="store_true",
            help="also run Trainer v2 and JobSet (TrainJob) and kube-controller-manager",
        )
        sub.add_argument(
            "--node",
            action="store_true",
            help="also run a real node (kubelet, containerd, kube-proxy; needs root)",
        )
        sub.add_argument(
            "--operator-version",
            metavar="V",
            help="Training Operator v1 release from v1.7.0 (default: the pinned v1.9.4)",
        )
        sub.add_argument(
            "--kubernetes-version",
            metavar="V",
            help="Kubernetes release of a minor from 1.32 to 1.37 (default: the pinned 1.36.3)",
        )
    commands.add_parser("down", help="stop it and remove its temporary files")
    commands.add_parser("status", help="exit 0 if it runs")
    running.add_command(commands)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    if args.command in {"up", "run"}:
        requested = {
            k: v
            for k, v in {
                "operator": args.operator_version,
                "kubernetes": args.kubernetes_version,
            }.items()
            if v
        }
        try:
            binaries.select(**requested)
        except binaries.VersionError as e:
            print(f"devcluster: {e}", file=sys.stderr)
            return 2
        wanted = Wanted(args.operator, args.mpi_operator, args.trainer)
        if args.command == "up":
            return cmd_up(wanted, args.node, requested)
        return cmd_run(wanted, args.node)
    if args.command == "down":
        return cmd_down()
    if args.command == "pods-running":
        return running.main(_stable_kubeconfig(), args.job, args.timeout)
    return cmd_status()


if __name__ == "__main__":
    sys.exit(main())
