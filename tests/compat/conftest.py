"""Fixtures of the compat tier: one control plane and one real operator per version pair.

The tier (``-m compat``) runs the same scenarios on every (Training Operator, Kubernetes) pair
of ``PAIRS``, each release's real binaries from the cache that ``scripts/build-binaries``
fills. The ``pair`` fixture is parametrized over the pairs at module scope: pytest groups the
tests by pair, so each pair's control plane and operator start once, serve that pair's tests,
and stop before the next pair starts (the versions are process-wide: ``binaries.select``).

Which pairs run: ``SWEEPER_TEST_COMPAT_PAIRS``, ``all`` (the default), ``ci`` (the subset
``scripts/test`` runs in CI, see ``scripts/test-compat``) or pair ids separated by commas
(``v1.9.3-k8s-v1.37.2``); ``-k v1.9.3`` narrows further, as usual. The Kueue tests
(``test_kueue.py``) run on the one pair marked ``kueue`` when it is selected, with their own
control plane, operator and Kueue.

The controller families cross Kubernetes minors too, in ``CELLS`` (ids such as
``mpi-operator-v0.8.2-k8s-v1.34.4``, selected by the same variable): each ``test_family_*``
module runs its family's cells, one control plane and set of controllers a cell, started by
``tests/e2e/conftest_families.py``'s fixtures (``mpi_cluster``, ``trainer_cluster``) on the
cell's kube-apiserver and kube-controller-manager. A cell that cannot run says why (``skip``).

The tier is not part of the default run: its tests are deselected unless the ``-m``
expression names ``compat`` (``pytest -m compat tests/compat``), so ``pytest`` alone and the
main tiers of ``scripts/test`` keep their time budget. Each pair's wall time (start of its
control plane to the end of its operator) is printed in the terminal summary: a figure, not
an assertion.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from devcluster import BinaryMissing, ControlPlane, binaries, jobs
from devcluster.kueue import Kueue
from devcluster.operator import Operator, served_schemes
from tests.e2e import clusters, workloads
from tests.e2e.conftest_families import (  # noqa: F401 - fixtures, used by name
    family_namespace,
    family_sweep,
    mpi_cluster,
    trainer_cluster,
)
from tests.e2e.conftest_operator import RunningJob, job_factory, poll


def release(version: str) -> tuple[int, ...]:
    """``v1.9.3`` as ``(1, 9, 3)``, for comparing releases."""
    return tuple(int(part) for part in version.lstrip("v").split(".")[:3])


@dataclass(frozen=True)
class Pair:
    """One (Training Operator, Kubernetes) pair the tier runs.

    Attributes:
        operator: Training Operator release, e.g. ``v1.9.3``.
        kubernetes: kube-apiserver release, e.g. ``v1.37.2``.
        ci: Whether ``scripts/test`` runs it in CI (the subset; ``--all`` runs every pair).
        why: Why the pair is in the matrix.
        kueue: Whether the Kueue tests (``test_kueue.py``, marker ``kueue``) run on it.
    """

    operator: str
    kubernetes: str
    ci: bool
    why: str
    kueue: bool = False

    @property
    def id(self) -> str:
        """The pytest id, e.g. ``v1.9.3-k8s-v1.37.2`` (what ``-k`` matches)."""
        return f"{self.operator}-k8s-{self.kubernetes}"

    @property
    def deletes_every_pod_on_deadline(self) -> bool:
        """v1.7.0 to v1.9.3 delete all pods on a deadline failure; v1.9.4 keeps cleanPodPolicy.

        kubeflow/trainer#3419, fixed in v1.9.4 by #3420 (``pkg/controller.v1/common/job.go``).
        """
        return release(self.operator) < (1, 9, 4)

    @property
    def serves_mxjob(self) -> bool:
        """MXJob is served up to v1.8.x (removed in v1.9.0 by #2150)."""
        return "mxjob" in served_schemes(self.operator)


# Each operator on the newest minor it runs on (1.37 for all four), and v1.9.4, the pinned one,
# on every minor managed clusters run in late 2026. Patch releases: the ones the cache holds.
NEWEST = "v1.37.2"
PAIRS: tuple[Pair, ...] = (
    Pair("v1.7.0", NEWEST, ci=True, why="first with suspend and <Kind>Failed; RHOAI 2.x base"),
    Pair("v1.8.1", NEWEST, ci=True, why="first with webhooks; last with MXJob"),
    # Kueue v0.17.0 pins trainer v1.9.3 in its go.mod: its Kueue tests run on this pair.
    Pair(
        "v1.9.3",
        NEWEST,
        ci=True,
        why="Charmed Kubeflow 1.10/1.11, RHOAI 3.x; deletes pods; Kueue's pinned operator",
        kueue=True,
    ),
    Pair("v1.9.4", NEWEST, ci=False, why="the last v1 release on the newest minor"),
    Pair("v1.9.4", "v1.32.13", ci=True, why="the oldest minor of extended support"),
    Pair("v1.9.4", "v1.34.4", ci=True, why="the middle of the range"),
    Pair("v1.9.4", "v1.36.3", ci=False, why="the pinned pair: the main e2e tier runs it"),
)


@dataclass(frozen=True)
class Cell:
    """One (controller family, Kubernetes) cell: the family's pinned controllers on a minor.

    Attributes:
        family: ``mpi-operator`` (MPIJob v2beta1) or ``trainer`` (Trainer v2 with JobSet).
        kubernetes: kube-apiserver and kube-controller-manager release.
        ci: Whether ``scripts/test`` runs it in CI.
        why: Why the cell is in the matrix.
        skip: Why it cannot run, when it cannot (the cell's test skips with it).
    """

    family: str
    kubernetes: str
    ci: bool
    why: str
    skip: str = ""

    @property
    def controllers(self) -> tuple[str, ...]:
        """The family's binaries, beyond etcd, kube-apiserver and kube-controller-manager."""
        return ("mpi-operator",) if self.family == "mpi-operator" else ("jobset", "trainer")

    @property
    def id(self) -> str:
        """The pytest id, e.g. ``mpi-operator-v0.8.2-k8s-v1.34.4``."""
        return f"{self.family}-{binaries.version(self.family)}-k8s-{self.kubernetes}"


# kube-controller-manager v1.32.13 does not build here: its module k8s.io/endpointslice@v0.32.13
# is not on the Go module proxy (403), and the Job controller and garbage collector are what
# end a launcher and reclaim a JobSet's Jobs. A newer one against an older apiserver is outside
# the version skew policy, so the 1.32 cells say so instead of running on it.
_NO_KCM_132 = (
    "kube-controller-manager v1.32.13 cannot be built: k8s.io/endpointslice@v0.32.13 is not "
    "on the Go module proxy"
)
# mpi-operator v0.8.2 is built with client-go v0.35, Trainer v2.3.0 and JobSet v0.12.0 with
# v0.36 (their go.mod files), and none of them documents a lowest minor: every cell below runs
# them. CI runs the middle and the newest minors (1.36 is the e2e tier's).
CELLS: tuple[Cell, ...] = (
    Cell("mpi-operator", "v1.32.13", ci=False, why="the oldest minor", skip=_NO_KCM_132),
    Cell("mpi-operator", "v1.34.4", ci=True, why="the minor below its client-go (v0.35)"),
    Cell("mpi-operator", "v1.36.3", ci=False, why="the pinned minor: the e2e tier runs it"),
    Cell("mpi-operator", NEWEST, ci=True, why="the newest minor"),
    Cell("trainer", "v1.32.13", ci=False, why="the oldest minor", skip=_NO_KCM_132),
    Cell("trainer", "v1.34.4", ci=True, why="two minors below its client-go (v0.36)"),
    Cell("trainer", "v1.36.3", ci=False, why="the pinned minor: the e2e tier runs it"),
    Cell("trainer", NEWEST, ci=True, why="the newest minor"),
)

_PAIRS_ENV = "SWEEPER_TEST_COMPAT_PAIRS"


def _selected(spec: str | None) -> tuple[list[Pair], list[Cell]]:
    spec = (spec or "all").strip()
    if spec == "all":
        return list(PAIRS), list(CELLS)
    if spec == "ci":
        return [p for p in PAIRS if p.ci], [c for c in CELLS if c.ci]
    pairs = {p.id: p for p in PAIRS}
    cells = {c.id: c for c in CELLS}
    wanted = [part.strip() for part in spec.split(",") if part.strip()]
    unknown = [w for w in wanted if w not in pairs and w not in cells]
    if unknown:
        raise pytest.UsageError(
            f"{_PAIRS_ENV}: unknown pair {', '.join(unknown)}; use all, ci or some of "
            f"{', '.join([*pairs, *cells])}"
        )
    return [pairs[w] for w in wanted if w in pairs], [cells[w] for w in wanted if w in cells]


def selected_pairs(spec: str | None) -> list[Pair]:
    """The pairs ``SWEEPER_TEST_COMPAT_PAIRS`` asks for (``all``, ``ci`` or ids).

    Raises:
        pytest.UsageError: An id that is not in ``PAIRS`` or ``CELLS`` (one line names them).
    """
    return _selected(spec)[0]


def selected_cells(spec: str | None) -> list[Cell]:
    """The families' cells ``SWEEPER_TEST_COMPAT_PAIRS`` asks for, as ``selected_pairs``."""
    return _selected(spec)[1]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``pair`` (or ``cell``) over the selected ones, at module scope.

    A module marked ``kueue`` runs on the selected pairs that have ``kueue`` set (one). A
    module with ``cell`` runs the selected cells of its ``FAMILY``.
    """
    if "cell" in metafunc.fixturenames:
        family = metafunc.module.FAMILY
        cells = [c for c in selected_cells(os.environ.get(_PAIRS_ENV)) if c.family == family]
        metafunc.parametrize(
            "cell", cells, ids=[c.id for c in cells], indirect=True, scope="module"
        )
    if "pair" in metafunc.fixturenames:
        pairs = selected_pairs(os.environ.get(_PAIRS_ENV))
        if metafunc.definition.get_closest_marker("kueue") is not None:
            pairs = [p for p in pairs if p.kueue]
        metafunc.parametrize(
            "pair", pairs, ids=[p.id for p in pairs], indirect=True, scope="module"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave the compat tier out of runs whose ``-m`` does not name it (the default run)."""
    if "compat" in (config.getoption("markexpr", "") or ""):
        return
    here = Path(__file__).parent
    deselected = [item for item in items if here in item.path.parents]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if here not in item.path.parents]


