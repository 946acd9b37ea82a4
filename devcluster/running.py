"""``scripts/devcluster pods-running NAMESPACE/NAME``: a job's pods Running, without a node.

The devcluster has no scheduler and no kubelet, so the pods the Training Operator creates for
a job stay Pending, and the job never starts: the bug the sweeper exists for (a Running job
that outlives its deadline) cannot be reproduced by hand. This reports every pod of the job
Running through ``pods/status``, as a kubelet would (:class:`devcluster.kubelet.Kubelet`, one
tick at a time), until as many pods run as the job's replica specs ask for; the operator then
marks the job Running and sets its ``startTime``, and the deadline counts from there. Nothing
keeps the pods Running but the API server's record of them: they never change again, which is
exactly the stuck job of kubeflow/trainer#3358.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes import config as k8s_config
from kubernetes.client import ApiException

from devcluster import fields, jobs
from devcluster.kubelet import Kubelet, Transition


class NotRunning(Exception):  # noqa: N818 - a state, as the harness's other errors
    """The job is missing, or its pods did not all come up in time."""


def find(api: client.ApiClient, namespace: str, name: str) -> jobs.JobView:
    """The Kubeflow job of that name, whatever its kind.

    Raises:
        NotRunning: No served kind has a job of that name in that namespace.
    """
    for kind in jobs.ALL_KINDS:
        try:
            return jobs.get(api, kind, namespace, name)
        except ApiException as error:
            if error.status != HTTPStatus.NOT_FOUND:  # or a kind this operator does not serve
                raise
    raise NotRunning(f'no Kubeflow job "{namespace}/{name}"')


def replicas(job: jobs.JobView) -> int:
    """How many pods the job's replica specs ask for (a spec without ``replicas`` is one)."""
    specs: dict[str, Any] = job.obj["spec"].get(jobs.ALL_KINDS[job.kind].replica_specs) or {}
    return sum(int(spec.get("replicas", 1)) for spec in specs.values())


def pods_running(
    api: client.ApiClient,
    namespace: str,
    name: str,
    *,
    timeout: float = 120.0,
    poll: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Report every pod of a job Running, once the operator has created them all.

    Args:
        api: A client of the devcluster.
        namespace: The job's namespace.
        name: The job's name.
        timeout: Seconds to wait for the operator to create the pods.
        poll: Seconds between two looks.
        clock: Monotonic seconds (tests step it).
        sleep: Waits between two looks.

    Returns:
        The names of the job's pods, now Running.

    Raises:
        NotRunning: The job does not exist, or fewer pods than it asks for exist by the timeout.
    """
    expected = replicas(find(api, namespace, name))
    kubelet = Kubelet(api, namespace, name, [Transition(0, "Running")])
    deadline = clock() + timeout
    while True:
        kubelet.tick()
        found = jobs.pods(api, namespace, name)
        running = [fields.name(p) for p in found if fields.status(p).phase == "Running"]
        if expected and len(running) >= expected:
            return running
        if clock() >= deadline:
            raise NotRunning(
                f"{len(running)} of {expected} pods of {namespace}/{name} Running after "
                f"{timeout:.0f}s: the Training Operator creates them (scripts/devcluster up "
                "--operator)"
            )
        sleep(poll)


def add_command(commands: Any) -> None:
    """Add ``pods-running`` to ``scripts/devcluster``'s commands (an argparse subparsers)."""
    pods = commands.add_parser("pods-running", help="report a job's pods Running (no node)")
    pods.add_argument("job", metavar="NAMESPACE/NAME")
    pods.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for pods")


def main(kubeconfig: Path, reference: str, timeout: float) -> int:
    """``scripts/devcluster pods-running NAMESPACE/NAME``: one line per pod; exit 1 if not."""
    namespace, _, name = reference.partition("/")
    if not namespace or not name:
        print(f"devcluster: pods-running takes NAMESPACE/NAME, not {reference!r}", file=sys.stderr)
        return 2
    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    try:
        names = pods_running(api, namespace, name, timeout=timeout)
    except NotRunning as error:
        print(f"devcluster: {error}", file=sys.stderr)
        return 1
    finally:
        api.close()
    for pod in names:
        print(f"pod {namespace}/{pod} Running")
    return 0
