"""Hostile values in a job, a Lease, a Date header or an option never stop enforcement (issue 19).

The reproductions of C1 (a time whose UTC instant leaves ``datetime``'s range), C2 (sums of
instants past the year 9999, and one object stopping a watch stream) and S9 (a huge
``--grace`` or ``--escalate-after``), each at the place it used to raise and through the CLI.
``tests/property/test_hostile_job_properties.py`` holds the class; these are the instances.
"""

from __future__ import annotations

import io
import json
import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from sweeper.cli import Seams, command
from sweeper.config import ClockMode, Config, WatchSettings
from sweeper.core import model
from sweeper.core.clock import SYSTEM_CLOCK, parse_http_date, parse_rfc3339
from sweeper.core.decide import due_at, judge
from sweeper.core.families import KINDS
from sweeper.core.jobs import Job, parse_job
from sweeper.core.kinds import TOUCHED_AT_ANNOTATION, VERSION
from sweeper.core.model import ActionMode, Enforcement, SkipReason
from sweeper.k8s import decode
from sweeper.k8s.cluster import ServedKind, WatchCluster, WatchEvent
from sweeper.stop import Stop
from sweeper.watch import engine, streams
from sweeper.watch.elector import parse_lease
from sweeper.watch.inbox import Scope
from sweeper.watch.servertime import ServerClock
from tests.cli_runner import runner
from tests.unit.fakes import FakeCluster, FakeWatchCluster
from tests.unit.objects import KIND, NOW, job

PYTORCH = KIND["PyTorchJob"]
# Valid RFC 3339 (Go's time.Parse reads them) whose UTC instant is before year 1 or after 9999.
OUT_OF_RANGE = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]
FAR_TOUCH = "9999-12-31T23:59:59Z"  # in range; a touch plus anything is not


@pytest.mark.parametrize("value", [*OUT_OF_RANGE, "0001-01-01T00:00:00+23:59"])
def test_a_time_out_of_range_in_utc_is_unparsable(value: str) -> None:
    assert parse_rfc3339(value) is None


def test_a_date_header_after_the_year_9999_in_utc_is_unparsable() -> None:
    assert parse_http_date("Fri, 31 Dec 9999 23:59:59 -0100") is None


def test_a_server_clock_past_the_year_9999_gives_no_reading() -> None:
    clock = ServerClock()
    clock.observe(datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), 0.0, 0.0)
    # The watch's main loop reads it every turn: None falls back to the local clock.
    assert clock.now(10.0) is None


@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_a_garbled_touch_is_no_touch_and_a_garbled_start_is_malformed(value: str) -> None:
    touched = job(annotations={TOUCHED_AT_ANNOTATION: value})
    started = job()
    started["status"]["startTime"] = value

    assert parse_job(touched, PYTORCH).touched_at is None
    assert parse_job(touched, PYTORCH).malformed is None
    assert parse_job(started, PYTORCH).malformed == "status.startTime"
    data = json.dumps({"items": [touched, started]}).encode()
    assert decode.decode_jobs(data, PYTORCH, VERSION).jobs == [
        parse_job(touched, PYTORCH),
        parse_job(started, PYTORCH),
    ]


@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_a_lease_with_times_out_of_range_reads_as_no_times(value: str) -> None:
    lease = parse_lease(
        {
            "metadata": {"resourceVersion": "3"},
            "spec": {
                "holderIdentity": "other",
                "leaseDurationSeconds": 10**400,
                "renewTime": value,
                "acquireTime": value,
                "leaseTransitions": True,
            },
        }
    )
    assert (lease.record.renew_time, lease.record.acquire_time) == (None, None)
    # No int that a float cannot hold reaches the elector's arithmetic.
    assert (lease.record.duration_s, lease.record.transitions) == (0, 0)


def far_touched(**changes: Any) -> Job:
    return parse_job(job(annotations={TOUCHED_AT_ANNOTATION: FAR_TOUCH}, **changes), PYTORCH)


@pytest.mark.parametrize(
    ("enforcement", "due"),
    [
        pytest.param(Enforcement(action=ActionMode.TOUCH), None, id="touch-never-again"),
        pytest.param(
            Enforcement(action=ActionMode.AUTO, escalate_after=120),
            # Exactly escalate_after past the deadline: judge compares instants, not the
            # overdue seconds as reported (rounded to the millisecond).
            NOW - timedelta(hours=1) + timedelta(seconds=120),
            id="auto-escalates-by-the-deadline",
        ),
        pytest.param(Enforcement(action=ActionMode.TOUCH, grace=1e15), None, id="huge-grace"),
        pytest.param(
            Enforcement(action=ActionMode.AUTO, grace=1e15, escalate_after=1e15),
            None,
            id="huge-both",
        ),
        pytest.param(
            Enforcement(action=ActionMode.TOUCH, escalate_after=1e15, retouch_after=1e15),
            None,
            id="huge-escalate",
        ),
    ],
)
def test_due_at_saturates_past_the_year_9999(
    enforcement: Enforcement, due: datetime | None
) -> None:
    # Judged at the last instant a datetime holds, the stamp is no longer ahead: it counts.
    view = far_touched()
    never = datetime.max.replace(tzinfo=UTC)
    assert due_at(view, never, enforcement) == due
    # judge agrees: no action there unless due.
    assert isinstance(judge(view, never, enforcement), model.Action) is (due is not None)


def test_a_grace_beyond_datetimes_range_leaves_every_job_not_yet_due() -> None:
    entry = judge(parse_job(job(), PYTORCH), NOW, Enforcement(grace=1e15))
    assert entry.reason == SkipReason.NOT_YET_DUE.value
    assert entry.detail.startswith("due in ")


