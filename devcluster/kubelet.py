"""Play the kubelet for one Kubeflow job's pods, on a timeline the test scripts.

The control plane has no scheduler and no kubelet, so the pods the Training Operator creates
stay Pending forever. ``Kubelet`` moves them instead, by patching ``pods/status`` the way a
kubelet would report them (phase, pod conditions, container statuses with ``ready: true``):

    kubelet = Kubelet(api, "ns", "demo", [
        Transition(at=1, phase="Running", replica_type="Master"),
        Transition(at=3, phase="Running", replica_type="Worker"),
        Transition(at=30, phase="Succeeded", replica_type="Master"),
    ]).start()

The timeline is declarative: at every tick the thread lists the job's pods (label
``training.kubeflow.org/job-name``) and brings each one to the phase its latest due
transition names, so a pod the operator creates late (an MPIJob launcher) catches up at once.
Phases only move forward (Pending, Running, then Succeeded or Failed), as on a real node. The
kubelet never creates, recreates or deletes a pod: whatever deletes a pod (the operator, the
sweeper) is what the test observes. Each status change it made is recorded in ``changes``
with the time it was accepted, so tests can state when the pods were last changed.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes import client
from kubernetes.client import ApiException

from devcluster import fields
from devcluster.processes import StopsOnExit

log = logging.getLogger(__name__)

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"

Phase = Literal["Pending", "Running", "Succeeded", "Failed"]
_ORDER: dict[str, int] = {"Pending": 0, "Running": 1, "Succeeded": 2, "Failed": 2}


@dataclass(frozen=True)
class Transition:
    """From ``at`` seconds after the timeline's origin, matching pods should be in ``phase``.

    Attributes:
        at: Seconds after the origin (``Kubelet.start``, or the ``origin`` given).
        phase: Running, Succeeded or Failed.
        replica_type: Replica type it applies to (``Master``, ``Worker``, ``Launcher``...,
            case-insensitive); None for every pod of the job.
        index: Replica index it applies to; None for every index.
    """

    at: float
    phase: Phase
    replica_type: str | None = None
    index: int | None = None

    def matches(self, pod_labels: dict[str, str]) -> bool:
        """Whether this transition is about the pod with these labels."""
        if self.replica_type is not None and (
            pod_labels.get(REPLICA_TYPE_LABEL, "").lower() != self.replica_type.lower()
        ):
            return False
        return self.index is None or pod_labels.get(REPLICA_INDEX_LABEL) == str(self.index)


def desired_phase(
    timeline: Sequence[Transition], pod_labels: dict[str, str], elapsed: float
) -> Phase:
    """The phase a pod should have ``elapsed`` seconds into the timeline (pure).

    The latest due transition that matches the pod wins; ties go to the later entry.
    """
    phase: Phase = "Pending"
    latest = float("-inf")
    for transition in timeline:
        if transition.at <= elapsed and transition.matches(pod_labels) and transition.at >= latest:
            phase, latest = transition.phase, transition.at
    return phase


def staggered(
    *,
    master_running: float,
    workers_running: Sequence[float],
    master_succeeded: float | None = None,
    master: str = "Master",
    worker: str = "Worker",
) -> list[Transition]:
    """The experiment's timeline: a master, then workers one by one, then the master finishes.

    Args:
        master_running: When the master pod runs.
        workers_running: When each worker pod (index 0, 1, ...) runs.
        master_succeeded: When the master completes; None to keep it running.
        master: Replica type of the master (``Chief`` for a TFJob, ``Launcher`` for an MPIJob).
        worker: Replica type of the workers.
    """
    timeline = [Transition(master_running, "Running", master)]
    timeline += [Transition(at, "Running", worker, i) for i, at in enumerate(workers_running)]
    if master_succeeded is not None:
        timeline.append(Transition(master_succeeded, "Succeeded", master))
    return timeline


@dataclass(frozen=True)
class Change:
    """One status change the kubelet made.

    Attributes:
        pod: Pod name.
        phase: The phase it reported.
        elapsed: Seconds after the origin when the apiserver accepted it.
        at: The same moment in UTC.
    """

    pod: str
    phase: Phase
    elapsed: float
    at: dt.datetime


class Kubelet(StopsOnExit):
    """A thread that moves one job's pods along a timeline by patching ``pods/status``.

    Attributes:
        namespace: The job's namespace.
        job_name: The job's name (value of ``training.kubeflow.org/job-name``).
        timeline: The transitions to apply.
        changes: Every status change made, in order.
        errors: Unexpected API errors (a pod deleted under our feet is not one).
    """

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        job_name: str,
        timeline: Sequence[Transition],
        *,
        interval: float = 0.2,
    ) -> None:
        self.namespace = namespace
        self.job_name = job_name
        self.timeline = tuple(timeline)
        self.changes: list[Change] = []
        self.errors: list[str] = []
        self._core = client.CoreV1Api(api)
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._origin = time.monotonic()
        self._origin_utc = dt.datetime.now(dt.UTC)

    def start(self, origin_utc: dt.datetime | None = None) -> Kubelet:
        """Start the thread.

        Args:
            origin_utc: The timeline's time zero; default now. Pass the job's creation time to
                script relative to it.
        """
        now_utc = dt.datetime.now(dt.UTC)
        origin_utc = origin_utc or now_utc
        self._origin_utc = origin_utc
        self._origin = time.monotonic() - (now_utc - origin_utc).total_seconds()
        self._thread = threading.Thread(
            target=self._run, name=f"kubelet-{self.job_name}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread; pods keep the phase they have. Safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    @property
    def elapsed(self) -> float:
        """Seconds since the timeline's origin."""
        return time.monotonic() - self._origin

    @property
    def last_change(self) -> Change | None:
        """The latest status change made, if any."""
        return self.changes[-1] if self.changes else None

    def tick(self) -> None:
        """Bring every pod of the job to its due phase once (the thread calls this)."""
        elapsed = self.elapsed
        pods = self._core.list_namespaced_pod(
            self.namespace, label_selector=f"{JOB_NAME_LABEL}={self.job_name}"
        ).items
        for pod in pods:
            if fields.metadata(pod).deletion_timestamp is not None:
                continue
            current = fields.status(pod).phase or "Pending"
            target = desired_phase(self.timeline, fields.metadata(pod).labels or {}, elapsed)
            if _ORDER[target] <= _ORDER.get(current, 0):
                continue
            self._report(pod, target)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except ApiException as e:
                self.errors.append(f"list pods: {e.status} {e.reason}")
            except Exception as e:  # noqa: BLE001 - keep playing; the test reads self.errors
                self.errors.append(f"{type(e).__name__}: {e}")
            self._stop.wait(self._interval)

    def _report(self, pod: client.V1Pod, phase: Phase) -> None:
        now = dt.datetime.now(dt.UTC)
        body = {"status": pod_status(pod, phase, now)}
        name = fields.name(pod)
        try:
            self._core.patch_namespaced_pod_status(
                name,
                self.namespace,
                body,
                _content_type="application/merge-patch+json",
            )
        except ApiException as e:
            if e.status == 404:  # noqa: PLR2004 - deleted meanwhile: the operator or sweeper did it
                return
            self.errors.append(f"patch {name} -> {phase}: {e.status} {e.reason}: {e.body}")
            return
        change = Change(name, phase, round(self.elapsed, 3), now)
        self.changes.append(change)
        log.info(
            "kubelet: %s/%s -> %s at %.1fs",
            self.namespace,
            name,
            phase,
            change.elapsed,
        )


