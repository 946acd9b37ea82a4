"""Every watcher a test starts is stopped (SIGTERM) when the test ends, whatever happened."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.unit.fakes import FakeCluster
from tests.unit.watch.harness import Running, running, stop_now

Start = Callable[..., Running]


@pytest.fixture
def start() -> Iterator[Start]:
    """``start(fake, **settings)``: a running watcher over the fake (see ``harness.running``)."""
    started: list[Running] = []

    def make(fake: FakeCluster, **settings: Any) -> Running:
        run = running(fake, **settings).start()
        started.append(run)
        return run

    yield make
    for run in started:
        if run.thread is not None and run.thread.is_alive():
            stop_now(run)
            run.thread.join(timeout=5)
