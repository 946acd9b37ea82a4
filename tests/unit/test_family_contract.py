"""A family defined here alone, added to FAMILIES, runs through every mode over the unit fake.

The proof that a family is one module: a controller that ends nothing itself (the sweeper
fails its jobs at their deadline, then deletes the pods it labels with the job's name) is
given as the ``Family`` contract in this module only, and a one-shot pass, its dry run,
``--explain`` and a watch fire each judge and end its job through the shared code.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

import pytest

from sweeper.config import Config, DryRun, OutputFormat
from sweeper.core import families
from sweeper.core.clock import human
from sweeper.core.families import Family, family_of, pods, table
from sweeper.core.jobs import Job, Owned
from sweeper.core.kinds import DEADLINE_MESSAGE, PODS, Kind, Leftovers, Reading, Resource
from sweeper.core.model import (
    JSON,
    Action,
    ActionKind,
    Enforcement,
    Entry,
    Skip,
    SkipReason,
    Why,
)
from sweeper.core.patches import DeadlineWrite, status_patch
from sweeper.core.rules import ALWAYS, Rule, at_once, later
from sweeper.k8s.cluster import ServedKind
from tests.unit.fakes import FakeWatchCluster
from tests.unit.objects import NOW, ago, owned
from tests.unit.oneshot.test_run import sweep
from tests.unit.test_cli import Harness
from tests.unit.watch.harness import running, wait_for

VERSION = "v1sweep"
SWEEPJOB = Kind(
    "SweepJob", "sweepjobs", "workers", group="sweep.example.com", readings=((VERSION, Reading()),)
)
LABEL = "sweep.example.com/job-name"


def _decide(job: Job, now: datetime, enforcement: Enforcement, overdue: float | None) -> Entry:
    due = None if job.deadline is None else later(job.deadline, enforcement.grace)
    if due is None or now < due:
        return Skip(job, SkipReason.NOT_YET_DUE, overdue, "before its deadline and grace")
    return Action(job, ActionKind.FAIL, Why.OVERDUE, overdue, f"{human(overdue or 0)} late")


class SweepJobs:
    """Its controller never ends a job: the sweeper fails it, then deletes its pods."""

    NAME = "sweep-jobs"
    SERVES: tuple[tuple[Kind, str], ...] = ((SWEEPJOB, VERSION),)
    MANAGED_BY = "sweep.example.com/controller"
    LEFTOVERS = Leftovers(PODS, LABEL)
    PODS = LEFTOVERS  # its pods are its own
    RULES: tuple[Rule, ...] = (Rule("overdue", lambda *_: "past its deadline?", _decide),)
    RECLAIM_REASON = "DeadlinePodsTerminated"
    NOTHING_LEFT = "no pods left"

    @staticmethod
    def finished(
        job: Job, _now: datetime, enforcement: Enforcement, overdue: float | None
    ) -> Entry:
        if job.failed_by_deadline:
            return pods.reclaim(job, enforcement, overdue)
        return Skip(job, SkipReason.FINISHED, overdue, job.finished or "")

    @staticmethod
    def seen_finished(job: Job, *_: object) -> str:
        return f"finished {job.finished}"

    @staticmethod
    def finished_due(job: Job, enforcement: Enforcement) -> datetime | None:
        return at_once(SweepJobs.finished(job, ALWAYS, enforcement, None))

    @staticmethod
    def due_at(job: Job, _now: datetime, enforcement: Enforcement) -> datetime | None:
        return None if job.deadline is None else later(job.deadline, enforcement.grace)

    @staticmethod
    def reclaim_words(enforcement: Enforcement) -> str:
        return pods.reclaim_words(enforcement)

    @staticmethod
    def leftovers(owned: Sequence[Owned], job: Job, enforcement: Enforcement) -> list[Owned]:
        return pods.leftovers(owned, job, enforcement)

    @staticmethod
    def reclaimed_event(job: Job, deleted: Sequence[str], companions: Sequence[str]) -> str:
        return pods.reclaimed_event(job, deleted, companions)

    @staticmethod
    def recreates_pods(_job: Job) -> bool:
        return False

    @staticmethod
    def fail_patch(job: Job, raw: JSON, now: datetime) -> JSON:
        return status_patch(job.kind, raw, now)

    @staticmethod
    def failed_event(job: Job, late: str, deleted: Sequence[str]) -> str:
        return f"failed {late} past its deadline; deleted {', '.join(deleted)}"

    @staticmethod
    def carrier(job: Job) -> tuple[Resource, str]:
        return job.kind.at(job.version), job.name

    @staticmethod
    def deadline_write(_action: Action, _target: JSON | None) -> DeadlineWrite | Action | str:
        return "never: its rules never plan one"


SWEEP: Family = SweepJobs()


@pytest.fixture(autouse=True)
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(families, "FAMILIES", (*families.FAMILIES, SWEEP))
    yield


def sweepjob(*, started_ago: float = 7200, deadline: int = 3600) -> JSON:
    return {
        "apiVersion": f"sweep.example.com/{VERSION}",
        "kind": "SweepJob",
        "metadata": {
            "name": "sweep",
            "namespace": "team-a",
            "uid": "uid-sweep",
            "resourceVersion": "1",
            "labels": {},
        },
        "spec": {"runPolicy": {"activeDeadlineSeconds": deadline}, "workers": {}},
        "status": {"startTime": ago(started_ago), "conditions": []},
    }


def cluster() -> FakeWatchCluster:
    fake = FakeWatchCluster(served=(ServedKind(SWEEPJOB, VERSION),), date=NOW)
    raw = fake.add_job(sweepjob())
    for name in ("sweep-w-0", "sweep-w-1"):
        pod = owned(name, raw)
        pod["metadata"]["labels"] = {LABEL: "sweep"}
        fake.add_pod(pod)
    return fake


def writes(fake: FakeWatchCluster) -> list[tuple[str, str | None]]:
    return [(r.method, r.name) for r in fake.writes]


ENDED = [
    ("patch-status", "sweep"),
    ("delete-pod", "sweep-w-0"),
    ("delete-pod", "sweep-w-1"),
    ("create-event", "sweep"),
]


def test_its_jobs_are_judged_by_the_shared_rules_then_its_own() -> None:
    assert family_of(SWEEPJOB, VERSION) is SWEEP
    assert [rule.name for rule in table(SWEEP)][-2:] == ["not-started", "overdue"]


def test_a_pass_fails_its_overdue_job_then_the_next_reclaims_nothing_more() -> None:
    fake = cluster()

    code, [report] = sweep(fake, Config(output=OutputFormat.JSON))

    assert code == 0
    assert writes(fake) == ENDED
    (record,) = report["jobs"]
    assert (record["kind"], record["decision"], record["result"]) == ("SweepJob", "fail", "done")
    failed = fake.job("sweepjobs", "team-a", "sweep")["status"]["conditions"][-1]
    assert DEADLINE_MESSAGE in failed["message"]
    assert fake.events[0]["reason"] == "DeadlineExceeded"

    code, [again] = sweep(fake, Config(output=OutputFormat.JSON))

    assert (code, len(fake.writes)) == (0, len(ENDED))
    assert again["summary"]["skipped"] == {"finished": 1}


def test_a_dry_run_plans_the_fail_and_writes_nothing() -> None:
    fake = cluster()

    code, [report] = sweep(fake, Config(output=OutputFormat.JSON, dry_run=DryRun.CLIENT))

    assert (code, fake.writes) == (0, [])
    assert [(j["decision"], j["result"]) for j in report["jobs"]] == [("fail", "planned")]


def test_explain_walks_the_shared_rules_and_its_own() -> None:
    harness = Harness(cluster())

    result = harness.invoke("--explain", "team-a/sweep")

    assert result.exit_code == 0, result.output
    assert " 1. malformed " in result.output
    assert "11. overdue " in result.output
    assert "Decision: fail (overdue)" in result.output
    assert harness.fake.writes == []


def test_a_watch_timer_fires_and_ends_its_job() -> None:
    fake = cluster()
    run = running(fake, kinds=(SWEEPJOB,)).start()
    try:
        wait_for(lambda: len(fake.writes) == len(ENDED), "the fire's writes")
    finally:
        assert run.stop() == 0
    assert writes(fake) == ENDED
