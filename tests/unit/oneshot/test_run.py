"""Passes: discovery, listing, the one clock reading, repetition and what ends a run."""

from __future__ import annotations

import gc
import io
import json
import logging
import time
from datetime import datetime, timedelta
from typing import Any

import pytest

from sweeper.config import ClockMode, Config, OutputFormat
from sweeper.core.clock import SYSTEM_CLOCK
from sweeper.core.errors import (
    ApiError,
    ClusterUnavailable,
    ConfigError,
    Gone,
    NotFound,
    RequestRef,
)
from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION, MPIJOB
from sweeper.core.families.training_operator import PYTORCHJOB, TFJOB
from sweeper.core.model import ActionMode, Enforcement
from sweeper.k8s.cluster import ServedKind
from sweeper.oneshot import run as oneshot
from sweeper.oneshot.run import collector_paused, run
from sweeper.stop import Stop
from tests.unit.fakes import FakeCluster, Request
from tests.unit.objects import NOW, ago, deadline_failed, job, owned

JSON_CONFIG = Config(output=OutputFormat.JSON)


class Ticker:
    """A clock whose monotonic reading only moves when asked: pass scheduling without real
    timing (its wall clock is the machine's)."""

    def __init__(self, step: float = 0.0) -> None:
        self.at = 1000.0
        self.step = step

    def now(self) -> datetime:
        return SYSTEM_CLOCK.now()

    def monotonic(self) -> float:
        self.at += self.step
        return self.at


def sweep(
    fake: FakeCluster, config: Config = JSON_CONFIG, clock: Ticker | None = None
) -> tuple[int, list[dict[str, Any]]]:
    def connect(config: Config, *, stop: Stop) -> FakeCluster:
        return fake

    out = io.StringIO()
    code = run(config, connect, out, clock=clock or Ticker())
    return code, documents(out.getvalue())


def documents(text: str) -> list[dict[str, Any]]:
    """The JSON documents of ``-o json``, one per pass, each over several lines."""
    decoder = json.JSONDecoder()
    found, position = [], 0
    while position < len(text):
        document, position = decoder.raw_decode(text, position)
        found.append(document)
        while position < len(text) and text[position].isspace():
            position += 1
    return found


def server_at(moment: Any = NOW, *raws: dict[str, Any]) -> FakeCluster:
    fake = FakeCluster(date=moment)
    for raw in raws:
        fake.add_job(raw)
    return fake


def test_one_pass_by_default_with_the_servers_clock() -> None:
    code, passes = sweep(server_at(NOW, job()))
    assert code == 0
    assert len(passes) == 1
    assert passes[0]["now"] == "2024-05-01T12:00:00Z"
    assert passes[0]["clock"] == "server"
    assert passes[0]["jobs"][0]["decision"] == "touch"


def test_the_servers_clock_decides_whatever_the_local_clock_says() -> None:
    # The server says 30 s before the deadline; the local clock (real, years later) is late.
    fake = server_at(NOW - timedelta(seconds=3630), job())
    _, passes = sweep(fake)
    assert passes[0]["jobs"][0]["reason"] == "not-yet-due"
    assert fake.writes == []


def test_local_clock_warns_when_skewed_beyond_grace(caplog: pytest.LogCaptureFixture) -> None:
    fake = server_at(NOW, job())
    config = Config(output=OutputFormat.JSON, clock=ClockMode.LOCAL)
    with caplog.at_level(logging.WARNING, logger="sweeper"):
        _, passes = sweep(fake, config)
    assert passes[0]["clock"] == "local"
    assert passes[0]["now"] != "2024-05-01T12:00:00Z"
    assert any("ahead of the API server" in r.getMessage() for r in caplog.records)


def test_without_a_date_header_the_local_clock_is_used_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="sweeper"):
        _, passes = sweep(server_at(None, job()))
    assert passes[0]["now"] is not None
    assert any("no Date header" in r.getMessage() for r in caplog.records)


