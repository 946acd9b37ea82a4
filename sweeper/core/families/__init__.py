"""The controller families: one module each, behind one contract (``Family``). Pure.

What every family shares is judged once, here, before a family's own rules (``table``): a
family adds rules, and cannot drop one of these. CONTRIBUTING.md says how to add the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from sweeper.core.families import mpi_operator, trainer, training_operator
from sweeper.core.jobs import Job, Owned
from sweeper.core.kinds import Kind, Leftovers, Resource
from sweeper.core.model import JSON, Action, Enforcement, Entry, SkipReason
from sweeper.core.patches import DeadlineWrite
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
    """What one controller family is; each module of this package is one (mypy checks it)."""

    NAME: str  # as the report, the metrics and the chart's families value name it
    SERVES: tuple[tuple[Kind, str], ...]  # its kinds, each at the version it serves
    MANAGED_BY: str  # its controller, as managedBy names it
    LEFTOVERS: Leftovers  # what it leaves of a job its deadline failed, and how it is found
    PODS: Leftovers  # where its jobs' pods are listed (a TrainJob's: its JobSet's, by label)
    RULES: tuple[Rule, ...]  # its own, after the shared ones; the last always decides
    RECLAIM_REASON: str  # the Event's reason after a reclaim
    NOTHING_LEFT: str  # what a reclaim that found nothing says

    def finished(
        self, job: Job, now: datetime, enforcement: Enforcement, overdue: float | None
    ) -> Entry:
        """What becomes of a job that finished (a skip, or a reclaim of what it left)."""

    def seen_finished(
        self, job: Job, now: datetime, enforcement: Enforcement, overdue: float | None
    ) -> str:
        """What ``--explain`` says of a finished job's end."""

    def finished_due(self, job: Job, enforcement: Enforcement) -> datetime | None:
        """The instant from which :meth:`finished` acts on a finished job; ``None``: never."""

    def due_at(self, job: Job, now: datetime, enforcement: Enforcement) -> datetime | None:
        """The instant from which its own rules act on a job the shared rules let through.

        The first such instant from ``now`` on, or one before ``now`` when they act at it.
        """

    def reclaim_words(self, enforcement: Enforcement) -> str:
        """What follows its deadline failure, as a ``DeadlineApproaching`` warning says it."""

    def leftovers(self, owned: Sequence[Owned], job: Job, enforcement: Enforcement) -> list[Owned]:
        """Which of the objects listed (``LEFTOVERS``) a reclaim of the job deletes."""

    def reclaimed_event(self, job: Job, deleted: Sequence[str], companions: Sequence[str]) -> str:
        """The Event's message after a reclaim deleted ``deleted`` (and their companions)."""

    def recreates_pods(self, job: Job) -> bool:
        """Whether its controller would re-create what a rule's reclaim deletes (left alone)."""

    def fail_patch(self, job: Job, raw: JSON, now: datetime) -> JSON:
        """The status patch that fails the job (read as ``raw``) as its controller would."""

    def failed_event(self, job: Job, late: str, deleted: Sequence[str]) -> str:
        """The Event's message once the sweeper failed the job and reclaimed ``deleted``."""

    def carrier(self, job: Job) -> tuple[Resource, str]:
        """Where a platform deadline of the job is written for its controller to enforce."""

    def deadline_write(self, action: Action, target: JSON | None) -> DeadlineWrite | Action | str:
        """A ``set-deadline``'s write into its carrier as read (``None``: none).

        Or the action to take instead, or why the carrier is left alone.
        """


FAMILIES: tuple[Family, ...] = (training_operator, mpi_operator, trainer)


def _kinds() -> tuple[Kind, ...]:
    # One row a kind, with every version its families serve, in FAMILIES order.
    merged: dict[Kind, Kind] = {}
    for family in FAMILIES:
        for kind, _ in family.SERVES:
            had = merged.setdefault(kind, kind)
            if had is not kind:
                merged[kind] = replace(had, readings=had.readings + kind.readings)
    return tuple(merged.values())


# The kind table: discovery, --kind and a rules file's kinds read it.
KINDS = _kinds()
KIND_NAMES = tuple(kind.name for kind in KINDS)


def lookup(text: str) -> Kind:
    """Find a kind by its name or plural, ignoring case (``PyTorchJob``, ``pytorchjobs``).

    Raises:
        KeyError: No known kind has that name; the message lists the valid ones.
    """
    wanted = text.strip().lower()
    for kind in KINDS:
        if wanted in (kind.name.lower(), kind.plural, kind.resource):
            return kind
    valid = ", ".join(kind.name for kind in KINDS)
    raise KeyError(f"unknown kind {text!r} (expected one of {valid}, or their plurals)")


def family_of(kind: Kind, version: str) -> Family:
    """The family serving ``kind`` at ``version`` (at another: its first family, as by hand)."""
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
    """Every rule a family's jobs are judged by: what no controller acts on, then its own."""
    rules = _TABLES.get(family.NAME)
    if rules is None:
        rules = _TABLES[family.NAME] = _table(family)
    return rules


_TABLES: dict[str, tuple[Rule, ...]] = {}


def _table(family: Family) -> tuple[Rule, ...]:
    def finished(
        job: Job, now: datetime, enforcement: Enforcement, overdue: float | None
    ) -> Entry | None:
        return None if job.finished is None else family.finished(job, now, enforcement, overdue)

    def seen(job: Job, now: datetime, enforcement: Enforcement, overdue: float | None) -> str:
        if job.finished is None:
            return "no Succeeded or Failed condition"
        return family.seen_finished(job, now, enforcement, overdue)

    return (
        MALFORMED,
        # JAXJob's and MXJob's controllers never read managedBy (Kind.checks_managed_by).
        managed_elsewhere(family.MANAGED_BY, checked=lambda job: job.kind.checks_managed_by),
        BEING_DELETED,
        OPTED_OUT,
        Rule(
            SkipReason.FINISHED.value,
            seen,
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


def due_at(job: Job, now: datetime, enforcement: Enforcement) -> datetime | None:
    """The instant from which the job's family's rules act on it (see ``decide.due_at``)."""
    family = family_of(job.kind, job.version)
    fixed, instant = premise_due(table(family), job, enforcement)
    return instant if fixed else family.due_at(job, now, enforcement)
