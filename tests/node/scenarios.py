"""Every chart scenario of a module set up at once, so that their waits overlap.

A scenario is one test's world on the node: a restricted namespace for the chart, one for a
training job whose two pods really run, a label of its own and one release. Its slow part is
the CronJob's minute-granular schedule (up to a minute before the first run) and the run
itself (about 40 s: passes at 0 and 30 s, see ``cluster.chart_values``); one scenario
after another, those waits add up to most of the node tier. ``start_all`` therefore creates
every scenario's training job first, waits for all their pods together, then installs every
release at once: the real CronJob controller starts all the first runs in the same minute, and
each test finds its run finished, or about to finish, when it comes to assert on it.

A scenario that cannot be set up (its pods never run, its install fails) is marked with the
reason instead of failing the others; its own test fails with that reason (``Scenario.ready``).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import pytest

from devcluster.node import Node
from tests.node import cluster
from tests.node.cluster import Obj

Values = Callable[[Node, str, str], Obj]
"""The chart values of a scenario, from the node, its training namespace and its selector."""

T = TypeVar("T")
_PODS_TIMEOUT = 240.0  # all the scenarios' pods, started together on a loaded machine


@dataclass
class Scenario:
    """One test's namespaces, training job and release, set up by ``start_all``.

    Attributes:
        name: The scenario's name, also its release's.
        sweeper_ns: The restricted namespace the chart is installed into.
        train_ns: The namespace of the training job.
        label: The value of the job's ``node-test`` label (the release's selector).
        job: The training job's name (a TFJob).
        values: The chart values it was installed with.
        pods: The job's pods once they all ran, as ``namespace/name``.
        containers: The pods with a running container in containerd (``namespace/name``) once
            every scenario's pods ran, before any release was installed.
        seconds_to_run: From the job's creation until its pods all ran.
        problem: Why it could not be set up; None when it was.
    """

    name: str
    sweeper_ns: str
    train_ns: str
    label: str
    job: str
    values: Obj = field(default_factory=dict)
    pods: frozenset[str] = frozenset()
    containers: frozenset[str] = frozenset()
    seconds_to_run: float | None = None
    problem: str | None = None
    created: float = field(default=0.0, repr=False)  # time.monotonic() at the job's creation

    @property
    def release(self) -> str:
        """The Helm release (named after the scenario)."""
        return self.name

    @property
    def cronjob(self) -> str:
        """The release's CronJob."""
        return f"{self.release}-kubeflow-deadline-sweeper"

    @property
    def selector(self) -> str:
        """The label selector of the scenario's training job."""
        return f"node-test={self.label}"

    def ready(self) -> Scenario:
        """Return the scenario, or fail the calling test with the reason it was not set up."""
        if self.problem is not None:
            pytest.fail(f"scenario {self.name} not set up: {self.problem}", pytrace=False)
        return self


def start_all(
    node: Node, scratch: cluster.Scratch, wanted: dict[str, Values], *, deadline: int
) -> dict[str, Scenario]:
    """Set up every scenario in ``wanted`` at once (see the module docstring).

    Args:
        node: The node.
        scratch: Records the namespaces and releases, for the caller to clean.
        wanted: The chart values of each scenario, by name.
        deadline: The training jobs' ``activeDeadlineSeconds``.

    Returns:
        The scenarios by name, each installed or marked with its ``problem``.
    """
    made = _each(lambda name: _create(node, scratch, name, deadline), wanted)
    _wait_for_pods(node, list(made.values()))
    containers = frozenset(cluster.running_containers(node))
    for scenario in made.values():
        scenario.containers = containers
        if scenario.problem is None:
            _check_not_failed_early(node, scenario, deadline)

    def install(name: str) -> None:
        scenario = made[name]
        if scenario.problem is None:
            scenario.values = wanted[name](node, scenario.train_ns, scenario.selector)
            scratch.install(scenario.release, scenario.sweeper_ns, scenario.values)

    # All at once, so that the releases' first runs fall into the same minute.
    for name, problem in _each_problem(install, made).items():
        made[name].problem = problem
    return made


def describe(made: dict[str, Scenario]) -> str:
    """One line: how long the pods took to run and when the releases were installed."""
    seconds = [s.seconds_to_run for s in made.values() if s.seconds_to_run is not None]
    took = f"{min(seconds):.1f}-{max(seconds):.1f} s" if seconds else "never"
    broken = [s.name for s in made.values() if s.problem is not None]
    return (
        f"{len(made)} set up at once, their pods ran after {took}, releases installed at "
        f"{time.strftime('%H:%M:%S', time.gmtime())} UTC"
        + (f"; not set up: {', '.join(broken)}" if broken else "")
    )


def _create(node: Node, scratch: cluster.Scratch, name: str, deadline: int) -> Scenario:
    scenario = Scenario(
        name=name,
        sweeper_ns=scratch.namespace(f"sweeper-{name}"),
        train_ns=scratch.namespace(f"train-{name}"),
        label=f"node-test-{secrets.token_hex(3)}",
        job="train",
    )
    cluster.training_job(
        node,
        scenario.train_ns,
        scenario.job,
        deadline=deadline,
        labels={"node-test": scenario.label},
    )
    scenario.created = time.monotonic()
    return scenario


def _wait_for_pods(node: Node, scenarios: Iterable[Scenario]) -> None:
    # One shared deadline: the pods of all the jobs start together.
    waiting = {s.name: s for s in scenarios}
    give_up = time.monotonic() + _PODS_TIMEOUT
    while waiting:
        for name, scenario in list(waiting.items()):
            running = cluster.running_pods(node, scenario.train_ns, scenario.job)
            if len(running) == 2:  # a TFJob's chief and worker
                scenario.pods = frozenset(
                    f"{scenario.train_ns}/{p['metadata']['name']}" for p in running
                )
                scenario.seconds_to_run = time.monotonic() - scenario.created
                del waiting[name]
        if not waiting:
            return
        if time.monotonic() > give_up:
            for scenario in waiting.values():
                scenario.problem = (
                    f"timed out after {_PODS_TIMEOUT:.0f}s waiting for the operator's pods of "
                    f"{scenario.train_ns}/{scenario.job} running\n"
                    f"{cluster.explain_namespace(node, scenario.train_ns)}"
                )
            return
        time.sleep(1.0)


def _check_not_failed_early(node: Node, scenario: Scenario, deadline: int) -> None:
    # A pod that becomes ready makes the operator reconcile its job; past the deadline by
    # then, the operator fails the job itself and the scenario would prove nothing about the
    # sweeper.
    failed = cluster.condition(cluster.get_job(node, scenario.train_ns, scenario.job), "Failed")
    if failed is not None:
        scenario.problem = (
            f"the operator failed {scenario.train_ns}/{scenario.job} itself while its pods "
            f"started ({scenario.seconds_to_run or 0:.0f}s, its deadline {deadline}s): "
            f"{failed.get('message')}"
        )


def _each(make: Callable[[str], T], names: Iterable[str]) -> dict[str, T]:
    """``make(name)`` for every name, concurrently; the first exception propagates."""
    names = list(names)
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        futures = {name: pool.submit(make, name) for name in names}
        return {name: future.result() for name, future in futures.items()}


def _each_problem(run: Callable[[str], None], names: Iterable[str]) -> dict[str, str]:
    """Run ``run(name)`` for every name concurrently; what failed, by name, as text."""
    names = list(names)
    problems: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        futures = {name: pool.submit(run, name) for name in names}
        for name, future in futures.items():
            try:
                future.result()
            except pytest.fail.Exception as e:
                problems[name] = str(e)
    return problems
