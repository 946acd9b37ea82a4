"""The chart and the image on a real node: what users deploy, run the way a cluster runs it.

``helm install ./chart`` with the image ``scripts/build-image`` built; the real CronJob
controller starts the Jobs, the scheduler and kubelet run the sweeper's container (uid 65532,
read-only root, PodSecurity ``restricted``) with the chart's ServiceAccount and its in-cluster
configuration; the real Training Operator v1.9.4 creates training pods whose containers run
until something stops them. Each test has namespaces and a job label of its own, and installs
the chart with that label as ``selector``, so cluster-wide installs never see another test's
jobs.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from devcluster.node import Node
from devcluster.operator import Operator
from tests.node import cluster
from tests.node.cluster import Obj

pytestmark = [pytest.mark.e2e, pytest.mark.node]

TOUCHED_AT = "kubeflow-deadline-sweeper.github.io/touched-at"
DEADLINE = 20  # seconds: overdue well before the CronJob's first run


def _setup(scratch: cluster.Scratch, name: str) -> tuple[str, str, str]:
    """A restricted namespace for the chart, one for training jobs, and a label of their own."""
    return (
        scratch.namespace(f"sweeper-{name}"),
        scratch.namespace(f"train-{name}"),
        f"node-test-{secrets.token_hex(3)}",
    )


def _overdue_job(node: Node, namespace: str, label: str) -> str:
    """A TFJob whose two pods really run, labelled ``node-test=<label>``; returns its name."""
    body_name = "train"
    cluster.training_job(node, namespace, body_name, deadline=DEADLINE, labels={"node-test": label})
    cluster.poll(
        lambda: True if len(cluster.running_pods(node, namespace, body_name)) == 2 else None,
        timeout=180,
        what=f"the operator's pods of {namespace}/{body_name} running",
        explain=lambda: cluster.explain_namespace(node, namespace),
    )
    return body_name


def _failed_by_deadline(node: Node, namespace: str, name: str) -> Obj:
    def probe() -> Obj | None:
        return cluster.condition(cluster.get_job(node, namespace, name), "Failed")

    return cluster.poll(probe, timeout=240, what=f"{namespace}/{name} Failed")


def _sweeper_pod(node: Node, namespace: str, run: Obj) -> Obj:
    (pod,) = cluster.pods_of(node, namespace, f"job-name={run['metadata']['name']}")
    return pod


def _summaries(logs: str) -> list[Obj]:
    # The JSON summary line each pass logs (stderr), beside the JSON report (stdout).
    return [line for line in cluster.json_lines(logs) if "pass" in line and "level" in line]


def test_touch_runs_in_cluster_and_the_operator_fails_the_job(
    node: Node, node_operator: Operator, scratch: cluster.Scratch
) -> None:
    sweeper_ns, train_ns, label = _setup(scratch, "touch")
    job = _overdue_job(node, train_ns, label)

    scratch.install(
        "touch",
        sweeper_ns,
        cluster.chart_values(node, action="touch", selector=f"node-test={label}"),
    )
    run = cluster.wait_for_run(node, sweeper_ns, "touch-kubeflow-deadline-sweeper")

    assert cluster.finished(run) == "Complete", cluster.explain_run(node, sweeper_ns, run)
    pod = _sweeper_pod(node, sweeper_ns, run)
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
    logs = cluster.run(node, "kubectl", "logs", "-n", sweeper_ns, f"job/{run['metadata']['name']}")
    summaries = _summaries(logs)
    assert summaries, logs
    assert sum(s["touch"] for s in summaries) >= 1, summaries
    assert all(s["errors"] == 0 for s in summaries), summaries
    failed = _failed_by_deadline(node, train_ns, job)
    assert "deadline" in failed["message"]
    assert TOUCHED_AT in cluster.get_job(node, train_ns, job)["metadata"]["annotations"]

    out = cluster.run(node, "helm", "test", "touch", "-n", sweeper_ns, "--logs", timeout=240)
    assert "Phase:          Succeeded" in out or "Succeeded" in out, out


@pytest.mark.parametrize(
    "action", [pytest.param("fail", id="fail"), pytest.param("auto", id="auto")]
)
def test_the_real_containers_of_an_overdue_job_are_stopped(
    node: Node, node_operator: Operator, scratch: cluster.Scratch, action: str
) -> None:
    sweeper_ns, train_ns, label = _setup(scratch, action)
    job = _overdue_job(node, train_ns, label)
    pod_names = {p["metadata"]["name"] for p in cluster.running_pods(node, train_ns, job)}
    assert pod_names <= cluster.running_containers(node)

    values = cluster.chart_values(
        node, action=action, selector=f"node-test={label}", escalateAfter=10
    )
    scratch.install(action, sweeper_ns, values)
    run = cluster.wait_for_run(node, sweeper_ns, f"{action}-kubeflow-deadline-sweeper")

    assert cluster.finished(run) == "Complete", cluster.explain_run(node, sweeper_ns, run)
    assert _failed_by_deadline(node, train_ns, job)
    cluster.poll(
        lambda: True if not pod_names & cluster.running_containers(node) else None,
        timeout=120,
        what=f"the containers of {sorted(pod_names)} stopped by the kubelet",
    )
    assert not cluster.running_pods(node, train_ns, job)


def _rules(node: Node, namespace: str, release: str) -> list[dict[str, Any]]:
    name = f"{release}-kubeflow-deadline-sweeper"
    path = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"
    return list(node.control_plane.request("GET", path)["rules"])


def _verbs(rules: list[dict[str, Any]]) -> set[str]:
    return {verb for rule in rules for verb in rule["verbs"]}


def test_upgrade_from_dry_run_to_enforcing_changes_rbac_and_behaviour(
    node: Node, node_operator: Operator, scratch: cluster.Scratch
) -> None:
    sweeper_ns, train_ns, label = _setup(scratch, "upgrade")
    job = _overdue_job(node, train_ns, label)
    release = "upgrade"
    values = cluster.chart_values(node, action="touch", selector=f"node-test={label}")

    scratch.install(release, sweeper_ns, {**values, "dryRun": True})
    first = cluster.wait_for_run(node, sweeper_ns, f"{release}-kubeflow-deadline-sweeper")
    dry_rules = _rules(node, sweeper_ns, release)
    untouched = cluster.get_job(node, train_ns, job)

    assert cluster.finished(first) == "Complete", cluster.explain_run(node, sweeper_ns, first)
    assert _verbs(dry_rules) <= {"get", "list", "watch"}
    assert TOUCHED_AT not in untouched["metadata"].get("annotations", {})
    assert cluster.condition(untouched, "Failed") is None

    cluster.install(node, release, sweeper_ns, {**values, "dryRun": False}, upgrade=True)

    assert "patch" in _verbs(_rules(node, sweeper_ns, release))
    failed = _failed_by_deadline(node, train_ns, job)
    assert "deadline" in failed["message"]


def test_namespaced_mode_works_with_its_roles_alone(
    node: Node, node_operator: Operator, scratch: cluster.Scratch
) -> None:
    sweeper_ns, train_ns, label = _setup(scratch, "namespaced")
    job = _overdue_job(node, train_ns, label)
    release = "namespaced"

    scratch.install(
        release, sweeper_ns, cluster.chart_values(node, action="touch", namespaces=[train_ns])
    )
    run = cluster.wait_for_run(node, sweeper_ns, f"{release}-kubeflow-deadline-sweeper")

    assert cluster.finished(run) == "Complete", cluster.explain_run(node, sweeper_ns, run)
    manifest = cluster.run(node, "helm", "get", "manifest", release, "-n", sweeper_ns)
    assert "kind: ClusterRole" not in manifest
    assert "kind: Role" in manifest
    assert _failed_by_deadline(node, train_ns, job)


def test_an_image_that_does_not_exist_fails_the_run_visibly(
    node: Node, node_operator: Operator, scratch: cluster.Scratch
) -> None:
    sweeper_ns, train_ns, label = _setup(scratch, "badimage")
    job = _overdue_job(node, train_ns, label)
    release = "badimage"
    values = cluster.chart_values(node, action="fail", selector=f"node-test={label}")
    values["image"] = {**values["image"], "repository": "localhost/no-such-image"}

    scratch.install(release, sweeper_ns, values)
    run = cluster.wait_for_run(node, sweeper_ns, f"{release}-kubeflow-deadline-sweeper")

    assert cluster.finished(run) == "Failed"
    # The Job's pod is gone once the Job failed; its events stay and say why.
    events = cluster.node_events(node, sweeper_ns)
    pulls = [e for e in events if e["reason"] == "ErrImageNeverPull"]
    assert pulls, [(e["reason"], e["message"]) for e in events]
    assert "localhost/no-such-image" in pulls[0]["message"]
    still = cluster.get_job(node, train_ns, job)
    assert cluster.condition(still, "Failed") is None
    assert len(cluster.running_pods(node, train_ns, job)) == 2
