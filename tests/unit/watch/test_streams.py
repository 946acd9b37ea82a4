"""The watch streams over the unit fake: list, then watch from the list's resourceVersion;
bookmarks move it; a closed stream resumes from the last one seen; 410 Gone lists again and
drops what vanished meanwhile; a stalled or failing stream is reopened after a backoff.

The backoffs after a stall or an error are real waits (the engine waits on its stop, not
on the injected clock): a quarter to half a second for the first failure.
"""

from __future__ import annotations

import logging
import math

import pytest

from sweeper.config import Config, DryRun, WatchSettings
from sweeper.core.errors import ApiError, Interrupted, RequestRef
from sweeper.core.families import KINDS
from sweeper.core.kinds import VERSION
from sweeper.core.model import Enforcement
from sweeper.k8s.cluster import ServedKind
from sweeper.metrics import WatchMetrics
from sweeper.stop import Stop
from sweeper.watch.context import WatchContext
from sweeper.watch.inbox import Scope
from sweeper.watch.streams import Streams
from tests.unit.objects import job
from tests.unit.watch.conftest import Start
from tests.unit.watch.harness import PYTORCH, Clock, Running, fake_cluster, tracked, wait_for

NO_RETOUCH = Enforcement(retouch_limit=0)
TFJOB = next(kind for kind in KINDS if kind.name == "TFJob")
JAXJOB = next(kind for kind in KINDS if kind.name == "JAXJob")


def watched_from(run: Running) -> list[str]:
    return [str(s.request.body) for s in run.requests("watch")]


def test_the_watch_starts_from_the_lists_resource_version(start: Start) -> None:
    fake = fake_cluster(job(name="a"), job(name="b", started_ago=0))
    fake.revision = 4711
    run = start(fake).listed()

    assert [s.request.method for s in run.log[:3]] == ["discover", "list", "watch"]
    assert watched_from(run) == ["4711"]
    run.stop()


def test_a_closed_stream_reopens_from_the_last_resource_version_it_saw(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake, enforcement=NO_RETOUCH).listed()
    seen = fake.emit("ADDED", job(name="a", started_ago=0))

    run.settle()
    opened = len(run.requests("watch"))
    fake.close_streams()
    wait_for(lambda: len(run.requests("watch")) > opened, "the reopened watch")

    reopened_from = int(watched_from(run)[-1])
    assert reopened_from >= int(seen["metadata"]["resourceVersion"])
    assert run.requests("list") and len(run.requests("list")) == 1, "no relist after a close"
    assert run.metric("deadline_sweeper_watch_restarts_total", reason="closed") >= 1
    run.stop()


def test_changes_made_while_the_stream_was_closed_are_replayed(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake, enforcement=NO_RETOUCH).listed()
    fake.miss("ADDED", job(name="meanwhile"))  # no open stream hears of it
    fake.close_streams()

    wait_for(lambda: run.requests("patch", "meanwhile") != [], "the touch")
    run.stop()


def test_a_bookmark_moves_the_resource_version_the_watch_resumes_from(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake).listed()  # PyTorchJob only
    fake.emit("ADDED", job(TFJOB, name="elsewhere"))  # the cluster's resourceVersion moves
    fake.bookmark()
    fake.close_streams()  # after the bookmark: the stream reads them in order

    wait_for(lambda: len(run.requests("watch")) == 2, "the reopened watch")
    assert watched_from(run) == ["100", "101"]  # no event of its own moved it
    run.stop()


