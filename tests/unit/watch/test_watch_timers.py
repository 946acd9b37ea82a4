"""The watch mode's timers, fires and resync, driven step by step on the unit fake.

The streams and the Lease need the real kube-apiserver (tests/e2e/test_watch*.py); what is
decided between a timer coming due and the job's next look is pure bookkeeping of the main
loop, so these tests call the loop's steps directly: take a timer, fire it (synchronously),
apply the message the fire sends, and read the timer it left armed.
"""

from __future__ import annotations

import io
from datetime import datetime, timedelta
from typing import Any

import pytest

from sweeper.cli import Seams, command
from sweeper.config import ClockMode, Config, WatchSettings
from sweeper.core.clock import SYSTEM_CLOCK
from sweeper.core.decide import ALWAYS
from sweeper.core.errors import ApiError, ConfigError, RequestRef
from sweeper.core.families import KINDS
from sweeper.core.kinds import VERSION
from sweeper.core.model import ActionMode, Enforcement
from sweeper.k8s.cluster import ServedKind
from sweeper.stop import Stop
from sweeper.watch.agenda import REFIRE_AFTER_S
from sweeper.watch.engine import Watcher
from sweeper.watch.inbox import Ending, Event, Fired, JobKey, Listed, Scope
from tests.cli_runner import runner
from tests.unit.fakes import FakeWatchCluster, Request
from tests.unit.objects import NOW, deadline_failed, job, owned
from tests.unit.watch.harness import Clock

KEY = JobKey("PyTorchJob", "team-a", "train")
SCOPE = Scope(ServedKind(next(k for k in KINDS if k.name == "PyTorchJob"), VERSION), None)


def watcher(fake: FakeWatchCluster, **config: Any) -> Watcher:
    """A watcher on the fake, leading (no election), whose decision clock reads ``NOW``."""
    settings = WatchSettings(leader_elect=False, health_port=0)
    made = Watcher(
        Config(watch=settings, clock=ClockMode.LOCAL, **config),
        settings,
        fake,
        Stop(SYSTEM_CLOCK),
        io.StringIO(),
        clock=Clock(wall=NOW),
    )
    made.served.update({s.kind.name: s for s in fake.served})
    return made


def refused() -> ApiError:
    return ApiError(RequestRef("patch", "pytorchjobs.kubeflow.org", "team-a", "train"), 403)


def take(w: Watcher, key: JobKey = KEY) -> bool:
    """The loop's turn at ``NOW`` with the job's timer due: whether its fire took the job."""
    w.agenda.apply(Listed(SCOPE, {key: NOW}, relist=False))
    return key in [taken for taken, _due in w.agenda.take_due(NOW)]


def fire(w: Watcher, key: JobKey = KEY) -> datetime | None:
    """Fire the key's timer as the main loop would; return when its timer is armed next."""
    assert take(w, key)
    w._fire.run(key, NOW)
    w._apply(w.ctx.inbox.get_nowait())
    return w.agenda.when(key)


def delay(armed: datetime | None) -> float:
    assert armed is not None, "the timer was dropped"
    return (armed - NOW).total_seconds()


# --- C5: --max-actions has no meaning in watch mode, and is refused ----------------------------


def test_watch_refuses_max_actions_instead_of_ignoring_it_in_its_timers() -> None:
    with pytest.raises(ConfigError, match=r"--watch .* does not take --max-actions"):
        Config(watch=WatchSettings(), enforcement=Enforcement(max_actions=3))


def test_watch_with_max_actions_is_a_usage_error_exit_two() -> None:
    result = runner().invoke(
        command, ["--watch", "--max-actions", "3"], obj=Seams(connect=_never_connect)
    )
    assert result.exit_code == 2
    assert "--watch acts on each job at its deadline; it does not take --max-actions" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_one_shot_passes_still_take_max_actions() -> None:
    assert Config(enforcement=Enforcement(max_actions=3)).enforcement.max_actions == 3


