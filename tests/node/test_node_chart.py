"""The chart and the image on a real node: what users deploy, run the way a cluster runs it.

``helm install ./chart`` with the image ``scripts/build-image`` built; the real CronJob
controller starts the Jobs, the scheduler and kubelet run the sweeper's container (uid 65532,
read-only root, PodSecurity ``restricted``) with the chart's ServiceAccount and its in-cluster
configuration; the real Training Operator v1.9.4 creates training pods whose containers run
until something stops them. Each test has a scenario of its own (``tests.node.scenarios``):
namespaces, a job label and a release installed with that label as ``selector``, so
cluster-wide installs never see another test's jobs. The module sets every selected test's
scenario up at once (``scenarios``), so that their CronJobs' first runs share one minute;
each test then asserts on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devcluster.node import Node
from devcluster.operator import Operator
from tests import summary
from tests.node import cluster
from tests.node.cluster import Obj
from tests.node.scenarios import Scenario, Values, describe, start_all

pytestmark = [pytest.mark.e2e, pytest.mark.node]

TOUCHED_AT = "kubeflow-deadline-sweeper.github.io/touched-at"
# Seconds. Past once every pod is ready, even with all the scenarios' pods starting at once (a
# pod becoming ready makes the operator reconcile its job: past the deadline by then, it would
# fail the job itself and leave the sweeper nothing to prove), and overdue by the last pass of
# the first run (at 30 s), whenever in its minute the first run starts.
DEADLINE = 30


def _bad_image(node: Node, train_ns: str, selector: str) -> Obj:
    values = cluster.chart_values(node, action="fail", selector=selector)
    values["image"] = {**values["image"], "repository": "localhost/no-such-image"}
    return values


# The chart values of each test's scenario, from (node, training namespace, selector).
VALUES: dict[str, Values] = {
    "upgrade": lambda node, _ns, selector: cluster.chart_values(
        node, action="touch", selector=selector, dryRun=True
    ),
    "touch": lambda node, _ns, selector: cluster.chart_values(
        node, action="touch", selector=selector
    ),
    "fail": lambda node, _ns, selector: cluster.chart_values(
        node, action="fail", selector=selector, escalateAfter=10
    ),
    "auto": lambda node, _ns, selector: cluster.chart_values(
        node, action="auto", selector=selector, escalateAfter=10
    ),
    "namespaced": lambda node, train_ns, _selector: cluster.chart_values(
        node, action="touch", namespaces=[train_ns]
    ),
    "badimage": _bad_image,
}


@pytest.fixture(scope="module")
def scenarios(
    request: pytest.FixtureRequest, node: Node, node_operator: Operator
) -> Iterator[dict[str, Scenario]]:
    """The scenarios of the tests selected in this module, set up at once.

    Only the scenarios of tests that will run (``-k`` may select a few): each names its own
    with the ``scenario`` mark. Their namespaces and releases are removed at the end of the
    module (``retire`` removes a test's own as soon as it is done).
    """
    wanted = {
        mark.args[0]
        for item in request.session.items
        if item.path == request.path
        for mark in item.iter_markers("scenario")
    }
    scratch = cluster.Scratch(node)
    try:
        made = start_all(
            node, scratch, {n: v for n, v in VALUES.items() if n in wanted}, deadline=DEADLINE
        )
        summary.record(request.config, "node scenarios", describe(made))
        yield made
    finally:
        scratch.clean()


@pytest.fixture(autouse=True)
def retire(
    request: pytest.FixtureRequest, node: Node, scenarios: dict[str, Scenario]
) -> Iterator[None]:
    """After a test, uninstall its release and delete its namespaces.

    Its CronJob would otherwise start a run every minute, and its training pods keep running,
    while the other tests wait for theirs.
    """
    yield
    for mark in request.node.iter_markers("scenario"):
        scenario = scenarios.get(mark.args[0])
        if scenario is not None:
            cluster.remove(
                node,
                [(scenario.release, scenario.sweeper_ns)],
                [scenario.sweeper_ns, scenario.train_ns],
            )


def _wait_for_run(node: Node, scenario: Scenario) -> Obj:
    return cluster.wait_for_run(
        node,
        scenario.sweeper_ns,
        scenario.cronjob,
        explain=lambda: cluster.explain_namespace(node, scenario.sweeper_ns),
    )


def _failed_by_deadline(node: Node, scenario: Scenario) -> Obj:
    def probe() -> Obj | None:
        return cluster.condition(cluster.get_job(node, scenario.train_ns, scenario.job), "Failed")

    def explain() -> str:
        job = cluster.get_job(node, scenario.train_ns, scenario.job)
        runs = cluster.cronjob_jobs(node, scenario.sweeper_ns, scenario.cronjob)
        return "\n".join(
            [
                f"job {scenario.job}: {job.get('status', {}).get('conditions')}",
                cluster.explain_namespace(node, scenario.train_ns),
                *(cluster.explain_run(node, scenario.sweeper_ns, run) for run in runs),
            ]
        )

    return cluster.poll(
        probe, timeout=240, what=f"{scenario.train_ns}/{scenario.job} Failed", explain=explain
    )


def _sweeper_pod(node: Node, namespace: str, run: Obj) -> Obj:
    (pod,) = cluster.pods_of(node, namespace, f"job-name={run['metadata']['name']}")
    return pod


def _summaries(logs: str) -> list[Obj]:
    # The JSON summary line each pass logs (stderr), beside the JSON report (stdout).
    return [line for line in cluster.json_lines(logs) if "pass" in line and "level" in line]


def _rules(node: Node, release: str) -> list[dict[str, Any]]:
    name = f"{release}-kubeflow-deadline-sweeper"
    path = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"
    return list(node.control_plane.request("GET", path)["rules"])


def _verbs(rules: list[dict[str, Any]]) -> set[str]:
    return {verb for rule in rules for verb in rule["verbs"]}


# First in the module: the only test that needs a second run, so the one whose wait for the
# next minute should start soonest.
@pytest.mark.scenario("upgrade")
def test_upgrade_from_dry_run_to_enforcing_changes_rbac_and_behaviour(
    node: Node, scenarios: dict[str, Scenario]
) -> None:
    s = scenarios["upgrade"].ready()

    first = _wait_for_run(node, s)
    dry_rules = _rules(node, s.release)
    untouched = cluster.get_job(node, s.train_ns, s.job)

    assert cluster.finished(first) == "Complete", cluster.explain_run(node, s.sweeper_ns, first)
    assert _verbs(dry_rules) <= {"get", "list", "watch"}
    assert TOUCHED_AT not in untouched["metadata"].get("annotations", {})
    assert cluster.condition(untouched, "Failed") is None

    cluster.install(node, s.release, s.sweeper_ns, {**s.values, "dryRun": False}, upgrade=True)

    assert "patch" in _verbs(_rules(node, s.release))
    failed = _failed_by_deadline(node, s)
    assert "deadline" in failed["message"]


def _wait_until_its_containers_stopped(node: Node, s: Scenario, timeout: float = 120) -> None:
    # Before any release was installed, the job's pods ran in containerd.
    assert s.pods <= s.containers
    cluster.poll(
        lambda: True if not s.pods & cluster.running_containers(node) else None,
        timeout=timeout,
        what=f"the containers of {sorted(s.pods)} stopped by the kubelet",
        explain=lambda: cluster.explain_namespace(node, s.train_ns),
    )
    assert not cluster.running_pods(node, s.train_ns, s.job)


@pytest.mark.scenario("touch")
def test_touch_runs_in_cluster_and_the_operator_fails_the_job(
    node: Node, scenarios: dict[str, Scenario]
) -> None:
    s = scenarios["touch"].ready()

    run = _wait_for_run(node, s)

    assert cluster.finished(run) == "Complete", cluster.explain_run(node, s.sweeper_ns, run)
    pod = _sweeper_pod(node, s.sweeper_ns, run)
    (container,) = pod["spec"]["containers"]
    assert pod["spec"]["serviceAccountName"] == "touch-kubeflow-deadline-sweeper"
    assert container["image"] == node.images["sweeper"].reference
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    effective_user = container["securityContext"].get(
        "runAsUser", pod["spec"].get("securityContext", {}).get("runAsUser")
    )
    assert effective_user == 65532
    (status,) = pod["status"]["containerStatuses"]
    assert status["state"]["terminated"]["exitCode"] == 0
    # Through the API server and the kubelet (the egress proxy into the node's namespace).
    logs = cluster.run(
        node, "kubectl", "logs", "-n", s.sweeper_ns, f"job/{run['metadata']['name']}"
    )
    summaries = _summaries(logs)
    assert summaries, logs
    assert sum(summary["touch"] for summary in summaries) >= 1, summaries
    assert all(summary["errors"] == 0 for summary in summaries), summaries
    failed = _failed_by_deadline(node, s)
    assert "deadline" in failed["message"]
    assert TOUCHED_AT in cluster.get_job(node, s.train_ns, s.job)["metadata"]["annotations"]
    # v1.9.4 fails the touched job and keeps its pods (no cleanPodPolicy: None); with the
    # chart's defaults a later pass deletes them (30 s after the touch's), and the kubelet
    # stops their containers.
    _wait_until_its_containers_stopped(node, s, timeout=150)

    out = cluster.run(node, "helm", "test", s.release, "-n", s.sweeper_ns, "--logs", timeout=240)
    assert "Phase:          Succeeded" in out or "Succeeded" in out, out


@pytest.mark.parametrize(
    "action",
    [
        pytest.param("fail", id="fail", marks=pytest.mark.scenario("fail")),
        pytest.param("auto", id="auto", marks=pytest.mark.scenario("auto")),
    ],
)
def test_the_real_containers_of_an_overdue_job_are_stopped(
    node: Node, scenarios: dict[str, Scenario], action: str
) -> None:
    s = scenarios[action].ready()

    run = _wait_for_run(node, s)

    assert cluster.finished(run) == "Complete", cluster.explain_run(node, s.sweeper_ns, run)
    assert _failed_by_deadline(node, s)
    _wait_until_its_containers_stopped(node, s)


@pytest.mark.scenario("namespaced")
def test_namespaced_mode_works_with_its_roles_alone(
    node: Node, scenarios: dict[str, Scenario]
) -> None:
    s = scenarios["namespaced"].ready()

    run = _wait_for_run(node, s)

    assert cluster.finished(run) == "Complete", cluster.explain_run(node, s.sweeper_ns, run)
    manifest = cluster.run(node, "helm", "get", "manifest", s.release, "-n", s.sweeper_ns)
    assert "kind: ClusterRole" not in manifest
    assert "kind: Role" in manifest
    assert _failed_by_deadline(node, s)


@pytest.mark.scenario("badimage")
def test_an_image_that_does_not_exist_fails_the_run_visibly(
    node: Node, scenarios: dict[str, Scenario]
) -> None:
    s = scenarios["badimage"].ready()

    run = _wait_for_run(node, s)

    assert cluster.finished(run) == "Failed", cluster.explain_run(node, s.sweeper_ns, run)
    # The Job's pod is gone once the Job failed; its events stay and say why.
    events = cluster.node_events(node, s.sweeper_ns)
    pulls = [e for e in events if e["reason"] == "ErrImageNeverPull"]
    assert pulls, [(e["reason"], e["message"]) for e in events]
    assert "localhost/no-such-image" in pulls[0]["message"]
    still = cluster.get_job(node, s.train_ns, s.job)
    assert cluster.condition(still, "Failed") is None
    assert len(cluster.running_pods(node, s.train_ns, s.job)) == 2