def test_namespaces_are_listed_one_by_one_never_cluster_wide() -> None:
    fake = server_at(NOW, job(namespace="a"), job(namespace="b"), job(namespace="c"))
    config = Config(output=OutputFormat.JSON, namespaces=("a", "c"), kinds=(PYTORCHJOB,))
    _, passes = sweep(fake, config)
    lists = [(r.namespace, r.name) for r in fake.requests if r.method == "list"]
    assert lists == [("a", "pytorchjobs"), ("c", "pytorchjobs")]
    assert [j["namespace"] for j in passes[0]["jobs"]] == ["a", "c"]


def test_pages_are_requested_until_the_list_ends() -> None:
    fake = server_at(NOW, *(job(name=f"j{i}") for i in range(5)))
    config = Config(output=OutputFormat.JSON, page_size=2, kinds=(PYTORCHJOB,))
    _, passes = sweep(fake, config)
    assert [r.method for r in fake.requests].count("list") == 3
    assert len(passes[0]["jobs"]) == 5


def test_kinds_not_served_are_skipped_with_one_info_line(caplog: pytest.LogCaptureFixture) -> None:
    fake = server_at(NOW, job())
    fake.served = (ServedKind(PYTORCHJOB, "v1"),)
    with caplog.at_level(logging.INFO, logger="sweeper"):
        code, _ = sweep(fake, Config(output=OutputFormat.JSON, kinds=(PYTORCHJOB, TFJOB)))
    assert code == 0
    assert [r.getMessage() for r in caplog.records if "not served" in r.getMessage()] == [
        "TFJob is not served by this cluster; skipped"
    ]


def test_an_mpi_operator_mpijob_whose_launcher_carries_its_deadline_is_never_written_to() -> None:
    fake = server_at(NOW, job("MPIJob"))
    fake.served = (ServedKind(MPIJOB, MPI_OPERATOR_VERSION),)
    launcher = owned("train-launcher", job("MPIJob"), phase=None)
    launcher.update(spec={"activeDeadlineSeconds": 3600}, status={"startTime": ago(7190)})
    fake.batch_jobs[("team-a", "train-launcher")] = launcher
    _, passes = sweep(
        fake, Config(output=OutputFormat.JSON, enforcement=Enforcement(ActionMode.FAIL))
    )
    (record,) = passes[0]["jobs"]
    assert (record["decision"], record["result"]) == ("set-deadline", "left-alone")
    assert fake.writes == []


def test_a_kind_removed_mid_run_is_skipped() -> None:
    fake = server_at(NOW, job(), job("TFJob"))
    fake.fail("list", "tfjobs", NotFound(RequestRef("list", "tfjobs.kubeflow.org"), 404))
    code, passes = sweep(fake)
    assert code == 0
    assert [j["kind"] for j in passes[0]["jobs"]] == ["PyTorchJob"]


def test_an_expired_continue_token_restarts_that_list_once() -> None:
    fake = server_at(NOW, *(job(name=f"j{i}") for i in range(3)))
    pages = []

    def expire_on_the_first_second_page(request: Request) -> None:
        if request.method == "list":
            pages.append(request)
            if len(pages) == 2:
                raise Gone(RequestRef("list", "pytorchjobs.kubeflow.org"), 410)

    fake.before = expire_on_the_first_second_page
    _, passes = sweep(fake, Config(output=OutputFormat.JSON, page_size=2, kinds=(PYTORCHJOB,)))
    assert sorted(j["name"] for j in passes[0]["jobs"]) == ["j0", "j1", "j2"]