@dataclass
class PairCluster:
    """A pair's running control plane and operator, shared by that pair's tests.

    Attributes:
        pair: The versions.
        cp: The control plane (kube-apiserver of ``pair.kubernetes``, the release's CRDs).
        operator: The running Training Operator of ``pair.operator``.
        kubeconfig: The sweeper's kubeconfig (user ``sweeper``, ``system:masters``).
        beside: What a module starts beside the operator for the pair's lifetime, stopped
            before the operator (a module-scoped fixture cannot depend on ``pair``, which is
            parametrized at module scope but declared for functions).
        kueue: Kueue once ``test_kueue.py``'s fixture started it (in ``beside``).
    """

    pair: Pair
    cp: ControlPlane
    operator: Operator
    kubeconfig: Path
    beside: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    kueue: Kueue | None = None

    def sweep(self, *args: str) -> Any:
        """Run the sweeper with ``-o json``; it must exit 0. Returns its single pass."""
        completed = clusters.run_sweeper(self.kubeconfig, *args, "-o", "json")
        assert completed.returncode == 0, (
            f"sweeper {' '.join(args)} exited {completed.returncode}: {completed.stderr[-2000:]}"
        )
        [report] = workloads.passes(completed.stdout)
        return report


@dataclass
class _Timings:
    lines: list[str] = field(default_factory=list)


