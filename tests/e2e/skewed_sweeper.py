"""Run the sweeper's CLI with its local clock ahead of the machine's (an e2e seam, never shipped).

The operator under test reads the machine's clock; a sweeper started through this file reads a
clock ``SKEWED_SWEEPER_AHEAD_S`` seconds ahead, the situation of a sweeper whose node's clock
runs ahead of the operator's node: its touch at the deadline reaches an operator whose clock
has not got there yet. Only the wall reading of ``sweeper.core.clock.SystemClock`` moves (with
``--clock local`` it is the decision clock); monotonic time, and so every timer's length, is
untouched.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from sweeper.cli import main
from sweeper.core.clock import SystemClock

AHEAD = timedelta(seconds=float(os.environ.get("SKEWED_SWEEPER_AHEAD_S", "0")))
_true_now = SystemClock.now


def _ahead(self: SystemClock) -> datetime:
    return _true_now(self) + AHEAD


if __name__ == "__main__":
    SystemClock.now = _ahead  # type: ignore[method-assign]  # the seam: every run's one clock
    main()
