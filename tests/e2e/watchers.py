"""``sweeper --watch`` as a long-running subprocess for the e2e tests: start, probe, stop."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.e2e.clusters import sweeper_executable

# Generous bounds for waiting on a shared, loaded machine; the tests assert what happened,
# never how fast (the benchmarks measure that).
PATIENCE_S = 60.0
# Leader election in seconds, not the default's tens: a hand-over within a test's patience.
QUICK_LEASE = ("--retry-period", "0.5", "--renew-deadline", "3", "--lease-duration", "4")


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as probe:
        probe.bind((address, 0))
        return int(probe.getsockname()[1])


class Watcher:
    """One ``sweeper --watch`` process, its stderr in a file, its probes on a loopback port."""

    def __init__(
        self,
        kubeconfig: Path,
        workdir: Path,
        *args: str,
        name: str = "w",
        clock_ahead_s: float = 0.0,
        port: int | None = None,
        address: str = "127.0.0.1",
    ) -> None:
        self.port = port or free_port(address)
        # The probes' URL authority: an IPv6 address in brackets.
        self.where = f"[{address}]:{self.port}" if ":" in address else f"{address}:{self.port}"
        self.log_path = workdir / f"watch-{name}-{self.port}.log"
        env = {
            k: v
            for k, v in os.environ.items()
            if k != "KUBECONFIG" and not k.startswith("SWEEPER_")
        }
        program = [str(sweeper_executable())]
        if clock_ahead_s:
            # The sweeper's local clock ahead of the machine's (tests/e2e/skewed_sweeper.py).
            program = [sys.executable, "-P", str(Path(__file__).with_name("skewed_sweeper.py"))]
            env["SKEWED_SWEEPER_AHEAD_S"] = str(clock_ahead_s)
        argv = [
            *program,
            "--kubeconfig",
            str(kubeconfig),
            "--watch",
            "--health-address",
            address,
            "--health-port",
            str(self.port),
            "--identity",
            name,
            *args,
        ]
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=self._log, env=env, text=True
        )

    def probe(self, path: str) -> int | None:
        try:
            with urllib.request.urlopen(f"http://{self.where}{path}", timeout=2) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as error:
            return int(error.code)
        except OSError:
            return None

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://{self.where}/metrics", timeout=2) as answer:
            return str(answer.read().decode())

    def wait_ready(self) -> None:
        wait_for(lambda: self.probe("/readyz") == 200, "readyz", self)

    def logs(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log_path.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                lines.append({"message": line})
        return lines

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=PATIENCE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._log.close()
        return code

    def explain(self) -> str:
        return f"exit {self.process.poll()}; log:\n{self.log_path.read_text()[-6000:]}"


def wait_for(condition: Callable[[], bool], what: str, *watchers: Watcher) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        if condition():
            return
        for watcher in watchers:
            if watcher.process.poll() is not None:
                raise AssertionError(f"{what}: the watcher exited\n{watcher.explain()}")
        time.sleep(0.1)
    raise AssertionError(
        f"{what}: not within {PATIENCE_S}s\n" + "\n".join(w.explain() for w in watchers)
    )


@contextlib.contextmanager
def quick_watchers(kubeconfig: Path, workdir: Path, namespace: str) -> Iterator[Any]:
    """Start watchers of ``namespace`` (their Lease there too) with short leader-election
    timings, so a hand-over takes seconds; every one started is stopped on the way out.

    ``start(*args, name="w")`` starts one with more arguments and returns its :class:`Watcher`.
    """
    started: list[Watcher] = []

    def start(*args: str, name: str = "w") -> Watcher:
        watcher = Watcher(
            kubeconfig,
            workdir,
            "-n",
            namespace,
            "--lease-namespace",
            namespace,
            *QUICK_LEASE,
            *args,
            name=name,
        )
        started.append(watcher)
        return watcher

    try:
        yield start
    finally:
        for watcher in started:
            watcher.stop()
