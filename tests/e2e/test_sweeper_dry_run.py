"""``--dry-run`` against a real apiserver, proven from the audit log for every action mode.

Client dry-run (bare ``--dry-run``) sends no write request at all. Server dry-run sends its
writes with ``dryRun=All``, which the apiserver validates and authorizes but never persists.
Each namespace holds a job overdue by seconds and never touched, and one an hour overdue that the
sweeper touched half an hour ago, both with running pods, so that touch, fail and auto all have
something to write (``auto`` touches the first, and fails the second: it is more than
``--escalate-after`` past its deadline and its touch).
"""

from __future__ import annotations

import datetime as dt
import urllib.parse

import pytest

from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e

ACTIONS = ["touch", "fail", "auto"]
# What each action plans for (never touched, touched 30 min ago) with --escalate-after 600.
ESCALATE_AFTER = ["--escalate-after", "600"]
PLANNED = {
    "touch": {"untouched": "touch", "touched": "touch"},
    "fail": {"untouched": "fail", "touched": "fail"},
    "auto": {"untouched": "touch", "touched": "fail"},
}


@pytest.fixture
def overdue(control_plane, namespace):
    """Two overdue jobs with running pods; returns the namespace's objects before the run."""
    half_an_hour_ago = w.stamp(w.now() - dt.timedelta(minutes=30))
    for name, deadline, marks in [
        ("untouched", 3590, {}),
        ("touched", 60, {w.TOUCHED_AT: half_an_hour_ago}),
    ]:
        job = w.create_job(control_plane, namespace, name, deadline=deadline, annotations=marks)
        w.create_replicas(control_plane, job, {"Master": ["Running"], "Worker": ["Running"]})
    return w.namespace_state(control_plane, namespace)


@pytest.mark.parametrize("action", ACTIONS, ids=str)
def test_client_dry_run_sends_no_write_request(control_plane, namespace, overdue, sweep, action):
    run = sweep("-n", namespace, "--action", action, *ESCALATE_AFTER, "--dry-run", "-o", "json")

    assert run.result.returncode == 0, run.explain()
    assert w.writes(run.requests) == [], run.explain()
    assert w.namespace_state(control_plane, namespace) == overdue
    decisions = {j["name"]: j["decision"] for j in w.report_jobs(run.result.stdout)}
    assert decisions == PLANNED[action]


@pytest.mark.parametrize("action", ACTIONS, ids=str)
def test_server_dry_run_marks_every_write_dry_run_and_changes_nothing(
    control_plane, namespace, overdue, sweep, action
):
    run = sweep(
        "-n", namespace, "--action", action, *ESCALATE_AFTER, "--dry-run=server", "-o", "json"
    )

    assert run.result.returncode == 0, run.explain()
    writes = w.writes(run.requests)
    assert writes, "server dry-run should still send its writes: " + run.explain()
    for event in writes:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(event["requestURI"]).query)
        assert query.get("dryRun") == ["All"], event["requestURI"]
    assert w.namespace_state(control_plane, namespace) == overdue
    decisions = {j["name"]: j["decision"] for j in w.report_jobs(run.result.stdout)}
    assert decisions == PLANNED[action]
