"""What the watch's threads tell the main loop, and the identities their messages carry.

Every thread speaks to the main loop only through one queue (the inbox): the streams say when
each job becomes due, the Lease thread when leadership changed, the fire pool and the resync
pass when they are done with a job. The main loop alone arms the timers.
"""

from __future__ import annotations

import queue
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

from sweeper.k8s.cluster import ServedKind


@dataclass(frozen=True, slots=True)
class JobKey:
    """A job's identity in the timers: a name can be reused, the re-read checks the rest."""

    kind: str
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Scope:
    """What one stream lists and watches: a served kind, in one namespace or all of them."""

    served: ServedKind
    namespace: str | None

    def holds(self, key: JobKey) -> bool:
        """Whether a job is this stream's (a relist drops the timers of its vanished jobs)."""
        return key.kind == self.served.kind.name and (
            self.namespace is None or key.namespace == self.namespace
        )

    def __str__(self) -> str:
        return f"{self.served.kind.plural} in {self.namespace or 'all namespaces'}"


@dataclass(frozen=True, slots=True)
class Pending:
    """A ``DeadlineApproaching`` warning a job's timer wakes for ``at``, before its due instant.

    Given until ``deadline`` (the action speaks then); ``name`` is its Event's, one per deadline.
    """

    at: datetime
    deadline: datetime
    name: str


@dataclass(frozen=True, slots=True)
class Listed:
    """A stream's list, complete: each job's due instant (``None``: never due as it stands).

    On a ``relist`` a job of the scope missing here is gone. An ``earlier_only`` list (a rule
    newly selecting a Namespace) is not ordered with the stream's events: it only brings timers
    forward, never delays nor drops one.
    """

    scope: Scope
    due: dict[JobKey, datetime | None]
    relist: bool
    pending: dict[JobKey, Pending] = field(default_factory=dict)
    earlier_only: bool = False


@dataclass(frozen=True, slots=True)
class Event:
    """A watch event: a job's due instant (``None`` also when deleted) and its warning."""

    key: JobKey
    due: datetime | None
    pending: Pending | None = None


@dataclass(frozen=True, slots=True)
class Leadership:
    """This replica started or stopped leading (it only wakes the main loop up)."""

    leading: bool


class Ending(Enum):
    """How a fire (or a resync pass's action on a job) ended, for the job's retry backoff."""

    SETTLED = "settled"  # acted, or nothing to do: the backoff starts over
    FAILED = "failed"  # the action failed: tried again after the job's backoff
    # Not tried: the read got no answer, or the run stopped or lost the Lease first. Looked
    # at again soon (a follower keeps the timer until it leads), the count kept.
    NOT_TRIED = "not-tried"
    RELEASED = "released"  # a resync pass's action ended: the count kept


@dataclass(frozen=True, slots=True)
class Fired:
    """A fire (or a resync pass's action) is done with a job; ``rearm`` is when to look again."""

    key: JobKey
    rearm: datetime | None
    ending: Ending = Ending.SETTLED
    # The warning the fire recorded (or found recorded): its timer need not wake for it again.
    warned: str | None = None


Message = Listed | Event | Leadership | Fired
Inbox = queue.Queue[Message]
