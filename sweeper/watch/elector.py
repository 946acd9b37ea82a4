"""Leader election on a ``coordination.k8s.io/v1`` Lease: client-go's state machine. Pure.

Every clock reading and every API answer is passed in. A candidate may take the Lease when it
has no holder or its record has not been *seen to change* for the lease duration on its own
monotonic clock: no two clocks are ever compared. The leader leads while its last successful
write was *sent* less than the renew deadline ago, and bounds each job write by
``Elector.write_window``: no two replicas' writes are ever in flight together. Every write
carries the resourceVersion read, so two candidates racing for an expired Lease cannot both win.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from sweeper.config import Timing
from sweeper.core.clock import parse_rfc3339
from sweeper.core.errors import ConfigError

LEASE_API_VERSION = "coordination.k8s.io/v1"
INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Record:
    """The Lease's spec as leader election uses it; ``holder`` is empty when released."""

    holder: str = ""
    duration_s: int = 0
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    transitions: int = 0


@dataclass(frozen=True, slots=True)
class Lease:
    """A Lease as read or written; ``resource_version`` is the precondition of the next update."""

    record: Record
    resource_version: str


@dataclass(frozen=True, slots=True)
class Create:
    """Create the Lease (it does not exist) with this record."""

    record: Record


@dataclass(frozen=True, slots=True)
class Wait:
    """Another candidate holds a Lease that has not expired: try again later."""

    holder: str


# Replace the Lease's spec with this record, provided it is still at this resourceVersion.
Update = Lease
Step = Create | Update | Wait