def pod_status(pod: client.V1Pod, phase: Phase, now: dt.datetime) -> dict[str, Any]:
    """The ``status`` a kubelet would report for ``pod`` in ``phase`` (pure).

    Running: every container started and ready, init containers completed. Succeeded or
    Failed: every container terminated with exit code 0 or 1.
    """
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    start_time = fields.status(pod).start_time
    started = start_time.strftime("%Y-%m-%dT%H:%M:%SZ") if start_time else stamp
    spec = fields.spec(pod)
    containers = [c.name for c in spec.containers]
    init_containers = [c.name for c in spec.init_containers or []]
    images = {c.name: c.image or "" for c in [*spec.containers, *(spec.init_containers or [])]}
    running = phase == "Running"

    def terminated(exit_code: int) -> dict[str, Any]:
        return {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "startedAt": started,
            "finishedAt": stamp,
        }

    def container_status(name: str, state: dict[str, Any], ready: bool) -> dict[str, Any]:
        return {
            "name": name,
            "image": images[name],
            "imageID": "",
            "ready": ready,
            "started": "running" in state,
            "restartCount": 0,
            "state": state,
        }

    if running:
        state: dict[str, Any] = {"running": {"startedAt": stamp}}
    else:
        state = {"terminated": terminated(0 if phase == "Succeeded" else 1)}

    def condition(kind: str, status: bool) -> dict[str, Any]:
        return {"type": kind, "status": "True" if status else "False", "lastTransitionTime": stamp}

    return {
        "phase": phase,
        "startTime": started,
        "conditions": [
            condition("PodScheduled", status=True),
            condition("Initialized", status=True),
            condition("ContainersReady", status=running),
            condition("Ready", status=running),
        ],
        "initContainerStatuses": [
            container_status(name, {"terminated": terminated(0)}, ready=True)
            for name in init_containers
        ],
        "containerStatuses": [container_status(name, state, ready=running) for name in containers],
    }