def test_410_gone_lists_again_and_drops_the_jobs_that_vanished_meanwhile(start: Start) -> None:
    fake = fake_cluster(job(name="vanishes", started_ago=3000), job(name="stays", started_ago=0))
    run = start(fake, enforcement=NO_RETOUCH).listed()
    run.settle()
    tracked(run, 2)

    fake.miss("DELETED", job(name="vanishes"))
    fake.miss("ADDED", job(name="came"))  # overdue
    fake.expire_streams()  # 410: the stream's resourceVersion is out of the window

    wait_for(lambda: len(run.requests("list")) == 2, "the relist")
    wait_for(lambda: run.requests("patch", "came") != [], "the new job's touch")
    assert run.metric("deadline_sweeper_watch_relists_total") == 1
    run.advance(700)  # past the vanished job's deadline
    run.wake()
    run.settle()
    assert run.requests("get", "vanishes") == []
    tracked(run, 2)  # "stays", and "came" touched
    run.stop()


def test_a_watch_from_a_compacted_resource_version_is_gone_and_relists(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake).listed()
    fake.compact()
    fake.miss("ADDED", job(name="x", started_ago=0))
    fake.compact()  # the stream's own resourceVersion is older than the window now
    fake.close_streams()

    wait_for(lambda: len(run.requests("list")) == 2, "the relist")
    run.stop()


def test_a_stalled_stream_is_reopened_from_where_it_was(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake).listed()
    fake.stall_streams()

    wait_for(lambda: len(run.requests("watch")) == 2, "the reopened watch")
    assert watched_from(run)[1] == watched_from(run)[0]
    assert run.metric("deadline_sweeper_watch_restarts_total", reason="stalled") == 1
    assert len(run.requests("list")) == 1
    run.stop()


def test_a_failing_stream_backs_off_and_reopens(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake).listed()
    fake.fail("watch", "pytorchjobs", ApiError(RequestRef("watch", "pytorchjobs", None, None), 503))
    fake.break_streams(ApiError(RequestRef("watch", "pytorchjobs", None, None), None))

    wait_for(lambda: len(run.requests("watch")) == 3, "the third watch")
    assert run.metric("deadline_sweeper_watch_restarts_total", reason="error") == 2
    assert run.fake.open_streams() == 1
    run.stop()


def test_a_stream_that_breaks_on_a_bug_is_logged_and_reopened(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake).listed()
    fake.break_streams(RuntimeError("a bug below the boundary"))

    wait_for(lambda: len(run.requests("watch")) == 2, "the reopened watch")
    assert run.metric("deadline_sweeper_watch_restarts_total", reason="error") == 1
    run.stop()


def test_a_list_that_fails_is_tried_again_and_readiness_waits_for_it(start: Start) -> None:
    fake = fake_cluster(job(name="train"))
    fake.fail("list", "pytorchjobs", ApiError(RequestRef("list", "pytorchjobs", None, None), 500))
    run = start(fake, enforcement=NO_RETOUCH)

    wait_for(lambda: run.get("/readyz")[0] == 200, "the second list")
    assert len(run.requests("list")) == 2
    wait_for(lambda: run.requests("patch", "train") != [], "the touch")
    run.stop()


def test_a_selector_limits_what_the_stream_delivers(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake, selector="team=a", enforcement=NO_RETOUCH).listed()
    other = job(name="other")
    other["metadata"]["labels"] = {"team": "b"}
    mine = job(name="mine")
    mine["metadata"]["labels"] = {"team": "a"}
    fake.emit("ADDED", other)
    fake.emit("ADDED", mine)

    wait_for(lambda: run.requests("patch", "mine") != [], "the touch")
    # Applied in order: had "other" reached a timer, it would have been read by now.
    assert run.requests("get", "other") == []
    assert {s.request.body for s in run.requests("watch")} == {"100"}
    run.stop()


# --- B4: a stream that ends at once, with no event, is a failure and backs off ------------------


class CountedWaits(Stop):
    """A stream thread's stop: its backoffs are counted, not waited; set at the 10th."""

    def __init__(self) -> None:
        super().__init__(Clock())
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        if len(self.waits) == 10:
            self.request("the test")
        return self.is_set()