_timings_key = pytest.StashKey[_Timings]()


@pytest.fixture
def pair(request: pytest.FixtureRequest) -> Iterator[PairCluster]:
    """The pair's control plane and operator (module scope through ``pytest_generate_tests``).

    Missing binaries skip the tier locally and fail it in CI, like the e2e tier; the message
    names the ``scripts/build-binaries`` command that builds them.
    """
    versions: Pair = request.param
    binaries.select(operator=versions.operator, kubernetes=versions.kubernetes)
    began = time.monotonic()
    try:
        clusters.require_binaries("etcd", "kube-apiserver", "training-operator")
        cp = clusters.start_control_plane()
        with cp:
            plane = time.monotonic() - began
            try:
                operator = Operator.start(cp)
            except BinaryMissing as e:
                clusters.binaries_missing(e)
                raise  # unreachable: binaries_missing always raises
            ready = time.monotonic() - began
            with operator:
                kubeconfig = cp.user_kubeconfig(clusters.SWEEPER_USER, ["system:masters"])
                cluster = PairCluster(versions, cp, operator, kubeconfig)
                with cluster.beside:
                    yield cluster
        timings = request.config.stash.setdefault(_timings_key, _Timings())
        timings.lines.append(
            f"{versions.id}: {time.monotonic() - began:.0f} s wall (control plane "
            f"{plane:.0f} s, operator ready at {ready:.0f} s)"
        )
    finally:
        binaries.select()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Print each pair's wall time (figures, never assertions)."""
    timings = config.stash.get(_timings_key, None)
    if timings and timings.lines:
        terminalreporter.section("compat tier: wall time per pair")
        for line in timings.lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def cell(request: pytest.FixtureRequest) -> Iterator[Cell]:
    """The cell's versions, selected for the process while its module runs (or its skip)."""
    versions: Cell = request.param
    if versions.skip:
        pytest.skip(versions.skip)
    binaries.select(kubernetes=versions.kubernetes)
    try:
        clusters.require_binaries(
            "etcd", "kube-apiserver", "kube-controller-manager", *versions.controllers
        )
        yield versions
    finally:
        binaries.select()


