"""devcluster.processes: a start-up that fails stops what it started; probes leave no cycles."""

from __future__ import annotations

import gc
import weakref

import pytest

from devcluster import processes


class StartError(Exception):
    pass


class Recorder:
    """What a start-up's callbacks saw: the stop, and whether the tails were read before it."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def tails(self) -> str:
        self.events.append("tails")
        return "--- last lines of etcd"

    def stop(self) -> None:
        self.events.append("stop")


def test_a_completed_start_records_each_phase_and_the_total() -> None:
    timings: dict[str, float] = {}
    seen = Recorder()

    with processes.starting(
        "thing", timings, tails=seen.tails, stop=seen.stop, error=StartError
    ) as mark:
        mark("first")
        mark("second")

    assert list(timings) == ["first", "second", "total"]
    assert all(v >= 0 for v in timings.values())
    assert timings["total"] >= timings["first"] + timings["second"] - 0.02  # rounding
    assert seen.events == []
    assert processes.describe_timings(timings).endswith(
        f"(first {timings['first']:.1f}s, second {timings['second']:.1f}s)"
    )


def test_a_failed_start_reads_the_tails_then_stops_and_raises_one_error() -> None:
    seen = Recorder()
    cause = OSError("port in use")

    with (
        pytest.raises(StartError, match=r"^thing did not start: port in use\n--- last") as info,
        processes.starting("thing", {}, tails=seen.tails, stop=seen.stop, error=StartError),
    ):
        raise cause

    assert info.value.__cause__ is cause
    assert seen.events == ["tails", "stop"]


def test_an_interrupted_start_stops_and_lets_the_interrupt_through() -> None:
    seen = Recorder()

    with (
        pytest.raises(KeyboardInterrupt),
        processes.starting("thing", {}, tails=seen.tails, stop=seen.stop, error=StartError),
    ):
        raise KeyboardInterrupt

    assert seen.events == ["tails", "stop"]


def test_a_failing_probe_is_not_kept_alive_by_wait_until() -> None:
    """The probe's failure is kept as text: its frame (a socket, say) is freed at once."""

    class Held:
        pass

    refs: list[weakref.ref[Held]] = []

    def probe() -> bool:
        held = Held()
        refs.append(weakref.ref(held))
        raise ConnectionResetError("not yet")

    gc.disable()
    try:
        with pytest.raises(TimeoutError, match=r"last error: not yet"):
            processes.wait_until(probe, timeout=0.05, what="the probe", interval=0.01)
        assert refs
        assert all(ref() is None for ref in refs), "a failed probe's frame outlived the wait"
    finally:
        gc.enable()
