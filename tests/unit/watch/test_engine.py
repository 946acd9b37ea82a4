"""The watch mode's main loop over the unit fake: timers armed from lists and events, fired
at the deadline on the injected clock, and each job acted on by the one-shot code's guards.

Driven through the Watcher's public surface only: its constructor, ``run()`` on a thread with a
SIGTERM to end it, the cluster boundary (tests/unit/fakes.py) and its probes on loopback.
"""

from __future__ import annotations

import io
import os
import signal
import threading
from datetime import timedelta

import pytest

from sweeper.config import ClockMode, Config, WatchSettings
from sweeper.core.clock import SYSTEM_CLOCK, parse_rfc3339
from sweeper.core.errors import EXIT_OK, ApiError, ClusterUnavailable, Interrupted, RequestRef
from sweeper.core.families import KINDS
from sweeper.core.kinds import TOUCHED_AT_ANNOTATION
from sweeper.core.model import Enforcement, PodsMode
from sweeper.k8s.cluster import WatchEvent
from sweeper.stop import Stop
from sweeper.watch.engine import watch
from tests.unit.fakes import FakeCluster
from tests.unit.objects import NOW, deadline_failed, job, owned, stamp
from tests.unit.watch.conftest import Start
from tests.unit.watch.harness import PYTORCH, QUICK_LEASE, fake_cluster, running, tracked, wait_for

NO_RETOUCH = Enforcement(retouch_limit=0)


def touched_at(fake_job: dict[str, object]) -> object:
    meta = fake_job["metadata"]
    assert isinstance(meta, dict)
    return (meta.get("annotations") or {}).get(TOUCHED_AT_ANNOTATION)


def test_an_overdue_job_listed_at_start_is_touched_at_once(start: Start) -> None:
    fake = fake_cluster(job(name="late"), job(name="on-time", started_ago=60))
    run = start(fake, enforcement=NO_RETOUCH).listed()

    wait_for(lambda: run.requests("patch", "late") != [], "the touch")
    run.settle()

    assert [s.request.name for s in run.requests("patch")] == ["late"]
    # The decision's instant is the server's clock (its Date header), not the local one.
    assert touched_at(fake.job("pytorchjobs", "team-a", "late")) == stamp(NOW)
    assert run.requests("get", "late"), "a timer re-reads the job before it acts"
    assert run.stop() == EXIT_OK


def test_a_job_is_touched_when_its_deadline_passes_on_the_server_clock_not_before(
    start: Start,
) -> None:
    fake = fake_cluster(job(name="train", started_ago=3000))  # 1 h deadline: due in 600 s
    run = start(fake, enforcement=NO_RETOUCH).listed()

    run.advance(599)
    run.wake()
    run.settle()
    assert run.requests("get", "train") == []  # not yet: nothing is read before the deadline

    run.advance(2)
    run.wake()
    wait_for(lambda: run.requests("patch", "train") != [], "the touch")

    (read,) = run.requests("get", "train")
    assert read.at == 1000 + 601  # read once, after the deadline
    # The server clock's lower bound (loosened by drift over 601 s), in whole seconds.
    assert touched_at(fake.job("pytorchjobs", "team-a", "train")) == stamp(
        NOW + timedelta(seconds=600)
    )
    assert run.metric("deadline_sweeper_lateness_seconds_count") == 1
    run.stop()


def test_a_job_added_by_an_event_is_armed_and_touched(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake, enforcement=NO_RETOUCH).listed()

    fake.emit("ADDED", job(name="new", started_ago=3590))  # due in 10 s
    run.settle()
    tracked(run, 1)
    assert run.requests("patch") == []

    run.advance(11)  # the server clock's lower bound is a little behind: 10 s is not enough
    run.wake()
    wait_for(lambda: run.requests("patch", "new") != [], "the touch")
    run.stop()


def test_a_touch_stamp_ahead_of_the_clock_does_not_put_the_timer_off(start: Start) -> None:
    # A tenant's stamp in year 9999 is no touch (C5): the timer comes at the deadline, not at
    # the resync an hour away, whether the job was listed or arrived as an event.
    forged = {TOUCHED_AT_ANNOTATION: "9999-12-31T23:59:59Z"}
    fake = fake_cluster(job(name="listed", started_ago=3590, annotations=forged))  # due in 10 s
    run = start(fake, enforcement=NO_RETOUCH).listed()
    fake.emit("ADDED", job(name="event", started_ago=3590, annotations=forged))
    run.settle()

    run.advance(5)
    run.wake()
    run.settle()
    assert run.requests("get", "listed") == run.requests("get", "event") == []  # not yet due

    run.advance(6)
    run.wake()
    wait_for(lambda: run.requests("patch", "listed") != [], "the listed job's touch")
    wait_for(lambda: run.requests("patch", "event") != [], "the event's job's touch")
    assert touched_at(fake.job("pytorchjobs", "team-a", "event")) != forged[TOUCHED_AT_ANNOTATION]
    run.stop()


