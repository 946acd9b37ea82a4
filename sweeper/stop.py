"""Stop: the one word for why a run (or one of its passes) ends before its work does.

A run stops for a signal (SIGTERM, SIGINT) or when ``--timeout`` runs out; in watch mode a
resync pass also stops when this replica no longer leads (the watch engine's subclass of
``StopFlag``). Every part asks the same question, "must I stop, and why?":
``StopFlag.reason`` answers it, ``StopReason`` is that question as a callable (what
the executor asks before every write), and the transport asks it between retries. The write
in progress completes; no new one starts. Both engines, ``explain`` and the connection use it.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from sweeper.core.clock import SYSTEM_CLOCK, Clock
from sweeper.core.errors import Interrupted, RunTimeout, SweeperError

StopReason = Callable[[], SweeperError | None]
"""Says why the work must stop now (``Interrupted``, ``RunTimeout``...), or ``None``."""


class StopFlag:
    """Why the run must stop, if it must: a signal, or ``--timeout`` running out.

    ``deadline`` is on the run's ``clock`` (monotonic); ``timeout`` (seconds) is only for the
    message.
    """

    def __init__(self, deadline: float, timeout: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self.event = threading.Event()
        self.deadline = deadline
        self._timeout = timeout
        self._clock = clock
        self._signal: str | None = None

    def request(self, name: str) -> None:
        """Ask the run to stop; ``name`` says what asked (a signal's name)."""
        self._signal = name
        self.event.set()

    def reason(self) -> SweeperError | None:
        """Say whether the run must stop now, and why: ``None`` to go on."""
        if self.event.is_set():
            return Interrupted(f"interrupted by {self._signal or 'a signal'}")
        if self._clock.monotonic() >= self.deadline:
            return RunTimeout(f"--timeout ({self._timeout:g}s) reached")
        return None

    def remaining(self) -> float:
        """Seconds left before ``--timeout``, on the run's clock (negative once past)."""
        return self.deadline - self._clock.monotonic()

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds``, unless a signal asks the run to stop; ``True`` when one did."""
        return self.event.wait(seconds)

    def write_window(self) -> float:
        """Unbounded: no Lease fences a one-shot run's writes (``--watch`` overrides this)."""
        return math.inf


@contextlib.contextmanager
def signals_stop(flag: StopFlag) -> Iterator[None]:
    """Turn SIGTERM and SIGINT into a stop request for the duration of the block.

    A second signal gives up at once (``KeyboardInterrupt``). Outside the main thread (where
    Python cannot install handlers) nothing is installed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        if flag.event.is_set():
            raise KeyboardInterrupt
        flag.request(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
