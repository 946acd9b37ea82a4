"""The controller families: one module each, behind one small interface. Pure.

A family is what one controller makes of its jobs: which kinds and versions it serves, where
its deadline clock starts (the view's ``start_time``, read by :func:`sweeper.core.jobs.parse_job`),
what ends a job past its deadline (a touch, the sweeper's fail, or the controller itself) and
what it leaves behind that the sweeper reclaims (pods, a JobSet). Each module gives its rules
as an ordered tuple (:class:`sweeper.core.rules.Rule`: the first that decides wins; ``--explain``
walks them) and ``due_at``, the instant from which they act, which a watch timer is armed for.
CONTRIBUTING.md says how to add the next one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sweeper.core.families import mpi_operator, trainer, training_operator
from sweeper.core.jobs import Job
from sweeper.core.kinds import MPI_OPERATOR_VERSION, TRAINJOB, Kind
from sweeper.core.model import Policy
from sweeper.core.rules import Rule


@dataclass(frozen=True, slots=True)
class Family:
    """One controller family.

    Attributes:
        name: As the report, the metrics and the chart's ``families`` value name it.
        rules: Its decision, in order; the last rule always decides.
        due_at: The instant from which ``rules`` act on a job that stays as it is; ``None``
            when they never do.
        reclaims: What it reclaims once its controller has failed a job, for the docs and
            ``--explain``.
    """

    name: str
    rules: tuple[Rule, ...]
    due_at: Callable[[Job, Policy], datetime | None]
    reclaims: str


TRAINING_OPERATOR = Family(
    training_operator.NAME,
    training_operator.RULES,
    training_operator.due_at,
    "the Running and Pending pods of a job failed by its deadline",
)
MPI_OPERATOR = Family(
    mpi_operator.NAME,
    mpi_operator.RULES,
    mpi_operator.due_at,
    "the Running and Pending workers of an MPIJob failed by its deadline",
)
TRAINER = Family(
    trainer.NAME,
    trainer.RULES,
    trainer.due_at,
    "the JobSet of a TrainJob failed by its deadline",
)
FAMILIES: tuple[Family, ...] = (TRAINING_OPERATOR, MPI_OPERATOR, TRAINER)


def family_of(kind: Kind, version: str) -> Family:
    """The family whose controller serves ``kind`` at ``version``."""
    if kind is TRAINJOB:
        return TRAINER
    if version == MPI_OPERATOR_VERSION:
        return MPI_OPERATOR
    return TRAINING_OPERATOR