def test_a_deleted_job_is_never_read_at_its_deadline(start: Start) -> None:
    fake = fake_cluster(job(name="gone", started_ago=3000))
    run = start(fake, enforcement=NO_RETOUCH).listed()
    run.settle()
    tracked(run, 1)

    fake.emit("DELETED", job(name="gone"))
    run.settle()
    tracked(run, 0)
    run.advance(3600)
    run.wake()
    run.settle()

    assert run.requests("get", "gone") == []
    run.stop()


def test_a_job_changed_before_its_deadline_is_armed_at_its_new_deadline(start: Start) -> None:
    fake = fake_cluster(job(name="train", started_ago=3000))  # due in 600 s
    run = start(fake, enforcement=NO_RETOUCH).listed()
    fake.emit("MODIFIED", job(name="train", started_ago=3000, deadline=7200))  # due in 4200 s
    run.settle()  # the change is applied before the clock passes the old deadline

    run.advance(601)
    run.wake()
    run.settle()
    assert run.requests("get", "train") == []

    run.advance(3600)
    run.wake()
    wait_for(lambda: run.requests("patch", "train") != [], "the touch")
    run.stop()


def test_a_job_that_finished_since_its_event_is_read_and_left_alone(start: Start) -> None:
    # The timer's re-read decides: the job succeeded after its last event reached us.
    fake = fake_cluster(job(name="train", started_ago=3000))
    run = start(fake, enforcement=NO_RETOUCH).listed()
    finished = job(
        name="train",
        started_ago=3000,
        status={"conditions": [{"type": "Succeeded", "status": "True"}]},
    )
    fake.miss("MODIFIED", finished)  # stored, but no stream heard of it yet

    run.advance(601)
    run.wake()
    wait_for(lambda: run.requests("get", "train") != [], "the re-read")
    run.settle()

    assert run.requests("patch") == []
    run.stop()


def test_jobs_in_an_excluded_namespace_are_never_tracked(start: Start) -> None:
    fake = fake_cluster(job(name="listed", namespace="kube-system"))
    run = start(fake, enforcement=NO_RETOUCH, exclude_namespaces=("kube-system",)).listed()
    fake.emit("ADDED", job(name="event", namespace="kube-system"))
    fake.emit("ADDED", job(name="kept", namespace="team-a"))
    wait_for(lambda: run.requests("patch", "kept") != [], "the touch")
    run.settle()

    assert [s.request.name for s in run.requests("patch")] == ["kept"]
    run.stop()


def test_a_hostile_event_object_is_skipped_and_the_stream_goes_on(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake, enforcement=NO_RETOUCH).listed()

    fake.send(WatchEvent("MODIFIED", {"metadata": "not a mapping"}))
    fake.send(WatchEvent("MODIFIED", [1, 2, 3]))  # type: ignore[arg-type]
    fake.send(WatchEvent("ADDED", {"kind": "PyTorchJob", "metadata": {"name": 7}}))
    fake.emit("ADDED", job(name="after"))

    wait_for(lambda: run.requests("patch", "after") != [], "the touch")
    assert len(run.requests("watch")) == 1, "the stream was never reopened"
    run.stop()


def test_a_failed_touch_is_tried_again_after_a_backoff(start: Start) -> None:
    fake = fake_cluster(job(name="train"))
    refused = ApiError(RequestRef("patch", "pytorchjobs.kubeflow.org", "team-a", "train"), 403)
    fake.fail("patch", "train", refused)
    run = start(fake, enforcement=NO_RETOUCH).listed()
    wait_for(lambda: len(run.requests("patch", "train")) == 1, "the first try")
    run.settle()
    assert (
        run.metric(
            "deadline_sweeper_actions_total", kind="PyTorchJob", action="touch", result="error"
        )
        == 1
    )

    run.advance(10.0)  # the first retry comes 5 to 10 s later
    run.wake()
    wait_for(lambda: len(run.requests("patch", "train")) == 2, "the retry")
    assert touched_at(fake.job("pytorchjobs", "team-a", "train")) is not None
    run.stop()


def test_a_read_without_an_answer_is_tried_again_soon(start: Start) -> None:
    fake = fake_cluster(job(name="train"))
    fake.fail("get", "train", ApiError(RequestRef("get", "pytorchjobs", "team-a", "train"), None))
    run = start(fake, enforcement=NO_RETOUCH).listed()
    wait_for(lambda: len(run.requests("get", "train")) == 1, "the first read")
    run.settle()
    assert run.requests("patch") == []

    run.advance(1)  # about half a second later
    run.wake()
    wait_for(lambda: run.requests("patch", "train") != [], "the touch")
    run.stop()


def test_the_quick_retouch_comes_after_retouch_after(start: Start) -> None:
    fake = fake_cluster(job(name="train", started_ago=3600))  # due right now
    run = start(fake, enforcement=Enforcement(retouch_after=5, retouch_limit=1)).listed()
    wait_for(lambda: len(run.requests("patch", "train")) == 1, "the touch")
    run.settle()

    run.advance(6)
    run.wake()
    wait_for(lambda: len(run.requests("patch", "train")) == 2, "the quick re-touch")
    run.advance(60)
    run.wake()
    run.settle()
    assert len(run.requests("patch", "train")) == 2  # the limit: one quick re-touch
    run.stop()


