"""``scripts/demo --scene held``: a gang larger than the GPUs holds some of them idle.

On the real node only (the scheduler must leave part of the gang Pending): the node advertises
two GPUs (``devcluster.gpus``); a TFJob with a chief and two workers of one GPU each gets two
pods placed and one Pending ``Unschedulable``, and a second job waits for the two GPUs the gang
holds for nothing. The sweeper's report shows them; under a platform rule's ``startDeadline``
it ends the gang, and the waiting job starts.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from devcluster import gpus, jobs
from devcluster import node as node_module

GANG = "gang"
WAITING = "next"
START_DEADLINE_S = 20
GPUS = 2  # the node's; the gang's placed pods hold them all, as the waiting job's two need
RULES = f"rules:\n  - {{name: gpu-tenants, startDeadline: {START_DEADLINE_S}s}}\n"


def play(
    node: node_module.Node,
    sweep: Callable[..., None],
    say: Callable[[str], None],
    began: float,
) -> int:
    """The scene, on a running node and operator; ``sweep(kubeconfig, *args)`` runs the CLI."""
    cp = node.control_plane
    namespace = node.ensure_namespace(f"demo-held-{int(time.time()) % 100000}")
    gpus.advertise(cp, node_module.NODE_NAME, GPUS)
    try:
        say(
            f"\nThe node offers 2 GPUs ({gpus.GPU}). TFJob {namespace}/{GANG}: a chief and 2 "
            "workers of 1 GPU each, a gang of 3 on 2 GPUs."
        )
        _create(node, namespace, GANG, workers=2)
        _wait("two pods of the gang running", lambda: _running(node, namespace, GANG) == GPUS)
        say(
            "2 of its pods run and hold both GPUs, the third is Pending Unschedulable: the gang "
            f"cannot train. TFJob {WAITING} (a chief and a worker, 1 GPU each) waits for them."
        )
        _create(node, namespace, WAITING, workers=1)
        kubeconfig = cp.user_kubeconfig("sweeper", ["system:masters"])
        sweep(kubeconfig, "-n", namespace, "--stuck-after", "0s")
        with tempfile.TemporaryDirectory() as work:
            rules = Path(work) / "rules.yaml"
            rules.write_text(RULES, encoding="utf-8")
            say(f"A platform rule gives a gang {START_DEADLINE_S}s from its first pod to start:")
            say(RULES.rstrip())
            time.sleep(START_DEADLINE_S)
            sweep(kubeconfig, "-n", namespace, "--policy", str(rules))
        _wait(f"TFJob {WAITING} running", lambda: _running(node, namespace, WAITING) == GPUS, 180)
        say(
            f"The gang is Failed (StartDeadlineExceeded) and its GPUs are free: TFJob {WAITING} "
            f"runs on them. Done in {time.monotonic() - began:.0f}s."
        )
    finally:
        gpus.advertise(cp, node_module.NODE_NAME, 0)
    return 0


def _create(node: node_module.Node, namespace: str, name: str, *, workers: int) -> None:
    body = gpus.gpu_limits(node.training_manifest("TFJob", name, deadline=None, workers=workers))
    node.control_plane.request("POST", f"/apis/kubeflow.org/v1/namespaces/{namespace}/tfjobs", body)


def _running(node: node_module.Node, namespace: str, job: str) -> int:
    selector = f"{jobs.JOB_NAME_LABEL}%3D{job}"
    pods = node.control_plane.request(
        "GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}"
    )["items"]
    return sum(1 for p in pods if p["status"].get("phase") == "Running")


def _wait(what: str, done: Callable[[], bool], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"demo: timed out waiting for {what}")
        time.sleep(1)
