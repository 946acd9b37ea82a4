"""``scripts/demo``: watch a Kubeflow job overrun its deadline, then watch the sweeper end it.

For someone without a cluster at hand. It starts a local control plane and the real Training
Operator v1.9.4, and replays the experiment behind the project: a PyTorchJob with one master
and three workers and ``activeDeadlineSeconds: 15``, whose pods are all Running (and stable)
from 7 s. The demo prints the job's state as it changes and once a second past the deadline,
so the overrun is visible; then it runs ``sweeper --action touch``, the operator fails the job
itself, and ``sweeper --action auto`` terminates the pods that v1.9.4 keeps. Everything it
started is stopped at the end, also on Ctrl-C.

Where the machine can run a real node (root, ``devcluster.node``'s binaries and images), the
demo uses one: the pods are real containers run by a kubelet, and the last step shows them
stopped. Elsewhere, or with ``--no-node``, a stand-in kubelet plays the pods' phases. The first
lines say which.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devcluster import binaries, demo_held, fields, jobs
from devcluster import node as node_module
from devcluster.controlplane import ControlPlane
from devcluster.kubelet import Kubelet, staggered
from devcluster.operator import Operator

NAMESPACE_PREFIX = "demo"
JOB = "train"
WORKERS_RUNNING = (3.0, 5.0, 7.0)
OVERDUE_EVERY = 2.0  # seconds between lines while the job overruns, so it shows


def say(text: str = "") -> None:
    """One line of narration."""
    print(text, flush=True)


class Clock:
    """Seconds since the job was created, for the narration's left column."""

    def __init__(self) -> None:
        self.origin = time.monotonic()

    def stamp(self) -> str:
        """``t= 12s``."""
        return f"t={time.monotonic() - self.origin:4.0f}s"


def describe(view: jobs.JobView, pods: list[Any], now: dt.datetime) -> tuple[str, str]:
    """The job's state in one line, and the part of it whose change is worth a new line."""
    running = sum(1 for p in pods if p.status.phase == "Running")
    state = f"{view.phase:<8} pods Running: {running}/{len(pods)}"
    text = state
    if view.deadline is not None and not view.finished:
        delta = (now - view.deadline).total_seconds()
        if delta < 0:
            text += f"   deadline in {-delta:.0f}s"
        else:
            text += f"   {delta:.0f}s PAST ITS DEADLINE"
    return text, state


def sweeper_command() -> Path:
    """The sweeper CLI installed in this virtual environment."""
    return Path(sys.executable).parent / "sweeper"


def run_sweeper(kubeconfig: Path, *args: str) -> None:
    """Run the sweeper as a person would, showing its report (its logs are quietened)."""
    argv = [
        str(sweeper_command()),
        "--kubeconfig",
        str(kubeconfig),
        *args,
        "--log-level",
        "WARNING",
    ]
    shown = ["sweeper", *args]
    say(f"\n$ {' '.join(shown)}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWEEPER_")}
    completed = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    for line in completed.stdout.splitlines():
        say(f"  {line}")
    if completed.returncode != 0:
        say(f"  (exit code {completed.returncode}) {completed.stderr.strip()[-500:]}")
    say()


def watch(
    api: Any,
    namespace: str,
    clock: Clock,
    *,
    seconds: float,
    stop_when_failed: bool,
    kind: str = "PyTorchJob",
) -> jobs.JobView:
    """Print the job's state for ``seconds``: on every change, and every 2 s once overdue."""
    until = time.monotonic() + seconds
    last_state = ""
    last_print = 0.0
    while True:
        view = jobs.get(api, kind, namespace, JOB)
        now = dt.datetime.now(dt.UTC)
        text, state = describe(view, jobs.pods(api, namespace, JOB), now)
        overdue = view.deadline is not None and now >= view.deadline and not view.finished
        if state != last_state or (overdue and time.monotonic() - last_print >= OVERDUE_EVERY):
            say(f"  {clock.stamp()}  {text}")
            last_state, last_print = state, time.monotonic()
        if (stop_when_failed and view.failed) or time.monotonic() >= until:
            return view
        time.sleep(0.25)