def test_lists_read_ahead_keep_the_listing_order_and_max_actions_ranks_across_them() -> None:
    # Several kinds and namespaces, pages of two: the lists are read on reader threads
    # (sweeper.k8s.readahead) and each judged when complete, yet the report is in listing order
    # and --max-actions still ranks every action of the pass together.
    overdue_by = {"p1": 10, "p2": 500, "p3": 30, "t1": 400, "t2": 20, "t3": 300}
    raws = [
        job(
            "PyTorchJob" if name.startswith("p") else "TFJob",
            name=name,
            namespace="a" if name in ("p1", "p2", "t1") else "b",
            started_ago=3600 + seconds,
        )
        for name, seconds in overdue_by.items()
    ]
    fake = server_at(NOW, *raws)
    config = Config(
        output=OutputFormat.JSON,
        page_size=2,
        namespaces=("b", "a"),
        kinds=(PYTORCHJOB, TFJOB),
        enforcement=Enforcement(ActionMode.FAIL, max_actions=2),
    )
    _, passes = sweep(fake, config)
    jobs = passes[0]["jobs"]
    assert [(j["kind"], j["namespace"], j["name"]) for j in jobs] == [
        ("PyTorchJob", "b", "p3"),
        ("PyTorchJob", "a", "p1"),
        ("PyTorchJob", "a", "p2"),
        ("TFJob", "b", "t2"),
        ("TFJob", "b", "t3"),
        ("TFJob", "a", "t1"),
    ]
    acted = {j["name"] for j in jobs if j["decision"] == "fail"}
    assert acted == {"p2", "t1"}
    assert {j["reason"] for j in jobs if j["name"] not in acted} == {"over-max-actions"}


def test_a_list_failing_for_good_after_others_were_judged_acts_on_nothing() -> None:
    # A server error that outlasts the retries is the server failing, not one list withheld
    # from the sweeper: the pass stops before any write, as before. A 403 is (test_cli.py).
    fake = server_at(NOW, job(name="overdue"), job("TFJob", name="other"))
    fake.fail("list", "tfjobs", ApiError(RequestRef("list", "tfjobs.kubeflow.org"), 503))
    with pytest.raises(ClusterUnavailable):
        sweep(fake, Config(output=OutputFormat.JSON, enforcement=Enforcement(ActionMode.FAIL)))
    assert fake.writes == []


def list_requests(fake: FakeCluster) -> list[str | None]:
    return [r.name for r in fake.requests if r.method == "list"]


def test_an_expired_token_after_judged_pages_lists_every_kind_again_and_reports_each_job_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    raws = [job(name=f"p{i}") for i in range(3)] + [job("TFJob", name=f"t{i}") for i in range(3)]
    fake = server_at(NOW, *raws)
    tf_pages = []

    def expire_tfjobs_second_page(request: Request) -> None:
        if request.method == "list" and request.name == "tfjobs":
            tf_pages.append(request)
            if len(tf_pages) == 2:
                raise Gone(RequestRef("list", "tfjobs.kubeflow.org"), 410)

    fake.before = expire_tfjobs_second_page
    config = Config(
        output=OutputFormat.JSON,
        page_size=2,
        kinds=(PYTORCHJOB, TFJOB),
        enforcement=Enforcement(ActionMode.FAIL),
    )
    with caplog.at_level(logging.WARNING, logger="sweeper"):
        code, passes = sweep(fake, config)
    assert code == 0
    names = [j["name"] for j in passes[0]["jobs"]]
    assert names == ["p0", "p1", "p2", "t0", "t1", "t2"]
    assert passes[0]["summary"]["jobs"] == 6
    assert passes[0]["summary"]["fail"] == 6
    # Each overdue job failed once: what the first listing judged was dropped, not acted on.
    assert sorted(str(r.name) for r in fake.requests if r.method == "patch-status") == sorted(names)
    assert list_requests(fake).count("pytorchjobs") == 4  # both pages, twice
    assert any("listing every kind again" in r.getMessage() for r in caplog.records)