class Harness:
    def __init__(self, *jobs: dict[str, Any]) -> None:
        self.fake = FakeWatchCluster(date=NOW)
        for raw in jobs:
            self.fake.add_job(raw)

    def invoke(self, *args: str) -> Any:
        return runner().invoke(
            command,
            ["--log-format", "text", *args],
            obj=Seams(connect=lambda _config, *, stop: self.fake),
            env={"KUBECONFIG": None},
            catch_exceptions=False,
        )


@pytest.mark.parametrize("value", [*OUT_OF_RANGE, FAR_TOUCH])
def test_a_hostile_touch_annotation_beside_an_overdue_job_stops_nothing(value: str) -> None:
    harness = Harness(
        job(name="bad", annotations={TOUCHED_AT_ANNOTATION: value}), job(name="victim")
    )
    result = harness.invoke()
    assert result.exit_code == 0, result.stderr
    touched = [r.name for r in harness.fake.writes if r.method == "patch"]
    assert "victim" in touched
    assert harness.invoke("--explain", "team-a/bad").exit_code == 0


@pytest.mark.parametrize("option", ["--grace", "--escalate-after"])
def test_a_huge_duration_option_runs_and_writes_nothing_it_should_not(option: str) -> None:
    harness = Harness(job(name="victim"))
    result = harness.invoke("--action", "auto", option, "1e15")
    assert result.exit_code == 0, result.stderr
    methods = [r.method for r in harness.fake.writes]
    # A grace that long: nothing is due. An escalation that long: the overdue job is touched.
    assert methods == ([] if option == "--grace" else ["patch", "create-event"])


# --- watch mode: one object never stops a stream --------------------------------------------


def watcher(fake: FakeCluster, enforcement: Enforcement) -> engine.Watcher:
    config = Config(
        enforcement=enforcement,
        clock=ClockMode.LOCAL,
        watch=WatchSettings(leader_elect=False, health_port=0),
    )
    assert config.watch is not None
    # No Lease: leader election is off, so the fake needs only the watch boundary.
    return engine.Watcher(
        config,
        config.watch,
        cast("WatchCluster", fake),
        Stop(SYSTEM_CLOCK),
        io.StringIO(),
        clock=SYSTEM_CLOCK,
    )


def armed(w: engine.Watcher) -> dict[str, datetime]:
    while not w.ctx.inbox.empty():
        w._apply(w.ctx.inbox.get_nowait())
    return {key.name: due for key in w.agenda if (due := w.agenda.when(key)) is not None}


def test_a_touch_near_the_year_9999_blinds_no_kind_in_watch_mode() -> None:
    fake = FakeCluster(served=(ServedKind(PYTORCH, VERSION),), date=NOW)
    fake.add_job(job(name="bad", annotations={TOUCHED_AT_ANNOTATION: FAR_TOUCH}))
    fake.add_job(job(name="victim"))
    w = watcher(fake, Enforcement(action=ActionMode.TOUCH))
    scope = Scope(ServedKind(PYTORCH, VERSION), None)

    w.streams.list_one(scope, relist=False)

    # The stamp is ahead of the clock, so no touch (C5): both are due at their deadline.
    assert armed(w) == {"bad": NOW - timedelta(hours=1), "victim": NOW - timedelta(hours=1)}


def test_an_object_that_cannot_be_read_is_logged_and_the_stream_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    served = ServedKind(PYTORCH, VERSION)
    fake = FakeCluster(served=(served,), date=NOW)
    fake.add_job(job(name="bad"))
    fake.add_job(job(name="victim"))

    def due_at_raising_for_bad(
        view: Job, now: datetime, enforcement: Enforcement
    ) -> datetime | None:
        if view.name == "bad":
            raise OverflowError("a bug in due_at, for one job")
        return due_at(view, now, enforcement)

    monkeypatch.setattr(streams, "due_at", due_at_raising_for_bad)
    w = watcher(fake, Enforcement(action=ActionMode.TOUCH))
    scope = Scope(served, None)

    with caplog.at_level(logging.ERROR, logger="sweeper.watch.streams"):
        w.streams.list_one(scope, relist=False)
        assert armed(w) == {"victim": NOW - timedelta(hours=1)}
        later = job(name="victim", resource_version="5", deadline=7200 + 600)
        fake.watch_events = [
            WatchEvent("MODIFIED", job(name="bad", resource_version="4")),
            WatchEvent("MODIFIED", cast("dict[str, Any]", None)),  # not even an object
            WatchEvent("MODIFIED", later),
            WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "9"}}),
        ]
        assert w.streams.follow(scope, "3") == "9"

    assert armed(w) == {"victim": NOW + timedelta(seconds=600)}
    unreadable = [r for r in caplog.records if "cannot read" in r.getMessage()]
    assert [r.getMessage() for r in unreadable] == [
        "watch of pytorchjobs in all namespaces: cannot read team-a/bad (list); left to the resync",
        "watch of pytorchjobs in all namespaces: cannot read team-a/bad (MODIFIED); left to the "
        "resync",
    ]


def test_every_kind_is_listed_whatever_one_job_holds() -> None:
    # The same hostile annotation in every kind, through the page decoder the passes use.
    for kind in KINDS:
        raw = job(kind, annotations={TOUCHED_AT_ANNOTATION: OUT_OF_RANGE[0]})
        data = json.dumps({"items": [raw]}).encode()
        (view,) = decode.decode_jobs(data, kind, VERSION).jobs
        assert view == replace(parse_job(raw, kind), touched_at=None)
