"""``sweeper --watch`` on the real kube-apiserver: timers armed, re-armed and dropped by events.

Jobs are created with deadlines a few seconds ahead; the test waits (patiently, without timing
assertions) for the watcher's touch, and checks that it never came before the deadline.
"""

from __future__ import annotations

import datetime as dt
import signal
import socket
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import clusters
from tests.e2e import workloads as w
from tests.e2e.watchers import PATIENCE_S, QUICK_LEASE, Watcher, quick_watchers, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def start_watcher(sweeper_kubeconfig: Path, tmp_path: Path, namespace: str) -> Iterator[Any]:
    with quick_watchers(sweeper_kubeconfig, tmp_path, namespace) as start:
        yield start


def touched_at(cp: Any, namespace: str, name: str) -> str | None:
    job = w.get_job(cp, namespace, "PyTorchJob", name)
    return (job["metadata"].get("annotations") or {}).get(w.TOUCHED_AT)


def acted(watcher: Watcher) -> list[str]:
    return [e["name"] for e in watcher.logs() if e.get("action")]


def deadline_of(job: dict[str, Any]) -> Any:
    start = w.parse_stamp(job["status"]["startTime"])
    return start + dt.timedelta(seconds=job["spec"]["runPolicy"]["activeDeadlineSeconds"])


def test_a_job_overdue_at_start_up_is_touched_at_once(control_plane, namespace, start_watcher):
    w.create_job(control_plane, namespace, "late")
    watcher = start_watcher()

    wait_for(lambda: touched_at(control_plane, namespace, "late") is not None, "touch", watcher)


def test_a_deadline_passing_while_watched_is_enforced_never_early(
    control_plane, namespace, start_watcher
):
    watcher = start_watcher()
    watcher.wait_ready()
    job = w.create_job(control_plane, namespace, "soon", deadline=4, started_ago=0)

    wait_for(lambda: acted(watcher) == ["soon"], "touch", watcher)

    stamp = touched_at(control_plane, namespace, "soon")
    assert stamp is not None
    assert w.parse_stamp(stamp) >= deadline_of(job).replace(microsecond=0)
    late = [e for e in watcher.logs() if e.get("name") == "soon"]
    assert [e["action"] for e in late] == ["touch"], watcher.explain()
    assert late[0]["seconds_overdue"] >= 0


def test_a_shortened_deadline_re_arms_the_timer(control_plane, namespace, start_watcher):
    watcher = start_watcher()
    watcher.wait_ready()
    w.create_job(control_plane, namespace, "edited", deadline=3600, started_ago=0)
    control_plane.request(
        "PATCH",
        w.job_path(namespace, "PyTorchJob", "edited"),
        {"spec": {"runPolicy": {"activeDeadlineSeconds": 2}}},
        content_type="application/merge-patch+json",
    )

    wait_for(lambda: touched_at(control_plane, namespace, "edited") is not None, "touch", watcher)


def test_suspended_and_deleted_jobs_are_left_alone_then_a_resume_is_enforced(
    control_plane, namespace, start_watcher
):
    watcher = start_watcher()
    watcher.wait_ready()
    w.create_job(control_plane, namespace, "paused", deadline=2, started_ago=0)
    control_plane.request(
        "PATCH",
        w.job_path(namespace, "PyTorchJob", "paused"),
        {"spec": {"runPolicy": {"suspend": True}}},
        content_type="application/merge-patch+json",
    )
    w.create_job(control_plane, namespace, "deleted", deadline=2, started_ago=0)
    control_plane.request("DELETE", w.job_path(namespace, "PyTorchJob", "deleted"))
    # A marker due after both: once it is touched, both deadlines are long past.
    w.create_job(control_plane, namespace, "marker", deadline=4, started_ago=0)
    wait_for(lambda: acted(watcher) == ["marker"], "marker", watcher)
    assert touched_at(control_plane, namespace, "paused") is None

    # The operator restarts the clock on resume: a new startTime.
    control_plane.request(
        "PATCH",
        w.job_path(namespace, "PyTorchJob", "paused"),
        {"spec": {"runPolicy": {"suspend": False}}},
        content_type="application/merge-patch+json",
    )
    w.set_status(
        control_plane,
        namespace,
        "PyTorchJob",
        "paused",
        w.operator_status("PyTorchJob", w.stamp(w.now())),
    )
    wait_for(lambda: touched_at(control_plane, namespace, "paused") is not None, "resume", watcher)


def test_two_replicas_elect_one_writer_and_sigterm_hands_over(
    control_plane, namespace, start_watcher
):
    first = start_watcher(name="first")
    first.wait_ready()
    wait_for(lambda: "deadline_sweeper_leader 1.0" in first.metrics(), "first leads", first)
    second = start_watcher(name="second")
    second.wait_ready()
    w.create_job(control_plane, namespace, "one", deadline=2, started_ago=0)
    wait_for(lambda: touched_at(control_plane, namespace, "one") is not None, "touch", first)
    lease = control_plane.request(
        "GET",
        f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/kubeflow-deadline-sweeper",
    )
    assert lease["spec"]["holderIdentity"] == "first"
    assert "deadline_sweeper_leader 0.0" in second.metrics()

    # A Deployment's normal stop: the Lease released, the work in flight done, exit 0.
    assert first.stop(signal.SIGTERM) == 0, first.explain()
    released = control_plane.request(
        "GET",
        f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/kubeflow-deadline-sweeper",
    )
    assert released["spec"].get("holderIdentity") in ("", None, "second"), released
    w.create_job(control_plane, namespace, "two", deadline=2, started_ago=0)

    # The action's log line comes after its writes (the touch, then the event): wait for it.
    wait_for(lambda: acted(second) == ["two"], "takeover", second)
    assert touched_at(control_plane, namespace, "two") is not None
    assert acted(first) == ["one"], first.explain()


