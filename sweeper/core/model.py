"""The plan and its outcomes: the types every mode decides and reports in (pure: no I/O).

``sweeper.core.decide`` makes a ``Plan`` of ``Action`` and ``Skip`` entries
under a ``Policy``; the executor (``sweeper.act.executor``) turns each entry into an
``Outcome``; the one-shot report, the watch loop and the metrics read them. They live
here, below the decision and all three readers, so that reading a plan or a result never climbs
the house, and the settings (``sweeper.config``) hold a ``Policy`` without importing
the rules.
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
# listing of pods (or JobSets) per scope, and each finds nothing to do once its controller or
# an earlier clean-up took it all.
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
class Policy:
    """The decision's flags; each field is the flag of its name (seconds for durations).

    Attributes:
        escalate_after: ``auto`` fails a job this many seconds past
            its deadline and grace, or this long after the sweeper's touch, whichever comes
            first (a touch need not have been written: see
            ``judge``); ``touch`` touches again this long after its
            touch.
        max_actions: ``None`` for no cap.
        retouch_after: ``touch`` and ``auto`` touch a job again this long
            after a touch that did not finish it, while the touch was written within
            ``retouch_limit`` times this of the job becoming due (the v1 operator judges the
            deadline with its own clock, which may not have reached it at the first touch).
        retouch_limit: At most this many such quick touches per deadline; 0 turns them off.
        operator_version: The release the cluster runs; ``None`` when unknown. Only
            ``--terminate-pods policy`` reads it (``pods_mode``).
        reclaim_grace: How long a controller that ends jobs itself (Trainer
            v2, mpi-operator) has to do so, or to clean up after its deadline failure, before
            the sweeper reclaims what it left or reports it late; also how long after its end
            a finished job's active pods are reported as held (``sweeper.core.held``).
        stuck_after: How long after its first pod was scheduled a job with others still
            unplaced is reported stuck starting.
        gpu_resources: The extended resources counted as GPUs (a trailing ``*`` matches the
            rest of a name).
    """

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


def pods_mode(policy: Policy) -> PodsMode:
    """What ``--terminate-pods`` selects for a job failed by its deadline, with the release.

    ``policy`` means what the operator keeps. v1.7.0 to v1.9.3 delete every pod at a deadline
    failure whatever ``cleanPodPolicy`` says, so with one of them it selects ``all``. v1.9.4
    follows ``cleanPodPolicy``; so does an unknown release, which never deletes a pod the
    operator might keep (the run's log says that older releases would delete them all).
    """
    release = policy.operator_version
    if (
        policy.terminate_pods is PodsMode.POLICY
        and release
        and release.deletes_every_pod_on_deadline
    ):
        return PodsMode.ALL
    return policy.terminate_pods


@dataclass(frozen=True, slots=True)
class Action:
    """A job the sweeper acts on.

    Attributes:
        seconds_overdue: ``now - (startTime + activeDeadlineSeconds)``, ``None`` if unknown.
        targets: For a ``terminate-pods`` or ``delete-jobset`` planned from a pass's listing
            (``assemble``), the pods or the JobSet to delete; ``None``
            when the executor reads them itself.
    """

    job: Job
    kind: ActionKind
    why: Why
    seconds_overdue: float | None
    detail: str = ""
    targets: tuple[Owned, ...] | None = None

    @property
    def decision(self) -> str:
        """The report's ``decision`` value."""
        return self.kind.value

    @property
    def reason(self) -> str:
        """The report's ``reason`` value."""
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
        """The report's ``decision`` value."""
        return "skip"

    @property
    def reason(self) -> str:
        """The report's ``reason`` value."""
        return self.why.value


Entry = Action | Skip


@dataclass(frozen=True, slots=True)
class Plan:
    """Jobs with their decisions, in listing order: what the executor is handed.

    ``decide`` gives every job it is handed an entry. A one-shot
    pass settles each skip as its page is judged and assembles only the actions, with the
    skips ``--max-actions`` made of them (``assemble``); a watch
    timer's plan holds the one job it fired for.
    """

    now: datetime
    policy: Policy
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
    """What became of one entry of the plan.

    Attributes:
        body: The patch sent (or that would be sent) for touch and fail.
        reclaimed: What was deleted (or would be), as (resource plural, name).
        errors: One line per request that failed for this job.
        touch_refused: The API server's refusal of the touch, when ``auto`` failed the job
            instead (its operator's validating webhook rejects every update while it is down).
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
