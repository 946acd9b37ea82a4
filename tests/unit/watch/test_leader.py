"""Leader election over the fake's Leases: only the leader writes to jobs; a follower keeps its
timers and takes over once the Lease expires on its own clock; a leader that cannot renew
within the renew deadline stops writing at once; a clean stop releases the Lease.

Expiry and the renew deadline are judged on the injected monotonic clock. The Lease thread's
retry period is a real wait, so these tests use 20 ms (harness.QUICK_LEASE).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from sweeper.config import Config, DryRun, WatchSettings
from sweeper.core.errors import EXIT_INTERRUPTED, EXIT_OK, ApiError, RequestRef
from sweeper.core.model import ActionMode, Enforcement
from sweeper.stop import Stop
from sweeper.watch.context import WatchContext
from sweeper.watch.elector import micro_time
from sweeper.watch.leader import Leader
from tests.unit.fakes import FakeCluster, Request
from tests.unit.objects import NOW, deadline_failed, job
from tests.unit.watch.conftest import Start
from tests.unit.watch.harness import (
    Clock,
    Running,
    fake_cluster,
    running,
    stop_now,
    tracked,
    wait_for,
)

NO_RETOUCH = Enforcement(retouch_limit=0)
LEASE = ("sweeper", "kubeflow-deadline-sweeper")


def held_by(fake: FakeCluster, holder: str, transitions: int = 0) -> None:
    fake.set_lease(
        *LEASE,
        {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "acquireTime": micro_time(NOW),
            "renewTime": micro_time(NOW),
            "leaseTransitions": transitions,
        },
    )


def spec(fake: FakeCluster) -> dict[str, object]:
    lease = fake.leases[LEASE]
    return dict(lease["spec"])


def leading(run: Running) -> bool:
    return run.metric("deadline_sweeper_leader") == 1


def test_with_no_lease_the_replica_creates_it_leads_and_acts(start: Start) -> None:
    fake = fake_cluster(job(name="train"))
    run = start(fake, leader_elect=True, enforcement=NO_RETOUCH).listed()

    wait_for(lambda: run.requests("patch", "train") != [], "the touch")
    assert spec(fake)["holderIdentity"] == "me"
    methods = [s.request.method for s in run.log]
    assert methods.index("create-lease") < methods.index("patch")
    assert leading(run)
    assert run.stop() == EXIT_OK
    # Released on a clean stop: the next leader need not wait out the lease duration.
    assert spec(fake)["holderIdentity"] == ""
    assert spec(fake)["leaseDurationSeconds"] == 1


def test_a_follower_never_writes_to_jobs_while_another_replica_holds_the_lease(
    start: Start,
) -> None:
    fake = fake_cluster(job(name="train"))
    held_by(fake, "other")
    run = start(fake, leader_elect=True, enforcement=NO_RETOUCH).listed()

    wait_for(lambda: len(run.requests("get-lease")) >= 3, "a few Lease rounds")
    run.advance(14)  # the Lease as seen has not expired on our clock
    run.wake()
    wait_for(lambda: len(run.requests("get-lease")) >= 6, "more Lease rounds")
    run.settle()

    assert not leading(run)
    tracked(run, 1)  # its timer is kept, armed
    assert [s for s in run.log if s.request.method in ("patch", "get", "update-lease")] == []
    assert run.stop() == EXIT_OK
    assert spec(fake)["holderIdentity"] == "other"  # not ours to release


def test_a_follower_takes_an_expired_lease_over_and_acts_on_every_overdue_job(
    start: Start,
) -> None:
    fake = fake_cluster(job(name="a"), job(name="b"))
    held_by(fake, "other", transitions=3)
    run = start(fake, leader_elect=True, enforcement=NO_RETOUCH).listed()
    wait_for(lambda: run.requests("get-lease") != [], "the first Lease read")

    run.advance(16)  # the record unchanged for longer than its duration, on our clock
    wait_for(lambda: len(run.requests("patch")) == 2, "both touches")

    assert spec(fake)["holderIdentity"] == "me"
    assert spec(fake)["leaseTransitions"] == 4
    (taken,) = [s for s in run.requests("update-lease") if s.at == 1016][:1]
    assert all(s.at >= taken.at for s in run.requests("patch"))
    run.stop()


def test_a_renewed_lease_is_not_taken_over(start: Start) -> None:
    fake = fake_cluster(job(name="train"))
    held_by(fake, "other")
    run = start(fake, leader_elect=True, enforcement=NO_RETOUCH).listed()
    wait_for(lambda: run.requests("get-lease") != [], "the first Lease read")

    run.advance(10)
    held_by(fake, "other")  # the leader renews: a new resourceVersion, seen changed
    reads = len(run.requests("get-lease"))
    wait_for(lambda: len(run.requests("get-lease")) > reads + 1, "a read of the renewal")
    run.advance(10)  # 20 s since the first read, 10 s since the renewal was seen
    reads = len(run.requests("get-lease"))
    wait_for(lambda: len(run.requests("get-lease")) > reads + 1, "another read")
    run.settle()

    assert run.requests("update-lease") == []
    assert run.requests("patch") == []
    run.stop()


def test_a_leader_that_cannot_renew_stops_writing_at_the_renew_deadline(start: Start) -> None:
    fake = fake_cluster()
    run = start(fake, leader_elect=True, enforcement=NO_RETOUCH).listed()
    wait_for(lambda: leading(run), "the Lease")
    refused = ApiError(RequestRef("update", "leases", *LEASE), 500)
    fake.fail("update-lease", LEASE[1], *(refused for _ in range(10_000)))

    run.advance(10)  # the renew deadline since the last good renewal
    fake.emit("ADDED", job(name="train"))  # overdue
    wait_for(lambda: not leading(run), "the step-down")
    run.settle()

    assert run.requests("patch") == []
    assert run.metric("deadline_sweeper_tracked_jobs") >= 1  # kept for a takeover

    fake.faults.clear()  # the API server answers again; the record still names us
    wait_for(lambda: run.requests("patch", "train") != [], "the touch after taking it back")
    assert spec(fake)["holderIdentity"] == "me"
    run.stop()


def test_a_leader_whose_lease_another_replica_wrote_stops_writing_at_once(start: Start) -> None:
    # Our renewal carries a stale resourceVersion: 409; the read shows the new holder.
    fake = fake_cluster()
    run = start(fake, leader_elect=True, enforcement=NO_RETOUCH).listed()
    wait_for(lambda: leading(run), "the Lease")

    held_by(fake, "other")
    wait_for(lambda: not leading(run), "the step-down")
    fake.emit("ADDED", job(name="train"))
    run.settle(tracked=1)

    assert run.requests("patch") == []
    assert spec(fake)["holderIdentity"] == "other"
    run.stop()
    assert spec(fake)["holderIdentity"] == "other"  # nothing released: not ours


def test_a_lease_created_by_another_replica_first_is_a_conflict_then_a_wait(
    start: Start,
) -> None:
    fake = fake_cluster(job(name="train"))
    fired: list[bool] = []

    def other_creates_it_first(request: Request) -> None:
        if request.method == "create-lease" and not fired:
            fired.append(True)
            held_by(fake, "other")  # between our read (404) and our create

    run = start(
        fake, leader_elect=True, enforcement=NO_RETOUCH, hook=other_creates_it_first
    ).listed()
    wait_for(lambda: len(run.requests("get-lease")) >= 3, "the reads after the conflict")
    run.settle(tracked=1)

    assert len(run.requests("create-lease")) == 1  # 409: never created twice
    assert spec(fake)["holderIdentity"] == "other"
    assert run.requests("patch") == []
    run.stop()


def test_a_dry_run_elects_no_leader_and_sends_no_lease_request(start: Start) -> None:
    fake = fake_cluster(job(name="train"))
    run = start(fake, leader_elect=True, dry_run=DryRun.SERVER, enforcement=NO_RETOUCH).listed()

    wait_for(lambda: run.requests("patch", "train") != [], "the dry touch")
    assert all(s.request.dry_run for s in run.requests("patch"))
    assert [s for s in run.log if "lease" in s.request.method] == []
    assert fake.leases == {}
    run.stop()


def test_a_stop_while_following_releases_nothing(start: Start) -> None:
    fake = fake_cluster()
    held_by(fake, "other")
    run = start(fake, leader_elect=True).listed()
    wait_for(lambda: run.requests("get-lease") != [], "the first Lease read")
    version = fake.leases[LEASE]["metadata"]["resourceVersion"]

    assert run.stop() == EXIT_OK
    assert fake.leases[LEASE]["metadata"]["resourceVersion"] == version


def test_a_stop_with_a_lease_request_stuck_leaves_the_lease_to_expire_exit_4(
    start: Start,
) -> None:
    # Releasing while our own renewal may still land would let two replicas lead at once.
    stuck = threading.Event()
    unstick = threading.Event()

    def hang_a_renewal(request: Request) -> None:
        if request.method == "update-lease" and not stuck.is_set():
            stuck.set()
            unstick.wait(5)

    fake = fake_cluster()
    run = start(fake, leader_elect=True, request_timeout=0.05, hook=hang_a_renewal)
    wait_for(stuck.is_set, "a renewal in flight")
    try:
        assert run.stop() == EXIT_INTERRUPTED
        assert spec(fake)["holderIdentity"] == "me"  # not released
    finally:
        unstick.set()


def test_a_follower_runs_no_resync_pass(start: Start) -> None:
    fake = fake_cluster(job(name="train"))
    held_by(fake, "other")
    run = start(fake, leader_elect=True, resync=0.01).listed()
    wait_for(lambda: len(run.requests("get-lease")) >= 10, "some Lease rounds")

    assert len(run.requests("list")) == 1  # the stream's; no pass listed
    assert run.requests("patch") == []
    run.stop()


# --- B2: a refused take waits a retry period; leaseTransitions stays an int32 ----------------


class SimulatedWaits(Stop):
    """The Lease thread's stop, on simulated time: each wait moves the clock instead.

    The thread runs ``rounds`` rounds, then stops; ``waits`` keeps every delay it asked for.
    """

    def __init__(self, clock: Clock, rounds: int) -> None:
        super().__init__(clock)
        self.clock = clock
        self.rounds = rounds
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.clock.at += seconds
        if len(self.waits) >= self.rounds:
            self.request("the test")
        return self.is_set()


def lease_thread(fake: FakeCluster, rounds: int) -> tuple[Leader, SimulatedWaits]:
    """A Lease thread over the fake, default timing (retry period 2 s), on simulated time."""
    clock = Clock()
    stopping = SimulatedWaits(clock, rounds)
    settings = WatchSettings(leader_elect=True, identity="me", lease_namespace=LEASE[0])
    leader = Leader(WatchContext.build(Config(watch=settings), fake, stopping, clock))
    return leader, stopping


@pytest.mark.parametrize(
    "status",
    [
        pytest.param(503, id="overloaded-api-server"),
        pytest.param(403, id="rbac-without-update"),
        pytest.param(400, id="refused-as-malformed"),
    ],
)
def test_a_follower_whose_take_is_refused_tries_again_a_retry_period_later(
    status: int | None,
) -> None:
    fake = FakeCluster(date=NOW)
    held_by(fake, "gone-replica")  # never renewed: expired 15 s after our first read
    refused = ApiError(RequestRef("update", "leases", *LEASE), status)
    fake.fail("update-lease", LEASE[1], *(refused for _ in range(1000)))
    leader, stopping = lease_thread(fake, rounds=100)

    leader.run()

    takes = [r for r in fake.requests if r.method == "update-lease"]
    simulated = sum(stopping.waits)
    assert len(takes) >= 10  # the Lease expired early on, and every take was refused
    # client-go: a candidate tries every retry period (2 s), with jitter, whatever failed.
    assert len(takes) <= simulated / 2.0 + 1, (len(takes), simulated)
    assert spec(fake)["holderIdentity"] == "gone-replica"


def test_a_candidate_that_gets_no_answer_tries_again_within_half_a_second() -> None:
    # The API server is down (a refused connection costs it nothing): the first attempt after
    # its return takes the Lease, so the jobs due during the outage are acted on at once.
    fake = FakeCluster(date=NOW)
    held_by(fake, "me")  # a leader that lapsed during the outage: the record still names it
    unreachable = ApiError(RequestRef("get", "leases", *LEASE), None)
    fake.fail("get-lease", LEASE[1], *(unreachable for _ in range(10)))
    leader, stopping = lease_thread(fake, rounds=12)

    leader.run()

    assert stopping.waits[:10] == [0.5] * 10
    methods = [r.method for r in fake.requests]
    assert methods[:12] == ["get-lease"] * 11 + ["update-lease"]  # taken back at the first answer


def test_a_lease_at_the_int32_limit_of_transitions_is_taken_without_overflowing() -> None:
    fake = FakeCluster(date=NOW)
    held_by(fake, "gone-replica", transitions=2**31 - 1)  # anyone may write a Lease
    leader, _stopping = lease_thread(fake, rounds=20)

    leader.run()

    assert spec(fake)["holderIdentity"] == "me"
    assert spec(fake)["leaseTransitions"] == 2**31 - 1  # kept at the limit, not 2**31


def test_a_standby_reports_no_overdue_jobs_it_is_not_the_one_to_handle(start: Start) -> None:
    # Jobs failed by their deadline are armed to look for their pods (fail, auto); only the
    # leader takes those timers, so on a standby they would stay due as long as the jobs exist.
    names = ("a", "b", "c")
    fake = fake_cluster(*(job(name=n, conditions=deadline_failed(n)) for n in names))
    fake.add_job(job(name="running-late"))
    held_by(fake, "leader-pod")
    run = start(fake, leader_elect=True, enforcement=Enforcement(action=ActionMode.AUTO)).listed()
    wait_for(lambda: run.requests("get-lease") != [], "the first Lease read")
    run.settle(tracked=4)

    assert not leading(run)
    assert run.metric("deadline_sweeper_overdue_jobs", kind="PyTorchJob") == 0
    assert run.requests("get") == []  # the leader's to handle, not ours
    run.stop()


# --- S1: a second signal before the loop saw the first gives up at once ----------------------


@dataclass
class SecondSignalClock(Clock):
    """The injected clock; once armed, the main loop's next reading is where both signals land.

    A signal handler runs in the main thread: the first sets the stop, the second raises
    ``KeyboardInterrupt``. Both landing before the loop's next check of the flag is the window.
    """

    stop: Stop | None = None

    def monotonic(self) -> float:
        if self.stop is not None and threading.current_thread() is threading.main_thread():
            stop, self.stop = self.stop, None
            stop.request("SIGTERM")
            raise KeyboardInterrupt
        return self.at


def test_a_second_signal_before_the_loop_saw_the_first_leaves_the_lease_to_expire() -> None:
    fake = fake_cluster(job(name="train"))
    clock = SecondSignalClock()
    run = running(fake, monotonic=clock, leader_elect=True, enforcement=NO_RETOUCH)

    def signals_once_acting() -> None:
        wait_for(lambda: run.requests("patch", "train") != [], "the touch")
        clock.stop = run.flag
        run.wake()  # the loop's next turn reads the clock

    signaller = threading.Thread(target=signals_once_acting, daemon=True)
    signaller.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run.watcher.run()  # in the main thread, where signal handlers run
    finally:
        stop_now(run)
    signaller.join()

    assert spec(fake)["holderIdentity"] == "me"  # not released: no drain after a second signal


# --- S2: a Lease write keeps what others wrote beside the record ------------------------------


def test_taking_and_renewing_the_lease_keeps_its_labels_annotations_and_other_fields(
    start: Start,
) -> None:
    fake = fake_cluster()
    held_by(fake, "other")
    lease = fake.leases[LEASE]
    lease["metadata"]["labels"] = {"team": "ml-platform"}
    lease["metadata"]["annotations"] = {"example.com/owner": "sre"}
    lease["spec"]["preferredHolder"] = "me"  # a newer field this sweeper does not know
    run = start(fake, leader_elect=True).listed()
    wait_for(lambda: run.requests("get-lease") != [], "the first Lease read")

    run.advance(16)  # expired: taken over
    wait_for(lambda: leading(run), "the Lease")
    renewals = len(run.requests("update-lease"))
    wait_for(lambda: len(run.requests("update-lease")) > renewals + 1, "two renewals")

    kept = fake.leases[LEASE]
    assert kept["spec"]["holderIdentity"] == "me"
    assert kept["metadata"]["labels"] == {"team": "ml-platform"}
    assert kept["metadata"]["annotations"] == {"example.com/owner": "sre"}
    assert kept["spec"]["preferredHolder"] == "me"
    run.stop()
    assert fake.leases[LEASE]["metadata"]["labels"] == {"team": "ml-platform"}  # released too