def _never_connect(config: Config, *, stop: Stop) -> FakeWatchCluster:
    raise AssertionError("a usage error never connects")


# --- C11: a quick re-touch is at least a second after the last touch ---------------------------


@pytest.mark.parametrize("seconds", [0.3, 0.999])
def test_sub_second_retouch_after_is_refused_while_quick_touches_are_on(seconds: float) -> None:
    # touched-at has whole seconds: the quick touch would write the value already there.
    with pytest.raises(ConfigError, match="--retouch-after must be at least 1s"):
        Config(enforcement=Enforcement(retouch_after=seconds, retouch_limit=2))


def test_sub_second_retouch_after_is_a_usage_error_exit_two() -> None:
    result = runner().invoke(
        command, ["--watch", "--retouch-after", "300ms"], obj=Seams(connect=_never_connect)
    )
    assert result.exit_code == 2
    assert "--retouch-after must be at least 1s" in result.stderr


def test_retouch_after_is_free_when_quick_touches_are_off() -> None:
    assert (
        Config(
            enforcement=Enforcement(retouch_after=0.5, retouch_limit=0)
        ).enforcement.retouch_after
        == 0.5
    )


@pytest.mark.parametrize("seconds", [0.0, 0.5, 0.999])
def test_sub_second_escalate_after_is_refused_under_touch(seconds: float) -> None:
    # Under touch, --escalate-after is the spacing of re-touches: the same whole second again.
    with pytest.raises(ConfigError, match="--escalate-after must be at least 1s"):
        Config(
            enforcement=Enforcement(
                action=ActionMode.TOUCH, escalate_after=seconds, retouch_limit=0
            )
        )


def test_sub_second_escalate_after_under_touch_is_a_usage_error_exit_two() -> None:
    result = runner().invoke(
        command, ["--watch", "--escalate-after", "0"], obj=Seams(connect=_never_connect)
    )
    assert result.exit_code == 2
    assert "--escalate-after must be at least 1s under --action touch" in result.stderr


@pytest.mark.parametrize("action", [ActionMode.AUTO, ActionMode.FAIL])
def test_escalate_after_may_be_zero_where_it_is_no_re_touch(action: ActionMode) -> None:
    # auto fails at once past the deadline (no second touch); fail never touches.
    assert (
        Config(enforcement=Enforcement(action=action, escalate_after=0)).enforcement.escalate_after
        == 0
    )


# --- S3: a failing fire backs off, per job, up to a cap ----------------------------------------


def test_a_failing_fire_backs_off_exponentially_per_job_up_to_a_cap() -> None:
    fake = FakeWatchCluster(date=NOW)
    fake.add_job(job())  # 1 h overdue; touch mode, and every touch is refused
    fake.add_job(job(name="other"))
    fake.fail("patch", "train", *(refused() for _ in range(12)))
    w = watcher(fake)
    delays = [delay(fire(w)) for _ in range(12)]
    # Equal jitter: the n-th retry comes between 5 x 2**(n-1) and twice that, capped at 300 s.
    for n, seconds in enumerate(delays, start=1):
        step = min(300.0, 10.0 * 2 ** (n - 1))
        assert step / 2 <= seconds <= step, (n, delays)
    assert max(delays) <= 300.0
    # The other job's first failure is not counted with this one's.
    fake.fail("patch", "other", refused())
    assert delay(fire(w, JobKey("PyTorchJob", "team-a", "other"))) <= 10.0


def test_the_backoff_starts_over_after_a_success() -> None:
    fake = FakeWatchCluster(date=NOW)
    fake.add_job(job())
    fake.fail("patch", "train", *(refused() for _ in range(5)))
    w = watcher(fake)
    for _ in range(4):
        fire(w)
    assert delay(fire(w)) > 10.0  # backed off by now
    assert fire(w) is None  # the touch went through: its own event re-arms the timer
    fake.add_job(job())  # touched again later, say (the annotation gone, not the count)
    fake.fail("patch", "train", refused())
    assert delay(fire(w)) <= 10.0


