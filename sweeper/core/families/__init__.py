"""The controller families: one module each, behind one contract (:class:`Family`). Pure.

A family is what one controller makes of its jobs: which kinds and versions it serves, where
its deadline clock starts (the view's ``start_time``, read by :func:`sweeper.core.jobs.parse_job`),
what ends a job past its deadline (a touch, the sweeper's fail, or the controller itself) and
what it leaves behind that the sweeper reclaims (pods, a JobSet). What every family shares is
judged once, here, before a family's own rules (:func:`table`): a family adds rules, and
cannot drop one of these. ``--explain`` walks the whole table; a watch timer is armed from it
(:func:`due_at`). CONTRIBUTING.md says how to add the next family.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from sweeper.core.families import mpi_operator, trainer, training_operator
from sweeper.core.jobs import Job, Owned
from sweeper.core.kinds import Kind, Leftovers, Resource
from sweeper.core.model import JSON, Action, DeadlineWrite, Entry, Policy, SkipReason
from sweeper.core.rules import (
    BEING_DELETED,
    DURATION_OVERFLOW,
    MALFORMED,
    NO_DEADLINE,
    NOT_STARTED,
    OPTED_OUT,
    RESUMING,
    SUSPENDED,
    Rule,
    managed_elsewhere,
    premise_due,
)


class Family(Protocol):
    """What one controller family is; each module of this package is one (mypy checks it).

    Attributes:
        NAME: As the report, the metrics and the chart's ``families`` value name it.
        SERVES: The kinds its controller serves, each at its version.
        MANAGED_BY: Its controller, as ``managedBy`` names it.
        LEFTOVERS: What the sweeper reclaims of a job its deadline failed, and how it finds
            them.
        RULES: Its own rules, judged after the shared ones (:func:`table`), in order; the
            last always decides.
        RECLAIM_REASON: The Event's reason after its leftovers were deleted.
        NOTHING_LEFT: What a reclaim that found nothing to delete says.
    """

    NAME: str
    SERVES: tuple[tuple[Kind, str], ...]
    MANAGED_BY: str
    LEFTOVERS: Leftovers
    RULES: tuple[Rule, ...]
    RECLAIM_REASON: str
    NOTHING_LEFT: str

    def finished(self, job: Job, now: datetime, policy: Policy, overdue: float | None) -> Entry:
        """What becomes of a job that finished (a skip, or a reclaim of what it left)."""

    def seen_finished(self, job: Job, now: datetime, policy: Policy, overdue: float | None) -> str:
        """What ``--explain`` says of a job's end."""

    def finished_due(self, job: Job, policy: Policy) -> datetime | None:
        """The instant from which :meth:`finished` acts on a finished job; ``None``: never."""

    def due_at(self, job: Job, now: datetime, policy: Policy) -> datetime | None:
        """The instant from which its own rules act on a job the shared rules let through.

        The first such instant from ``now`` on, or one before ``now`` when they act at it.
        """

    def reclaim_words(self, policy: Policy) -> str:
        """What follows its deadline failure, as a ``DeadlineApproaching`` warning says it."""

    def leftovers(self, owned: Sequence[Owned], job: Job, policy: Policy) -> list[Owned]:
        """Which of the objects listed (``LEFTOVERS``) a reclaim of the job deletes."""

    def reclaimed_event(self, job: Job, deleted: Sequence[str], companions: Sequence[str]) -> str:
        """The Event's message after a reclaim deleted ``deleted`` (and their companions)."""

    def recreates_pods(self, job: Job) -> bool:
        """Whether its controller may still re-create the pods of the finished job.

        A platform rule's ``reclaimFailedAfter`` leaves such pods alone (``sweeper.core.held``).
        """

    def fail_patch(self, job: Job, raw: JSON, now: datetime) -> JSON:
        """The status patch that fails the job (read as ``raw``) as its controller would."""

    def failed_event(self, job: Job, late: str, deleted: Sequence[str]) -> str:
        """The Event's message once the sweeper failed the job and reclaimed ``deleted``."""

    def carrier(self, job: Job) -> tuple[Resource, str]:
        """Where a platform deadline of the job is written for its controller to enforce."""

    def deadline_write(self, action: Action, target: JSON | None) -> DeadlineWrite | Action | str:
        """The write of a ``set-deadline`` into its carrier as read (``None``: there is none).

        Or the action to take instead (a fail), or why the carrier is left alone.
        """


FAMILIES: tuple[Family, ...] = (training_operator, mpi_operator, trainer)


def family_of(kind: Kind, version: str) -> Family:
    """The family whose controller serves ``kind`` at ``version``.

    A kind at a version no family serves is its first family's (a view built by hand).
    """
    index = _index()
    return index.get((kind.name, version)) or index[kind.name, ""]


_INDEXED: list[tuple[tuple[Family, ...], dict[tuple[str, str], Family]]] = []


def _index() -> dict[tuple[str, str], Family]:
    # Built again only when FAMILIES is another tuple (a test's family added to it).
    if not _INDEXED or _INDEXED[0][0] is not FAMILIES:
        index: dict[tuple[str, str], Family] = {}
        for family in reversed(FAMILIES):
            for kind, version in family.SERVES:
                index[kind.name, version] = index[kind.name, ""] = family
        _INDEXED[:] = [(FAMILIES, index)]
    return _INDEXED[0][1]


def table(family: Family) -> tuple[Rule, ...]:
    """Every rule a family's jobs are judged by: the shared ones, then the family's own.

    What no controller acts on either comes first, for every family: a job unreadable,
    managed by another controller, being deleted, opted out, finished (the family says what
    it then reclaims), suspended, resuming (its controller restarts its clock), without a
    deadline, with one no controller can hold (beyond Go's ``time.Duration``) or not started.
    """
    rules = _TABLES.get(family.NAME)
    if rules is None:
        rules = _TABLES[family.NAME] = _table(family)
    return rules


_TABLES: dict[str, tuple[Rule, ...]] = {}


def _table(family: Family) -> tuple[Rule, ...]:
    def finished(job: Job, now: datetime, policy: Policy, overdue: float | None) -> Entry | None:
        return None if job.finished is None else family.finished(job, now, policy, overdue)

    return (
        MALFORMED,
        # JAXJob's and MXJob's controllers never read managedBy (Kind.checks_managed_by).
        managed_elsewhere(family.MANAGED_BY, checked=lambda job: job.kind.checks_managed_by),
        BEING_DELETED,
        OPTED_OUT,
        Rule(
            SkipReason.FINISHED.value,
            family.seen_finished,
            finished,
            premise=lambda job: job.finished is not None,
            acts_from=family.finished_due,
        ),
        SUSPENDED,
        RESUMING,
        NO_DEADLINE,
        DURATION_OVERFLOW,
        NOT_STARTED,
        *family.RULES,
    )


def due_at(job: Job, now: datetime, policy: Policy) -> datetime | None:
    """The instant from which the job's family's rules act on it (see ``decide.due_at``)."""
    family = family_of(job.kind, job.version)
    fixed, instant = premise_due(table(family), job, policy)
    return instant if fixed else family.due_at(job, now, policy)