def test_an_excluded_namespace_is_never_watched_into_an_action(
    control_plane, namespace, sweeper_kubeconfig, tmp_path
):
    # --exclude-namespace (from the ops branch) and --watch (from the watch branch) met in a
    # merge: the watch streams are cluster-wide and the API cannot leave a namespace out, so
    # the watcher must drop the excluded namespace's jobs itself, as a pass does.
    other = control_plane.create_namespace("excluded")
    try:
        w.create_job(control_plane, namespace, "kept")
        w.create_job(control_plane, other, "hidden")
        watcher = Watcher(
            sweeper_kubeconfig,
            tmp_path,
            "--exclude-namespace",
            other,
            "--lease-namespace",
            namespace,
            *QUICK_LEASE,
            name="excl",
        )
        try:
            # Both jobs are overdue at start-up, when the watcher acts on every due job at once.
            wait_for(
                lambda: touched_at(control_plane, namespace, "kept") is not None, "touch", watcher
            )
            watcher.wait_ready()
            assert touched_at(control_plane, other, "hidden") is None, watcher.explain()
            assert "hidden" not in [e.get("name") for e in watcher.logs()], watcher.explain()
        finally:
            watcher.stop()
    finally:
        clusters.empty_namespace(control_plane, other)


def lease_requests(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (e["verb"], e["requestURI"])
        for e in events
        if (e.get("objectRef") or {}).get("resource") == "leases"
    ]


@pytest.mark.parametrize("mode", ["client", "server"], ids=str)
def test_a_dry_run_watch_writes_no_lease_and_each_replica_reports_on_its_own(
    control_plane, namespace, start_watcher, mode
):
    # A dry run writes nothing, the Lease included (--dry-run=server too: its Lease would be
    # a real write); so nobody leads, and every dry replica acts on the job in its own report.
    since = control_plane.audit_offset()
    w.create_job(control_plane, namespace, "late")
    first = start_watcher(f"--dry-run={mode}", name="dry-a")
    second = start_watcher(f"--dry-run={mode}", name="dry-b")

    wait_for(lambda: acted(first) == ["late"], "first reports", first, second)
    wait_for(lambda: acted(second) == ["late"], "second reports", first, second)
    first.wait_ready()
    second.wait_ready()
    codes = [first.stop(signal.SIGTERM), second.stop(signal.SIGTERM)]

    requests = control_plane.audit_events(user=clusters.SWEEPER_USER, since=since)
    assert lease_requests(requests) == []
    assert codes == [0, 0], first.explain() + second.explain()
    written = w.writes(requests)
    if mode == "client":
        assert written == [], [e["requestURI"] for e in written]
    else:
        assert written, "a server dry run sends its writes, with dryRun=All"
        for event in written:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(event["requestURI"]).query)
            assert query.get("dryRun") == ["All"], event["requestURI"]
    assert touched_at(control_plane, namespace, "late") is None


def test_a_second_watch_on_a_busy_probes_port_exits_2_naming_the_option(
    control_plane, namespace, sweeper_kubeconfig, tmp_path, start_watcher
):
    first = start_watcher(name="first")
    first.wait_ready()

    second = Watcher(
        sweeper_kubeconfig,
        tmp_path,
        "-n",
        namespace,
        "--lease-namespace",
        namespace,
        name="second",
        port=first.port,
    )
    second.process.wait(timeout=PATIENCE_S)
    code = second.stop()

    stderr = second.log_path.read_text()
    assert code == 2, second.explain()
    assert stderr.strip().splitlines()[-1] == (
        f"sweeper: error: cannot serve /healthz, /readyz and /metrics on 127.0.0.1:{first.port}: "
        "Address already in use (another process listens there); choose a free port with "
        "--health-port (SWEEPER_HEALTH_PORT), or 0 to serve none"
    )
    assert "Traceback" not in stderr
    assert first.probe("/readyz") == 200  # the first one is untouched


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return socket.has_ipv6


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this host (cannot bind ::1)")
def test_the_probes_and_metrics_answer_on_the_ipv6_loopback(
    control_plane, namespace, sweeper_kubeconfig, tmp_path
):
    watcher = Watcher(
        sweeper_kubeconfig, tmp_path, "-n", namespace, "--no-leader-elect", address="::1"
    )
    try:
        watcher.wait_ready()
        assert watcher.probe("/healthz") == 200
        assert "deadline_sweeper_tracked_jobs" in watcher.metrics()
        messages = [e.get("message") for e in watcher.logs()]
        serving = f"serving /healthz, /readyz and /metrics on [::1]:{watcher.port}"
        assert serving in messages, watcher.explain()
    finally:
        assert watcher.stop() == 0, watcher.explain()
