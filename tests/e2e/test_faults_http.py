"""HTTP error answers from the apiserver: 429, 500, 503, 409 and 404, where they hurt most.

The fault proxy answers in the apiserver's place (a Kubernetes ``Status`` body, ``Retry-After``
where given) for chosen requests: a list page, a touch patch, a pod delete, the status write;
or it deletes the job just before a request reaches the apiserver, so the 404 is the real one.
For each: the exit code of the documented table, the failing request named in the output, the
attempts counted in the proxy's log (bounded, spaced by backoff or ``Retry-After``), no write
the fault should have prevented, and every other job still swept.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from devcluster import ControlPlane
from tests.e2e import clusters
from tests.e2e import workloads as w
from tests.e2e.clusters import explain_through, sweep_through
from tests.e2e.faultproxy import Before, FaultProxy, Hang, Respond, Rule, Seen

pytestmark = pytest.mark.e2e

MOST_ATTEMPTS = 5
# The shortest wait between two attempts that is still a backoff, not a hot loop.
LEAST_BACKOFF_S = 0.1

FAULTS = [
    pytest.param(Respond(429, retry_after=1), id="429-retry-after"),
    pytest.param(Respond(500), id="500"),
    pytest.param(Respond(503, retry_after=1), id="503-retry-after"),
]


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    with FaultProxy.for_control_plane(control_plane, lifetime=300) as p:
        yield p


def logged_errors(run: clusters.Sweep) -> list[str]:
    """The ``errors`` of every JSON log record on stderr."""
    records = [json.loads(line) for line in run.result.stderr.splitlines() if line.startswith("{")]
    # Per-job records carry a list; the pass summary carries a count under the same key.
    lists = [r["errors"] for r in records if isinstance(r.get("errors"), list)]
    return [error for errors in lists for error in errors]


def gaps(attempts: list[Seen]) -> list[float]:
    """Seconds between the answer to one attempt and the next attempt."""
    return [b.started - (a.ended or a.started) for a, b in itertools.pairwise(attempts)]


def assert_backed_off(attempts: list[Seen], fault: Respond) -> None:
    least = fault.retry_after if fault.retry_after is not None else LEAST_BACKOFF_S
    waited = gaps(attempts)
    print(f"{fault.describe()}: {len(attempts)} attempts, waits {[round(g, 2) for g in waited]}s")
    assert all(g >= least * 0.95 for g in waited), waited


def touched(cp: ControlPlane, namespace: str, name: str) -> bool:
    annotations = w.get_job(cp, namespace, "PyTorchJob", name)["metadata"].get("annotations") or {}
    return w.TOUCHED_AT in annotations


def failed(cp: ControlPlane, namespace: str, name: str) -> bool:
    conditions = (
        w.get_job(cp, namespace, "PyTorchJob", name).get("status", {}).get("conditions", [])
    )
    return any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)


# --- a list page ------------------------------------------------------------------------------

SECOND_PAGE = r"/pytorchjobs\?.*continue="


@pytest.fixture
def three_late(control_plane: ControlPlane, namespace: str) -> str:
    for index in range(3):
        w.create_job(control_plane, namespace, f"late-{index}")
    return namespace


@pytest.mark.parametrize("fault", FAULTS)
def test_a_list_page_that_keeps_failing_exits_3_and_writes_nothing(
    control_plane: ControlPlane, three_late: str, proxy: FaultProxy, fault: Respond
) -> None:
    proxy.rules.append(Rule(fault, "GET", SECOND_PAGE, times=None))

    run = sweep_through(control_plane, proxy, "-o", "json", "-n", three_late, "--page-size", "1")

    attempts = proxy.matching("GET", SECOND_PAGE)
    assert run.result.returncode == 3, explain_through(run, proxy)
    assert 1 < len(attempts) <= MOST_ATTEMPTS, proxy.describe()
    assert_backed_off(attempts, fault)
    errors = [line for line in run.result.stderr.splitlines() if line.startswith("sweeper: error")]
    assert len(errors) == 1, run.result.stderr
    assert "list pytorchjobs.kubeflow.org" in errors[0]
    assert three_late in errors[0]
    assert str(fault.status) in errors[0]
    # A partial listing never leads to acting on the part that was read.
    assert proxy.writes() == [], proxy.describe()
    assert "Traceback" not in run.result.stderr


def test_a_list_whose_continue_token_expires_twice_exits_3_with_the_pass_reported(
    control_plane: ControlPlane, three_late: str, proxy: FaultProxy
) -> None:
    # 410 Gone is the apiserver's answer to an expired continue token; the sweeper starts the
    # list over once, and a list that expires again is a list that cannot be read.
    proxy.rules.append(Rule(Respond(410), "GET", SECOND_PAGE, times=None))

    run = sweep_through(control_plane, proxy, "-o", "json", "-n", three_late, "--page-size", "1")

    assert run.result.returncode == 3, explain_through(run, proxy)
    assert [a.status for a in proxy.matching("GET", SECOND_PAGE)] == [410, 410]
    [report] = w.passes(run.result.stdout)
    assert report["jobs"] == []
    assert "gone (410)" in report["summary"]["stopped_by"]
    assert "expired again" in report["summary"]["stopped_by"]
    assert run.result.stderr.splitlines()[-1].startswith("sweeper: error: cannot list")
    assert proxy.writes() == [], proxy.describe()


# --- a touch patch ----------------------------------------------------------------------------

PATCH_LATE_0 = r"/pytorchjobs/late-0$"


@pytest.mark.parametrize("fault", FAULTS)
def test_a_touch_patch_that_keeps_failing_exits_1_names_the_job_and_spares_the_others(
    control_plane: ControlPlane, three_late: str, proxy: FaultProxy, fault: Respond
) -> None:
    proxy.rules.append(Rule(fault, "PATCH", PATCH_LATE_0, times=None))

    run = sweep_through(control_plane, proxy, "-o", "json", "-n", three_late, "--action", "touch")

    attempts = proxy.matching("PATCH", PATCH_LATE_0)
    assert run.result.returncode == 1, explain_through(run, proxy)
    assert 1 < len(attempts) <= MOST_ATTEMPTS, proxy.describe()
    assert_backed_off(attempts, fault)
    jobs = run.jobs_by_name()
    assert jobs["late-0"]["result"] == "error"
    [error] = jobs["late-0"]["errors"]
    assert f"patch pytorchjobs.kubeflow.org 'late-0' in namespace \"{three_late}\"" in error
    assert str(fault.status) in error
    assert error in logged_errors(run)
    assert [jobs[f"late-{i}"]["result"] for i in (1, 2)] == ["done", "done"]
    assert not touched(control_plane, three_late, "late-0")
    assert touched(control_plane, three_late, "late-1")
    assert touched(control_plane, three_late, "late-2")


# --- a pod delete -----------------------------------------------------------------------------

DELETE_POD = r"/pods/late-worker-0$"


@pytest.fixture
def late_with_pods(control_plane: ControlPlane, namespace: str) -> str:
    job = w.create_job(control_plane, namespace, "late")
    w.create_replicas(control_plane, job, {"Master": ["Running"], "Worker": ["Running"]})
    return namespace


# --- any of them, failing twice: retried with backoff, the run completes ------------------------


def all_touched(cp: ControlPlane, namespace: str) -> bool:
    return all(touched(cp, namespace, f"late-{i}") for i in range(3))


def failed_without_pods(cp: ControlPlane, namespace: str) -> bool:
    return failed(cp, namespace, "late") and w.names(cp, namespace, "pods") == set()


@dataclass(frozen=True)
class Target:
    """A request the fault proxy fails, and what a completed run leaves behind.

    Attributes:
        jobs: The fixture that creates the namespace's jobs.
        method: The request's method.
        path: A pattern of its path.
        args: The sweeper's arguments besides ``-o json -n <namespace>``.
        swept: Whether the run did all it had to.
        more_match: Later requests match the pattern too (the pages after the second).
    """

    jobs: str
    method: str
    path: str
    args: tuple[str, ...]
    swept: Callable[[ControlPlane, str], bool]
    more_match: bool = False


TARGETS = [
    pytest.param(
        Target(
            "three_late", "GET", SECOND_PAGE, ("--page-size", "1"), all_touched, more_match=True
        ),
        id="list-page",
    ),
    pytest.param(
        Target("three_late", "PATCH", PATCH_LATE_0, ("--action", "touch"), all_touched),
        id="touch-patch",
    ),
    pytest.param(
        Target("late_with_pods", "DELETE", DELETE_POD, ("--action", "fail"), failed_without_pods),
        id="pod-delete",
    ),
]


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("target", TARGETS)
def test_a_failing_request_is_retried_with_backoff_and_the_run_completes(
    control_plane: ControlPlane,
    proxy: FaultProxy,
    request: pytest.FixtureRequest,
    target: Target,
    fault: Respond,
) -> None:
    namespace = request.getfixturevalue(target.jobs)
    proxy.rules.append(Rule(fault, target.method, target.path, times=2))

    run = sweep_through(control_plane, proxy, "-o", "json", "-n", namespace, *target.args)

    attempts = proxy.matching(target.method, target.path)
    if target.more_match:
        attempts = attempts[:3]
    assert run.result.returncode == 0, explain_through(run, proxy)
    assert [a.status for a in attempts] == [fault.status, fault.status, 200]
    assert_backed_off(attempts, fault)
    assert target.swept(control_plane, namespace)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_pod_delete_that_keeps_failing_exits_1_and_the_next_run_finishes_the_cleanup(
    control_plane: ControlPlane, late_with_pods: str, proxy: FaultProxy, fault: Respond
) -> None:
    proxy.rules.append(Rule(fault, "DELETE", DELETE_POD, times=None))

    run = sweep_through(
        control_plane, proxy, "-o", "json", "-n", late_with_pods, "--action", "fail"
    )

    attempts = proxy.matching("DELETE", DELETE_POD)
    assert run.result.returncode == 1, explain_through(run, proxy)
    assert 1 < len(attempts) <= MOST_ATTEMPTS, proxy.describe()
    assert_backed_off(attempts, fault)
    [error] = run.jobs_by_name()["late"]["errors"]
    assert f"delete pods 'late-worker-0' in namespace \"{late_with_pods}\"" in error
    assert error in logged_errors(run)
    # The status came first, so the job is Failed and the operator will not recreate pods.
    assert failed(control_plane, late_with_pods, "late")
    assert w.names(control_plane, late_with_pods, "pods") == {"late-worker-0"}

    proxy.rules.clear()
    again = sweep_through(
        control_plane, proxy, "-o", "json", "-n", late_with_pods, "--action", "fail"
    )

    assert again.result.returncode == 0, explain_through(again, proxy)
    assert (again.jobs_by_name()["late"]["decision"], again.jobs_by_name()["late"]["result"]) == (
        "terminate-pods",
        "done",
    )
    assert w.names(control_plane, late_with_pods, "pods") == set()
    assert w.names(control_plane, late_with_pods, "services") == set()


# --- 409 on the status write ------------------------------------------------------------------

STATUS_LATE = r"/pytorchjobs/late/status$"
GET_LATE = r"/pytorchjobs/late$"


def test_a_conflict_on_the_status_write_is_retried_after_a_re_read(
    control_plane: ControlPlane, late_with_pods: str, proxy: FaultProxy
) -> None:
    proxy.rules.append(Rule(Respond(409), "PATCH", STATUS_LATE))

    run = sweep_through(
        control_plane, proxy, "-o", "json", "-n", late_with_pods, "--action", "fail"
    )

    assert run.result.returncode == 0, explain_through(run, proxy)
    # Each status write is preceded by its own read of the job.
    order = [(s.method, s.status) for s in proxy.seen if s.path.endswith(("/late", "/late/status"))]
    assert order == [("GET", 200), ("PATCH", 409), ("GET", 200), ("PATCH", 200)], proxy.describe()
    assert failed(control_plane, late_with_pods, "late")
    assert w.names(control_plane, late_with_pods, "pods") == set()


def test_a_status_write_that_keeps_conflicting_gives_up_on_that_job_and_deletes_no_pod(
    control_plane: ControlPlane, late_with_pods: str, proxy: FaultProxy
) -> None:
    other = w.create_job(control_plane, late_with_pods, "other-late")
    w.create_replicas(control_plane, other, {"Master": ["Running"]})
    proxy.rules.append(Rule(Respond(409), "PATCH", STATUS_LATE, times=None))

    run = sweep_through(
        control_plane, proxy, "-o", "json", "-n", late_with_pods, "--action", "fail"
    )

    writes = proxy.matching("PATCH", STATUS_LATE)
    reads = proxy.matching("GET", GET_LATE)
    assert run.result.returncode == 1, explain_through(run, proxy)
    assert 1 < len(writes) <= MOST_ATTEMPTS, proxy.describe()
    assert len(reads) == len(writes)  # a fresh read before every attempt
    jobs = run.jobs_by_name()
    assert jobs["late"]["result"] == "error"
    [error] = jobs["late"]["errors"]
    assert f"pytorchjobs.kubeflow.org/status 'late' in namespace \"{late_with_pods}\"" in error
    assert "conflict (409)" in error
    assert error in logged_errors(run)
    # The Failed status was never written, so deleting pods would have the operator recreate
    # them: none may be deleted.
    assert not failed(control_plane, late_with_pods, "late")
    assert proxy.matching("DELETE", r"/late-") == [], proxy.describe()
    assert {"late-master-0", "late-worker-0"} <= w.names(control_plane, late_with_pods, "pods")
    # One job's trouble does not stop the sweep.
    assert jobs["other-late"]["result"] == "done"
    assert failed(control_plane, late_with_pods, "other-late")


def test_a_status_write_whose_answer_is_lost_fails_the_job_once_and_still_cleans_up(
    control_plane: ControlPlane, late_with_pods: str, proxy: FaultProxy
) -> None:
    # The write reaches the apiserver, the answer never reaches the sweeper: its retry carries
    # a stale resourceVersion and gets the real 409.
    proxy.rules.append(Rule(Hang(60, forward_first=True), "PATCH", STATUS_LATE))

    run = sweep_through(
        control_plane,
        proxy,
        "-o",
        "json",
        "-n",
        late_with_pods,
        "--action",
        "fail",
        "--request-timeout",
        "2",
    )

    assert run.result.returncode == 0, explain_through(run, proxy)
    writes = proxy.matching("PATCH", STATUS_LATE)
    assert [s.upstream_status for s in writes] == [200, 409], proxy.describe()
    conditions = w.get_job(control_plane, late_with_pods, "PyTorchJob", "late")["status"][
        "conditions"
    ]
    assert [c["type"] for c in conditions].count("Failed") == 1
    assert w.names(control_plane, late_with_pods, "pods") == set()
    assert run.jobs_by_name()["late"]["result"] == "done"


# --- 404: the job, or its whole CRD, deleted mid-run -------------------------------------------


def delete_job(cp: ControlPlane, namespace: str, name: str) -> Before:
    def action(_seen: Seen) -> None:
        cp.request("DELETE", w.job_path(namespace, "PyTorchJob", name))

    return Before(action, name=f"delete-{name}-first")


@pytest.mark.parametrize(
    ("action", "method", "path"),
    [
        ("touch", "PATCH", GET_LATE),
        ("fail", "GET", GET_LATE),
        ("fail", "PATCH", STATUS_LATE),
    ],
    ids=["touch-patch", "fail-re-read", "fail-status-write"],
)
def test_a_job_deleted_mid_run_is_left_alone_and_the_run_completes(  # noqa: PLR0917 - fixtures and a parameter table
    control_plane: ControlPlane,
    late_with_pods: str,
    proxy: FaultProxy,
    action: str,
    method: str,
    path: str,
) -> None:
    w.create_job(control_plane, late_with_pods, "other-late")
    proxy.rules.append(Rule(delete_job(control_plane, late_with_pods, "late"), method, path))

    run = sweep_through(
        control_plane, proxy, "-o", "json", "-n", late_with_pods, "--action", action
    )

    assert run.result.returncode == 0, explain_through(run, proxy)
    [hit] = [s for s in proxy.seen if s.fault == "delete-late-first"]
    assert hit.upstream_status == 404  # the apiserver's own answer
    jobs = run.jobs_by_name()
    assert jobs["late"]["result"] == "left-alone", jobs["late"]
    assert "deleted" in json.dumps(jobs["late"])
    # No pod of a job that is gone is touched: without a Failed status there is nothing to
    # clean up on its behalf.
    assert proxy.matching("DELETE", r"/late-") == [], proxy.describe()
    assert jobs["other-late"]["result"] == "done"
    assert "Traceback" not in run.result.stderr


# --- --timeout bounds retries too ---------------------------------------------------------------


def test_a_retry_after_longer_than_the_time_left_ends_the_run_at_timeout(
    control_plane: ControlPlane, three_late: str, proxy: FaultProxy
) -> None:
    proxy.rules.append(Rule(Respond(429, retry_after=60), "GET", SECOND_PAGE, times=None))

    run = sweep_through(
        control_plane, proxy, "-o", "json", "-n", three_late, "--page-size", "1", "--timeout", "4"
    )

    assert run.result.returncode == 5, explain_through(run, proxy)
    assert "--timeout" in run.result.stderr
    assert "list pytorchjobs.kubeflow.org" in run.result.stderr
    # The run did not sit out the 60 s the server asked for: one retry at most fits in 4 s.
    assert len(proxy.matching("GET", SECOND_PAGE)) <= 2, proxy.describe()
    assert proxy.writes() == []


# --- auto and a touch that is throttled, not refused ---------------------------------------------

PATCH_LATE = r"/pytorchjobs/late$"


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(Respond(429, retry_after=1), id="429"),
        pytest.param(Respond(503, retry_after=1), id="503"),
        pytest.param(Respond(504), id="504"),
    ],
)
def test_auto_does_not_fail_a_job_whose_touch_is_throttled(
    control_plane: ControlPlane, namespace: str, proxy: FaultProxy, fault: Respond
) -> None:
    # A second past its deadline: inside the window where the operator's clock may not be
    # there yet, and its cleanPodPolicy (None) would keep the pods.
    late = w.create_job(control_plane, namespace, "late", deadline=60, started_ago=61)
    w.create_replicas(control_plane, late, {"Master": ["Running"]})
    proxy.rules.append(Rule(fault, "PATCH", PATCH_LATE, times=None))

    run = sweep_through(control_plane, proxy, "-o", "json", "-n", namespace, "--action", "auto")

    assert run.result.returncode == 1, explain_through(run, proxy)
    record = run.jobs_by_name()["late"]
    assert (record["decision"], record["result"]) == ("touch", "error"), record
    assert "touch_refused" not in record
    [error] = record["errors"]
    assert str(fault.status) in error
    assert not failed(control_plane, namespace, "late")
    assert proxy.matching("PATCH", STATUS_LATE) == [], proxy.describe()
    assert w.names(control_plane, namespace, "pods") == {"late-master-0"}


# --- a fail whose answer was lost is this run's, whatever is left to delete ---------------------


@pytest.mark.parametrize("pods", ["active", "policy"])
def test_a_status_write_whose_answer_is_lost_is_done_with_its_event(
    control_plane: ControlPlane, late_with_pods: str, proxy: FaultProxy, pods: str
) -> None:
    proxy.rules.append(Rule(Hang(60, forward_first=True), "PATCH", STATUS_LATE))

    run = sweep_through(
        control_plane,
        proxy,
        "-o",
        "json",
        "-n",
        late_with_pods,
        "--action",
        "fail",
        "--terminate-pods",
        pods,
        "--request-timeout",
        "2",
    )

    assert run.result.returncode == 0, explain_through(run, proxy)
    writes = proxy.matching("PATCH", STATUS_LATE)
    assert [s.upstream_status for s in writes] == [200, 409], proxy.describe()
    record = run.jobs_by_name()["late"]
    assert (record["decision"], record["result"]) == ("fail", "done"), record
    job = w.get_job(control_plane, late_with_pods, "PyTorchJob", "late")
    assert [e["reason"] for e in w.events_about(control_plane, job)] == ["DeadlineExceeded"]
    # --terminate-pods policy with cleanPodPolicy unset (None) keeps them, as the operator.
    left = set() if pods == "active" else {"late-master-0", "late-worker-0"}
    assert w.names(control_plane, late_with_pods, "pods") == left