def test_a_token_expiring_again_after_starting_over_is_cluster_unavailable() -> None:
    fake = server_at(NOW, *(job(name=f"j{i}") for i in range(3)))
    seen = []

    def expire_every_second_page(request: Request) -> None:
        if request.method == "list":
            seen.append(request)
            if len(seen) % 2 == 0:
                raise Gone(RequestRef("list", "pytorchjobs.kubeflow.org"), 410)

    fake.before = expire_every_second_page
    with pytest.raises(ClusterUnavailable, match="expired again after starting over") as raised:
        sweep(fake, Config(output=OutputFormat.JSON, page_size=2, kinds=(PYTORCHJOB,)))
    assert raised.value.exit_code == 3
    assert fake.writes == []


def test_a_kind_vanishing_after_some_pages_were_judged_is_skipped_whole() -> None:
    raws = [job(name=f"p{i}") for i in range(2)] + [job("TFJob", name=f"t{i}") for i in range(3)]
    fake = server_at(NOW, *raws)
    gone = NotFound(RequestRef("list", "tfjobs.kubeflow.org"), 404)
    tf_pages = []

    def remove_tfjobs_after_one_page(request: Request) -> None:
        if request.method == "list" and request.name == "tfjobs":
            tf_pages.append(request)
            if len(tf_pages) >= 2:
                raise gone

    fake.before = remove_tfjobs_after_one_page
    config = Config(output=OutputFormat.JSON, page_size=2, kinds=(PYTORCHJOB, TFJOB))
    code, passes = sweep(fake, config)
    assert code == 0
    assert [j["name"] for j in passes[0]["jobs"]] == ["p0", "p1"]


FORBIDDEN = ApiError(RequestRef("list", "pytorchjobs.kubeflow.org", "a"), 403)


def test_a_forbidden_list_ends_the_run_as_cluster_unavailable() -> None:
    fake = server_at(NOW, job(namespace="a"))
    fake.fail("list", "pytorchjobs", FORBIDDEN)
    with pytest.raises(ClusterUnavailable) as raised:
        sweep(fake, Config(namespaces=("a",), kinds=(PYTORCHJOB,)))
    assert str(raised.value) == (
        'cannot list pytorchjobs.kubeflow.org in namespace "a": forbidden (403) '
        '(server https://fake.invalid, context "fake")'
    )
    assert raised.value.exit_code == 3


def test_a_selector_the_server_rejects_is_a_configuration_error() -> None:
    fake = server_at(NOW, job())
    rejected = ApiError(RequestRef("list", "pytorchjobs"), 400, "unable to parse requirement")
    fake.fail("list", None, rejected)
    with pytest.raises(ConfigError, match="unable to parse requirement"):
        sweep(fake, Config(selector="team=a"))


def test_an_unreachable_cluster_at_discovery_is_cluster_unavailable() -> None:
    fake = server_at(NOW)
    refused = ApiError(RequestRef("get", "API group"), None, "connection refused")
    fake.fail("discover", None, refused)
    with pytest.raises(ClusterUnavailable, match="connection refused"):
        sweep(fake)


def test_failed_actions_make_the_exit_code_one() -> None:
    fake = server_at(NOW, job(name="a"), job(name="b"))
    fake.fail("patch", "a", ApiError(RequestRef("patch", "pytorchjobs"), 500))
    code, passes = sweep(fake)
    assert code == 1
    assert passes[0]["summary"]["errors"] == 1
    assert passes[0]["summary"]["touch"] == 2


def test_repeated_passes_start_every_interval_during_the_duration() -> None:
    # Passes take no time on the ticker: they start at 0, 0.01, 0.02 and 0.03 s.
    fake = server_at(NOW, job(started_ago=10))
    config = Config(output=OutputFormat.JSON, every=0.01, for_seconds=0.035, timeout=5)
    code, passes = sweep(fake, config)
    assert code == 0
    assert [p["pass"] for p in passes] == [1, 2, 3, 4]


