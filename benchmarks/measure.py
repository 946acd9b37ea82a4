"""Measuring child processes and printing figures: what every benchmark script shares.

A command is timed from just before it is spawned until it is reaped. Its peak resident set
size is the kernel's high-water mark for that process, ``VmHWM`` in ``/proc/<pid>/status``,
read every few milliseconds while it runs (it only grows, so the last reading is the peak up
to the last few milliseconds). Not ``ru_maxrss`` from ``os.wait4``: Linux carries the
high-water mark of the address space a process had before ``exec`` into it, and a child
forked from this process starts with this process's memory, so ``ru_maxrss`` reports the
benchmark's own footprint (hundreds of MiB once it has built a fleet) whenever that is larger
than the child's. Figures are printed one per line as ``key: value`` so that people and
``tests/benchmarks`` read them alike.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

Figure = int | float | str | None


@dataclass(frozen=True)
class Run:
    """One finished child process.

    Attributes:
        argv: The command line.
        wall_s: Seconds from spawn to reap.
        cpu_s: CPU seconds it used (user + system; from ``os.wait4``, exact per child): less
            sensitive than ``wall_s`` to what else the machine runs.
        peak_rss_mb: Its own peak resident set size, in MiB.
        returncode: Its exit code (negative: killed by that signal).
        stderr_tail: The last lines it wrote on stderr, for error messages.
    """

    argv: tuple[str, ...]
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    returncode: int
    stderr_tail: str

    def check(self) -> Run:
        """Return itself if it exited 0.

        Raises:
            RuntimeError: It did not; the message has its stderr tail.
        """
        if self.returncode != 0:
            raise RuntimeError(
                f"{' '.join(self.argv)} exited {self.returncode}:\n{self.stderr_tail}"
            )
        return self


def run(
    argv: Sequence[str],
    *,
    stdout: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 900.0,
) -> Run:
    """Run a command to completion and measure it.

    Args:
        argv: The command line.
        stdout: File that receives its stdout (truncated first); None discards it. Either way
            the child writes to a file, as it would to a pipe drained at once.
        env: Its environment; default this process's without ``KUBECONFIG`` and ``SWEEPER_*``.
        cwd: Its working directory; default this one.
        timeout: Seconds before it is killed (then the run reports the kill).

    Returns:
        The measurements.
    """
    env = dict(env) if env is not None else clean_env()
    target = stdout if stdout is not None else Path(os.devnull)
    with target.open("wb") as out, tempfile.TemporaryFile() as err:
        began = time.monotonic()
        process = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=cwd)
        status, peak_kib, usage = _reap(process, began + timeout)
        wall = time.monotonic() - began
        # Popen must not try to reap it again.
        process.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read().decode("utf-8", "replace").splitlines()[-20:]
    return Run(
        tuple(argv),
        wall,
        usage.ru_utime + usage.ru_stime,
        peak_kib / 1024,
        process.returncode,
        "\n".join(tail),
    )


def _reap(
    process: subprocess.Popen[bytes], deadline: float
) -> tuple[int, int, resource.struct_rusage]:
    """Wait for the child, reading its high-water mark meanwhile: (status, KiB, usage)."""
    status_file = Path(f"/proc/{process.pid}/status")
    peak = 0
    while True:
        peak = max(peak, _high_water_kib(status_file))
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            return status, peak, usage
        if time.monotonic() > deadline:
            process.kill()
            _, status, usage = os.wait4(process.pid, 0)
            return status, peak, usage
        # Short enough not to distort sub-second figures or miss a peak, cheap enough to
        # cost the machine nothing.
        time.sleep(0.002)


def _high_water_kib(status_file: Path) -> int:
    try:
        text = status_file.read_text(encoding="ascii", errors="replace")
    except OSError:
        return 0  # exited meanwhile (a zombie has no address space left to report)
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without ``KUBECONFIG`` and ``SWEEPER_*``, plus ``extra``.

    Nothing from the developer's shell then changes what a benchmarked command does.
    """
    env = {
        k: v for k, v in os.environ.items() if k != "KUBECONFIG" and not k.startswith("SWEEPER_")
    }
    env.update(extra)
    return env


def sweeper_executable() -> Path:
    """The installed CLI of the virtual environment running the benchmark."""
    return Path(sys.executable).parent / "sweeper"


def start_watcher(
    kubeconfig: Path,
    log_path: Path,
    *args: str,
    identity: str = "bench",
    health_port: int = 0,
    append: bool = False,
    tree: Path | None = None,
    command: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Start ``sweeper --watch`` with ``args``, its health server on loopback, logs to a file.

    Its report (stdout) is thrown away; its log lines (stderr) go to ``log_path``, which the
    scripts read for errors. The environment is :func:`clean_env`'s. With ``tree``, the
    sweeper package in that checkout runs, as ``python -m sweeper`` from it; ``command``
    replaces the sweeper altogether (``benchmarks.traced_watch`` runs it under ``tracemalloc``).
    """
    # From the tree: "-m" puts the working directory first on sys.path, so started from
    # elsewhere it would import that directory's sweeper/ instead.
    program = [sys.executable, "-m", "sweeper"] if tree else [str(sweeper_executable())]
    argv = [
        *(command or program),
        "--kubeconfig",
        str(kubeconfig),
        "--watch",
        *args,
        "--identity",
        identity,
        "--health-address",
        "127.0.0.1",
        "--health-port",
        str(health_port),
    ]
    env = clean_env(PYTHONPATH=str(tree)) if tree else clean_env()
    with log_path.open("a" if append else "w") as log:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=tree)


def watch_until(
    watcher: subprocess.Popen[bytes], log_path: Path, end: dt.datetime, poll: float = 1.0
) -> None:
    """Wait until ``end`` (UTC) while the watcher started by :func:`start_watcher` lives.

    Raises:
        RuntimeError: The watcher exited first; the message ends with its log's tail.
    """
    while dt.datetime.now(dt.UTC) < end:
        if watcher.poll() is not None:
            raise RuntimeError(f"the sweeper exited:\n{log_path.read_text()[-3000:]}")
        time.sleep(poll)


def median(values: Sequence[float]) -> float:
    """The median (the figure the scripts report: robust to a neighbour's burst of load)."""
    return float(statistics.median(values))


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile, e.g. ``fraction=0.99``; a value that was observed."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return float(ordered[rank - 1])


def lateness(prefix: str, values: Sequence[float]) -> dict[str, Figure]:
    """``{prefix}lateness_p50_s``, ``_p99_s``, ``_max_s`` and ``_min_s`` of ``values`` (seconds,
    to the millisecond); nothing without values."""
    if not values:
        return {}
    return {
        f"{prefix}lateness_p50_s": round(percentile(values, 0.50), 3),
        f"{prefix}lateness_p99_s": round(percentile(values, 0.99), 3),
        f"{prefix}lateness_max_s": round(max(values), 3),
        f"{prefix}lateness_min_s": round(min(values), 3),
    }


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, e.g. ``2.10 1.85 1.60``."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def print_figures(figures: Mapping[str, Figure]) -> None:
    """Print figures one per line as ``key: value`` (floats with 3 decimals; None as ``-``)."""
    for key, value in figures.items():
        if isinstance(value, float):
            text = f"{value:.3f}"
        elif value is None:
            text = "-"
        else:
            text = str(value)
        print(f"{key}: {text}", flush=True)


def parse_figures(text: str) -> dict[str, str]:
    """Read printed figures back (the inverse of :func:`print_figures`, values as text)."""
    figures = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key and " " not in key:
            figures[key] = value
    return figures
