"""GPUs held for nothing, on the real node: the scheduler leaves part of a gang Pending.

The node advertises two GPUs (``devcluster.gpus``); a TFJob on the real Training Operator
v1.9.4 with a chief and two workers of one GPU each gets two pods placed and one Pending
``Unschedulable``. The sweeper reports it without a rule, and under a rule's
``startDeadline`` ends it and frees its GPUs, which a smaller job then gets.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import gpus
from devcluster import jobs as kubeflow
from devcluster.node import NODE_NAME, Node
from devcluster.operator import Operator
from tests.e2e import clusters
from tests.node import cluster

pytestmark = [pytest.mark.e2e, pytest.mark.node]

Obj = dict[str, Any]


def gang(node: Node, namespace: str, name: str, workers: int) -> None:
    body = gpus.gpu_limits(node.training_manifest("TFJob", name, deadline=None, workers=workers))
    plural = kubeflow.KINDS["TFJob"].plural
    node.control_plane.request(
        "POST", f"/apis/kubeflow.org/v1/namespaces/{namespace}/{plural}", body
    )


def placement(node: Node, namespace: str, name: str) -> tuple[int, int]:
    """How many of the job's pods are bound to the node, and how many wait Unschedulable."""
    pods = cluster.pods_of(node, namespace, f"{kubeflow.JOB_NAME_LABEL}={name}")
    placed = sum(1 for p in pods if p["spec"].get("nodeName"))
    waiting = sum(
        1
        for p in pods
        if not p["spec"].get("nodeName")
        and any(c.get("reason") == "Unschedulable" for c in p["status"].get("conditions", []))
    )
    return placed, waiting


def sweep(node: Node, namespace: str, *args: str) -> Obj:
    done = clusters.run_sweeper(node.kubeconfig, "-n", namespace, "-o", "json", *args)
    assert done.returncode == 0, done.stderr
    document: Obj = json.loads(done.stdout)
    return document


@pytest.fixture
def namespace(node: Node) -> Iterator[str]:
    """A namespace on the node offering two GPUs; deleted after the test, its pods gone.

    A test leaves pods holding GPUs (the smaller job's, a failed job's chief): the next test
    would find none free, its pods all Pending ``Insufficient nvidia.com/gpu``.
    """
    gpus.advertise(node.control_plane, NODE_NAME, 2)
    name = node.ensure_namespace(f"held-{secrets.token_hex(3)}")
    yield name
    cluster.remove(node, [], [name])
    cluster.poll(
        lambda: (
            True
            if not node.control_plane.request("GET", f"/api/v1/namespaces/{name}/pods")["items"]
            else None
        ),
        timeout=120,
        what=f"the pods of namespace {name} gone, their GPUs free",
        explain=lambda: cluster.explain_namespace(node, name),
    )
    gpus.advertise(node.control_plane, NODE_NAME, 0)


def test_a_gang_larger_than_the_gpus_is_reported_then_ended_and_its_gpus_go_to_a_smaller_job(
    node: Node, node_operator: Operator, namespace: str, tmp_path: Path
) -> None:
    gang(node, namespace, "gang", workers=2)
    cluster.poll(
        lambda: True if placement(node, namespace, "gang") == (2, 1) else None,
        timeout=120,
        what="two pods of the gang placed and one Unschedulable",
        explain=lambda: cluster.explain_namespace(node, namespace),
    )

    reported = sweep(node, namespace, "--stuck-after", "0s")
    (held,) = reported["held"]
    assert (held["name"], held["state"], held["gpus"], held["placed"]) == (
        "gang",
        "stuck-starting",
        2,
        2,
    )
    assert cluster.condition(cluster.get_job(node, namespace, "gang"), "Failed") is None

    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {name: gpu-tenants, startDeadline: 1s}\n", encoding="utf-8")
    dry = sweep(node, namespace, "--policy", str(rules), "--dry-run")
    (planned,) = [j for j in dry["jobs"] if j["name"] == "gang"]
    assert (planned["decision"], planned["reason"], planned["result"]) == (
        "fail",
        "start-deadline",
        "planned",
    )
    assert cluster.condition(cluster.get_job(node, namespace, "gang"), "Failed") is None

    ended = sweep(node, namespace, "--policy", str(rules))
    (done,) = [j for j in ended["jobs"] if j["name"] == "gang"]
    assert done["result"] == "done", done
    failed = cluster.condition(cluster.get_job(node, namespace, "gang"), "Failed")
    assert failed is not None
    assert failed["reason"] == "StartDeadlineExceeded"

    gang(node, namespace, "small", workers=1)
    cluster.poll(
        lambda: True if len(cluster.running_pods(node, namespace, "small")) == 2 else None,
        timeout=120,
        what="the smaller job's two pods running on the freed GPUs",
        explain=lambda: cluster.explain_namespace(node, namespace),
    )