@pytest.fixture(scope="module")
def family_control_plane(cell: Cell, request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """The cell's control plane, under ``conftest_families``' fixtures (it replaces theirs).

    Its wall time, controllers included, is printed with the pairs'.
    """
    began = time.monotonic()
    with clusters.start_control_plane() as cp:
        yield cp
    timings = request.config.stash.setdefault(_timings_key, _Timings())
    timings.lines.append(f"{cell.id}: {time.monotonic() - began:.0f} s wall")


@pytest.fixture
def pair_jobs(pair: PairCluster) -> Iterator[Callable[..., RunningJob]]:
    """Factory: ``pair_jobs(kind, ads=..., timeline=[...])``, a job and its kubelet.

    Each job gets its own namespace (or the one given); teardown stops the kubelets and
    deletes everything (``tests.e2e.conftest_operator.job_factory``).
    """
    with job_factory(pair.cp, "compat") as create:
        yield create


def overdue(created: Sequence[RunningJob], *, after: float = 3) -> None:
    """Wait until every job runs with stable pods and is ``after`` s past its deadline.

    Asserts the premise of every deadline scenario: the operator alone has failed none of
    them (kubeflow/trainer#3358, in every v1 release).
    """
    deadlines = []
    for job in created:
        view = job.started()
        job.wait(lambda v: v.is_true("Running"), f"{job.kind} {job.name} to be Running")
        assert view.deadline is not None
        deadlines.append(view.deadline)
    moment = max(deadlines) + dt.timedelta(seconds=after)
    delay = (moment - dt.datetime.now(dt.UTC)).total_seconds()
    if delay > 0:
        time.sleep(delay)
    missed = {f"{job.kind} {job.name}": not job.view().failed for job in created}
    assert all(missed.values()), (
        f"premise: with stable pods the operator alone misses the deadline: {missed}"
    )


def reconciled(pair: PairCluster, job: RunningJob, poke: Callable[[], None]) -> None:
    """Make the operator reconcile ``job`` (``poke`` updates it) and wait until it is done.

    Every release logs the job's name when it reconciles it (the name is unique in the pair);
    once a new such line is in the log and the controller's queue is empty, the reconcile that
    the update caused has ended.
    """
    scheme = job.kind.lower()
    before = pair.operator.log_since_start().count(job.name)
    poke()
    poll(
        lambda: pair.operator.log_since_start().count(job.name) > before,
        what=f"the operator to reconcile {job.namespace}/{job.name}",
    )
    poll(lambda: pair.operator.idle(scheme), what=f"the {scheme} controller to be idle")


def annotate(pair: PairCluster, job: RunningJob, key: str, value: str) -> None:
    """A merge patch of one annotation: the request a sweeper touch makes."""
    plural = jobs.ALL_KINDS[job.kind].plural
    pair.cp.request(
        "PATCH",
        f"/apis/kubeflow.org/v1/namespaces/{job.namespace}/{plural}/{job.name}",
        {"metadata": {"annotations": {key: value}}},
        content_type="application/merge-patch+json",
    )
