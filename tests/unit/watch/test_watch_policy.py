"""The watch mode under ``--policy``: a timer's fire judges the job under its platform rule."""

from __future__ import annotations

import io
from datetime import timedelta

from sweeper.config import Config, WatchSettings
from sweeper.core.decide import due_at
from sweeper.core.jobs import parse_job
from sweeper.core.kinds import PYTORCHJOB as PYTORCH
from sweeper.core.platform import load_platform
from sweeper.oneshot import namespaces
from sweeper.stop import Stop
from sweeper.watch.engine import Watcher
from sweeper.watch.inbox import JobKey
from tests.unit.fakes import FakeWatchCluster
from tests.unit.objects import NOW, job
from tests.unit.watch.harness import Clock

RULES = """
rules:
  - {name: gpu, namespaceSelector: {matchLabels: {tier: gpu}}, defaultDeadline: 1h}
"""
KEY = JobKey("PyTorchJob", "team-a", "train")


def watcher(fake: FakeWatchCluster) -> Watcher:
    settings = WatchSettings(leader_elect=False, health_port=0)
    config = Config(watch=settings, platform=load_platform(RULES, "rules.yaml"))
    clock = Clock(wall=NOW)  # the decision clock, fixed
    made = Watcher(config, settings, fake, Stop(clock), io.StringIO(), clock=clock)
    made.served = {s.kind.name: s for s in fake.served}
    made.view = namespaces.read_view(fake, config)
    return made


def test_a_fire_fails_a_job_past_the_default_of_its_rule_and_counts_the_rule() -> None:
    fake = FakeWatchCluster(date=NOW)
    fake.add_namespace("team-a", {"tier": "gpu"})
    fake.add_job(job(deadline=None, started_ago=7200))
    w = watcher(fake)
    # What the streams arm: the rule's default (1 h) makes the 2 h old job due an hour ago.
    listed = parse_job(fake.job("pytorchjobs", "team-a", "train"), PYTORCH)
    assert due_at(listed, w.config.policy) is None
    assert due_at(w.streams.view()(listed), w.config.policy) == NOW - timedelta(hours=1)
    w._fire.run(KEY, NOW)
    (status,) = [r for r in fake.writes if r.method == "patch-status"]
    assert "platform rule gpu" in status.body["status"]["conditions"][-1]["message"]
    assert 'rule="gpu"' in w.metrics.render().decode()