def test_a_job_failed_by_a_workers_exit_keeps_its_chief_until_reclaim_failed_after(
    node: Node, node_operator: Operator, namespace: str, tmp_path: Path
) -> None:
    body = gpus.gpu_limits(node.training_manifest("TFJob", "crash", deadline=None, workers=1))
    worker = body["spec"][kubeflow.KINDS["TFJob"].replica_specs]["Worker"]
    (container,) = worker["template"]["spec"]["containers"]
    container["command"] = ["python", "-c", "import sys; sys.exit(3)"]
    plural = kubeflow.KINDS["TFJob"].plural
    node.control_plane.request(
        "POST", f"/apis/kubeflow.org/v1/namespaces/{namespace}/{plural}", body
    )
    cluster.poll(
        lambda: cluster.condition(cluster.get_job(node, namespace, "crash"), "Failed"),
        timeout=180,
        what="the TFJob failed by its worker's exit",
        explain=lambda: cluster.explain_namespace(node, namespace),
    )
    # v1.9.4 keeps the chief Running (cleanPodPolicy absent means None).
    assert [p["metadata"]["name"] for p in cluster.running_pods(node, namespace, "crash")] == [
        "crash-chief-0"
    ]

    reported = sweep(node, namespace, "--reclaim-grace", "0s")
    (held,) = reported["held"]
    assert (held["state"], held["gpus"], held["pods"]) == ("finished-holding", 1, 1)
    assert cluster.running_pods(node, namespace, "crash"), "reported, never written"

    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - {name: gpu-tenants, reclaimFailedAfter: 1s}\n", encoding="utf-8")
    freed = sweep(node, namespace, "--policy", str(rules))
    (done,) = [j for j in freed["jobs"] if j["name"] == "crash"]
    assert (done["decision"], done["reason"], done["result"]) == (
        "terminate-pods",
        "finished-holding",
        "done",
    ), done
    assert done["deleted"]["pods"] == ["crash-chief-0"]
    cluster.poll(
        lambda: True if not cluster.running_pods(node, namespace, "crash") else None,
        timeout=120,
        what="the chief gone, and not re-created",
        explain=lambda: cluster.explain_namespace(node, namespace),
    )
    names = [
        p["metadata"]["name"]
        for p in cluster.pods_of(node, namespace, f"{kubeflow.JOB_NAME_LABEL}=crash")
    ]
    assert "crash-worker-0" in names, "the finished pod stays, with its logs"


def test_a_job_fully_started_and_one_with_every_pod_pending_are_left_alone(
    node: Node, node_operator: Operator, namespace: str, tmp_path: Path
) -> None:
    started = gpus.gpu_limits(node.training_manifest("TFJob", "fits", deadline=None, workers=1))
    plural = kubeflow.KINDS["TFJob"].plural
    path = f"/apis/kubeflow.org/v1/namespaces/{namespace}/{plural}"
    node.control_plane.request("POST", path, started)
    # Three GPUs a pod on a node of two: none of its pods is ever placed.
    node.control_plane.request(
        "POST",
        path,
        gpus.gpu_limits(
            node.training_manifest("TFJob", "queued", deadline=None, workers=1), count=3
        ),
    )
    cluster.poll(
        lambda: (
            True
            if placement(node, namespace, "fits") == (2, 0)
            and placement(node, namespace, "queued") == (0, 2)
            else None
        ),
        timeout=120,
        what="one job fully placed, the other with both pods Unschedulable",
        explain=lambda: cluster.explain_namespace(node, namespace),
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - {name: gpu-tenants, startDeadline: 1s, reclaimFailedAfter: 1s}\n",
        encoding="utf-8",
    )
    done = sweep(node, namespace, "--policy", str(rules), "--stuck-after", "0s")
    assert [(h["name"], h["state"], h["gpus"]) for h in done["held"]] == [("queued", "waiting", 0)]
    assert {j["name"]: j["decision"] for j in done["jobs"]} == {"fits": "skip", "queued": "skip"}
    for name in ("fits", "queued"):
        assert cluster.condition(cluster.get_job(node, namespace, name), "Failed") is None