def test_a_pass_longer_than_the_interval_skips_the_slots_it_overran() -> None:
    # Slots every 1/16 s during 3.5/16 s: 4 passes when they take no time. Each pass takes
    # 1.5/16 s here, so the second starts at slot 2 and the third at slot 3; slot 4 is gone.
    ticker = Ticker()
    fake = server_at(NOW, job(started_ago=10))

    def slow_discovery(request: Request) -> None:
        if request.method == "discover":
            ticker.at += 1.5 / 16

    fake.before = slow_discovery
    config = Config(output=OutputFormat.JSON, every=1 / 16, for_seconds=3.5 / 16, timeout=5)
    code, passes = sweep(fake, config, ticker)
    assert code == 0
    assert len(passes) == 3


def test_a_timeout_during_the_pass_reports_and_exits_five() -> None:
    fake = server_at(NOW, job(name="a"), job(name="b"))
    code, passes = sweep(fake, Config(output=OutputFormat.JSON, timeout=1), Ticker(step=0.3))
    assert code == 5
    assert passes[0]["summary"]["stopped_by"] == "--timeout (1s) reached"


@pytest.mark.parametrize(
    ("timeout", "step", "code", "push_timeout"),
    [
        # --timeout reached: the push still gets its floor, not --request-timeout (10 s), which
        # outlasted the chart's activeDeadlineSeconds and lost the run's metrics (B5).
        pytest.param(1, 0.3, 5, 1.0, id="timeout-reached-the-floor"),
        pytest.param(3, 0.0, 0, 3.0, id="what-is-left-of-the-timeout"),
        pytest.param(45, 0.0, 0, 10.0, id="at-most-the-request-timeout"),
    ],
)
def test_the_metrics_push_gets_what_is_left_of_the_timeout(
    monkeypatch: pytest.MonkeyPatch, timeout: float, step: float, code: int, push_timeout: float
) -> None:
    from sweeper import metrics  # noqa: PLC0415 - as the run imports it, only to push

    pushed: list[float] = []

    def push(url: str, job: str, run: metrics.RunFigures, *, timeout: float) -> bool:
        pushed.append(timeout)
        return True

    monkeypatch.setattr(metrics, "push", push)
    fake = server_at(NOW, job(name="a"), job(name="b"))
    config = Config(
        output=OutputFormat.JSON,
        timeout=timeout,
        request_timeout=10,
        pushgateway="http://127.0.0.1:9",
    )

    assert sweep(fake, config, Ticker(step=step))[0] == code
    assert pushed == [push_timeout]


def test_without_a_clock_the_run_and_its_stop_flag_read_time_monotonic_at_each_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One default clock for the run, its passes and its Stop: patching time.monotonic
    # (as freezegun does) moves them all together, the --timeout included.
    ticker = Ticker(step=0.3)
    monkeypatch.setattr(time, "monotonic", ticker.monotonic)
    fake = server_at(NOW, job(name="a"), job(name="b"))
    out = io.StringIO()

    code = run(Config(output=OutputFormat.JSON, timeout=1), lambda c, *, stop: fake, out)

    (document,) = documents(out.getvalue())
    assert code == 5
    assert document["summary"]["stopped_by"] == "--timeout (1s) reached"
    assert document["summary"]["duration_s"] >= 0.3


def test_no_pass_starts_at_or_after_the_timeout() -> None:
    # --for reaches past --timeout: the run ends cleanly instead of waiting to be cut off.
    fake = server_at(NOW, job(started_ago=10))
    config = Config(output=OutputFormat.JSON, every=0.01, for_seconds=10.0, timeout=0.025)
    code, passes = sweep(fake, config)
    assert code == 0
    assert [p["pass"] for p in passes] == [1, 2, 3]


def test_the_collector_is_paused_only_inside_the_block_and_restored_after_an_error() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("a list failed")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # a caller that had paused it keeps it paused
    finally:
        gc.enable()


