"""What the node tests share beyond fixtures: helm and kubectl runs, waits, training jobs.

Everything here talks to a ``devcluster.node.Node``: the real kube-controller-manager runs the
chart's CronJob, the real scheduler and kubelet run its pods in containerd, and the real
Training Operator v1.9.4 creates the training pods, whose containers (the workload image) run
until something stops them.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

from devcluster import binaries
from devcluster import jobs as kubeflow
from devcluster.node import Node, NodeUnavailable, missing_prerequisites

CHART = Path(__file__).resolve().parents[2] / "chart"
Obj = dict[str, Any]
T = TypeVar("T")


def unavailable(reason: str) -> None:
    """Skip (locally) or fail (``CI=true``) because this machine cannot run the node."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"node tests must run in CI: {reason}", pytrace=False)
    pytest.skip(f"no real node here: {reason}")


def check_prerequisites() -> None:
    """Skip or fail (see ``unavailable``) unless the node, helm and kubectl can run."""
    reasons = missing_prerequisites()
    for name in ("helm", "kubectl"):
        if not os.access(binaries.path(name), os.X_OK):
            reasons.append(f"{name} not built: run scripts/build-binaries {name}")
    if reasons:
        unavailable("; ".join(reasons))


def start_node() -> Node:
    """Start a node, or skip/fail with the reason it cannot run here."""
    check_prerequisites()
    try:
        return Node.start()
    except NodeUnavailable as e:
        unavailable(str(e))
        raise  # unreachable: unavailable always raises


def poll(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    every: float = 1.0,
    explain: Callable[[], str] | None = None,
) -> T:
    """Call ``probe`` until it returns something other than None; fail after ``timeout``.

    ``explain`` adds what the failure message should show (pods, events) when it times out.
    """
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            details = f"\n{explain()}" if explain else ""
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}{details}")
        time.sleep(every)


def explain_namespace(node: Node, namespace: str) -> str:
    """The pods' phases and the events of a namespace, for failure messages."""
    pods = node.control_plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    lines = [f"pod {p['metadata']['name']}: {p['status'].get('phase')}" for p in pods]
    lines += [describe_event(e) for e in node_events(node, namespace)]
    return "\n".join(lines) or f"nothing in {namespace}"


def describe_event(event: Obj) -> str:
    """One event as a line, with its time: a failure's explanation says what happened when."""
    at = event.get("lastTimestamp") or event.get("eventTime") or "?"
    return f"event {at} {event['reason']}: {event['message']}"


