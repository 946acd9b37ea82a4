"""The decision core: pure functions from (jobs, now, policy) to a plan; never raises.

Every judged job gets an ``Action`` or a ``Skip``, each with its reason, by its family's rules:
``judge`` applies them, ``explain`` shows them, ``due_at`` times them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from sweeper.core import plan
from sweeper.core.families import due_at as family_due_at
from sweeper.core.families import family_of, table
from sweeper.core.jobs import Job, Owned
from sweeper.core.model import Enforcement, Entry, Plan
from sweeper.core.rules import ALWAYS, Step, judge_by, walk

__all__ = ["ALWAYS", "Step", "assemble", "decide", "due_at", "explain", "judge"]


def decide(
    jobs: Iterable[Job],
    now: datetime,
    enforcement: Enforcement,
    pods: Mapping[str, Sequence[Owned]] | None = None,
) -> Plan:
    """Decide what to do with every job (``pods``: their leftovers by controller uid)."""
    return assemble([judge(job, now, enforcement) for job in jobs], now, enforcement, pods)


def assemble(
    entries: Iterable[Entry],
    now: datetime,
    enforcement: Enforcement,
    leftovers: Mapping[str, Sequence[Owned]] | None = None,
) -> Plan:
    """The plan of entries judged one by one, each clean-up's targets chosen by its family."""
    return plan.assemble(entries, now, enforcement, leftovers, _leftovers)


def _leftovers(
    found: Sequence[Owned], job: Job, enforcement: Enforcement
) -> tuple[list[Owned], str]:
    family = family_of(job.kind, job.version)
    return family.leftovers(found, job, enforcement), family.NOTHING_LEFT


def judge(job: Job, now: datetime, enforcement: Enforcement) -> Entry:
    """Decide for one job by its family's rules, in the order its controller checks them."""
    return judge_by(table(family_of(job.kind, job.version)), job, now, enforcement)


def explain(job: Job, now: datetime, enforcement: Enforcement) -> tuple[tuple[Step, ...], Entry]:
    """Walk every rule of the job's family in order, as ``judge`` does, and give its entry."""
    return walk(table(family_of(job.kind, job.version)), job, now, enforcement)


def due_at(job: Job, now: datetime, enforcement: Enforcement) -> datetime | None:
    """The instant from which ``judge`` acts on the job as it is, from ``now`` on. Pure.

    What a watch timer is armed for at ``now``: before it ``judge`` skips, from it it acts (the
    property tests hold the two to that); a touch stamp is read as ``judge`` reads it at the
    first instant it could act (one ahead of the clock there counts as none); ``ALWAYS`` when
    the work left does not depend on time; ``None`` when it never acts.
    """
    return family_due_at(job, now, enforcement)
