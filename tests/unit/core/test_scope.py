"""Which kinds and namespaces a run covers: one selection for the pass, the watch and --explain."""

from __future__ import annotations

import pytest

from sweeper.core.families.mpi_operator import MPIJOB
from sweeper.core.families.training_operator import JAXJOB, PYTORCHJOB, TFJOB
from sweeper.core.kinds import Kind
from sweeper.core.scope import RunScope
from sweeper.k8s.cluster import ServedKind

SERVED = (ServedKind(TFJOB, "v1"), ServedKind(PYTORCHJOB, "v1"), ServedKind(MPIJOB, "v2beta1"))


@pytest.mark.parametrize(
    ("kinds", "covered", "missing"),
    [
        pytest.param((), (TFJOB, PYTORCHJOB, MPIJOB), (), id="every-served-kind"),
        pytest.param((MPIJOB, TFJOB), (MPIJOB, TFJOB), (), id="kind-in-the-order-given"),
        pytest.param((JAXJOB, PYTORCHJOB), (PYTORCHJOB,), (JAXJOB,), id="kind-not-served"),
    ],
)
def test_the_kinds_a_run_covers(
    kinds: tuple[Kind, ...], covered: tuple[Kind, ...], missing: tuple[Kind, ...]
) -> None:
    scope = RunScope.of(SERVED, kinds)
    assert tuple(served.kind for served in scope.kinds) == covered
    assert scope.missing == missing


def test_nothing_served_covers_nothing_and_names_every_wanted_kind_missing() -> None:
    scope: RunScope[ServedKind] = RunScope.of((), (TFJOB,))
    assert (scope.kinds, scope.missing, scope.lists) == ((), (TFJOB,), ())


def test_lists_go_kind_by_kind_then_namespace() -> None:
    scope = RunScope.of(SERVED[:2], namespaces=("a", "b"))
    assert [(served.kind, namespace) for served, namespace in scope.lists] == [
        (TFJOB, "a"),
        (TFJOB, "b"),
        (PYTORCHJOB, "a"),
        (PYTORCHJOB, "b"),
    ]


def test_without_namespaces_one_list_covers_all_of_them() -> None:
    scope = RunScope.of(SERVED[:1])
    assert [namespace for _, namespace in scope.lists] == [None]
    assert scope.listed("anything")


@pytest.mark.parametrize(
    ("namespace", "listed", "kept"),
    [
        pytest.param("team-a", True, True, id="listed-and-kept"),
        pytest.param("kube-system", True, False, id="excluded"),
        pytest.param("team-b", False, True, id="not-listed"),
    ],
)
def test_namespaces_listed_and_kept(namespace: str, *, listed: bool, kept: bool) -> None:
    scope = RunScope.of(SERVED, namespaces=("team-a", "kube-system"), excluded=("kube-system",))
    assert (scope.listed(namespace), scope.kept(namespace)) == (listed, kept)


@pytest.mark.parametrize(
    ("kinds", "families", "covered", "left_out"),
    [
        pytest.param((), ("training-operator",), (TFJOB, PYTORCHJOB), (MPIJOB,), id="v2beta1"),
        pytest.param((), ("mpi-operator",), (MPIJOB,), (TFJOB, PYTORCHJOB), id="mpi-operator"),
        pytest.param(
            (MPIJOB, JAXJOB), ("training-operator",), (), (MPIJOB,), id="of-the-kinds-given"
        ),
        pytest.param((), (), (TFJOB, PYTORCHJOB, MPIJOB), (), id="every-family"),
    ],
)
def test_a_family_left_out_leaves_out_what_it_serves_not_a_kind(
    kinds: tuple[Kind, ...],
    families: tuple[str, ...],
    covered: tuple[Kind, ...],
    left_out: tuple[Kind, ...],
) -> None:
    # MPIJob at v2beta1 is mpi-operator's: --kind MPIJob cannot say which family it means.
    scope = RunScope.of(SERVED, kinds, families=families)
    assert tuple(served.kind for served in scope.kinds) == covered
    assert tuple(served.kind for served in scope.left_out) == left_out
    assert JAXJOB not in tuple(s.kind for s in scope.left_out)