def test_a_stream_the_server_ends_at_once_is_a_failure_and_backs_off() -> None:
    # A proxy that does not keep streaming answers open: every watch is an empty 200.
    fake = fake_cluster()
    fake.watch_events = []
    stopping = CountedWaits()
    config = Config(watch=WatchSettings(health_port=0), kinds=(PYTORCH,))
    # The clock never moves: every watch lasted less than a second.
    ctx = WatchContext.build(config, fake, stopping, Clock())
    streams = Streams(ctx)

    # Without a backoff the thread would never wait: stop it at the 100th watch instead.
    fake.before = lambda request: stopping.request("the test") if len(fake.requests) > 100 else None
    streams.run(Scope(ServedKind(PYTORCH, VERSION), None))

    watches = [r for r in fake.requests if r.method == "watch"]
    assert len(watches) == 10
    # client-go's reflector: a watch under a second with no event is an error, backed off
    # as any failing stream is (0.5 s doubling up to 30 s, equal jitter).
    assert len(stopping.waits) == 10
    for n, wait in enumerate(stopping.waits, start=1):
        assert wait >= min(30.0, 0.5 * 2 ** (n - 1)) / 2, (n, stopping.waits)
    assert restarts(ctx.metrics, "short") == 10
    assert restarts(ctx.metrics, "closed") is None


def restarts(metrics: WatchMetrics, reason: str) -> float | None:
    return metrics.registry.get_sample_value(
        "deadline_sweeper_watch_restarts_total", {"reason": reason}
    )


def test_a_stream_that_delivered_a_bookmark_is_a_regular_close(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake).listed()
    fake.bookmark()
    fake.close_streams()

    wait_for(lambda: len(run.requests("watch")) == 2, "the reopened watch")
    assert run.metric("deadline_sweeper_watch_restarts_total", reason="closed") == 1
    assert math.isnan(run.metric("deadline_sweeper_watch_restarts_total", reason="short"))
    run.stop()


# --- B6: the streams follow the served kinds, rediscovered before every resync -----------------


def test_a_kind_served_later_gets_a_stream_and_one_no_longer_served_loses_its_own(
    start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    # An operator upgrade: JAXJob comes (CRDs installed after the sweeper), PyTorchJob goes.
    pytorch, jax = (ServedKind(kind, VERSION) for kind in (PYTORCH, JAXJOB))
    fake = fake_cluster(job(name="pt", started_ago=0))
    fake.served = (pytorch,)
    with caplog.at_level(logging.INFO, logger="sweeper.watch"):
        run = start(fake, kinds=(), resync=0.05, enforcement=NO_RETOUCH, dry_run=DryRun.CLIENT)
        run.listed()
        tracked(run, 1)

        fake.served = (jax,)
        fake.add_job(job(JAXJOB, name="jx", started_ago=0))
        fake.add_job(job(JAXJOB, name="jx-2", started_ago=0))
        fake.close_streams()  # the PyTorchJob CRD is deleted: its watches end
        wait_for(lambda: run.requests("watch", "jaxjobs") != [], "the new kind's stream")
        tracked(run, 2)  # the JAXJobs armed, the PyTorchJob's timer dropped with its stream

    watched = [r.getMessage() for r in caplog.records if r.getMessage().startswith("watching")]
    assert watched[:2] == ["watching PyTorchJob: 1 stream(s)", "watching JAXJob: 1 stream(s)"]
    assert any("pytorchjobs in all namespaces no longer served" in m for m in caplog.messages)
    run.stop()


def test_a_rediscovery_that_fails_keeps_the_streams_and_the_resyncs_go_on(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake, resync=0.05).listed()
    unavailable = ApiError(RequestRef("get", "kubeflow.org", None, None), 503)
    fake.fail("discover", None, Interrupted("interrupted by SIGTERM"), unavailable)

    wait_for(lambda: len(run.requests("discover")) >= 4, "two failed rediscoveries, then more")
    wait_for(lambda: run.metric("deadline_sweeper_resyncs_total", result="ok") >= 2, "passes")
    assert len(run.requests("watch")) == 1  # the stream kept as it was
    assert run.fake.open_streams() == 1
    run.stop()
