"""Fixtures of the operator suite (``tests/e2e/test_operator_*.py``): the real Training Operator.

Imported into ``tests/e2e/conftest.py`` (one import line), because ``pytest_plugins`` is only
allowed in the top-level conftest. Provides:

- ``operator``: the real Training Operator v1.9.4, one per test module, watching every
  namespace of the session's control plane. Module scope keeps the suite fast while letting
  the restart scenario stop and start its own; it stops at the end of the module, so no other
  test module ever runs beside an operator that would rewrite its jobs.
- ``kubeflow_jobs``: creates jobs shaped like the experiment, each in its own namespace with
  its own ``Kubelet``, and removes everything at teardown.
- ``figures``: measured facts (deadline to Failed, touch to Failed...) printed in the terminal
  summary: figures, never assertions on the machine's speed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from devcluster import BinaryMissing, ControlPlane, binaries, jobs
from devcluster.jobs import JobView
from devcluster.kubelet import Kubelet, Transition
from devcluster.operator import Operator
from tests import summary
from tests.e2e import clusters, workloads

T = TypeVar("T")

# The operator's own words (pkg/controller.v1/common/job.go), and the sweeper's extension.
OPERATOR_DEADLINE_MESSAGE = (
    "Job {name} has failed because it was active longer than specified deadline"
)
SWEEPER_DEADLINE_MESSAGE = OPERATOR_DEADLINE_MESSAGE + " (enforced by kubeflow-deadline-sweeper)"

# Generous: the machine is shared, and these bound waits, they do not measure anything.
TIMEOUT = 60.0


def poll(probe: Callable[[], T | None], *, timeout: float = TIMEOUT, what: str) -> T:
    """Call ``probe`` until it returns something truthy, and return that.

    Raises:
        AssertionError: Nothing truthy within ``timeout`` seconds; the message says what was
            awaited, so a failing scenario reads as a broken expectation.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout:.0f}s still waiting for {what}")
        time.sleep(0.2)


def sleep_until(moment: dt.datetime) -> None:
    """Sleep until the local UTC clock reaches ``moment`` (the apiserver shares this clock)."""
    delay = (moment - dt.datetime.now(dt.UTC)).total_seconds()
    if delay > 0:
        time.sleep(delay)


@dataclass
class RunningJob:
    """One job under test, its namespace and the kubelet playing its pods.

    Attributes:
        api: Admin API client.
        kind: Job kind.
        namespace: Its own namespace.
        name: Job name.
        kubelet: The thread moving its pods.
    """

    api: Any
    kind: str
    namespace: str
    name: str
    kubelet: Kubelet

    def view(self) -> JobView:
        """The job as the apiserver has it now."""
        return jobs.get(self.api, self.kind, self.namespace, self.name)

    def pods(self) -> list[Any]:
        """Its pods, sorted by name."""
        return jobs.pods(self.api, self.namespace, self.name)

    def active_pods(self) -> list[Any]:
        """Its Pending and Running pods that are not being deleted."""
        return [
            p
            for p in self.pods()
            if p.status.phase in ("Pending", "Running") and p.metadata.deletion_timestamp is None
        ]

    def services(self) -> list[str]:
        """Names of its services."""
        from kubernetes import client  # noqa: PLC0415 - keep module import light

        items = (
            client.CoreV1Api(self.api)
            .list_namespaced_service(
                self.namespace, label_selector=f"{jobs.JOB_NAME_LABEL}={self.name}"
            )
            .items
        )
        return sorted(s.metadata.name for s in items if s.metadata and s.metadata.name)

    def started(self) -> JobView:
        """Wait until the operator has written ``status.startTime``, and return the job."""
        return self.wait(lambda v: v.start_time is not None, f"{self.kind} {self.name} to start")

    def wait(
        self, predicate: Callable[[JobView], bool], what: str, timeout: float = TIMEOUT
    ) -> JobView:
        """Wait until ``predicate(job)`` holds, and return the job."""

        def probe() -> JobView | None:
            view = self.view()
            return view if predicate(view) else None

        return poll(probe, timeout=timeout, what=what)

    def wait_failed(self, timeout: float = TIMEOUT) -> JobView:
        """Wait until the job has ``Failed=True``."""
        return self.wait(
            lambda v: v.failed, f"{self.kind} {self.namespace}/{self.name} to fail", timeout
        )

    def pods_settled(self, count: int) -> list[Any]:
        """Wait until the kubelet has made ``count`` status changes; return them."""
        return poll(
            lambda: self.kubelet.changes if len(self.kubelet.changes) >= count else None,
            what=f"{count} pod status changes of {self.name}",
        )


