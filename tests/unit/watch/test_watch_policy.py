"""The watch mode under ``--policy``: a timer's fire judges the job under its platform rule."""

from __future__ import annotations

from datetime import timedelta

from sweeper.core.decide import due_at
from sweeper.core.families import KIND_NAMES
from sweeper.core.families.training_operator import PYTORCHJOB as PYTORCH
from sweeper.core.jobs import parse_job
from sweeper.core.platform import load_platform
from sweeper.watch.inbox import JobKey
from tests.unit.fakes import FakeWatchCluster
from tests.unit.objects import NOW, job
from tests.unit.watch.conftest import Start
from tests.unit.watch.harness import GPU_RULES, policy_watcher, tracked, wait_for

KEY = JobKey("PyTorchJob", "team-a", "train")


def test_a_fire_fails_a_job_past_the_default_of_its_rule_and_counts_the_rule() -> None:
    fake = FakeWatchCluster(date=NOW)
    fake.add_namespace("team-a", {"tier": "gpu"})
    fake.add_job(job(deadline=None, started_ago=7200))
    w = policy_watcher(fake)
    # What the streams arm: the rule's default (1 h) makes the 2 h old job due an hour ago.
    listed = parse_job(fake.job("pytorchjobs", "team-a", "train"), PYTORCH)
    assert due_at(listed, NOW, w.ctx.config.enforcement) is None
    assert due_at(w.ctx.view()(listed), NOW, w.ctx.config.enforcement) == NOW - timedelta(hours=1)
    w._fire.run(KEY, NOW)
    (status,) = [r for r in fake.writes if r.method == "patch-status"]
    assert "platform rule gpu" in status.body["status"]["conditions"][-1]["message"]
    assert 'rule="gpu"' in w.ctx.metrics.render().decode()


# --- a Namespace labelled into a rule between resyncs --------------------------------------------


def test_a_namespace_labelled_into_a_rule_arms_its_jobs_timers_at_the_next_resync(
    start: Start,
) -> None:
    # A job without a deadline in a Namespace no rule selects has no timer. Labelled into the
    # rule, its default falls in 30 min: the resync's re-read of the labels arms the timer,
    # with no event of the job's, so the deadline is not left to a later resync.
    fake = FakeWatchCluster(date=NOW)
    fake.add_namespace("team-a", {})
    fake.add_job(job(deadline=None, started_ago=1800))
    run = start(
        fake, platform=load_platform(GPU_RULES, "rules.yaml", KIND_NAMES), resync=0.05
    ).listed()
    tracked(run, 0)
    reads = len(run.requests("list-namespaces"))

    fake.add_namespace("team-a", {"tier": "gpu"})
    wait_for(lambda: len(run.requests("list-namespaces")) > reads + 1, "two resyncs")
    tracked(run, 1)

    run.advance(1800)
    run.wake()
    wait_for(lambda: run.requests("patch-status", "train") != [], "the default enforced")


def test_a_namespace_whose_rule_is_unchanged_costs_no_list(start: Start) -> None:
    fake = FakeWatchCluster(date=NOW)
    fake.add_namespace("team-a", {"tier": "gpu"})
    run = start(
        fake, platform=load_platform(GPU_RULES, "rules.yaml", KIND_NAMES), resync=0.05
    ).listed()
    lists = len(run.requests("list"))
    reads = len(run.requests("list-namespaces"))

    fake.add_namespace("team-a", {"tier": "gpu", "team": "a"})  # the same rule
    fake.add_namespace("team-b", {})  # a new Namespace no rule selects
    wait_for(lambda: len(run.requests("list-namespaces")) > reads + 2, "three resyncs")
    passes = run.metric("deadline_sweeper_resyncs_total", result="ok")
    # One list per pass, none other (a pass may be listing as the count is read).
    assert len(run.requests("list")) - lists <= passes + 1
