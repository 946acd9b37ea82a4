"""Watch-mode steady state: N jobs watched, none due. Memory, CPU and API requests.

    .venv/bin/python -m benchmarks.watch_steady [--jobs 10000] [--window 60]

Creates the ``benchmarks.fleet`` jobs (its overdue share included), starts ``sweeper --watch``
cluster-wide with ``--dry-run`` (so the overdue ones are judged once at start-up and written
to never), waits for ``/readyz`` and a settling pause, then watches it for ``--window``
seconds: its CPU seconds (``/proc``), the API requests it made (audit log, by verb and
resource: only Lease renewals are expected), and its resident memory (``VmRSS`` now,
``VmHWM`` its peak since start, the initial lists included).
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import os
import signal
import time
import urllib.error
import urllib.request
from http import HTTPStatus
from pathlib import Path

from benchmarks import fleet, measure
from devcluster import ControlPlane

USER = "bench-steady"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.watch_steady",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--window", type=int, default=60)
    parser.add_argument("--settle", type=int, default=15)
    args = parser.parse_args(argv)
    with ControlPlane.start() as cp:
        began = time.monotonic()
        creator = fleet.Creator(cp)
        creator.namespaces()
        reference = dt.datetime.now(dt.UTC)
        creator.create(fleet.plan(i, reference) for i in range(args.jobs))
        setup_s = time.monotonic() - began
        kubeconfig = cp.user_kubeconfig(USER, ["system:masters"])
        port = _free_port()
        started = time.monotonic()
        sweeper = measure.start_watcher(
            kubeconfig,
            cp.workdir / "steady.log",
            "--dry-run",
            "--lease-namespace",
            "default",
            identity="steady",
            health_port=port,
        )
        try:
            while _probe(port, "/readyz") != HTTPStatus.OK:
                if sweeper.poll() is not None:
                    raise RuntimeError("the sweeper exited")
                time.sleep(0.2)
            ready_s = time.monotonic() - started
            time.sleep(args.settle)
            since = cp.audit_offset()
            cpu_before = _cpu_seconds(sweeper.pid)
            time.sleep(args.window)
            cpu = _cpu_seconds(sweeper.pid) - cpu_before
            status = _status(sweeper.pid)
            requests = collections.Counter(
                f"{e.get('verb')} {(e.get('objectRef') or {}).get('resource')}"
                for e in cp.audit_events(user=USER, since=since)
            )
        finally:
            sweeper.send_signal(signal.SIGTERM)
            sweeper.wait(timeout=60)
        measure.print_figures(
            {
                "jobs": args.jobs,
                "setup_s": round(setup_s, 1),
                "ready_after_s": round(ready_s, 2),
                "window_s": args.window,
                "cpu_s_in_window": round(cpu, 3),
                "cpu_pct_in_window": round(100 * cpu / args.window, 2),
                "rss_mb": round(status["VmRSS"] / 1024, 1),
                "peak_rss_mb": round(status["VmHWM"] / 1024, 1),
                "requests_in_window": " ".join(f"{k}={v}" for k, v in sorted(requests.items())),
                "load_avg": measure.load_average(),
            }
        )
    return 0


def _free_port() -> int:
    import socket  # noqa: PLC0415 - only here

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _probe(port: int, path: str) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except OSError:
        return None


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def _status(pid: int) -> dict[str, int]:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])  # kB
    return values


if __name__ == "__main__":
    raise SystemExit(main())