def run_tool(node: Node, tool: str, *args: str) -> str:
    """Like ``run`` but never fails: stdout and stderr, for diagnostics."""
    done = subprocess.run(
        [str(binaries.find(tool)), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env=dict(os.environ, KUBECONFIG=str(node.kubeconfig), HOME=str(node.workdir)),
    )
    return done.stdout + done.stderr


def run(node: Node, tool: str, *args: str, check: bool = True, timeout: float = 180) -> str:
    """Run ``helm`` or ``kubectl`` as the admin against the node; return stdout."""
    done = subprocess.run(
        [str(binaries.find(tool)), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env=dict(os.environ, KUBECONFIG=str(node.kubeconfig), HOME=str(node.workdir)),
    )
    if check and done.returncode != 0:
        pytest.fail(f"{tool} {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout + (done.stderr if not check else "")


def values_file(node: Node, values: Obj) -> Path:
    """Write chart values to a file helm can read (``-f``)."""
    path = node.workdir / f"values-{secrets.token_hex(3)}.json"
    path.write_text(json.dumps(values), encoding="utf-8")
    return path


def chart_values(node: Node, **overrides: Any) -> Obj:
    """The chart's values for the node: its own image, loaded on the node, never pulled.

    ``intervalSeconds: 30``: a run every minute making passes at 0 and 30 s (a job that
    becomes overdue during a run is acted on in that run). The Job's
    ``activeDeadlineSeconds`` (58) counts from the Job's start, the passes from the sweeper's:
    with 10 (last pass at 50 s) or 20 (at 40 s), pod start, interpreter start and the last
    pass did not fit in what was left with six sweeper pods starting at once on this loaded
    machine, and the runs failed ``DeadlineExceeded``. The chart now ends ``--timeout``
    ``startupAllowanceSeconds`` (5) + 1 s before that deadline (52 s); 30 keeps 22 s for the
    last pass beyond it, where 10 keeps 2, so a start-up slower than 5 s here would still fail
    a run at 10.
    """
    image = node.images["sweeper"]
    values: Obj = {
        "image": {"repository": image.repository, "tag": image.tag, "pullPolicy": "Never"},
        "intervalSeconds": 30,
        "output": "json",
        "logFormat": "json",
    }
    values.update(overrides)
    return values


class Scratch:
    """What one test created on the node: namespaces and chart releases (see ``clean``)."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.namespaces: list[str] = []
        self.releases: list[tuple[str, str]] = []

    def namespace(self, prefix: str, labels: dict[str, str] | None = None) -> str:
        """A new namespace, PodSecurity ``restricted`` unless ``labels`` say otherwise."""
        name = self.node.ensure_namespace(f"{prefix}-{secrets.token_hex(3)}", labels)
        self.namespaces.append(name)
        return name

    def install(self, release: str, namespace: str, values: Obj) -> str:
        """``helm install``, uninstalled by ``clean``."""
        self.releases.append((release, namespace))
        return install(self.node, release, namespace, values)

    def clean(self) -> None:
        """Uninstall the releases, then delete the namespaces (their pods stop)."""
        remove(self.node, self.releases, self.namespaces)


def remove(node: Node, releases: list[tuple[str, str]], namespaces: list[str]) -> None:
    """Uninstall ``(release, namespace)`` pairs at once, then delete ``namespaces``.

    Idempotent: a release or namespace already gone is fine. Without ``--wait``: the
    uninstall deletes the CronJob (so it starts no further run) and the cluster-wide RBAC;
    what is left in the namespaces goes with them.
    """
    with ThreadPoolExecutor(max_workers=max(1, len(releases))) as pool:
        list(
            pool.map(
                lambda r: run(node, "helm", "uninstall", r[0], "-n", r[1], check=False), releases
            )
        )
    for name in namespaces:
        node.control_plane.request("DELETE", f"/api/v1/namespaces/{name}", expect=(200, 202, 404))


def install(node: Node, release: str, namespace: str, values: Obj, *, upgrade: bool = False) -> str:
    """``helm install`` (or ``upgrade``) of ``./chart`` into ``namespace``; returns its output."""
    values_path = str(values_file(node, values))
    verb = "upgrade" if upgrade else "install"
    return run(node, "helm", verb, release, str(CHART), "-n", namespace, "-f", values_path)


def cronjob_jobs(node: Node, namespace: str, cronjob: str) -> list[Obj]:
    """The Jobs the CronJob controller created for ``cronjob``, oldest first."""
    listed = node.control_plane.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs")
    owned = [
        job
        for job in listed["items"]
        if any(ref["name"] == cronjob for ref in job["metadata"].get("ownerReferences", []))
    ]
    return sorted(owned, key=lambda j: j["metadata"]["creationTimestamp"])


def finished(job: Obj) -> str | None:
    """``Complete`` or ``Failed`` once the Job has that condition, else None."""
    for condition in job.get("status", {}).get("conditions", []):
        if condition["type"] in ("Complete", "Failed") and condition["status"] == "True":
            return str(condition["type"])
    return None


def wait_for_run(
    node: Node,
    namespace: str,
    cronjob: str,
    timeout: float = 240,
    explain: Callable[[], str] | None = None,
) -> Obj:
    """Wait for the CronJob's first run to finish (schedule + pod start + the run); return it."""

    def probe() -> Obj | None:
        jobs = cronjob_jobs(node, namespace, cronjob)
        return jobs[0] if jobs and finished(jobs[0]) else None

    return poll(
        probe,
        timeout=timeout,
        what=f"a finished run of CronJob {namespace}/{cronjob}",
        explain=explain,
    )


def explain_run(node: Node, namespace: str, run: Obj) -> str:
    """A CronJob run's conditions, its pods' container states and logs, for failure messages."""
    name = run["metadata"]["name"]
    status = run.get("status", {})
    lines = [
        f"job {name}: created {run['metadata'].get('creationTimestamp')}, started "
        f"{status.get('startTime')}: {status.get('conditions')}"
    ]
    for pod in pods_of(node, namespace, f"job-name={name}"):
        for status in pod["status"].get("containerStatuses", []):
            lines.append(f"pod {pod['metadata']['name']}: {status.get('state')}")
        logs = run_tool(node, "kubectl", "logs", "-n", namespace, pod["metadata"]["name"])
        lines.append(logs[-3000:])
    lines += [describe_event(e) for e in node_events(node, namespace)]
    return "\n".join(lines)


def pods_of(node: Node, namespace: str, selector: str) -> list[Obj]:
    """Pods matching a label selector."""
    listed = node.control_plane.request(
        "GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}"
    )
    return list(listed["items"])


def node_events(node: Node, namespace: str) -> list[Obj]:
    """Every event in ``namespace``."""
    listed = node.control_plane.request("GET", f"/api/v1/namespaces/{namespace}/events")
    return list(listed["items"])


def json_lines(text: str) -> list[Obj]:
    """The lines of ``text`` that are JSON objects (the sweeper's logs and report)."""
    found = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def training_job(
    node: Node,
    namespace: str,
    name: str,
    *,
    deadline: int,
    kind: str = "TFJob",
    labels: dict[str, str] | None = None,
) -> Obj:
    """Create a training job whose pods the operator creates and the kubelet really runs.

    Its containers run the workload image, which never finishes by itself, under the
    restricted profile. A TFJob (chief and worker) by default: the operator adds to
    PyTorchJob workers an init container with a public image that cannot be pulled here.
    """
    body = node.training_manifest(kind, name, deadline=deadline)
    body["metadata"]["labels"] = dict(labels or {})
    plural = kubeflow.KINDS[kind].plural
    created: Obj = node.control_plane.request(
        "POST", f"/apis/kubeflow.org/v1/namespaces/{namespace}/{plural}", body
    )
    return created


def get_job(node: Node, namespace: str, name: str, kind: str = "TFJob") -> Obj:
    """Read a training job."""
    plural = kubeflow.KINDS[kind].plural
    job: Obj = node.control_plane.request(
        "GET", f"/apis/kubeflow.org/v1/namespaces/{namespace}/{plural}/{name}"
    )
    return job


def condition(job: Obj, ctype: str) -> Obj | None:
    """The job's condition of type ``ctype`` when it is True."""
    for c in job.get("status", {}).get("conditions", []):
        if c["type"] == ctype and c["status"] == "True":
            return dict(c)
    return None


def running_pods(node: Node, namespace: str, job: str) -> list[Obj]:
    """The job's pods whose containers all run (ready)."""
    pods = pods_of(node, namespace, f"{kubeflow.JOB_NAME_LABEL}={job}")
    return [
        p
        for p in pods
        if p["status"].get("phase") == "Running"
        and all(c.get("ready") for c in p["status"].get("containerStatuses", []))
    ]


def running_containers(node: Node) -> set[str]:
    """The pods with a running task in containerd, as ``namespace/name`` (their CRI labels).

    With the namespace: every scenario's training pods have the same names.
    """
    ctr = [str(binaries.find("ctr")), "--address", str(node.containerd_socket), "-n", "k8s.io"]
    tasks = subprocess.run([*ctr, "tasks", "list"], capture_output=True, text=True, check=True)
    ids = [
        line.split()[0]
        for line in tasks.stdout.splitlines()[1:]
        if line.split() and line.split()[-1] == "RUNNING"
    ]
    names = set()
    for container_id in ids:
        info = subprocess.run(
            [*ctr, "containers", "info", container_id], capture_output=True, text=True, check=False
        )
        if info.returncode == 0:
            labels = json.loads(info.stdout).get("Labels", {})
            names.add(
                f"{labels.get('io.kubernetes.pod.namespace', '')}/"
                f"{labels.get('io.kubernetes.pod.name', '')}"
            )
    return names