def ensure_ready() -> None:
    """Build the binaries the demo needs and check the sweeper is installed."""
    needed = ["etcd", "kube-apiserver", "training-operator"]
    missing = []
    for name in needed:
        try:
            binaries.find(name)
        except binaries.BinaryMissing:
            missing.append(name)
    if missing:
        if shutil.which("go") is None:
            raise SystemExit(f"demo: needs {', '.join(missing)}; install Go 1.26 to build them")
        say(f"demo: first run: building {', '.join(missing)} from Go modules (several minutes)")
        subprocess.run([str(binaries.BUILD_SCRIPT), *missing], check=True)
    if not sweeper_command().exists():
        raise SystemExit("demo: the sweeper is not installed here; run: .venv/bin/pip install -e .")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``scripts/demo``."""
    parser = argparse.ArgumentParser(prog="scripts/demo", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--overrun",
        type=float,
        default=10.0,
        help="seconds to let the job run past its deadline before sweeping (default 10)",
    )
    parser.add_argument(
        "--no-node",
        action="store_true",
        help="use a stand-in kubelet even where a real node could run",
    )
    parser.add_argument(
        "--scene",
        choices=("deadline", "held"),
        default="deadline",
        help="deadline: a job overruns its deadline (default); held: a gang larger than the "
        "GPUs holds some idle, and a platform rule's startDeadline frees them (a real node only)",
    )
    args = parser.parse_args(argv)
    ensure_ready()
    began = time.monotonic()
    reasons = ["--no-node"] if args.no_node else node_module.missing_prerequisites()
    if args.scene == "held" and reasons:
        raise SystemExit(f"demo: --scene held needs a real node: {'; '.join(reasons)}")
    if not reasons:
        say("demo: on a REAL NODE: kube-controller-manager, scheduler, kubelet, containerd, runc")
        with node_module.Node.start() as node:
            say(f"demo: ... ready in {node.timings.get('total', 0):.1f}s")
            say("demo: starting the real Kubeflow Training Operator v1.9.4")
            started = time.monotonic()
            with Operator.start(node.control_plane) as _operator:
                say(f"demo: ... ready in {time.monotonic() - started:.1f}s")
                if args.scene == "held":
                    return demo_held.play(node, run_sweeper, say, began)
                return play(node.control_plane, args.overrun, began, node)
    say(f"demo: with a STAND-IN KUBELET (no real node: {'; '.join(reasons)})")
    say("demo: starting a local control plane (etcd, kube-apiserver, the Kubeflow CRDs)")
    with ControlPlane.start() as cp:
        say(f"demo: ... ready in {cp.timings.get('total', 0):.1f}s")
        say("demo: starting the real Kubeflow Training Operator v1.9.4")
        started = time.monotonic()
        with Operator.start(cp) as _operator:
            say(f"demo: ... ready in {time.monotonic() - started:.1f}s")
            return play(cp, args.overrun, began)


def play(
    cp: ControlPlane, overrun: float, began: float, node: node_module.Node | None = None
) -> int:
    """The scenario itself, on a running control plane and operator (and node, if any)."""
    api = cp.api()
    namespace = cp.create_namespace(NAMESPACE_PREFIX)
    # On a real node a TFJob: v1.9.4 gives PyTorchJob workers an init container whose public
    # image cannot be pulled there. Both kinds share the deadline bug.
    kind, master = ("TFJob", "chief") if node is not None else ("PyTorchJob", "master")
    say()
    say(f"{kind} {namespace}/{JOB}: 1 {master} + 3 workers, activeDeadlineSeconds: 15")
    kubelet: contextlib.AbstractContextManager[Any]
    if node is not None:
        say(
            "The kubelet runs its 4 containers (an image whose process never ends by itself); "
            "once they run, no pod changes."
        )
        body = node.training_manifest(kind, JOB, deadline=15, workers=3)
        kubelet = contextlib.nullcontext()
    else:
        say(
            "A stand-in kubelet runs the master at 1s and the workers at "
            + ", ".join(f"{t:.0f}s" for t in WORKERS_RUNNING)
            + "; after that no pod changes."
        )
        body = jobs.manifest("PyTorchJob", JOB, active_deadline_seconds=15)
        timeline = staggered(master_running=1, workers_running=WORKERS_RUNNING)
        kubelet = Kubelet(api, namespace, JOB, timeline).start()
    jobs.create(api, namespace, body)
    clock = Clock()
    with kubelet:
        deadline = None
        while deadline is None:  # the operator writes startTime on its first reconcile
            deadline = jobs.get(api, kind, namespace, JOB).deadline
            time.sleep(0.1)
        say(
            f"The operator started it at {deadline - dt.timedelta(seconds=15):%H:%M:%S}: "
            f"its deadline is {deadline:%H:%M:%S} UTC."
        )
        to_deadline = (deadline - dt.datetime.now(dt.UTC)).total_seconds()
        view = watch(
            api, namespace, clock, seconds=to_deadline + overrun, stop_when_failed=True, kind=kind
        )
        if view.failed:
            say("\nThe operator failed the job by itself: the bug did not reproduce this time.")
            return 1
        say(
            f"\nThe job is {overrun:.0f}s past its deadline and still Running: nothing makes the "
            "operator look at it again (kubeflow/trainer#3358)."
        )

        sweeper_kubeconfig = cp.user_kubeconfig("sweeper", ["system:masters"])
        run_sweeper(sweeper_kubeconfig, "--action", "touch", "-n", namespace)
        view = watch(api, namespace, clock, seconds=30, stop_when_failed=True, kind=kind)
        if not view.failed:
            say("The job is not Failed 30s after the touch: something is wrong.")
            return 1
        condition = view.condition("Failed") or {}
        say(
            f"\nThe operator itself failed it: {condition.get('reason')}: "
            f"{condition.get('message')}"
        )
        running = [
            fields.name(p)
            for p in jobs.pods(api, namespace, JOB)
            if fields.status(p).phase == "Running"
        ]
        say(
            f"Its {len(running)} pods are still Running: v1.9.4 keeps the pods of a failed job "
            "unless cleanPodPolicy says otherwise."
        )
        run_sweeper(sweeper_kubeconfig, "--action", "auto", "-n", namespace)
        if node is not None:
            # The pods are deleted at once; their containers stop when the kubelet has run
            # their SIGTERM handlers. Give it a moment, so the count below is the real one.
            time.sleep(5)
        left = [
            fields.name(p)
            for p in jobs.pods(api, namespace, JOB)
            if fields.status(p).phase == "Running"
        ]
        say(f"Pods still Running: {len(left)}. Done in {time.monotonic() - began:.0f}s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