class CollectorWitness(FakeCluster):
    """Notes whether the cyclic collector runs while the jobs are listed."""

    def __init__(self) -> None:
        super().__init__(date=NOW)
        self.collecting: list[bool] = []

    def list_job_views(self, *args: Any, **kwargs: Any) -> Any:
        self.collecting.append(gc.isenabled())
        return super().list_job_views(*args, **kwargs)


def test_a_one_shot_run_lists_with_the_collector_paused() -> None:
    fake = CollectorWitness()
    fake.add_job(job())
    assert sweep(fake)[0] == 0
    assert fake.collecting
    assert not any(fake.collecting)
    assert gc.isenabled()


def test_a_pass_called_alone_leaves_the_collector_on() -> None:
    # The watch mode's resync thread calls sweep(): the collector stays on for the process.
    fake = CollectorWitness()
    fake.add_job(job())
    outcome = oneshot.sweep(
        1, JSON_CONFIG, fake, Stop(SYSTEM_CLOCK), io.StringIO(), clock=SYSTEM_CLOCK
    )
    assert outcome.errors == 0
    assert fake.collecting
    assert all(fake.collecting)


@pytest.mark.parametrize(
    ("fault", "config", "raises"),
    [
        pytest.param(None, JSON_CONFIG, None, id="one-pass"),
        pytest.param(
            None,
            Config(output=OutputFormat.JSON, every=0.01, for_seconds=0.035, timeout=5),
            None,
            id="repeated-passes",
        ),
        pytest.param(FORBIDDEN, JSON_CONFIG, ClusterUnavailable, id="cluster-unavailable"),
        pytest.param(RuntimeError("a bug"), JSON_CONFIG, RuntimeError, id="internal-error"),
    ],
)
def test_the_run_closes_its_connections_once_however_it_ends(
    fault: BaseException | None, config: Config, raises: type[BaseException] | None
) -> None:
    fake = server_at(NOW, job(started_ago=10))
    if fault is not None:
        fake.fail("list", "pytorchjobs", fault)
    if raises is None:
        sweep(fake, config)
    else:
        with pytest.raises(raises):
            sweep(fake, config)
    assert fake.closed == 1


# --- clean-ups after touches and fails; one pod list per scope (C3, C9) ---------------------


def deadline_failed_job(name: str, kind: str = "TFJob", *, failed_ago: float) -> dict[str, Any]:
    return job(kind, name=name, conditions=deadline_failed(name), started_ago=3600 + failed_ago)


def test_old_deadline_failed_jobs_take_no_slot_from_a_recent_ones_pods() -> None:
    fake = server_at(NOW)
    for i in range(3):
        fake.add_job(deadline_failed_job(f"old-{i}", failed_ago=86400 * (30 + i)))
    recent = fake.add_job(deadline_failed_job("recent", failed_ago=60))
    for i in range(2):
        fake.add_pod(owned(f"recent-worker-{i}", recent))
    config = Config(
        output=OutputFormat.JSON, enforcement=Enforcement(action=ActionMode.AUTO, max_actions=3)
    )

    code, [report] = sweep(fake, config)

    assert code == 0
    results = {j["name"]: (j["decision"], j["reason"], j["result"]) for j in report["jobs"]}
    assert results == {
        **{f"old-{i}": ("skip", "finished", "skipped") for i in range(3)},
        "recent": ("terminate-pods", "failed-by-deadline", "done"),
    }
    assert fake.pods == {}
    assert [e["reason"] for e in fake.events] == ["DeadlinePodsTerminated"]


