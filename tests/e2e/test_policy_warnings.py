"""``warnBefore`` on the real kube-apiserver: one ``DeadlineApproaching`` Event a deadline, in time.

The warning needs no operator: the sweeper records it on the job before the deadline. The
rules file selects the test's namespace by a label; the jobs are created with their status
written as the operator would. Passes and watchers run as often as they like; the API server
itself keeps the warning to one Event, by its name. Times are compared with the job's own
instants (its start, its deadline), never with how fast the machine is.
"""

from __future__ import annotations

import datetime as dt
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from tests.e2e import clusters
from tests.e2e import workloads as w
from tests.e2e.watchers import Watcher, quick_watchers, wait_for

pytestmark = pytest.mark.e2e

REASON = "DeadlineApproaching"
TIER = "e2e.example.com/tier"


@pytest.fixture
def gpu_namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace the rules file's rule selects by its label."""
    name = control_plane.create_namespace("warn", labels={TIER: "gpu"})
    yield name
    clusters.empty_namespace(control_plane, name)
    control_plane.request("DELETE", f"/api/v1/namespaces/{name}", expect=(200, 202, 404))


def rules_file(tmp_path: Path, warn_before: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(
        "rules:\n"
        "  - name: gpu-tenants\n"
        f"    namespaceSelector: {{matchLabels: {{{TIER}: gpu}}}}\n"
        "    allowExemption: true\n"
        f"    warnBefore: {warn_before}\n"
    )
    return path


def warnings_about(cp: ControlPlane, job: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in w.events_about(cp, job) if e["reason"] == REASON]


def instants(job: dict[str, Any], warn_before_s: int) -> tuple[dt.datetime, dt.datetime]:
    """The job's warning instant and its deadline, from its own fields."""
    started = w.parse_stamp(job["status"]["startTime"])
    deadline = started + dt.timedelta(seconds=job["spec"]["runPolicy"]["activeDeadlineSeconds"])
    return deadline - dt.timedelta(seconds=warn_before_s), deadline


def sleep_until(moment: dt.datetime) -> None:
    time.sleep(max((moment - dt.datetime.now(dt.UTC)).total_seconds(), 0.0))


def test_passes_across_the_warning_instant_record_one_event_in_time(
    control_plane, gpu_namespace, run_sweeper, tmp_path
):
    rules = rules_file(tmp_path, "30s")
    job = w.create_job(control_plane, gpu_namespace, "soon", deadline=40, started_ago=0)
    suspended = w.create_job(control_plane, gpu_namespace, "paused", deadline=40, started_ago=0)
    control_plane.request(
        "PATCH",
        w.job_path(gpu_namespace, "PyTorchJob", "paused"),
        {"spec": {"runPolicy": {"suspend": True}}},
        content_type="application/merge-patch+json",
    )
    excluded = w.create_job(
        control_plane,
        gpu_namespace,
        "opted-out",
        deadline=40,
        started_ago=0,
        annotations={w.EXCLUDE: "true"},
    )
    at, deadline = instants(job, 30)

    reports = []
    for number in range(3):
        if number == 1:
            sleep_until(at)
        result = run_sweeper("-n", gpu_namespace, "--policy", str(rules), "-o", "json")
        assert result.returncode == 0, result.stderr
        reports.extend(w.passes(result.stdout))

    (event,) = warnings_about(control_plane, job)
    recorded = w.parse_stamp(event["firstTimestamp"])
    assert at <= recorded < deadline, event
    assert event["type"] == "Warning"
    assert event["metadata"]["name"].startswith("soon.deadline-approaching.")
    assert w.stamp(deadline) in event["message"]
    assert "platform rule gpu-tenants" in event["message"]
    assert warnings_about(control_plane, suspended) == []
    assert warnings_about(control_plane, excluded) == []
    # Each pass said what it did: nothing before the instant, the one record, then "already".
    results = []
    for report in reports:
        now = w.parse_stamp(report["now"])
        said = [(x["name"], x["result"]) for x in report.get("warnings", [])]
        if now < at or now >= deadline:
            assert said == [], report
        else:
            assert len(said) == 1 and said[0][0] == "soon", report
            results.append(said[0][1])
    assert results.count("done") == 1, reports
    assert set(results) <= {"done", "left-alone"}, reports


def test_dry_runs_record_nothing_and_name_the_warning(
    control_plane, gpu_namespace, run_sweeper, tmp_path
):
    rules = rules_file(tmp_path, "2h")  # longer than the deadline: due from the start
    job = w.create_job(control_plane, gpu_namespace, "long", deadline=3600, started_ago=0)

    def warned(*args: str) -> str:
        result = run_sweeper("-n", gpu_namespace, "--policy", str(rules), "-o", "json", *args)
        assert result.returncode == 0, result.stderr
        (report,) = w.passes(result.stdout)
        (warning,) = report["warnings"]
        assert warning["name"] == "long", report
        assert warning["deadline_source"] == "job"
        assert warning["rule"] == "gpu-tenants"
        return str(warning["result"])

    assert warned("--dry-run=client") == "planned"
    assert warned("--dry-run=server") == "dry-run"
    assert warnings_about(control_plane, job) == []
    assert warned() == "done"
    assert warned("--dry-run=server") == "left-alone"  # the server's answer: it exists
    assert len(warnings_about(control_plane, job)) == 1


@pytest.fixture
def start_watcher(sweeper_kubeconfig: Path, tmp_path: Path, gpu_namespace: str) -> Iterator[Any]:
    with quick_watchers(sweeper_kubeconfig, tmp_path, gpu_namespace) as start:
        yield start


def warned_lines(watcher: Watcher) -> list[dict[str, Any]]:
    return [
        line
        for line in watcher.logs()
        if line.get("reason") == REASON and line.get("result") == "done"
    ]


def test_two_watching_replicas_record_one_event_in_time(
    control_plane, gpu_namespace, start_watcher, tmp_path
):
    rules = str(rules_file(tmp_path, "12s"))
    first = start_watcher("--policy", rules, name="first")
    first.wait_ready()
    wait_for(lambda: "deadline_sweeper_leader 1.0" in first.metrics(), "first leads", first)
    second = start_watcher("--policy", rules, name="second")
    second.wait_ready()

    job = w.create_job(control_plane, gpu_namespace, "soon", deadline=20, started_ago=0)
    at, deadline = instants(job, 12)
    wait_for(lambda: warnings_about(control_plane, job) != [], "warning", first, second)
    # Then the deadline: the touch shows the timer went on to the action after the warning.
    wait_for(
        lambda: (
            w.TOUCHED_AT
            in (
                w.get_job(control_plane, gpu_namespace, "PyTorchJob", "soon")["metadata"].get(
                    "annotations"
                )
                or {}
            )
        ),
        "touch",
        first,
        second,
    )

    (event,) = warnings_about(control_plane, job)
    recorded = w.parse_stamp(event["firstTimestamp"])
    assert at <= recorded < deadline, event
    assert [len(warned_lines(first)), len(warned_lines(second))] == [1, 0], first.explain()
    assert (
        'deadline_sweeper_warnings_total{family="training-operator",kind="PyTorchJob",'
        'rule="gpu-tenants"} 1.0' in first.metrics()
    )
    assert first.stop(signal.SIGTERM) == 0, first.explain()
    assert second.stop(signal.SIGTERM) == 0, second.explain()
    assert len(warnings_about(control_plane, job)) == 1
