"""A Watcher running on its own thread over the unit fake, with time in the test's hands.

The watcher's decisions read two clocks, and both are the test's: the monotonic reading of the
one clock it is handed (timers on the server clock, the Lease's expiry and renew deadline) and
the fake's ``Date`` header, which :meth:`Running.advance` moves with it, so the server clock
estimated from the headers moves as the API server's would. Nothing waits for the clock: a test
moves it and wakes the main loop with a change the streams deliver. What the watcher did is read
from the fake's requests (each stamped with the injected clock's reading) and from its probes and
metrics, served on a loopback port like a pod's.
"""

from __future__ import annotations

import io
import math
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from sweeper.config import Config, Timing, WatchSettings
from sweeper.core.clock import SYSTEM_CLOCK
from sweeper.core.errors import NotFound, RequestRef
from sweeper.core.families import KIND_NAMES, KINDS
from sweeper.core.platform import load_platform
from sweeper.oneshot import namespaces
from sweeper.stop import Stop
from sweeper.watch.engine import Watcher
from tests.unit.fakes import FakeCluster, FakeWatchCluster, Request
from tests.unit.objects import NOW, job

PYTORCH = next(kind for kind in KINDS if kind.name == "PyTorchJob")
# The Lease thread's waits are real (a retry period): short, so that a round follows each
# move of the clock within a few milliseconds. Expiry and deadlines are on the injected clock.
QUICK_LEASE = Timing(lease_duration=15, renew_deadline=10, retry_period=0.02)
WAIT_S = 10.0  # at most, for another thread (a failing test: under load, hand-offs are slow)


@dataclass
class Clock:
    """The watcher's clock: its monotonic reading moves only when the test says.

    Its wall clock is the machine's, unless ``wall`` fixes it.
    """

    at: float = 1000.0
    wall: datetime | None = None

    def now(self) -> datetime:
        return self.wall or SYSTEM_CLOCK.now()

    def monotonic(self) -> float:
        return self.at


@dataclass
class Stamped:
    request: Request
    at: float  # the injected clock when it was sent


