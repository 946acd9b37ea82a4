"""The decision core: pure functions from (jobs, now, policy) to a plan.

Nothing here reads a clock, the network or the environment, and nothing here raises on odd
input (``jobs.parse_job`` already turned it into a ``malformed`` view). The plan is data: every
judged job gets either an ``Action`` or a
``Skip``, each with its reason, by the rules of the job's controller
family (``sweeper.core.families``): ``judge`` applies them, ``explain`` shows them,
``due_at`` times them. What a pass makes of the judged entries (``--max-actions``, the
execution order, the pods a clean-up deletes) is ``sweeper.core.plan``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from sweeper.core import plan
from sweeper.core.families import due_at as family_due_at
from sweeper.core.families import family_of, table
from sweeper.core.families.training_operator import current_touch
from sweeper.core.jobs import Job, Owned
from sweeper.core.model import Entry, Plan, Policy
from sweeper.core.rules import ALWAYS, Step, judge_by, walk

__all__ = [
    "ALWAYS",
    "Step",
    "assemble",
    "current_touch",
    "decide",
    "due_at",
    "explain",
    "judge",
]


def decide(
    jobs: Iterable[Job],
    now: datetime,
    policy: Policy,
    pods: Mapping[str, Sequence[Owned]] | None = None,
) -> Plan:
    """Decide what to do with every job. Pure: no clock, no I/O, never raises.

    ``pods`` are those of the jobs failed by their deadline, by controller uid (``None`` when
    not listed). With ``max_actions``, the most overdue actions are kept (touches and fails
    before pod clean-ups) and the rest become ``over-max-actions`` skips.
    """
    return assemble([judge(job, now, policy) for job in jobs], now, policy, pods)


def assemble(
    entries: Iterable[Entry],
    now: datetime,
    policy: Policy,
    leftovers: Mapping[str, Sequence[Owned]] | None = None,
) -> Plan:
    """The plan of entries judged one by one (``sweeper.core.plan.assemble``).

    Each clean-up's targets are chosen from ``leftovers`` by its job's family.
    """
    return plan.assemble(entries, now, policy, leftovers, _leftovers)


def _leftovers(found: Sequence[Owned], job: Job, policy: Policy) -> tuple[list[Owned], str]:
    family = family_of(job.kind, job.version)
    return family.leftovers(found, job, policy), family.NOTHING_LEFT


def judge(job: Job, now: datetime, policy: Policy) -> Entry:
    """Decide for one job by its family's rules, in the order its controller checks them.

    Every rule compares instants (``now`` against sums of the job's instants and the policy's
    spans); the seconds overdue are rounded to the millisecond only for the entry, as
    reported, never for a comparison.
    """
    return judge_by(table(family_of(job.kind, job.version)), job, now, policy)


def explain(job: Job, now: datetime, policy: Policy) -> tuple[tuple[Step, ...], Entry]:
    """Walk every rule of the job's family in order, as ``judge`` does, and give its entry."""
    return walk(table(family_of(job.kind, job.version)), job, now, policy)


def due_at(job: Job, now: datetime, policy: Policy) -> datetime | None:
    """Compute the instant from which ``judge`` acts on the job, from ``now`` on, if it stays.

    Pure. This is what a long-running sweeper arms a timer for at ``now``: from ``now`` until
    the instant, ``judge(job, ..., policy)`` is a skip; at it, an action; and at ``now``
    itself an action exactly when the instant is not after it (property tests hold the two
    functions to that). A touch stamp is read as ``judge`` reads it at the first instant it
    could act: one ahead of the clock there (a tenant's) counts as none. Any change to the job
    (a resume, a new deadline, a touch, a finish) gives a new instant, so the caller
    recomputes it on every change, and after a fire that did not act. Sums saturate:
    an instant after ``datetime.max`` is ``None``, never an error. ``ALWAYS`` when the only
    work left does not depend on time (the pods of a job failed by its deadline); ``None``
    when judge never acts on it.
    """
    return family_due_at(job, now, policy)