def test_every_served_kind_and_namespace_gets_its_own_stream(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake, kinds=(), namespaces=("team-a", "team-b")).listed()

    watched = sorted((s.request.name, s.request.namespace) for s in run.requests("watch"))
    assert watched == sorted(
        (kind.plural, namespace) for kind in KINDS for namespace in ("team-a", "team-b")
    )
    run.stop()


def test_discovery_that_fails_for_good_is_a_cluster_error() -> None:
    fake = fake_cluster()
    fake.fail("discover", None, ApiError(RequestRef("get", "apis/kubeflow.org", None, None), 503))
    run = running(fake)
    with pytest.raises(ClusterUnavailable, match=r"fake\.invalid"):
        run.watcher.run()


def test_a_signal_during_discovery_stops_cleanly() -> None:
    fake = fake_cluster()
    fake.fail("discover", None, Interrupted("interrupted by SIGTERM"))
    run = running(fake)
    assert run.watcher.run() == EXIT_OK
    assert [s.request.method for s in run.log] == ["discover"]  # nothing listed or watched


def test_a_resync_pass_catches_what_no_stream_heard_of_and_reports_it(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake, resync=0.05, enforcement=NO_RETOUCH).listed()
    fake.miss("ADDED", job(name="missed"))  # stored, but no stream heard of it
    wait_for(lambda: run.requests("patch", "missed") != [], "the resync's touch")
    wait_for(lambda: run.metric("deadline_sweeper_resyncs_total", result="ok") >= 1, "a pass")
    run.stop()
    assert "missed" in run.out.getvalue()  # the pass's report, as a one-shot pass writes it


def test_a_resync_pass_sets_the_pods_finished_jobs_hold(start: Start) -> None:
    fake = fake_cluster()
    failed = fake.add_job(job(name="kept", conditions=deadline_failed("kept")))
    fake.add_pod(owned("kept-master-0", failed))
    fake.add_pod(owned("kept-worker-0", failed, phase="Pending"))
    enforcement = Enforcement(terminate_pods=PodsMode.POLICY)
    run = start(fake, resync=0.05, enforcement=enforcement).listed()
    series = {"family": "training-operator", "kind": "PyTorchJob", "reason": "policy"}
    held = "deadline_sweeper_held_pods"
    assert run.metric(held, **series) == 0, "before the first pass"

    wait_for(lambda: run.metric(held, **series) == 2, "a pass to count them")
    del fake.pods["team-a", "kept-master-0"]  # gone, as its kubelet would report
    wait_for(lambda: run.metric(held, **series) == 1, "the next pass to count one")
    run.stop()


def test_with_the_local_clock_the_decision_instant_is_the_local_clock(start: Start) -> None:
    fake = fake_cluster(job(name="train"))  # overdue on any clock after 2024
    run = start(fake, clock=ClockMode.LOCAL, enforcement=NO_RETOUCH).listed()
    before = SYSTEM_CLOCK.now().replace(microsecond=0)

    wait_for(lambda: run.requests("patch", "train") != [], "the touch")

    written = parse_rfc3339(touched_at(fake.job("pytorchjobs", "team-a", "train")))
    assert written is not None
    assert written >= before > NOW  # not the server's (the fake's Date says NOW)
    run.stop()


def test_sigterm_ends_the_watch_mode_with_0_after_releasing_the_lease() -> None:
    # The entry point, as the CLI calls it: its own stop, signal handlers, and close.
    fake = fake_cluster(job(name="train"))
    settings = WatchSettings(
        leader_elect=True, identity="me", timing=QUICK_LEASE, health_port=0, lease_namespace="ns"
    )
    config = Config(watch=settings, kinds=(PYTORCH,), enforcement=NO_RETOUCH)

    def connect(_config: Config, *, stop: Stop) -> FakeCluster:
        return fake

    def terminate_once_acting() -> None:
        try:
            wait_for(lambda: any(r.method == "patch" for r in fake.requests), "the touch")
        finally:
            os.kill(os.getpid(), signal.SIGTERM)
            fake.close_streams()

    killer = threading.Thread(target=terminate_once_acting, daemon=True)
    killer.start()
    assert watch(config, connect, io.StringIO()) == EXIT_OK
    killer.join()

    assert fake.closed == 1
    assert fake.leases[("ns", "kubeflow-deadline-sweeper")]["spec"]["holderIdentity"] == ""


def test_a_resync_pass_that_cannot_list_is_counted_and_the_next_one_comes(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake, resync=0.05).listed()
    unavailable = ApiError(RequestRef("list", "pytorchjobs", None, None), 503)
    fake.fail("list", "pytorchjobs", unavailable, unavailable)

    wait_for(lambda: run.metric("deadline_sweeper_resyncs_total", result="failed") >= 1, "failure")
    wait_for(lambda: run.metric("deadline_sweeper_resyncs_total", result="ok") >= 1, "a good one")
    run.stop()
