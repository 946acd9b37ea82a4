"""The watch mode under ``--policy``: a timer's fire judges the job under its platform rule."""

from __future__ import annotations

from datetime import timedelta

from sweeper.core.decide import due_at
from sweeper.core.jobs import parse_job
from sweeper.core.kinds import PYTORCHJOB as PYTORCH
from sweeper.watch.inbox import JobKey
from tests.unit.fakes import FakeWatchCluster
from tests.unit.objects import NOW, job
from tests.unit.watch.harness import policy_watcher

KEY = JobKey("PyTorchJob", "team-a", "train")


def test_a_fire_fails_a_job_past_the_default_of_its_rule_and_counts_the_rule() -> None:
    fake = FakeWatchCluster(date=NOW)
    fake.add_namespace("team-a", {"tier": "gpu"})
    fake.add_job(job(deadline=None, started_ago=7200))
    w = policy_watcher(fake)
    # What the streams arm: the rule's default (1 h) makes the 2 h old job due an hour ago.
    listed = parse_job(fake.job("pytorchjobs", "team-a", "train"), PYTORCH)
    assert due_at(listed, w.config.policy) is None
    assert due_at(w.streams.view()(listed), w.config.policy) == NOW - timedelta(hours=1)
    w._fire.run(KEY, NOW)
    (status,) = [r for r in fake.writes if r.method == "patch-status"]
    assert "platform rule gpu" in status.body["status"]["conditions"][-1]["message"]
    assert 'rule="gpu"' in w.metrics.render().decode()
