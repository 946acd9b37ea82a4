"""Which jobs a run covers: the kinds and namespaces it lists, and the namespaces it leaves out.

One selection for the three modes (the one-shot pass, the watch streams and ``--explain``), so
that ``--family``, ``--kind``, ``-n`` and ``--exclude-namespace`` mean the same everywhere.
Pure: the caller discovers the served kinds and logs what is missing or left out.

``--family`` is judged on what the cluster serves, not on the kind: MPIJob is the Training
Operator's at ``v1`` and mpi-operator's at ``v2beta1``, and only discovery says which.

``--exclude-namespace`` cannot be sent to the API server (a list or a watch selects one
namespace or all of them), so an excluded namespace's jobs are listed and then dropped here,
before any decision: they are never acted on, tracked nor reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from sweeper.core.kinds import Kind


class Served(Protocol):
    """A kind the cluster serves (``sweeper.k8s.cluster.ServedKind``), as far as scope needs."""

    @property
    def kind(self) -> Kind:
        """The kind served."""
        ...

    @property
    def family(self) -> str:
        """The name of the family whose controller serves it."""
        ...


S = TypeVar("S", bound=Served)


@dataclass(frozen=True, slots=True)
class RunScope(Generic[S]):
    """The kinds and namespaces a run covers.

    Attributes:
        kinds: Those of ``--kind`` in the order given, or every served kind in discovery's
            order.
        missing: The kinds of ``--kind`` the cluster does not serve (skipped, in that order).
        left_out: What the cluster serves of a family ``--family`` leaves out (of ``--kind``'s
            kinds, when given).
        namespaces: ``-n``, or ``(None,)``: one list or watch across all namespaces.
    """

    kinds: tuple[S, ...]
    missing: tuple[Kind, ...]
    left_out: tuple[S, ...]
    namespaces: tuple[str | None, ...]
    excluded: frozenset[str]

    @classmethod
    def of(
        cls,
        served: Iterable[S],
        kinds: Sequence[Kind] = (),
        namespaces: Sequence[str] = (),
        excluded: Iterable[str] = (),
        families: Sequence[str] = (),
    ) -> RunScope[S]:
        """The scope of a run over what discovery found. Pure.

        Empty ``kinds`` (``--kind``) is every served kind, empty ``namespaces`` (``-n``) all,
        empty ``families`` (``--family``) every family.
        """
        by_kind = {each.kind: each for each in served}
        wanted = tuple(kinds) or tuple(by_kind)
        found = tuple(by_kind[kind] for kind in wanted if kind in by_kind)
        return cls(
            kinds=tuple(each for each in found if not families or each.family in families),
            missing=tuple(kind for kind in wanted if kind not in by_kind),
            left_out=tuple(each for each in found if families and each.family not in families),
            namespaces=tuple(namespaces) or (None,),
            excluded=frozenset(excluded),
        )

    @property
    def lists(self) -> tuple[tuple[S, str | None], ...]:
        """Each (kind, namespace) to list or watch, kind by kind: the run's request order."""
        return tuple((kind, namespace) for kind in self.kinds for namespace in self.namespaces)

    def listed(self, namespace: str) -> bool:
        """Whether ``-n`` lists the namespace (it does when ``-n`` is not given)."""
        return self.namespaces == (None,) or namespace in self.namespaces

    def kept(self, namespace: str) -> bool:
        """Whether ``--exclude-namespace`` leaves the namespace's jobs in."""
        return namespace not in self.excluded
