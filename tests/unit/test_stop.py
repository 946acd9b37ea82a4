"""The run's one stop: a signal, the Lease's fence, ``--timeout``, and a resync pass's own bound."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from sweeper.core.clock import SYSTEM_CLOCK
from sweeper.core.errors import Interrupted, RunTimeout
from sweeper.stop import Stop


@dataclass
class Ticks:
    at: float = 100.0

    def now(self) -> datetime:
        return SYSTEM_CLOCK.now()

    def monotonic(self) -> float:
        return self.at


@dataclass
class Lease:
    leads: bool = True
    window: float = 7.0

    def leading(self) -> bool:
        return self.leads

    def write_window(self) -> float:
        return self.window if self.leads else 0.0


def test_a_run_stops_at_its_deadline_on_its_clock() -> None:
    clock = Ticks()
    stop = Stop(clock, deadline=145.0, timeout=45.0)
    assert (stop.reason(), stop.remaining(), stop.write_window()) == (None, 45.0, math.inf)

    clock.at = 145.0

    cause = stop.reason()
    assert isinstance(cause, RunTimeout)
    assert str(cause) == "--timeout (45s) reached"


def test_a_pass_has_its_own_timeout_and_shares_its_runs_signal_and_lease() -> None:
    clock = Ticks()
    run = Stop(clock)  # the watch: no deadline
    lease = Lease()
    run.fence(lease)
    resync = run.within(45.0, "in resync pass")
    assert (resync.reason(), resync.remaining(), resync.write_window()) == (None, 45.0, 7.0)

    lease.leads = False
    assert [str(s.reason()) for s in (run, resync)] == ["no longer the leader"] * 2
    assert resync.write_window() == 0.0

    lease.leads = True
    clock.at += 45.0
    assert run.reason() is None
    assert str(resync.reason()) == "--timeout (45s) reached in resync pass"

    run.request("SIGTERM")
    assert resync.is_set()
    assert resync.wait(10.0)  # returns at once: the run was signalled
    cause = resync.reason()
    assert isinstance(cause, Interrupted)
    assert str(cause) == "interrupted by SIGTERM"
