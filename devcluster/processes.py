"""Child processes of the harness: start in their own process group, log to a file, always stop.

Every child runs in a new session (its own process group), so stopping it reaches anything it
forked, and a Ctrl-C in the terminal reaches only the harness, which then stops the children
in order. Three layers make sure nothing outlives the harness:

1. ``Process.stop``: SIGTERM to the group, then SIGKILL after a grace period (the harness's
   own long-lived objects are ``StopsOnExit`` context managers, so a ``with`` block stops
   them however it ends);
2. ``on_exit``: cleanups that run at interpreter exit (``atexit``) and on SIGTERM/SIGHUP,
   which Python would otherwise die of without running ``atexit``;
3. ``PR_SET_PDEATHSIG`` on Linux: the kernel sends the child SIGKILL if the harness itself is
   killed with SIGKILL and so cannot clean up.

The controllers the harness runs beside the control plane (the Training Operator, Kueue) start
through one ``Launcher``: a header in the log, the child, a wait for its readiness check, and
on failure its log tail in the error (another try when a port was taken). As root, a child can
run in a mount namespace of its own (``devcluster.mounts``), where a directory of the harness's
is bind-mounted on a path the controller hard-codes, so nothing is shared or left on the machine.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import ctypes
import ctypes.util
import datetime as dt
import itertools
import logging
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from types import FrameType, TracebackType
from typing import Self

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1

_libc_prctl: Callable[..., int] | None
try:
    _libc_prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: the other two layers still apply
    _libc_prctl = None


def _die_with_parent() -> None:
    # Runs in the child between fork and exec; the prctl function was resolved before the
    # fork, so nothing here imports or allocates much.
    if _libc_prctl is not None:
        _libc_prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago.

    Another process can take it before the caller binds it; callers retry on "address already
    in use" (see ``ADDRESS_IN_USE``).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def answers_ok(port: int, path: str = "/readyz") -> bool:
    """Whether a GET of ``path`` on ``127.0.0.1:port`` answers 200 right now (a probe)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return bool(r.status == HTTPStatus.OK)
    except (urllib.error.URLError, OSError):
        return False


# What etcd and kube-apiserver log when a port was taken between free_port() and their bind.
ADDRESS_IN_USE = "address already in use"


class StopsOnExit(abc.ABC):
    """A context manager whose ``with`` block ends with ``stop()``, whether or not it raised.

    For the harness's objects that own processes, threads or sockets (control plane, operator,
    kubelet, fault proxy): ``stop`` must be safe to call twice, since callers may also call it
    themselves.
    """

    @abc.abstractmethod
    def stop(self) -> None:
        """Release everything the object runs; safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class Process:
    """One child process with its output in a log file.

    Attributes:
        name: Short name for messages, e.g. ``etcd``.
        argv: The command line.
        log_path: File receiving the child's stdout and stderr.
    """

    def __init__(
        self, name: str, argv: Sequence[str], log_path: Path, popen: subprocess.Popen[bytes]
    ):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._popen = popen

    @classmethod
    def start(
        cls,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        *,
        die_with_parent: bool = True,
    ) -> Process:
        """Start a child in its own session with stdout and stderr appended to ``log_path``.

        Args:
            name: Short name for messages.
            argv: Command line; ``argv[0]`` is a path.
            log_path: Log file (appended to, so a retried start keeps the earlier attempt).
            env: Environment; defaults to this process's.
            die_with_parent: Ask the kernel to kill the child if the thread that started it
                dies (Linux). Start children from a thread that lives as long as they should.
        """
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as out:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                preexec_fn=_die_with_parent if die_with_parent else None,  # noqa: PLW1509 - see _die_with_parent
            )
        log.debug("started %s (pid %d): %s", name, popen.pid, " ".join(argv))
        return cls(name, argv, log_path, popen)

    @property
    def pid(self) -> int:
        """The child's pid, which is also its process group id."""
        return self._popen.pid

    def poll(self) -> int | None:
        """The exit code, or None while it runs."""
        return self._popen.poll()

    def stop(self, grace: float = 10.0) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after ``grace`` seconds.

        Safe to call twice and after the child exited by itself.
        """
        if self._popen.poll() is None:
            _signal_group(self.pid, signal.SIGTERM)
            try:
                self._popen.wait(grace)
            except subprocess.TimeoutExpired:
                log.warning(
                    "%s (pid %d) ignored SIGTERM for %.0fs; killing it", self.name, self.pid, grace
                )
        # Kill what is left of the group even if the leader exited: a forked helper would
        # otherwise keep the log file and ports.
        _signal_group(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(5)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the child's log, for error messages."""
        return tail(self.log_path, lines)

    def __repr__(self) -> str:
        return f"Process({self.name!r}, pid={self.pid}, log={str(self.log_path)!r})"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a text file, or a note that it does not exist."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def starting(
    what: str,
    timings: dict[str, float],
    *,
    tails: Callable[[], str],
    stop: Callable[[], None],
    error: Callable[[str], Exception],
) -> Iterator[Callable[[str], None]]:
    """Run a start-up made of phases; on any failure stop what started and say why.

    Yields ``mark(phase)``, which records the phase's own duration (the time since the
    previous mark) in ``timings``; ``timings["total"]`` is set when the block completes. An
    exception in the block stops everything (``stop``) and raises ``error`` with the message
    and the processes' log tails, read before the stop removes them; a KeyboardInterrupt
    stops and propagates unchanged.
    """
    began = time.monotonic()

    def mark(phase: str) -> None:
        elapsed = time.monotonic() - began
        timings[phase] = round(elapsed - sum(timings.values()), 2)

    try:
        yield mark
    except BaseException as e:
        text = tails()
        stop()
        if isinstance(e, Exception):
            raise error(f"{what} did not start: {e}\n{text}") from e
        raise
    timings["total"] = round(time.monotonic() - began, 2)


