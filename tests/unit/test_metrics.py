"""Pushed metrics: values from a pass, fixed label sets, a push that cannot fail a run."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sweeper import metrics
from sweeper.core.decide import decide
from sweeper.core.families import KINDS
from sweeper.core.jobs import parse_job
from sweeper.core.kinds import EXCLUDE_ANNOTATION, TOUCHED_AT_ANNOTATION
from sweeper.core.model import Enforcement, Outcome, Result
from sweeper.core.tally import Tally
from tests.unit.loopback import serving
from tests.unit.objects import KIND, NOW, ago, condition, deadline_failed, job, owned
from tests.unit.test_cli import Harness

ENDED = NOW + timedelta(seconds=3)


def outcomes(*raws: dict[str, Any], results: dict[str, Result] | None = None) -> list[Outcome]:
    plan = decide([parse_job(r, KIND[r["kind"]]) for r in raws], NOW, Enforcement())
    found = []
    for entry in plan.entries:
        default = Result.SKIPPED if entry.decision == "skip" else Result.DONE
        found.append(Outcome(entry, (results or {}).get(entry.job.name, default)))
    return found


def a_pass() -> list[Outcome]:
    return outcomes(
        job(name="late", started_ago=7200),  # 1 h overdue: touched
        job(name="later", kind="TFJob", started_ago=9000),  # 1 h 30 overdue: touch refused
        job(name="touched", annotations={TOUCHED_AT_ANNOTATION: ago(30)}),  # recently touched
        job(name="young", started_ago=60),  # not yet due
        job(name="by-operator", conditions=deadline_failed("by-operator")),
        job(name="by-sweeper", conditions=deadline_failed("by-sweeper", by_sweeper=True)),
        job(
            name="after-touch",
            conditions=deadline_failed("after-touch"),
            annotations={TOUCHED_AT_ANNOTATION: ago(600)},
        ),
        job(name="done", conditions=[condition("Succeeded")]),
        results={"later": Result.ERROR},
    )


def value(run: metrics.RunFigures, metric: metrics.Metric, *labels: str) -> float:
    return run.values[metric.name][labels]


@pytest.mark.parametrize(
    ("metric", "labels", "expected"),
    [
        pytest.param(metrics.JOBS, ("PyTorchJob", "touch"), 1, id="jobs-touched"),
        pytest.param(metrics.JOBS, ("PyTorchJob", "skip"), 3, id="jobs-skipped"),
        pytest.param(
            metrics.JOBS, ("PyTorchJob", "terminate-pods"), 3, id="jobs-deadline-failed-reclaimed"
        ),
        pytest.param(metrics.JOBS, ("MPIJob", "fail"), 0, id="zeros-are-pushed"),
        pytest.param(metrics.SKIPPED, ("PyTorchJob", "recently-touched"), 1, id="skip-reason"),
        pytest.param(metrics.SKIPPED, ("PyTorchJob", "finished"), 1, id="finished"),
        pytest.param(metrics.ACTIONS, ("PyTorchJob", "touch", "done", ""), 1, id="action-done"),
        pytest.param(metrics.ACTIONS, ("TFJob", "touch", "error", ""), 1, id="action-error"),
        pytest.param(metrics.OVERDUE, ("PyTorchJob",), 2, id="overdue-acted-or-touched"),
        pytest.param(metrics.OVERDUE, ("TFJob",), 1, id="overdue-by-kind"),
        pytest.param(metrics.MAX_OVERDUE, (), 5400, id="largest-overdue-seconds"),
        pytest.param(metrics.DEADLINE_FAILED, ("PyTorchJob", "operator"), 1, id="by-operator"),
        pytest.param(metrics.DEADLINE_FAILED, ("PyTorchJob", "sweeper"), 1, id="by-sweeper"),
        pytest.param(
            metrics.DEADLINE_FAILED,
            ("PyTorchJob", "operator-after-touch"),
            1,
            id="by-the-operator-after-a-touch",
        ),
        pytest.param(metrics.LAST_EXIT_CODE, (), 1, id="exit-code"),
        pytest.param(metrics.DURATION, (), 2.5, id="duration"),
        pytest.param(metrics.LAST_RUN, (), ENDED.timestamp(), id="last-run"),
    ],
)
def test_the_figures_of_a_pass(
    metric: metrics.Metric, labels: tuple[str, ...], expected: float
) -> None:
    run = metrics.figures(a_pass(), exit_code=1, ended_at=ENDED, duration_s=2.5)
    assert value(run, metric, *labels) == expected


def test_a_pass_tally_gives_the_figures_its_outcomes_give() -> None:
    # The one-shot run pushes the tally its summary was counted in, not its outcomes.
    found = a_pass()
    tallied = metrics.figures(Tally.of(found), exit_code=1, ended_at=ENDED, duration_s=2.5)
    assert tallied == metrics.figures(found, exit_code=1, ended_at=ENDED, duration_s=2.5)


@pytest.mark.parametrize(
    ("exit_code", "has_success"),
    [
        pytest.param(0, True, id="ok"),
        pytest.param(1, False, id="actions-failed"),
        pytest.param(3, False, id="cluster-unavailable"),
        pytest.param(5, False, id="timeout"),
    ],
)
def test_the_last_success_is_pushed_only_by_a_run_that_exits_0(
    exit_code: int, has_success: bool
) -> None:
    run = metrics.figures([], exit_code=exit_code, ended_at=ENDED, duration_s=1)
    assert (metrics.LAST_SUCCESS.name in run.values) is has_success


def test_a_run_that_never_decided_pushes_only_its_own_metrics() -> None:
    # POST replaces only the metrics it carries: the last pass's job figures stay in place.
    run = metrics.figures(None, exit_code=3, ended_at=ENDED, duration_s=1)
    assert set(run.values) == {
        metrics.LAST_RUN.name,
        metrics.LAST_EXIT_CODE.name,
        metrics.DURATION.name,
    }


def test_the_exposition_has_a_fixed_set_of_series_and_no_job_labels() -> None:
    small = metrics.figures(a_pass(), exit_code=0, ended_at=ENDED, duration_s=1)
    empty = metrics.figures([], exit_code=0, ended_at=ENDED, duration_s=1)
    texts = [generate_latest(metrics.registry_of(r)).decode() for r in (small, empty)]
    families = [list(text_string_to_metric_families(text)) for text in texts]
    series = [
        {(s.name, tuple(sorted(s.labels.items()))) for f in fam for s in f.samples}
        for fam in families
    ]
    assert series[0] == series[1]
    assert {f.name for f in families[0]} == {m.name for m in metrics.METRICS}
    labels = {key for fam in families[0] for s in fam.samples for key in s.labels}
    assert labels == {
        "kind",
        "decision",
        "reason",
        "action",
        "result",
        "by",
        "family",
        "what",
        "rule",
    }
    assert all(f.name.startswith("deadline_sweeper_") for f in families[0])


def test_what_the_clean_ups_deleted_is_counted_by_family_kind_and_what() -> None:
    found = a_pass()
    cleaned = [
        replace(o, reclaimed=(("pods", "w-0"), ("pods", "w-1")))
        for o in found
        if o.entry.decision == "terminate-pods" and o.entry.job.name == "by-operator"
    ]
    run = metrics.figures(cleaned, exit_code=0, ended_at=ENDED, duration_s=1)

    assert value(run, metrics.RECLAIMED, "training-operator", "PyTorchJob", "pods") == 2
    assert value(run, metrics.RECLAIMED, "mpi-operator", "MPIJob", "pods") == 0
    assert value(run, metrics.RECLAIMED, "trainer", "TrainJob", "jobsets") == 0


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_pushgateway_is_logged_and_keeps_the_exit_code() -> None:
    harness = Harness()
    harness.fake.add_job(job(name="late"))
    url = f"http://127.0.0.1:{closed_port()}"
    result = harness.invoke("--pushgateway", url, "--log-format", "text")
    assert result.exit_code == 0, result.output
    assert f"cannot push metrics to the Pushgateway {url}" in result.stderr


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("pushgateway:9091", id="no-scheme"),
        pytest.param("ftp://pushgateway", id="other-scheme"),
        pytest.param("http://", id="no-host"),
        pytest.param("http://pushgateway:port", id="bad-port"),
    ],
)
def test_a_bad_pushgateway_url_is_a_usage_error(url: str) -> None:
    result = Harness().invoke("--pushgateway", url)
    assert result.exit_code == 2
    assert "(--pushgateway)" in result.stderr


def test_the_pushgateway_flags_have_environment_twins() -> None:
    harness = Harness()
    url = f"http://127.0.0.1:{closed_port()}"
    harness.invoke(env={"SWEEPER_PUSHGATEWAY": url, "SWEEPER_PUSHGATEWAY_JOB": "team-a"})
    assert harness.config is not None
    assert (harness.config.pushgateway, harness.config.pushgateway_job) == (url, "team-a")


def test_the_watch_modes_overdue_gauge_has_the_pushed_gauges_name_and_kind_label() -> None:
    # Issue 14: one name for both modes, so one alert and one dashboard read either.
    watch = metrics.WatchMetrics()
    watch.set_overdue({"TFJob": 2})
    samples = {
        (s.name, tuple(s.labels.items())): s.value
        for family in text_string_to_metric_families(watch.render().decode())
        for s in family.samples
        if s.name == metrics.OVERDUE.name
    }
    assert samples == {
        (metrics.OVERDUE.name, (("kind", kind.name),)): (2 if kind.name == "TFJob" else 0)
        for kind in KINDS
    }


class _Gateway(BaseHTTPRequestHandler):
    """A Pushgateway on loopback that keeps the bodies pushed to it."""

    bodies: list[str]

    def do_POST(self) -> None:
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])).decode())
        self.send_response(202)
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def gateway() -> Iterator[tuple[str, list[str]]]:
    bodies: list[str] = []
    with serving(type("Gateway", (_Gateway,), {"bodies": bodies})) as url:
        yield url, bodies


def test_a_run_pushes_the_counts_its_summary_reports(gateway: tuple[str, list[str]]) -> None:
    url, bodies = gateway
    harness = Harness()
    harness.fake.add_job(job(name="late"))  # touched
    harness.fake.add_job(job(name="young", started_ago=60))
    harness.fake.add_job(job(name="tf-young", kind="TFJob", started_ago=60))
    harness.fake.add_job(job(name="done", conditions=[condition("Succeeded")]))

    result = harness.invoke("--pushgateway", url, "-o", "json")

    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["summary"]
    (body,) = bodies
    labels_of = {metric.name: metric.labels for metric in metrics.METRICS}
    pushed = {
        (s.name, tuple(s.labels[label] for label in labels_of[s.name])): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    jobs = {labels: n for (name, labels), n in pushed.items() if name == metrics.JOBS.name}
    assert {labels: n for labels, n in jobs.items() if n} == {
        ("PyTorchJob", "touch"): 1,
        ("PyTorchJob", "skip"): 2,
        ("TFJob", "skip"): 1,
    }
    assert sum(jobs.values()) == summary["jobs"] == 4
    assert pushed[metrics.ACTIONS.name, ("PyTorchJob", "touch", "done", "")] == 1
    assert pushed[metrics.SKIPPED.name, ("TFJob", "not-yet-due")] == 1
    assert pushed[metrics.OVERDUE.name, ("PyTorchJob",)] == 1


def _held(body: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(s.labels[label] for label in metrics.HELD_PODS.labels): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if s.name == metrics.HELD_PODS.name
    }


def test_the_pods_finished_jobs_hold_are_pushed_by_reason_and_go_once_reclaimed(
    gateway: tuple[str, list[str]],
) -> None:
    url, bodies = gateway
    harness = Harness()
    failed = harness.fake.add_job(job(name="failed", conditions=deadline_failed("failed")))
    harness.fake.add_pod(owned("failed-master-0", failed))
    harness.fake.add_pod(owned("failed-worker-0", failed, phase="Pending"))
    harness.fake.add_pod(owned("failed-worker-1", failed, phase="Succeeded"))  # holds nothing
    harness.fake.add_pod(owned("failed-worker-2", failed, deleting=True))  # going already
    opted = harness.fake.add_job(
        job(
            name="opted",
            uid="uid-opted",
            conditions=deadline_failed("opted"),
            annotations={EXCLUDE_ANNOTATION: "true"},
        )
    )
    harness.fake.add_pod(owned("opted-master-0", opted))
    harness.fake.add_pod(owned("look-alike", opted, controller=False))  # not its controller's
    # Finished otherwise: its cleanPodPolicy is its controller's business, not a held pod.
    done = harness.fake.add_job(
        job(name="done", uid="uid-done", conditions=[condition("Succeeded")])
    )
    harness.fake.add_pod(owned("done-worker-0", done))
    training = ("training-operator", "PyTorchJob")

    kept = harness.invoke("--terminate-pods", "policy", "--pushgateway", url)
    reclaimed = harness.invoke("--pushgateway", url)

    assert (kept.exit_code, reclaimed.exit_code) == (0, 0), kept.output + reclaimed.output
    first, second = map(_held, bodies)
    assert {labels: n for labels, n in first.items() if n} == {
        (*training, "policy"): 2,
        (*training, "opted-out"): 1,
    }
    assert {labels: n for labels, n in second.items() if n} == {(*training, "opted-out"): 1}
    assert second[(*training, "policy")] == 0
    assert ("trainer", "TrainJob", "finished") not in second, "a TrainJob's pods are its JobSet's"
    assert second[("trainer", "TrainJob", "finished-holding")] == 0, "held: every family"
    assert ("mpi-operator", "MPIJob", "finished") in second, "every series, zeros included"


def test_the_watch_modes_held_pods_gauge_is_set_from_a_resync_pass_and_zeroes_the_rest() -> None:
    watch = metrics.WatchMetrics()

    watch.set_held_pods({("mpi-operator", "MPIJob", "reclaim-later"): 2})
    first = _held(watch.render().decode())
    watch.set_held_pods({})
    second = _held(watch.render().decode())

    assert {labels: n for labels, n in first.items() if n} == {
        ("mpi-operator", "MPIJob", "reclaim-later"): 2
    }
    assert not any(second.values())
    assert set(second) == set(first)


def _samples(body: str, metric: metrics.Metric) -> dict[tuple[str, ...], float]:
    return {
        tuple(s.labels[label] for label in metric.labels): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if s.name == metric.name
    }


def test_the_gpus_held_for_nothing_are_pushed_beside_their_pods(
    gateway: tuple[str, list[str]],
) -> None:
    url, bodies = gateway
    harness = Harness()
    gang = harness.fake.add_job(job(name="gang", deadline=None))
    for name, node in (("gang-master-0", "node-a"), ("gang-worker-0", None)):
        pod = owned(name, gang, phase="Running" if node else "Pending")
        pod["spec"] = {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 4}}}]}
        if node:
            pod["spec"]["nodeName"] = node
            pod["status"]["conditions"] = [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": ago(3600)}
            ]
        harness.fake.add_pod(pod)

    result = harness.invoke("--pushgateway", url)

    assert result.exit_code == 0, result.output
    (body,) = bodies
    gpus = _samples(body, metrics.HELD_GPUS)
    pods = _samples(body, metrics.HELD_PODS)
    stuck = ("training-operator", "PyTorchJob", "stuck-starting")
    assert {labels: n for labels, n in gpus.items() if n} == {stuck: 4}
    assert pods[stuck] == 2
    assert gpus[("mpi-operator", "MPIJob", "finished-holding")] == 0, "zeros included"
    assert gpus[("trainer", "TrainJob", "stuck-starting")] == 0, "every family"


def test_the_watch_modes_held_gpus_gauge_is_set_from_a_resync_pass() -> None:
    watch = metrics.WatchMetrics()
    stuck = ("training-operator", "TFJob", "stuck-starting")
    watch.set_held_pods({stuck: 3}, {stuck: 2})
    first = _samples(watch.render().decode(), metrics.HELD_GPUS)
    watch.set_held_pods({})
    second = _samples(watch.render().decode(), metrics.HELD_GPUS)
    assert {labels: n for labels, n in first.items() if n} == {stuck: 2}
    assert not any(second.values())
