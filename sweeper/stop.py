"""Stop: the one object that says whether a run (or one of its passes) must end, and why.

A run stops for a signal (SIGTERM, SIGINT) or when ``--timeout`` runs out; in watch mode its
writes also stop when this replica no longer leads (the Lease ``fence``s the run's ``Stop``),
and each resync pass has its own ``--timeout`` (``within``). Each mode builds one on the run's
clock and hands it to every part, which asks ``reason`` before each write and after each page:
the write in progress completes; no new one starts.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Protocol

from sweeper.core.clock import Clock
from sweeper.core.errors import Interrupted, RunTimeout, SweeperError


class Fence(Protocol):
    """What may end a replica's right to write: the Lease (``sweeper.watch.leader.Leader``)."""

    def leading(self) -> bool:
        """Whether this replica may write to jobs now."""

    def write_window(self) -> float:
        """Seconds a write sent now may stay in flight; 0 or less: send none."""


class Stop:
    """Why the run must stop, if it must: a signal, no longer leading, or ``--timeout``.

    ``deadline`` is on ``clock``'s monotonic reading; ``timeout`` and ``where`` are for the message.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        deadline: float = math.inf,
        timeout: float = math.inf,
        where: str = "",
    ) -> None:
        self.deadline = deadline
        self._clock = clock
        self._timeout = timeout
        self._where = where
        self._run = self  # whose signal and fence: a pass's Stop shares its run's
        self._event = threading.Event()
        self._signal: str | None = None
        self._fence: Fence | None = None

    def within(self, timeout: float, where: str) -> Stop:
        """This run's stop, with ``--timeout`` counted from now: a resync pass's."""
        deadline = self._clock.monotonic() + timeout
        part = Stop(self._clock, deadline=deadline, timeout=timeout, where=where)
        part._run, part._event = self._run, self._run._event
        return part

    def fence(self, lease: Fence) -> None:
        """From now on, stop the run's writes when ``lease`` says this replica no longer leads."""
        self._run._fence = lease

    def request(self, name: str) -> None:
        """Ask the run to stop; ``name`` says what asked (a signal's name)."""
        self._run._signal = name
        self._event.set()

    def is_set(self) -> bool:
        """Whether a signal asked the run to stop."""
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds``, unless a signal asks the run to stop; ``True`` when one did."""
        return self._event.wait(seconds)

    def reason(self) -> SweeperError | None:
        """Say whether the work must stop now, and why: ``None`` to go on."""
        if self._event.is_set():
            return Interrupted(f"interrupted by {self._run._signal or 'a signal'}")
        fence = self._run._fence
        if fence is not None and not fence.leading():
            return Interrupted("no longer the leader")
        if self._clock.monotonic() >= self.deadline:
            where = f" {self._where}" if self._where else ""
            return RunTimeout(f"--timeout ({self._timeout:g}s) reached{where}")
        return None

    def remaining(self) -> float:
        """Seconds left before ``--timeout``, on the run's clock (negative once past)."""
        return self.deadline - self._clock.monotonic()

    def write_window(self) -> float:
        """Seconds a job write sent now may stay in flight: the fence's, else unbounded."""
        fence = self._run._fence
        return math.inf if fence is None else fence.write_window()


@contextlib.contextmanager
def signals_stop(stop: Stop) -> Iterator[None]:
    """Turn SIGTERM and SIGINT into a stop request in the block (the main thread's only).

    A second signal gives up at once (``KeyboardInterrupt``).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.request(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