def describe_timings(timings: Mapping[str, float]) -> str:
    """Start-up timings as one line, e.g. ``9.1s (etcd 0.4s, apiserver 6.2s, ...)``."""
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items() if k != "total")
    return f"{timings.get('total', 0.0):.1f}s ({phases})"


def log_tails(children: Sequence[Process], lines: int) -> str:
    """The last ``lines`` lines of each child's log, for a failure message."""
    return "\n".join(
        f"--- last {lines} lines of {p.name} log ({p.log_path}):\n{p.log_tail(lines)}"
        for p in children
    )


def wait_until(
    condition: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    interval: float = 0.05,
    max_interval: float = 0.5,
    watch: Sequence[Process] = (),
) -> None:
    """Poll ``condition`` until it holds.

    Args:
        condition: Returns True when done; exceptions count as "not yet".
        timeout: Seconds before giving up.
        what: Description for the error message.
        interval: First polling interval; it grows to ``max_interval`` so a slow start costs
            little CPU.
        max_interval: The longest polling interval.
        watch: Processes that must stay alive meanwhile; one exiting ends the wait at once.

    Raises:
        TimeoutError: ``condition`` did not hold in time.
        ChildProcessError: A watched process exited.
    """
    deadline = time.monotonic() + timeout
    # The last failure as text, not the exception: its traceback would keep the probe's frame
    # (and any socket in it) alive in a reference cycle until some later garbage collection.
    last_error = ""
    while True:
        try:
            if condition():
                return
        except Exception as e:  # noqa: BLE001 - any failure of a probe means "not ready yet"
            last_error = str(e) or type(e).__name__
        for process in watch:
            code = process.poll()
            if code is not None:
                raise ChildProcessError(
                    f"{process.name} exited with code {code} while waiting for {what}"
                )
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)
        interval = min(interval * 1.5, max_interval)