def micro_time(moment: datetime) -> str:
    """Format a ``metav1.MicroTime``: UTC, microseconds, ``Z`` (``2024-01-02T03:04:05.123456Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_lease(raw: Mapping[str, object]) -> Lease:
    """Read a Lease object (decoded JSON). Never raises: odd fields read as absent."""
    meta, spec = raw.get("metadata"), raw.get("spec")
    meta = meta if isinstance(meta, Mapping) else {}
    spec = spec if isinstance(spec, Mapping) else {}
    holder, version = spec.get("holderIdentity"), meta.get("resourceVersion")
    return Lease(
        Record(
            holder=holder if isinstance(holder, str) else "",
            duration_s=_int32(spec.get("leaseDurationSeconds")),
            acquire_time=parse_rfc3339(spec.get("acquireTime")),
            renew_time=parse_rfc3339(spec.get("renewTime")),
            transitions=_int32(spec.get("leaseTransitions")),
        ),
        version if isinstance(version, str) else "",
    )


def _int32(value: object) -> int:
    # The Lease's integers are int32 in the API; anything else (a bool, 10**400, which no
    # float holds) reads as absent, so the elector's float arithmetic never overflows.
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return value if -(2**31) <= value <= INT32_MAX else 0


def lease_body(
    namespace: str,
    name: str,
    record: Record,
    resource_version: str | None = None,
    base: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """Build the Lease object to create (no ``resource_version``), or to replace.

    An update is written over the Lease as last read or written (``base``), as client-go's:
    labels, annotations and spec fields the sweeper does not know stay as others wrote them.
    """
    body = copy.deepcopy(dict(base)) if base is not None else {}
    old_meta, old_spec = body.get("metadata"), body.get("spec")
    metadata = dict(old_meta) if isinstance(old_meta, Mapping) else {}
    spec = dict(old_spec) if isinstance(old_spec, Mapping) else {}
    metadata.update(name=name, namespace=namespace)
    metadata.pop("resourceVersion", None)
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    spec.update(
        holderIdentity=record.holder,
        leaseDurationSeconds=record.duration_s,
        leaseTransitions=record.transitions,
    )
    for key, moment in (("acquireTime", record.acquire_time), ("renewTime", record.renew_time)):
        spec.pop(key, None)
        if moment is not None:
            spec[key] = micro_time(moment)
    body.update(apiVersion=LEASE_API_VERSION, kind="Lease", metadata=metadata, spec=spec)
    return body


class Elector:
    """One candidate's view of the Lease; ``identity`` is unique per process.

    ``now`` arguments are the local monotonic clock, which judges expiry and the renew
    deadline; ``wall`` arguments are the local wall clock, written into the record for humans.
    """

    def __init__(self, identity: str, timing: Timing) -> None:
        if not identity:
            raise ConfigError("the leader election identity must not be empty")
        self.identity = identity
        self.timing = timing
        self._observed: Lease | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None  # send time of this candidate's last good write

    @property
    def holder(self) -> str:
        """Who holds the Lease as last seen (empty when nobody, or not seen yet)."""
        return self._observed.record.holder if self._observed else ""

    def leading(self, now: float) -> bool:
        """Whether it holds the Lease and sent its last good write within the renew deadline."""
        return (
            self._renewed_at is not None
            and self.holder == self.identity
            and now < self._renewed_at + self.timing.renew_deadline
        )

    def lost(self, now: float) -> bool:
        """Whether this candidate led and the renew deadline passed (it may take it back)."""
        return self._renewed_at is not None and not self.leading(now)

    def write_window(self, now: float) -> float:
        """How long a job write sent now may stay in flight; 0 when none may be sent.

        No other candidate can have seen this one's last renewal before it was sent, so none
        leads before ``sent + lease_duration``: an attempt bounded by this window is over by
        then.
        """
        if self._renewed_at is None or not self.leading(now):
            return 0.0
        return self._renewed_at + self.timing.lease_duration - now

    def renewal(self, wall: datetime) -> Update | None:
        """The leader's optimistic renewal, from its own last write (no read first)."""
        observed = self._held()
        if observed is None:
            return None
        record = replace(
            observed.record, renew_time=wall, duration_s=_seconds(self.timing.lease_duration)
        )
        return Update(record, observed.resource_version)

    def attempt(self, current: Lease | None, now: float, wall: datetime) -> Step:
        """Decide what to write after reading the Lease (client-go's tryAcquireOrRenew).

        ``current`` is ``None`` when the Lease does not exist (404); ``now`` is when it was read.
        """
        fresh = Record(
            holder=self.identity,
            duration_s=_seconds(self.timing.lease_duration),
            acquire_time=wall,
            renew_time=wall,
        )
        if current is None:
            return Create(fresh)
        if self._observed != current:
            # Expiry counts from when the Lease was last *seen to change*, on our clock. A new
            # resourceVersion is a change even if the record reads the same (client-go compares
            # the record alone; its renewTime has microseconds, so it always differs there).
            self._observed_at = now
        self._observed = current
        old = current.record
        if old.holder and old.holder != self.identity and self._valid(now):
            return Wait(old.holder)
        if old.holder == self.identity:
            record = replace(fresh, acquire_time=old.acquire_time, transitions=old.transitions)
        else:
            # An int32 in the API: a count at its limit (anyone may write a Lease) stays there,
            # or no replica could ever take the Lease.
            record = replace(fresh, transitions=min(old.transitions + 1, INT32_MAX))
        return Update(record, current.resource_version)

    def succeeded(self, written: Lease, sent: float, now: float) -> None:
        """Record a create or update the server answered (``now``) with ``written``.

        The leadership window counts from ``sent``: the server may have applied it at once.
        """
        self._observed = written
        self._observed_at = now
        if written.record.holder == self.identity:
            self._renewed_at = sent

    def release(self, wall: datetime) -> Update | None:
        """The write that hands the Lease over (on shutdown): no holder, a one-second lease."""
        observed = self._held()
        if observed is None:
            return None
        record = Record(
            holder="",
            duration_s=1,
            acquire_time=wall,
            renew_time=wall,
            transitions=observed.record.transitions,
        )
        return Update(record, observed.resource_version)

    def expires_in(self, now: float) -> float | None:
        """Seconds until another candidate's Lease, as last seen, expires (0 when expired)."""
        observed = self._observed
        if observed is None or not observed.record.holder or self.holder == self.identity:
            return None
        return max(self._observed_at + self._duration() - now, 0.0)

    def step_down(self) -> None:
        """Stop leading (after a release or a lapse) until a write of its own succeeds."""
        self._renewed_at = None

    def _held(self) -> Lease | None:
        """The Lease as last seen, if this candidate holds it by a write of its own."""
        if self._renewed_at is None or self.holder != self.identity:
            return None
        return self._observed

    def _valid(self, now: float) -> bool:
        return now < self._observed_at + self._duration()

    def _duration(self) -> float:
        observed = self._observed
        duration = observed.record.duration_s if observed is not None else 0
        # A record without a usable duration is judged with our own.
        return duration if duration > 0 else self.timing.lease_duration


def _seconds(value: float) -> int:
    # leaseDurationSeconds is an integer; round up so no follower waits less than asked.
    whole = int(value)
    return whole if whole == value else whole + 1
