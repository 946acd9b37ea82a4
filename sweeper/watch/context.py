"""What every part of the watch engine shares (``WatchContext``), and the clock it judges by."""

from __future__ import annotations

import logging
import math
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sweeper.config import ClockMode, Config, WatchSettings
from sweeper.core.clock import Clock
from sweeper.core.platform import PlatformView
from sweeper.k8s.cluster import WatchCluster
from sweeper.metrics import WatchMetrics
from sweeper.stop import Stop
from sweeper.watch.health import Health
from sweeper.watch.inbox import Inbox
from sweeper.watch.servertime import ServerClock

log = logging.getLogger(__name__)


class DecisionClock:
    """The run's clock as the timers, the fires and the main loop judge by.

    Under ``--clock server``, ``now`` is the earliest time the API server's clock can show.
    """

    def __init__(self, mode: ClockMode, clock: Clock) -> None:
        self._mode = mode
        self._clock = clock
        self._server = ServerClock()
        self._lock = threading.Lock()
        self._said_local = False

    def saw_date(self, date: datetime | None, sent: float, received: float) -> None:
        """Feed one answer's ``Date`` (and the monotonic seconds around its request)."""
        if date is None:
            return
        with self._lock:
            self._server.observe(date, sent, received)

    def now(self) -> datetime:
        """The instant a job is judged at."""
        if self._mode is ClockMode.LOCAL:
            return self._clock.now()
        with self._lock:
            estimate = self._server.now(self._clock.monotonic())
            if estimate is not None:
                return estimate
            said, self._said_local = self._said_local, True
        if not said:  # once: a proxy that strips Date headers strips them all
            log.warning("no Date header from the API server yet; using the local clock")
        return self._clock.now()

    def monotonic(self) -> float:
        """The run's clock's monotonic reading."""
        return self._clock.monotonic()

    def offset(self, bound: str) -> float:
        """The ``low`` or ``high`` bound of the server clock minus the local one, in seconds."""
        mono = self._clock.monotonic()
        with self._lock:
            bounds = self._server.bounds(mono)
        if bounds is None:
            return math.nan
        # server - local wall = (server - monotonic) - (wall - monotonic)
        wall_minus_mono = self._clock.now().timestamp() - mono
        return (bounds.low if bound == "low" else bounds.high) - wall_minus_mono


@dataclass(frozen=True, slots=True)
class WatchContext:
    """The run's collaborators, built once by the engine and handed to each of its parts.

    ``clock`` is the run's one clock, ``decision`` built on it; ``stop`` the run's one stop,
    fenced by the Lease; ``view`` the platform rules as last read (again at each resync).
    """

    config: Config
    settings: WatchSettings
    cluster: WatchCluster
    stop: Stop
    clock: Clock
    decision: DecisionClock
    metrics: WatchMetrics
    health: Health
    inbox: Inbox
    view: Callable[[], PlatformView]

    @classmethod
    def build(
        cls,
        config: Config,
        cluster: WatchCluster,
        stop: Stop,
        clock: Clock,
        *,
        settings: WatchSettings | None = None,
        view: Callable[[], PlatformView] = PlatformView,
    ) -> WatchContext:
        """A context whose other parts are new; ``settings`` default to ``config.watch``."""
        return cls(
            config,
            settings or config.watch or WatchSettings(),
            cluster,
            stop,
            clock,
            DecisionClock(config.clock, clock),
            WatchMetrics(),
            Health(streams=1, clock=clock),
            queue.Queue(),
            view,
        )