def test_retained_deadline_failed_jobs_cost_one_pod_list_and_the_due_touch_comes_first() -> None:
    fake = server_at(NOW)
    for i in range(200):
        fake.add_job(deadline_failed_job(f"old-{i:03}", failed_ago=86400 + i))
    fake.add_job(job("PyTorchJob", name="due-now", started_ago=3601))
    config = Config(output=OutputFormat.JSON, enforcement=Enforcement(action=ActionMode.AUTO))

    code, [report] = sweep(fake, config)

    assert code == 0
    methods = fake.methods()
    assert methods.count("list-pods") == 1  # the pass's one list, none per job
    assert methods[-3:] == ["list-pods", "patch", "create-event"]
    assert report["summary"]["skipped"] == {"finished": 200}
    assert [j["name"] for j in report["jobs"]][-1] == "due-now"


def test_a_touch_listed_after_a_clean_up_runs_before_it() -> None:
    fake = server_at(NOW)
    failed = fake.add_job(deadline_failed_job("failed", failed_ago=60))
    fake.add_pod(owned("failed-worker-0", failed))
    fake.add_job(job("PyTorchJob", name="due-now", started_ago=3601))
    config = Config(output=OutputFormat.JSON, enforcement=Enforcement(action=ActionMode.AUTO))

    code, [report] = sweep(fake, config)

    assert code == 0
    writes = [(r.method, r.name) for r in fake.writes]
    assert writes == [
        ("patch", "due-now"),
        ("create-event", "due-now"),
        ("delete-pod", "failed-worker-0"),
        ("create-event", "failed"),
    ]
    assert [j["name"] for j in report["jobs"]] == ["failed", "due-now"]


def test_with_namespaces_the_pods_are_listed_in_each_namespace_with_a_clean_up() -> None:
    fake = server_at(NOW)
    fake.add_job(job("TFJob", name="f", namespace="a", conditions=deadline_failed("f")))
    fake.add_job(job("TFJob", name="g", namespace="c", conditions=deadline_failed("g")))
    config = Config(
        output=OutputFormat.JSON,
        namespaces=("a", "b", "c"),
        enforcement=Enforcement(action=ActionMode.FAIL),
    )

    code, _ = sweep(fake, config)

    assert code == 0
    lists = [r.namespace or "" for r in fake.requests if r.method == "list-pods"]
    assert sorted(lists) == ["a", "c"]


def test_touch_mode_reclaims_the_pods_the_operator_kept_at_its_deadline_failure() -> None:
    # v1.9.4 fails a touched job and keeps its pods (cleanPodPolicy absent means None): the
    # defaults must still give the GPUs back.
    fake = server_at(NOW)
    failed = fake.add_job(deadline_failed_job("failed", failed_ago=60))
    fake.add_pod(owned("failed-worker-0", failed))
    fake.add_pod(owned("failed-worker-1", failed, phase="Succeeded"))
    fake.add_job(job(name="due"))

    code, _ = sweep(fake)

    assert code == 0
    writes = [(r.method, r.name) for r in fake.writes]
    assert writes == [
        ("patch", "due"),
        ("create-event", "due"),
        ("delete-pod", "failed-worker-0"),
        ("create-event", "failed"),
    ]


# --- terminating pods (C4) ----------------------------------------------------------------


@pytest.mark.parametrize("action", [ActionMode.FAIL, ActionMode.AUTO])
def test_a_pod_already_terminating_is_not_deleted_again_nor_reported(action: ActionMode) -> None:
    # What the pass after a fail sees when the pod's grace period (or a finalizer) keeps it.
    fake = server_at(NOW)
    raw = fake.add_job(job(name="train", conditions=deadline_failed("train", by_sweeper=True)))
    fake.add_pod(owned("train-worker-0", raw, deleting=True))
    fake.add_service(owned("train-worker-0", raw, phase=None))
    config = Config(output=OutputFormat.JSON, enforcement=Enforcement(action=action))

    code, [report] = sweep(fake, config)

    assert code == 0
    [record] = report["jobs"]
    assert (record["decision"], record["reason"], record["result"]) == (
        "skip",
        "finished",
        "skipped",
    )
    assert fake.writes == []
    assert fake.events == []
