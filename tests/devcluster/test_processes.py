"""devcluster.processes: a start-up that fails stops what it started; probes leave no cycles."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

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


# --- Launcher: one controller started until it is ready -----------------------------------------


class Attempts:
    """A controller whose first starts print ``lines`` and exit, then one that keeps running."""

    def __init__(self, *failures: str) -> None:
        self.failures = list(failures)
        self.commands = 0
        self.events: list[str] = []

    def command(self) -> processes.Command:
        self.commands += 1
        if self.failures:
            line = self.failures.pop(0)
            return processes.Command(["/bin/sh", "-c", f"echo '{line}'; exit 3"], {}, 0)
        return processes.Command(["/bin/sh", "-c", "echo serving; exec sleep 60"], {}, 0)

    def ready(self, process: processes.Process) -> None:
        # Ready once it said so; an exit first is wait_until's ChildProcessError.
        processes.wait_until(
            lambda: "serving" in process.log_path.read_text(encoding="utf-8").split("===")[-1],
            timeout=20,
            what="the controller",
            interval=0.01,
            watch=[process],
        )

    def on_failure(self) -> None:
        self.events.append("undone")


def test_a_start_whose_port_was_taken_is_tried_again_with_a_fresh_command(
    tmp_path: Path,
) -> None:
    launcher = processes.Launcher("ctl", tmp_path / "ctl.log", error=StartError)
    attempts = Attempts(f"listen tcp 127.0.0.1:1: bind: {processes.ADDRESS_IN_USE}")

    try:
        process = launcher.launch(attempts.command, attempts.ready, on_failure=attempts.on_failure)

        assert (attempts.commands, launcher.starts, attempts.events) == (2, 2, ["undone"])
        assert launcher.running
        assert launcher.process is process
        assert launcher.log_since_start().startswith("serving")
        headers = launcher.log_path.read_text(encoding="utf-8").count("=== devcluster: ctl start")
        assert headers == 2
    finally:
        launcher.stop()
    assert launcher.process is None
    assert not launcher.running


def test_a_child_that_exits_otherwise_is_reported_with_its_log_tail_once(tmp_path: Path) -> None:
    launcher = processes.Launcher("ctl", tmp_path / "ctl.log", error=StartError)
    attempts = Attempts("flag provided but not defined: -x", "never reached")

    with pytest.raises(
        StartError, match=r"^ctl did not become ready: ctl exited with code 3"
    ) as info:
        launcher.launch(attempts.command, attempts.ready, on_failure=attempts.on_failure)

    assert "flag provided but not defined: -x" in str(info.value)
    assert isinstance(info.value.__cause__, ChildProcessError)
    assert (attempts.commands, attempts.events, launcher.process) == (1, ["undone"], None)


def test_every_try_taken_by_a_port_ends_in_the_last_error(tmp_path: Path) -> None:
    launcher = processes.Launcher("ctl", tmp_path / "ctl.log", error=StartError, attempts=2)
    taken = f"bind: {processes.ADDRESS_IN_USE}"
    attempts = Attempts(taken, taken, "never reached")

    with pytest.raises(StartError, match=processes.ADDRESS_IN_USE):
        launcher.launch(attempts.command, attempts.ready)

    assert (attempts.commands, launcher.starts) == (2, 2)


def test_any_other_failure_of_the_readiness_check_stops_the_child_and_passes_through(
    tmp_path: Path,
) -> None:
    launcher = processes.Launcher("ctl", tmp_path / "ctl.log", error=StartError)
    attempts = Attempts()
    started: list[processes.Process] = []

    def ready(process: processes.Process) -> None:
        started.append(process)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        launcher.launch(attempts.command, ready, on_failure=attempts.on_failure)

    assert attempts.events == ["undone"]
    assert started[0].poll() is not None, "the child was left running"
    assert launcher.process is None
