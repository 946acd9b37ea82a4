"""The executor records a ``DeadlineApproaching`` warning once, by its Event's name."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from sweeper.act.executor import Executor
from sweeper.config import DryRun
from sweeper.core.clock import SYSTEM_CLOCK
from sweeper.core.errors import ApiError, Interrupted, RequestRef
from sweeper.core.jobs import parse_job
from sweeper.core.model import Enforcement, Result
from sweeper.core.warn import DeadlineWarning, warning_due
from sweeper.stop import Stop
from tests.unit.fakes import FakeCluster
from tests.unit.objects import KIND, NOW, job


def warning(name: str = "train") -> DeadlineWarning:
    raw = job(name=name, deadline=3600, started_ago=3000)
    view = replace(parse_job(raw, KIND["PyTorchJob"]), warn_before=900.0, rule="gpu")
    due = warning_due(view, NOW, Enforcement())
    assert due is not None
    return due


def test_the_warning_is_a_named_warning_event_on_the_job() -> None:
    fake = FakeCluster()
    (warned,), stopped = Executor(fake, dry_run=None, stop=Stop(SYSTEM_CLOCK)).warn(
        [warning()], NOW
    )
    assert (warned.result, stopped) == (Result.DONE, None)
    (event,) = fake.events
    assert event["metadata"]["name"] == warned.warning.name
    assert "generateName" not in event["metadata"]
    assert (event["type"], event["reason"]) == ("Warning", "DeadlineApproaching")
    assert event["involvedObject"]["uid"] == "uid-PyTorchJob-team-a-train"
    assert event["firstTimestamp"] == "2024-05-01T12:00:00Z"
    assert event["message"].startswith("deadline 2024-05-01T12:10:00Z (in 10m00s), set by its own")


def test_a_second_pass_finds_it_recorded_and_records_nothing_more() -> None:
    fake = FakeCluster()
    Executor(fake, dry_run=None, stop=Stop(SYSTEM_CLOCK)).warn([warning()], NOW)
    later = NOW + timedelta(seconds=30)
    (again,), _ = Executor(fake, dry_run=None, stop=Stop(SYSTEM_CLOCK)).warn([warning()], later)
    assert (again.result, again.detail) == (Result.LEFT_ALONE, "already recorded")
    assert len(fake.events) == 1


@pytest.mark.parametrize(
    ("dry_run", "result"),
    [
        pytest.param(DryRun.CLIENT, Result.PLANNED, id="client"),
        pytest.param(DryRun.SERVER, Result.DRY_RUN, id="server"),
    ],
)
def test_a_dry_run_records_nothing_and_says_what_it_would(dry_run: DryRun, result: Result) -> None:
    fake = FakeCluster()
    (warned,), _ = Executor(fake, dry_run=dry_run, stop=Stop(SYSTEM_CLOCK)).warn([warning()], NOW)
    assert warned.result is result
    assert fake.events == []
    assert [r.dry_run for r in fake.requests] == ([True] if dry_run is DryRun.SERVER else [])


def test_a_refused_warning_is_an_error_and_the_next_one_is_still_tried() -> None:
    fake = FakeCluster()
    fake.fail("create-event", "a", ApiError(RequestRef("create", "events", "team-a"), 403))
    warned, _ = Executor(fake, dry_run=None, stop=Stop(SYSTEM_CLOCK)).warn(
        [warning("a"), warning("b")], NOW
    )
    assert [w.result for w in warned] == [Result.ERROR, Result.DONE]
    assert "forbidden (403)" in warned[0].detail


def test_a_stop_leaves_the_remaining_warnings_not_started() -> None:
    fake = FakeCluster()
    stop = Stop(SYSTEM_CLOCK)
    stop.request("SIGTERM")
    warned, stopped = Executor(fake, dry_run=None, stop=stop).warn(
        [warning("a"), warning("b")], NOW
    )
    assert [w.result for w in warned] == [Result.NOT_STARTED, Result.NOT_STARTED]
    assert isinstance(stopped, Interrupted)
    assert fake.requests == []
