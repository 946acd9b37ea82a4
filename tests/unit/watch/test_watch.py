"""The watch mode's leadership seams and its resync's bound, on an injected monotonic clock.

What the watch mode does against an API server (streams, the Lease's requests, SIGTERM) is the
e2e tier's (tests/e2e/test_watch*.py, test_signals.py); here: who may write, for how long, and
when a resync pass stops, with every clock reading scripted.
"""

from __future__ import annotations

import io
import json
import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sweeper.config import ClockMode, Config, DryRun, OutputFormat, Timing, WatchSettings
from sweeper.core.clock import SYSTEM_CLOCK
from sweeper.stop import Stop
from sweeper.watch.context import DecisionClock
from sweeper.watch.elector import Lease, Record
from sweeper.watch.engine import Watcher
from tests.unit.fakes import FakeCluster, Request
from tests.unit.objects import NOW, job

TIMING = Timing(lease_duration=15, renew_deadline=10, retry_period=2)
WALL = datetime(2031, 1, 1, tzinfo=UTC)


@dataclass
class Clock:
    at: float = 100.0

    def now(self) -> datetime:
        return SYSTEM_CLOCK.now()

    def monotonic(self) -> float:
        return self.at


def watcher(
    clock: Clock,
    *,
    dry_run: DryRun | None = None,
    leader_elect: bool = True,
    timeout: float = 45.0,
    cluster: FakeCluster | None = None,
) -> Watcher:
    settings = WatchSettings(leader_elect=leader_elect, identity="me", timing=TIMING)
    config = Config(
        dry_run=dry_run, timeout=timeout, watch=settings, output=OutputFormat.JSON, page_size=1
    )
    stop = Stop(clock)
    # A Cluster, not a WatchCluster: nothing here opens a stream or sends a Lease request.
    fake: Any = cluster or FakeCluster(date=NOW)
    return Watcher(config, settings, fake, stop, io.StringIO(), clock=clock)


@pytest.mark.parametrize("dry_run", [DryRun.CLIENT, DryRun.SERVER], ids=str)
def test_a_dry_run_elects_no_leader_and_every_replica_acts_in_its_own_report(
    dry_run: DryRun,
) -> None:
    # A dry run writes nothing, the Lease included (a server dry run's Lease would be real).
    dry = watcher(Clock(), dry_run=dry_run)

    assert not dry.leader.elects
    assert dry.leader.leading()
    assert dry.ctx.stop.write_window() == math.inf


def test_with_election_no_write_is_sent_until_leading_nor_in_flight_past_the_lease() -> None:
    clock = Clock(100.0)
    real = watcher(clock)
    leader, stop = real.leader, real.ctx.stop
    assert leader.elects
    assert (leader.leading(), stop.write_window()) == (False, 0.0)

    leader.elector.succeeded(Lease(Record("me", 15, WALL, WALL, 0), "1"), sent=100.0, now=100.2)
    clock.at = 104.0
    assert (leader.leading(), stop.write_window()) == (True, 11.0)
    clock.at = 110.0  # the renew deadline: the transport sends no attempt any more
    assert (leader.leading(), stop.write_window()) == (False, 0.0)
    assert str(stop.reason()) == "no longer the leader"


def test_without_election_writes_are_not_fenced() -> None:
    alone = watcher(Clock(), leader_elect=False)
    leader = alone.leader
    assert (leader.elects, leader.leading(), alone.ctx.stop.write_window()) == (
        False,
        True,
        math.inf,
    )


def test_a_resync_pass_that_outlasts_the_timeout_stops_and_is_reported_so() -> None:
    # --timeout is documented as bounding a pass in watch mode: each resync pass, from its start.
    clock = Clock(100.0)
    cluster = FakeCluster(date=NOW)
    for name in ("a", "b"):
        cluster.add_job(job(name=name))

    def slow_list(request: Request) -> None:
        if request.method == "list":
            clock.at += 30.0  # each page takes 30 s: the second ends past 45 s

    cluster.before = slow_list
    resyncing = watcher(clock, leader_elect=False, timeout=45.0, cluster=cluster)

    resyncing._resync.pass_once(1)

    assert isinstance(resyncing._resync.out, io.StringIO)
    summary = json.loads(resyncing._resync.out.getvalue())["summary"]
    assert "--timeout (45s) reached" in summary["stopped_by"]
    assert (
        resyncing.ctx.metrics.registry.get_sample_value(
            "deadline_sweeper_resyncs_total", {"result": "stopped"}
        )
        == 1
    )
    assert cluster.writes == []


def test_the_server_clock_says_once_when_it_falls_back_to_the_local_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # S8: no Date header seen (a proxy strips them): --clock server decides by the local clock.
    decision = DecisionClock(ClockMode.SERVER, Clock())
    with caplog.at_level(logging.WARNING, logger="sweeper.watch.context"):
        decision.now()
        decision.now()
        decision.saw_date(NOW, 100.0, 100.1)
        assert decision.now() < NOW + timedelta(seconds=1)  # the server's, once seen

    assert [r.getMessage() for r in caplog.records] == [
        "no Date header from the API server yet; using the local clock"
    ]