@dataclass
class Running:
    """One watcher on a thread; ``stop()`` is SIGTERM (the test's teardown calls it)."""

    fake: FakeCluster
    watcher: Watcher
    flag: Stop  # the run's one stop (``stop()`` is SIGTERM)
    clock: Clock
    out: io.StringIO
    port: int
    log: list[Stamped] = field(default_factory=list)
    # The probes' address: the loopback of the family the watcher listens on.
    host: str = "127.0.0.1"
    code: int | None = None
    error: BaseException | None = None
    thread: threading.Thread | None = None
    # Called on every request after it is stamped (to block a list, or change the cluster).
    hook: Callable[[Request], None] | None = None
    markers: int = 0

    # --- time ---------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move the local monotonic clock and the API server's clock together."""
        self.clock.at += seconds
        if self.fake.date is not None:
            self.fake.date += timedelta(seconds=seconds)

    def wake(self) -> None:
        """Turn the main loop now: a change of a job no timer cares for (no deadline)."""
        self.fake.emit("MODIFIED", job(name="waker", deadline=None))

    def settle(self, tracked: int | None = None) -> None:
        """Wait until the main loop has applied, and fired, everything delivered so far.

        The loop applies messages in order and submits what is due in the turn that applied
        them: an overdue job added now is read in the turn after everything before it. It is
        gone by then (a deletion whose event is still on its way), so nothing acts on it.
        Only a replica that leads fires anything: a follower settles on its tracked gauge,
        once it reads ``tracked`` (what the test expects after its own changes).
        """
        self.markers += 1
        name = f"marker-{self.markers}"
        if not self.watcher.leader.leading():
            if tracked is not None:
                wait_for(lambda: self.metric("deadline_sweeper_tracked_jobs") == tracked, "jobs")
            before = self.metric("deadline_sweeper_tracked_jobs")
            self.fake.emit("MODIFIED", job(name=name, started_ago=0, deadline=10**6))
            wait_for(lambda: self.metric("deadline_sweeper_tracked_jobs") > before, "the loop")
            self.fake.emit("DELETED", job(name=name))
            wait_for(lambda: self.metric("deadline_sweeper_tracked_jobs") == before, "the loop")
            return
        ref = RequestRef("get", "pytorchjobs.kubeflow.org", "team-a", name)
        self.fake.fail("get", name, NotFound(ref, 404))
        self.fake.emit("ADDED", job(name=name))
        wait_for(lambda: self.requests("get", name) != [], "the loop")
        self.fake.jobs.pop(("pytorchjobs", "team-a", name))

    # --- what happened ------------------------------------------------------------------

    def requests(self, method: str, name: str | None = None) -> list[Stamped]:
        return [
            s
            for s in self.log
            if s.request.method == method and (name is None or s.request.name == name)
        ]

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://{self._where}{path}", timeout=2) as a:
                return a.status, a.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        """One sample of /metrics (NaN when absent)."""
        status, body = self.get("/metrics")
        assert status == 200, body
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return float(sample.value)
        return math.nan

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> Running:
        def run() -> None:
            try:
                self.code = self.watcher.run()
            except BaseException as error:  # noqa: BLE001 - the test reads it
                self.error = error

        self.thread = threading.Thread(target=run, name="watcher under test", daemon=True)
        self.thread.start()
        wait_for(self._serving, "the probes")
        return self

    def listed(self) -> Running:
        """Wait until every stream has listed and opened its watch."""
        wait_for(lambda: self.get("/readyz")[0] == 200, "the first lists")
        wait_for(lambda: self.fake.open_streams() >= len(self.watcher.served), "the watches")
        return self

    def stop(self) -> int:
        """SIGTERM: the run drains, releases the Lease, and returns its exit code."""
        assert self.thread is not None
        stop_now(self)
        self.thread.join(timeout=WAIT_S)
        assert not self.thread.is_alive(), "the watcher did not stop"
        if self.error is not None:
            raise self.error
        assert self.code is not None
        return self.code

    def _serving(self) -> bool:
        if self.error is not None:
            raise self.error
        try:
            with socket.create_connection((self.host, self.port), timeout=0.2):
                return True
        except OSError:
            return False

    @property
    def _where(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def stop_now(run: Running) -> None:
    """SIGTERM, and end what would otherwise wait for it in real time.

    Idle streams block until the server ends them; the main loop sleeps up to a second
    between turns unless a message comes: ``None`` in its inbox turns it without being one.
    """
    run.flag.request("SIGTERM")
    run.fake.close_streams()
    inbox: Any = run.watcher.ctx.inbox
    inbox.put(None)


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    """Poll a condition another thread makes true (real time: this is thread hand-off)."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


def tracked(run: Running, jobs: int) -> None:
    """Wait until the tracked-jobs gauge reads ``jobs`` (the loop sets it on every turn)."""
    wait_for(lambda: run.metric("deadline_sweeper_tracked_jobs") == jobs, f"{jobs} tracked job(s)")


def free_port(host: str = "127.0.0.1") -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def running(
    fake: FakeCluster,
    *,
    monotonic: Clock | None = None,
    leader_elect: bool = False,
    identity: str = "me",
    resync: float = 3600.0,
    timing: Timing = QUICK_LEASE,
    hook: Callable[[Request], None] | None = None,
    health_address: str = "127.0.0.1",
    **config: Any,
) -> Running:
    """A watcher over ``fake`` (PyTorchJob only, unless ``kinds`` says), not started yet."""
    clock = monotonic or Clock()
    port = free_port(health_address)
    settings = WatchSettings(
        leader_elect=leader_elect,
        identity=identity,
        timing=timing,
        resync=resync,
        health_address=health_address,
        health_port=port,
        lease_namespace="sweeper",
    )
    config.setdefault("kinds", (PYTORCH,))
    made = Config(watch=settings, **config)
    stop = Stop(clock)
    out = io.StringIO()
    watcher = Watcher(made, settings, fake, stop, out, clock=clock)
    result = Running(fake, watcher, stop, clock, out, port, hook=hook, host=health_address)

    def stamp(request: Request) -> None:
        result.log.append(Stamped(request, clock.at))
        if result.hook is not None:
            result.hook(request)

    assert fake.before is None, "the harness stamps every request"
    fake.before = stamp
    return result


def fake_cluster(*jobs: dict[str, Any]) -> FakeCluster:
    fake = FakeCluster(date=NOW)
    for raw in jobs:
        fake.add_job(raw)
    return fake


GPU_RULES = """
rules:
  - {name: gpu, namespaceSelector: {matchLabels: {tier: gpu}}, defaultDeadline: 1h}
"""


def policy_watcher(fake: FakeWatchCluster, rules: str = GPU_RULES) -> Watcher:
    """A Watcher under ``rules`` (not started), its decision clock fixed at ``NOW``.

    Its served kinds and platform view are the fake's, as after start-up, so a test can hand
    its streams and fires events directly.
    """
    settings = WatchSettings(leader_elect=False, health_port=0)
    config = Config(watch=settings, platform=load_platform(rules, "rules.yaml", KIND_NAMES))
    clock = Clock(wall=NOW)
    made = Watcher(config, settings, fake, Stop(clock), io.StringIO(), clock=clock)
    made.served.update({s.kind.name: s for s in fake.served})
    made.view = namespaces.read_view(fake, config)
    return made