# --- controllers: start until ready -----------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """What one start of a controller runs.

    Attributes:
        argv: The command line.
        env: The whole environment.
        health_port: Where its ``/readyz`` answers on 127.0.0.1 (``Launcher.ready``).
    """

    argv: list[str]
    env: dict[str, str]
    health_port: int


class Launcher:
    """Starts one controller binary as a child, again on each ``launch``, until it is ready.

    What every controller of the harness needs around its own argv, environment and readiness
    check: each start appends a header to the log and remembers where that run's part begins
    (``log_since_start``); a child that does not become ready is stopped and reported with its
    log tail; a run whose log says a port was taken (``ADDRESS_IN_USE``) is tried again with a
    new ``Command``, since ``command`` picks its free ports afresh each time.

    Attributes:
        name: Short name for messages and the log header, e.g. ``kueue``.
        log_path: The child's stdout and stderr, appended across starts.
        process: The current child, or None before the first start and after ``stop``.
        starts: How many starts were tried, failed ones included.
    """

    def __init__(
        self,
        name: str,
        log_path: Path,
        *,
        error: Callable[[str], Exception],
        attempts: int = 3,
    ) -> None:
        self.name = name
        self.log_path = log_path
        self.process: Process | None = None
        self.starts = 0
        self._error = error
        self._attempts = attempts
        self._offset = 0
        self._health_port = 0

    @property
    def running(self) -> bool:
        """Whether the current child is alive."""
        return self.process is not None and self.process.poll() is None

    @property
    def ready(self) -> bool:
        """Whether the child is alive and its ``/readyz`` answers 200 right now."""
        return self.running and answers_ok(self._health_port)

    def launch(
        self,
        command: Callable[[], Command],
        ready: Callable[[Process], None],
        *,
        on_failure: Callable[[], None] = lambda: None,
    ) -> Process:
        """Start the child and wait until ``ready`` returns; a port taken means another try.

        Args:
            command: The argv and environment of one start, with fresh ports each call.
            ready: Returns once the child serves; raises ``TimeoutError`` or
                ``ChildProcessError`` (``wait_until``'s) when it does not.
            on_failure: Undoes what ``ready`` set up around the child (webhooks, say); runs
                before the child is stopped, on any failure.

        Raises:
            Exception: ``error`` with the child's log tail, when it did not become ready.
        """
        last: Exception | None = None
        for _ in range(self._attempts):
            launched = command()
            self._health_port = launched.health_port
            self._header()
            self.process = Process.start(self.name, launched.argv, self.log_path, launched.env)
            try:
                ready(self.process)
            except BaseException as e:
                on_failure()
                self.stop()
                if not isinstance(e, TimeoutError | ChildProcessError):
                    raise
                last = self._error(
                    f"{self.name} did not become ready: {e}\n"
                    f"--- {self.log_path} (tail) ---\n{self.log_tail()}"
                )
                last.__cause__ = e
                if ADDRESS_IN_USE in self.log_since_start():
                    continue
                raise last from e
            return self.process
        assert last is not None  # noqa: S101 - the loop ran at least once
        raise last

    def stop(self, grace: float = 15.0) -> None:
        """Stop the current child (its whole process group); safe to call twice."""
        if self.process is not None:
            self.process.stop(grace)
            self.process = None

    def log_since_start(self) -> str:
        """The log written by the current (or last) start of the child."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(self._offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the child's log, for error messages."""
        return tail(self.log_path, lines)

    def _header(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with self.log_path.open("ab") as f:
            now = dt.datetime.now(dt.UTC).isoformat()
            f.write(f"=== devcluster: {self.name} start {self.starts} at {now}\n".encode())
            self._offset = f.tell()


class Controller(StopsOnExit):
    """A harness object that runs one controller through a ``Launcher``: its state, read through.

    Subclasses set ``_launcher`` in their constructor and say the rest: what to start, what
    ready means, what ``stop`` undoes besides the process.
    """

    _launcher: Launcher

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self._launcher.running

    @property
    def ready(self) -> bool:
        """Whether the process is alive and its ``/readyz`` answers 200 right now."""
        return self._launcher.ready

    @property
    def pid(self) -> int | None:
        """The controller's pid while it runs."""
        process = self._launcher.process
        return process.pid if process is not None and self.running else None

    @property
    def processes(self) -> list[Process]:
        """The running process, for ``scripts/devcluster down`` to kill if need be."""
        return [self._launcher.process] if self._launcher.process is not None else []

    def log_since_start(self) -> str:
        """The log written by the current (or last) run of the process."""
        return self._launcher.log_since_start()

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the process's log, for error messages."""
        return self._launcher.log_tail(lines)


# --- cleanups at exit -------------------------------------------------------------------------

_cleanups: dict[int, Callable[[], None]] = {}
_cleanup_ids = itertools.count()
_lock = threading.RLock()
_handlers_installed = False
_CAUGHT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def on_exit(cleanup: Callable[[], None]) -> int:
    """Run ``cleanup`` at interpreter exit and on SIGTERM/SIGHUP, unless cancelled first.

    Returns:
        A handle for ``cancel``.
    """
    global _handlers_installed  # noqa: PLW0603 - one process-wide registry, by nature
    with _lock:
        handle = next(_cleanup_ids)
        _cleanups[handle] = cleanup
        if not _handlers_installed:
            atexit.register(run_cleanups)
            if threading.current_thread() is threading.main_thread():
                for sig in _CAUGHT_SIGNALS:
                    _chain_signal(sig)
            _handlers_installed = True
    return handle


def cancel(handle: int) -> None:
    """Forget a cleanup registered with ``on_exit`` (it ran already, or is no longer needed)."""
    with _lock:
        _cleanups.pop(handle, None)


def run_cleanups() -> None:
    """Run every registered cleanup once, newest first; errors are logged, not raised."""
    with _lock:
        pending = list(_cleanups.items())
        _cleanups.clear()
    for _, cleanup in reversed(pending):
        try:
            cleanup()
        except Exception:
            log.exception("cleanup failed")


def _chain_signal(sig: signal.Signals) -> None:
    previous = signal.getsignal(sig)

    def handler(signum: int, frame: FrameType | None) -> None:
        run_cleanups()
        if callable(previous):
            previous(signum, frame)
            return
        if previous == signal.SIG_IGN:
            return
        # Die of the signal as if we had never caught it, so the exit status tells the truth.
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)

    signal.signal(sig, handler)