@pytest.fixture(scope="module")
def operator(control_plane: ControlPlane) -> Iterator[Operator]:
    """The real Training Operator v1.9.4 for one test module (skips or fails like e2e)."""
    try:
        op = Operator.start(control_plane)
    except BinaryMissing as e:
        clusters.binaries_missing(e)
        raise  # unreachable: binaries_missing always raises
    with op:
        yield op


@contextlib.contextmanager
def job_factory(cp: ControlPlane, prefix: str) -> Iterator[Callable[..., RunningJob]]:
    """Factory: ``create(kind, ads=..., timeline=[...])`` makes a job and its kubelet.

    The one job factory of the e2e and compat tiers (``kubeflow_jobs`` here, ``pair_jobs`` in
    ``tests/compat``). Each job gets its own namespace ``<prefix>-<kind>-…`` unless one is
    given (Kueue's LocalQueue is namespaced, so its jobs share one); ``shape`` edits the
    manifest before it is created (labels, resource requests). At the end every kubelet stops
    and every job, pod and service is deleted (nothing garbage-collects them without
    kube-controller-manager), then the namespaces.
    """
    api = cp.api()
    created: list[RunningJob] = []

    def create(
        kind: str,
        *,
        ads: int | None,
        timeline: Sequence[Transition],
        name: str = "train",
        clean_pod_policy: str | None = None,
        namespace: str | None = None,
        shape: Callable[[dict[str, Any]], None] | None = None,
    ) -> RunningJob:
        namespace = namespace or cp.create_namespace(f"{prefix}-{kind.lower()}")
        body = jobs.manifest(
            kind, name, active_deadline_seconds=ads, clean_pod_policy=clean_pod_policy
        )
        if shape is not None:
            shape(body)
        jobs.create(api, namespace, body)
        kubelet = Kubelet(api, namespace, name, timeline).start()
        running = RunningJob(api, kind, namespace, name, kubelet)
        created.append(running)
        return running

    yield create
    for running in created:
        running.kubelet.stop()
    for running in created:
        jobs.delete_everything(api, running.kind, running.namespace, running.name)
    for namespace in dict.fromkeys(running.namespace for running in created):
        cp.request("DELETE", f"/api/v1/namespaces/{namespace}", expect=(200, 202, 404))
    for running in created:
        assert not running.kubelet.errors, (
            f"the kubelet of {running.name} hit API errors: {running.kubelet.errors}"
        )


@pytest.fixture
def kubeflow_jobs(control_plane: ControlPlane) -> Iterator[Callable[..., RunningJob]]:
    """Factory: ``kubeflow_jobs(kind, ads=..., timeline=[...])`` creates a job and its kubelet.

    Each job gets its own namespace; see ``job_factory`` for what teardown removes.
    """
    with job_factory(control_plane, "op") as create:
        yield create


@dataclass(frozen=True)
class Figures:
    """Measured facts of the operator suite, printed at the end of the run (``tests.summary``)."""

    config: pytest.Config

    def add(self, scenario: str, text: str) -> None:
        """Record one figure, e.g. ``add("2 operator alone", "deadline -> Failed 15 s")``."""
        section = f"Training Operator {binaries.version('training-operator')}: measured"
        summary.record(self.config, section, f"{scenario}: {text}")


@pytest.fixture(scope="session")
def figures(pytestconfig: pytest.Config) -> Figures:
    """Where scenarios record what they measured (shown in the terminal summary)."""
    return Figures(pytestconfig)


def sweeper_passes(stdout: str) -> list[dict[str, Any]]:
    """The ``-o json`` report: one JSON document per pass (each over several lines)."""
    return workloads.passes(stdout)


def entry_for(report: dict[str, Any], job: RunningJob) -> dict[str, Any]:
    """The report entry of one job in one pass."""
    matches: list[dict[str, Any]] = [
        e for e in report["jobs"] if e["namespace"] == job.namespace and e["name"] == job.name
    ]
    assert len(matches) == 1, f"expected one report entry for {job.namespace}/{job.name}: {report}"
    return matches[0]


def seconds(a: dt.datetime | None, b: dt.datetime | None) -> float:
    """``b - a`` in seconds (both known)."""
    assert a is not None
    assert b is not None
    return (b - a).total_seconds()