def test_the_backoff_starts_over_when_the_job_changes() -> None:
    fake = FakeWatchCluster(date=NOW)
    fake.add_job(job())
    fake.fail("patch", "train", *(refused() for _ in range(6)))
    w = watcher(fake)
    for _ in range(4):
        fire(w)
    assert delay(fire(w)) > 10.0  # backed off by now
    w._apply(Event(KEY, NOW))  # a MODIFIED event: the owner fixed something, say
    assert delay(fire(w)) <= 10.0


def test_a_deleted_job_leaves_no_failure_count_behind() -> None:
    fake = FakeWatchCluster(date=NOW)
    fake.add_job(job())
    fake.fail("patch", "train", refused(), refused())
    w = watcher(fake)
    fire(w)
    fire(w)
    w._apply(Event(KEY, None))  # DELETED
    assert w.agenda.failures(KEY) == 0
    assert w.agenda.when(KEY) is None


def test_a_clean_up_that_deleted_some_pods_and_failed_on_others_is_tried_again() -> None:
    # S7: the fire ends "done" with errors; a dropped timer would leave the rest to the resync.
    fake = FakeWatchCluster(date=NOW)
    failed = fake.add_job(job(conditions=deadline_failed()))
    for pod in ("train-worker-0", "train-worker-1"):
        fake.add_pod(owned(pod, failed))
    gone = ApiError(RequestRef("delete", "pods", "team-a", "train-worker-1"), 500)
    fake.fail("delete-pod", "train-worker-1", gone)
    w = watcher(fake, enforcement=Enforcement(action=ActionMode.FAIL))

    assert delay(fire(w)) <= 10.0  # the job's backoff after a failure, as for any failed fire
    assert fire(w) is None  # the other pod deleted this time: nothing left to look at
    assert set(fake.pods) == set()


# --- S4: a resync pass and a timer never act on one job at once --------------------------------


def touches(fake: FakeWatchCluster) -> list[Request]:
    return [r for r in fake.requests if r.method == "patch"]


def test_a_resync_pass_leaves_alone_a_job_its_timer_is_acting_on() -> None:
    fake = FakeWatchCluster(date=NOW)
    fake.add_job(job())
    fake.add_job(job(name="other"))
    w = watcher(fake)
    assert take(w)  # the timer's fire is in flight
    w._resync.pass_once(1)
    assert [r.name for r in touches(fake)] == ["other"]
    assert isinstance(w._resync.out, io.StringIO)
    assert "left-alone" in w._resync.out.getvalue()


def test_a_resync_pass_leaves_alone_a_job_its_timer_took_since_the_pass_listed() -> None:
    # The timer fired (and touched, with a later instant) after the pass read the job: the
    # pass's touch, with its older instant, would move the annotation back.
    fake = FakeWatchCluster(date=NOW)
    fake.add_job(job())
    w = watcher(fake)

    fired: list[bool] = []

    def timer_fires_during_the_listing(request: Request) -> None:
        if request.method == "list" and not fired:
            fired.append(take(w))
            w._apply(Fired(KEY, None))

    fake.before = timer_fires_during_the_listing
    w._resync.pass_once(1)
    assert fired == [True]
    assert touches(fake) == []


def test_a_timer_waits_while_a_resync_pass_acts_on_its_job_then_looks_again() -> None:
    fake = FakeWatchCluster(date=NOW)
    fake.add_job(job())
    w = watcher(fake)
    taken: list[bool] = []

    def timer_comes_due_during_the_touch(request: Request) -> None:
        if request.method == "patch":
            taken.append(take(w))

    fake.before = timer_comes_due_during_the_touch
    w._resync.pass_once(1)
    assert taken == [False]  # the main loop defers it (as for a fire in flight)
    assert w.agenda.when(KEY) is None
    w._apply(w.ctx.inbox.get_nowait())  # the pass let the job go
    assert w.agenda.when(KEY) == NOW  # the deferred look is armed again
    assert take(w)


