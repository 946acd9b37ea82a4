"""A job whose warning and action are due together: the watch acts, then warns, once each.

A TrainJob without a deadline under a rule's default is due at once (its deadline is written
for the trainer to enforce) while, first seen inside its ``warnBefore`` window, its warning is
due too. The fire takes the action; the warning follows at the job's next event (the write's
own), as the next one-shot pass would record it. Nothing is re-read in a loop: the requests
sent in a fixed window are counted.
"""

from __future__ import annotations

import time

import pytest

from sweeper.core.decide import ALWAYS
from sweeper.core.families import KIND_NAMES
from sweeper.core.families.trainer import TRAINER_VERSION, TRAINJOB
from sweeper.core.platform import load_platform
from sweeper.core.warn import REASON
from sweeper.k8s.cluster import ServedKind
from sweeper.watch.inbox import Fired, JobKey
from tests.unit.fakes import FakeWatchCluster
from tests.unit.objects import NOW, trainjob
from tests.unit.watch.conftest import Start
from tests.unit.watch.harness import policy_watcher, wait_for

# Real time the watcher runs on its own before its requests are counted: a loop re-firing
# as fast as the API answers sends thousands in it, the watch a handful.
WINDOW_S = 1.0
# GETs of the job at most in the window (three are sent: the set-deadline's fire and its
# write's, then the warning's fire): a handful.
MOST_READS = 5


def cluster() -> FakeWatchCluster:
    fake = FakeWatchCluster(served=(ServedKind(TRAINJOB, TRAINER_VERSION),), date=NOW)
    fake.add_namespace("team-a", {"tier": "gpu"})
    return fake


def rules(default: str, warn: str) -> str:
    return f"""
rules:
  - name: gpu
    namespaceSelector: {{matchLabels: {{tier: gpu}}}}
    defaultDeadline: {default}
    warnBefore: {warn}
"""


@pytest.mark.parametrize(
    ("default", "warn", "created_ago"),
    [
        pytest.param("1h", "30m", 40 * 60, id="first-seen-inside-the-warning-window"),
        pytest.param("1h", "2h", 60, id="warn-before-longer-than-the-default"),
        pytest.param("1h", "1h", 0, id="warn-before-equal-to-the-default"),
    ],
)
def test_a_trainjob_inside_its_warning_window_gets_its_deadline_and_one_warning(
    start: Start, default: str, warn: str, created_ago: float
) -> None:
    fake = cluster()
    fake.add_job(trainjob(deadline=None, created_ago=created_ago))
    platform = load_platform(rules(default, warn), "rules.yaml", KIND_NAMES)
    run = start(fake, kinds=(TRAINJOB,), platform=platform)
    run.listed()
    time.sleep(WINDOW_S)
    reads = run.requests("get", "tj")
    creates = run.requests("create-event", "tj")
    assert len(reads) <= MOST_READS, f"{len(reads)} GETs of the TrainJob in {WINDOW_S} s"
    assert len(creates) <= 2, f"{len(creates)} Event creates in {WINDOW_S} s"

    # The warning did not delay the action: the deadline is written, long before it falls.
    wait_for(lambda: len(fake.events) == 2, "the set-deadline's Event and the warning")
    assert fake.job("trainjobs", "team-a", "tj")["spec"]["activeDeadlineSeconds"] == 3600
    assert len(run.requests("patch", "tj")) == 1
    assert [e["reason"] for e in fake.events] == ["DeadlineSet", REASON]
    assert len(run.requests("get", "tj")) <= MOST_READS


def test_the_fire_takes_the_action_due_with_a_warning_and_warns_at_the_next_look() -> None:
    # The agenda does not wait for a warning due after the action
    # (test_agenda_warnings.py); the fire does not either.
    fake = cluster()
    fake.add_job(trainjob(deadline=None, created_ago=40 * 60))
    w = policy_watcher(fake, rules("1h", "30m"))
    key = JobKey("TrainJob", "team-a", "tj")

    w._fire.run(key, ALWAYS)
    acted = w.ctx.inbox.get_nowait()
    assert [r.method for r in fake.writes] == ["patch", "create-event"]
    assert [e["reason"] for e in fake.events] == ["DeadlineSet"]
    assert isinstance(acted, Fired)
    assert acted.rearm is None  # the write's own event re-arms the timer

    w._fire.run(key, ALWAYS)  # that event's look: the deadline is now the TrainJob's own
    warned = w.ctx.inbox.get_nowait()
    assert [e["reason"] for e in fake.events] == ["DeadlineSet", REASON]
    assert isinstance(warned, Fired)
    assert warned.warned is not None
    assert warned.rearm is None  # the trainer fails it at its deadline
