"""The plan's outcomes, the types every mode reports in (pure: no I/O).

The executor (:mod:`sweeper.act`) turns each entry of a plan into an :class:`Outcome`; the
one-shot report, the watch loop and the metrics read them. They live here, below all three,
so that reading a result never climbs the house.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sweeper.core.decide import Entry, Skip

# A decoded JSON object, as the API server sends it.
JSON = dict[str, Any]


class Result(StrEnum):
    """How an entry of the plan ended."""

    SKIPPED = "skipped"
    PLANNED = "planned"  # --dry-run (client): computed, not sent
    DONE = "done"
    DRY_RUN = "dry-run"  # --dry-run=server: sent with dryRun=All, accepted, not persisted
    LEFT_ALONE = "left-alone"  # re-read: the job no longer needs the action
    ERROR = "error"
    NOT_STARTED = "not-started"  # the run stopped first (signal or --timeout)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of one entry of the plan.

    Attributes:
        entry: The plan's entry.
        result: How it ended.
        detail: Why it was left alone, what stopped it...
        body: The patch sent (or that would be sent) for touch and fail.
        pods: Names of the pods deleted (or that would be).
        services: Names of the services deleted (or that would be).
        errors: One line per request that failed for this job.
        touch_refused: The API server's refusal of the touch, when ``auto`` failed the job
            instead (its operator's validating webhook rejects every update while it is down).
    """

    entry: Entry
    result: Result
    detail: str = ""
    body: JSON | None = None
    pods: tuple[str, ...] = ()
    services: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    touch_refused: str = ""


def settled(entry: Skip) -> Outcome:
    """The outcome of a skip: nothing to do, so it is final as soon as the job is judged."""
    return Outcome(entry, Result.SKIPPED, entry.detail)
