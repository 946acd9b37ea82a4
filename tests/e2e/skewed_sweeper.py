"""Run the sweeper's CLI with its local clock ahead of the machine's (an e2e seam, never shipped).

The operator under test reads the machine's clock; a sweeper started through this file reads a
clock ``SKEWED_SWEEPER_AHEAD_S`` seconds ahead, the situation of a sweeper whose node's clock
runs ahead of the operator's node: its touch at the deadline reaches an operator whose clock
has not got there yet. Only ``sweeper.core.clock.local_now`` moves (with ``--clock local`` it is the
decision clock); monotonic time, and so every timer's length, is untouched.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from sweeper.cli import main
from sweeper.core import clock

AHEAD = timedelta(seconds=float(os.environ.get("SKEWED_SWEEPER_AHEAD_S", "0")))
_true_now = clock.local_now


def _ahead() -> datetime:
    return _true_now() + AHEAD


if __name__ == "__main__":
    clock.local_now = _ahead
    main()