def test_an_action_not_started_is_no_failure_of_the_job() -> None:
    # The run stopped (or the Lease was lost) between the read and the write: the timer is
    # kept armed, for the next leader's turn of the loop, and nothing is counted.
    fake = FakeWatchCluster(date=NOW)
    fake.add_job(job())
    w = watcher(fake)
    w.ctx.stop.request("SIGTERM")
    assert delay(fire(w)) == REFIRE_AFTER_S
    assert w.agenda.failures(KEY) == 0
    assert touches(fake) == []


# --- C4: nothing is re-fired faster than the API server answers --------------------------------


@pytest.mark.parametrize(
    ("rearm", "ending"),
    [
        pytest.param(ALWAYS, Ending.SETTLED, id="at-once"),
        pytest.param(NOW, Ending.SETTLED, id="now"),
        pytest.param(NOW - timedelta(minutes=5), Ending.SETTLED, id="in-the-past"),
        pytest.param(NOW, Ending.NOT_TRIED, id="not-tried"),
    ],
)
def test_a_fire_asking_to_look_again_at_once_is_looked_at_a_moment_later(
    rearm: datetime, ending: Ending
) -> None:
    w = watcher(FakeWatchCluster(date=NOW))
    assert take(w)
    w._apply(Fired(KEY, rearm, ending))
    assert delay(w.agenda.when(KEY)) == REFIRE_AFTER_S
    assert w.agenda.take_due(NOW) == []


def test_a_fire_asking_to_look_again_later_is_looked_at_then() -> None:
    w = watcher(FakeWatchCluster(date=NOW))
    assert take(w)
    w._apply(Fired(KEY, NOW + timedelta(seconds=0.1)))
    assert delay(w.agenda.when(KEY)) == 0.1


def test_a_change_while_the_fire_ran_is_looked_at_at_once() -> None:
    # The job's event is the API server's answer: its look is not held back.
    w = watcher(FakeWatchCluster(date=NOW))
    assert take(w)
    w._apply(Event(KEY, NOW))
    assert w.agenda.take_due(NOW) == []  # deferred while the fire holds the job
    w._apply(Fired(KEY, NOW))
    assert w.agenda.when(KEY) == NOW


def test_an_unanswered_read_is_tried_again_a_moment_later_without_counting() -> None:
    fake = FakeWatchCluster(date=NOW)
    fake.add_job(job())
    fake.fail("get", "train", ApiError(RequestRef("get", "pytorchjobs", "team-a", "train"), None))
    w = watcher(fake)
    assert delay(fire(w)) == REFIRE_AFTER_S
    assert w.agenda.failures(KEY) == 0


# --- a list for a Namespace's new rule only brings timers forward ------------------------------


@pytest.mark.parametrize(
    ("armed", "listed", "expected"),
    [
        pytest.param(None, NOW, NOW, id="arms-a-job-without-a-timer"),
        pytest.param(NOW + timedelta(hours=1), NOW, NOW, id="brings-a-timer-forward"),
        pytest.param(NOW, NOW + timedelta(hours=1), NOW, id="never-delays-one"),
        pytest.param(NOW, None, NOW, id="never-drops-one"),
        pytest.param(None, None, None, id="arms-nothing-never-due"),
    ],
)
def test_a_list_for_a_new_rule_only_brings_timers_forward(
    armed: datetime | None, listed: datetime | None, expected: datetime | None
) -> None:
    w = watcher(FakeWatchCluster(date=NOW))
    w._apply(Event(KEY, armed))
    w._apply(Listed(SCOPE, {KEY: listed}, relist=False, earlier_only=True))
    assert w.agenda.when(KEY) == expected
