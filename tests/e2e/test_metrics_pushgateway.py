"""``--pushgateway`` against a real Pushgateway and a real apiserver: pushed, read back, kept."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e import pushgateway
from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e

JOB = "sweeper-e2e"


@pytest.fixture
def gateway() -> Iterator[str]:
    with pushgateway.running() as url:
        yield url


Scraped = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def sample(scraped: Scraped, name: str, **labels: str) -> float | None:
    key = (name, tuple(sorted({"job": JOB, "instance": "", **labels}.items())))
    return scraped.get(key)


def present(scraped: Scraped, name: str, **labels: str) -> float:
    found = sample(scraped, name, **labels)
    assert found is not None, f"{name} {labels} not pushed: {sorted(scraped)}"
    return found


def test_a_run_pushes_its_figures_and_a_failed_run_keeps_the_last_success(
    control_plane, namespace, sweep, gateway, tmp_path
):
    w.create_job(control_plane, namespace, "late")
    w.create_job(control_plane, namespace, "young", started_ago=5)
    w.create_job(control_plane, namespace, "done", finished="Succeeded")

    good = sweep("-n", namespace, "--pushgateway", gateway, "--pushgateway-job", JOB)

    assert good.result.returncode == 0, good.explain()
    first = pushgateway.scrape(gateway)
    success = sample(first, "deadline_sweeper_last_success_timestamp_seconds")
    assert success is not None, sorted(first)
    assert sample(first, "deadline_sweeper_last_exit_code") == 0
    assert sample(first, "deadline_sweeper_jobs", kind="PyTorchJob", decision="touch") == 1
    assert sample(first, "deadline_sweeper_jobs", kind="PyTorchJob", decision="skip") == 2
    assert (
        sample(
            first,
            "deadline_sweeper_actions",
            kind="PyTorchJob",
            action="touch",
            result="done",
            rule="",
        )
        == 1
    )
    assert sample(first, "deadline_sweeper_overdue_jobs", kind="PyTorchJob") == 1
    assert present(first, "deadline_sweeper_overdue_seconds_max") >= 3600 - 60
    assert not [
        key for key in first if dict(key[1]).get("name") or dict(key[1]).get("namespace")
    ], "no per-job labels"

    # A kubeconfig whose server refuses connections: exit 3, pushed without a success.
    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n"
        "clusters: [{name: dead, cluster: {server: 'https://127.0.0.1:"
        f"{pushgateway.free_port()}'}}}}]\n"
        "contexts: [{name: dead, context: {cluster: dead, user: dead}}]\n"
        "users: [{name: dead, user: {token: x}}]\n"
    )
    bad = sweep(
        "--pushgateway", gateway, "--pushgateway-job", JOB, "--timeout", "5", kubeconfig=dead
    )

    assert bad.result.returncode == 3, bad.explain()
    second = pushgateway.scrape(gateway)
    assert sample(second, "deadline_sweeper_last_exit_code") == 3
    assert sample(second, "deadline_sweeper_last_success_timestamp_seconds") == success
    assert present(second, "deadline_sweeper_last_run_timestamp_seconds") > success
    # The run never listed: the job figures of the last pass that did stay in place.
    assert sample(second, "deadline_sweeper_overdue_jobs", kind="PyTorchJob") == 1


def test_a_pushgateway_that_is_down_does_not_change_the_exit_code(control_plane, namespace, sweep):
    w.create_job(control_plane, namespace, "late")

    run = sweep(
        "-n",
        namespace,
        "--pushgateway",
        f"http://127.0.0.1:{pushgateway.free_port()}",
        "--log-format",
        "json",
    )

    assert run.result.returncode == 0, run.explain()
    assert "cannot push metrics to the Pushgateway" in run.result.stderr


def test_the_pods_finished_jobs_hold_are_pushed_and_go_to_zero_once_reclaimed(
    control_plane, namespace, sweep, gateway
):
    # Failed by its deadline with its pods left running (v1.9.4), and a Succeeded job whose
    # Running worker its cleanPodPolicy keeps: not the deadline's, not counted.
    failed = w.failed_by_its_deadline(control_plane, namespace, "kept")
    w.create_replicas(control_plane, failed, {"Master": ["Running"], "Worker": ["Pending"]})
    done = w.create_job(control_plane, namespace, "done", finished="Succeeded")
    w.create_replicas(control_plane, done, {"Worker": ["Running"]})
    push = ("-n", namespace, "--pushgateway", gateway, "--pushgateway-job", JOB)
    held = "deadline_sweeper_held_pods"
    series = {"family": "training-operator", "kind": "PyTorchJob"}

    kept = sweep(*push, "--terminate-pods", "policy")

    assert kept.result.returncode == 0, kept.explain()
    first = pushgateway.scrape(gateway)
    assert sample(first, held, **series, reason="policy") == 2
    assert sample(first, held, **series, reason="finished") == 0

    reclaimed = sweep(*push)

    assert reclaimed.result.returncode == 0, reclaimed.explain()
    second = pushgateway.scrape(gateway)
    assert sample(second, held, **series, reason="policy") == 0
    assert sample(second, held, **series, reason="finished") == 0
    assert w.names(control_plane, namespace, "pods") == {"done-worker-0"}
