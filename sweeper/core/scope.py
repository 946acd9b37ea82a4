"""Which jobs a run covers: the kinds and namespaces it lists, and the namespaces it leaves out.

One selection for every mode, so ``--family``, ``--kind``, ``-n`` and ``--exclude-namespace``
mean the same everywhere. Pure. ``--family`` is judged on what the cluster serves (a kind may
be two families' at two versions); ``--exclude-namespace`` cannot be sent to the API server,
so an excluded namespace's jobs are listed, then dropped here before any decision.
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

    @property
    def family(self) -> str:
        """The name of the family whose controller serves it."""


S = TypeVar("S", bound=Served)


@dataclass(frozen=True, slots=True)
class RunScope(Generic[S]):
    """The kinds and namespaces a run covers."""

    kinds: tuple[S, ...]  # --kind's in its order, or every served kind in discovery's
    missing: tuple[Kind, ...]  # --kind's the cluster does not serve
    left_out: tuple[S, ...]  # what it serves of a family --family leaves out
    namespaces: tuple[str | None, ...]  # -n, or (None,): one list across all
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
        """The scope of a run over what discovery found (each empty selection: all). Pure."""
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
