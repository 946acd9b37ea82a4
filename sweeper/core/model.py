"""The plan and its outcomes: the types every mode decides and reports in. Pure.

``decide`` makes a ``Plan`` of ``Action`` and ``Skip`` entries under a ``Enforcement``, the executor
turns each into an ``Outcome``; they live below the decision and all its readers, so reading a
plan or a result never climbs the house, and the settings hold a ``Enforcement`` without the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sweeper.core.jobs import Job, Owned
from sweeper.core.kinds import GPU_RESOURCES
from sweeper.core.releases import Release

# A decoded JSON object, as the API server sends it.
JSON = dict[str, Any]


class ActionMode(StrEnum):
    """``--action``: what to do with an overdue job."""

    TOUCH = "touch"
    FAIL = "fail"
    AUTO = "auto"


class PodsMode(StrEnum):
    """``--terminate-pods``: which of a failed job's pods to delete."""

    ACTIVE = "active"
    ALL = "all"
    POLICY = "policy"


class ActionKind(StrEnum):
    """What an action does (the ``decision`` of a report line)."""

    TOUCH = "touch"
    FAIL = "fail"
    TERMINATE_PODS = "terminate-pods"
    DELETE_JOBSET = "delete-jobset"
    # Write a platform deadline where the job's controller enforces it (a TrainJob's spec, an
    # MPIJob's launcher Job): the controller then ends the job on its own clock.
    SET_DEADLINE = "set-deadline"


# The actions that reclaim what a job failed by its deadline left: a pass plans them from one
# listing per scope.
CLEAN_UPS = (ActionKind.TERMINATE_PODS, ActionKind.DELETE_JOBSET)


class Why(StrEnum):
    """Why an action was planned."""

    OVERDUE = "overdue"
    ESCALATED = "escalated"
    RETOUCH = "touch-again"
    FAILED_BY_DEADLINE = "failed-by-deadline"
    NO_LAUNCHER = "no-launcher"
    JOBSET_LEFT = "jobset-left"
    TOUCH_REFUSED = "touch-refused"
    # A deadline the job does not carry (a platform rule's default or cap): only the sweeper
    # can enforce it, since the job's controller reads its own field alone.
    PLATFORM_DEADLINE = "platform-deadline"
    # A platform rule's startDeadline: some pods placed (their GPUs held), others never.
    START_DEADLINE = "start-deadline"
    # A platform rule's reclaimFailedAfter: a finished job's Running and Pending pods.
    FINISHED_HOLDING = "finished-holding"


class SkipReason(StrEnum):
    """Why a job is left alone."""

    MALFORMED = "malformed"
    OPERATOR_ENFORCED = "operator-enforced"
    MISCONFIGURED = "misconfigured"
    BEING_DELETED = "being-deleted"
    OPTED_OUT = "opted-out"
    MANAGED_ELSEWHERE = "managed-elsewhere"
    FINISHED = "finished"
    RECLAIM_LATER = "reclaim-later"
    CONTROLLER_LATE = "controller-late"
    SUSPENDED = "suspended"
    RESUMING = "resuming"
    NO_DEADLINE = "no-deadline"
    NOT_STARTED = "not-started"
    NOT_YET_DUE = "not-yet-due"
    RECENTLY_TOUCHED = "recently-touched"
    OVER_MAX_ACTIONS = "over-max-actions"


@dataclass(frozen=True, slots=True)
class Enforcement:
    """The decision's flags, each field its flag's (docs/cli.md); durations in seconds."""

    action: ActionMode = ActionMode.TOUCH
    grace: float = 0.0
    escalate_after: float = 120.0
    max_actions: int | None = None
    terminate_pods: PodsMode = PodsMode.ACTIVE
    retouch_after: float = 5.0
    retouch_limit: int = 3
    operator_version: Release | None = None
    reclaim_grace: float = 120.0
    stuck_after: float = 600.0
    gpu_resources: tuple[str, ...] = GPU_RESOURCES


@dataclass(frozen=True, slots=True)
class Action:
    """A job the sweeper acts on; ``seconds_overdue`` is ``now - deadline`` (``None``: unknown).

    ``targets``: what a clean-up planned from a pass's listing deletes (``None``: read then).
    """

    job: Job
    kind: ActionKind
    why: Why
    seconds_overdue: float | None
    detail: str = ""
    targets: tuple[Owned, ...] | None = None

    @property
    def decision(self) -> str:
        """The report's ``decision``."""
        return self.kind.value

    @property
    def reason(self) -> str:
        """The report's ``reason``."""
        return self.why.value


@dataclass(frozen=True, slots=True)
class Skip:
    """A job the sweeper leaves alone; ``seconds_overdue`` is negative before the deadline."""

    job: Job
    why: SkipReason
    seconds_overdue: float | None = None
    detail: str = ""

    @property
    def decision(self) -> str:
        """The report's ``decision``."""
        return "skip"

    @property
    def reason(self) -> str:
        """The report's ``reason``."""
        return self.why.value


Entry = Action | Skip


@dataclass(frozen=True, slots=True)
class Plan:
    """Jobs with their decisions, in listing order: what the executor is handed.

    A pass's actions (and the skips ``--max-actions`` made of them), or a watch timer's job.
    """

    now: datetime
    enforcement: Enforcement
    entries: tuple[Entry, ...] = field(default=())

    @property
    def actions(self) -> tuple[Action, ...]:
        """The entries that are actions, in listing order."""
        return tuple(e for e in self.entries if isinstance(e, Action))


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
    """What became of one entry of the plan (``body``, ``reclaimed``: sent, or would be).

    ``errors``: a line per failed request; ``touch_refused``: why ``auto`` failed it instead.
    """

    entry: Entry
    result: Result
    detail: str = ""
    body: JSON | None = None
    reclaimed: tuple[tuple[str, str], ...] = ()
    errors: tuple[str, ...] = ()
    touch_refused: str = ""

    def deleted(self, plural: str) -> tuple[str, ...]:
        """The names of the objects of one resource deleted (or that would be)."""
        return tuple(name for what, name in self.reclaimed if what == plural)

    @property
    def pods(self) -> tuple[str, ...]:
        """The pods deleted."""
        return self.deleted("pods")

    @property
    def services(self) -> tuple[str, ...]:
        """The services deleted."""
        return self.deleted("services")

    @property
    def jobsets(self) -> tuple[str, ...]:
        """The JobSets deleted."""
        return self.deleted("jobsets")


def settled(entry: Skip) -> Outcome:
    """The outcome of a skip: nothing to do, so it is final as soon as the job is judged."""
    return Outcome(entry, Result.SKIPPED, entry.detail)
