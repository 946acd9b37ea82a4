"""Compact views of the objects the sweeper reads: jobs, and what they own. Parsing never raises.

A view keeps only what the decision needs, so a list page is dropped as soon as it is read
(memory stays flat with the number of jobs); an object that cannot be understood becomes a
view whose ``malformed`` names the offending field.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TypeVar

from sweeper.core.clock import parse_rfc3339
from sweeper.core.kinds import (
    COMPONENT,
    DEADLINE_EXCEEDED,
    DEADLINE_MESSAGE,
    EXCLUDE_ANNOTATION,
    LEGACY_EXCLUDE_ANNOTATION,
    LEGACY_TOUCHED_AT_ANNOTATION,
    QUEUE_NAME_LABEL,
    TOUCHED_AT_ANNOTATION,
    VERSION,
    Kind,
    Reading,
)

# Every controller computes ``time.Duration(activeDeadlineSeconds) * time.Second`` in int64
# nanoseconds: beyond this many seconds (about 292 years) either way the product wraps around
# (22446744074 s to about 127 years), and what a controller then decides is an accident of the
# overflow, not the deadline written (:func:`overflows`).
MAX_DEADLINE_SECONDS = (2**63 - 1) // 10**9
T = TypeVar("T")
# What the sweeper appends to the operator's deadline message
# (sweeper.core.patches.failure_message).
SWEEPER_MARK = f"(enforced by {COMPONENT})"


def overflows(seconds: int | None) -> bool:
    """Whether an ``activeDeadlineSeconds`` is beyond what the controllers' ``time.Duration`` holds.

    Longer than any other deadline, then: a cap replaces it, uncapped it is never due. Never
    ``malformed``: a tenant could then evade every cap with one.
    """
    return seconds is not None and not -MAX_DEADLINE_SECONDS <= seconds <= MAX_DEADLINE_SECONDS


class DeadlineSource(StrEnum):
    """Where a job's effective deadline comes from (``sweeper.core.platform.apply``)."""

    JOB = "job"  # its own activeDeadlineSeconds (or none at all)
    DEFAULT = "default"  # the platform rule's defaultDeadline: the job declares none
    CAP = "cap"  # the platform rule's maxDeadline: the job declares a longer one, or none


@dataclass(frozen=True, slots=True)
class Job:
    """What the sweeper knows about one job after listing it (the fields its families read)."""

    kind: Kind
    version: str  # as listed: v1; v2beta1 for mpi-operator's MPIJob; v1alpha1 for a TrainJob
    namespace: str
    name: str
    uid: str
    # Where its controller starts the deadline clock: status.startTime (set at the first
    # start, reset on resume), or a TrainJob's creation or last resume.
    start_time: datetime | None = None
    # The effective deadline: declared_seconds, else the platform rule's default, capped by
    # its maximum (platform.apply); every rule reads this one.
    deadline_seconds: int | None = None
    suspended: bool = False
    # Suspended=True still in the status: with suspend no longer set the job is resuming,
    # and its controller restarts the clock before it checks the deadline.
    suspended_condition: bool = False
    managed_by: str | None = None
    deleting: bool = False
    excluded: bool = False  # the opt-out annotation says "true"
    touched_at: datetime | None = None  # the sweeper's last touch, if parsable
    finished: str | None = None  # "Failed", or the success condition's type, when "True"
    failed_by_deadline: bool = False  # its Failed condition says the deadline caused it...
    failed_by_sweeper: bool = False  # ... and the sweeper wrote it (counted apart)
    # As written (runPolicy's wins over an MPIJob's spec.cleanPodPolicy); None when absent.
    clean_pod_policy: str | None = None
    completed: bool = False  # status.completionTime set (mpi-operator cleans up only then)
    failed_at: datetime | None = None  # the Failed=True condition's lastTransitionTime
    launcher_waits: bool = False  # launcherCreationPolicy: WaitForWorkersReady (v2beta1)
    malformed: str | None = None  # the field that made the object unusable
    declared_seconds: int | None = None  # its own activeDeadlineSeconds, negatives included
    deadline_source: DeadlineSource = DeadlineSource.JOB
    rule: str | None = None  # the platform rule it falls under
    # It carries the exclude annotation, which its rule does not allow (excluded is false).
    exemption_refused: bool = False
    warn_before: float | None = None  # the rule's warnBefore, in seconds
    finished_at: datetime | None = None  # when the finished condition turned True
    queued: bool = False  # Kueue's (its queue-name label): Kueue decides when it runs
    replicas: int | None = None  # the pods its controller creates (None: unknown)

    @property
    def deadline(self) -> datetime | None:
        """``startTime + activeDeadlineSeconds``, when both are known and it does not overflow.

        A negative deadline is due at ``startTime``: the operator compares
        ``now - startTime >= activeDeadlineSeconds``, already true for any job it started.
        """
        if self.start_time is None or self.deadline_seconds is None:
            return None
        if overflows(self.deadline_seconds):
            return None
        return self.start_time + timedelta(seconds=max(self.deadline_seconds, 0))


@dataclass(frozen=True, slots=True)
class Owned:
    """An object that may belong to a job (a pod, a service, a JobSet)."""

    name: str
    uid: str
    phase: str | None  # a pod's status.phase
    controller_uid: str | None  # the uid of its controller ownerReference
    # deletionTimestamp set: a pod keeps its phase while it terminates, and deleting it again
    # changes nothing (the operator's DeletePod skips it too).
    deleting: bool = False


class _Malformed(Exception):  # noqa: N818 - internal control flow, never escapes this module
    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


def parse_job(raw: object, kind: Kind, version: str = VERSION) -> Job:
    """The view of one listed job; an unusable one is ``malformed`` (with what identity it has)."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    # Interned: thousands of jobs share a few namespaces. Never a name or a uid: each is one
    # job's, and an interned string stays in the interpreter's table as long as it lives, for
    # ever on CPython 3.12.0 to 3.12.6 (CPython gh-113993), so a long --watch would keep every
    # name and uid it ever saw; elsewhere their churn rebuilds that table (some 2 MB) again and
    # again, and the allocator keeps each old copy resident.
    namespace = sys.intern(_identity(meta, "namespace"))
    name = _identity(meta, "name")
    uid = _identity(meta, "uid")
    try:
        return _parse(raw, kind, version, (namespace, name, uid))
    except _Malformed as bad:
        return Job(kind, version, namespace, name, uid, malformed=bad.field)


def _identity(meta: object, key: str) -> str:
    value = meta.get(key) if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) else ""


def _parse(raw: object, kind: Kind, version: str, identity: tuple[str, str, str]) -> Job:
    if not isinstance(raw, Mapping):
        raise _Malformed("object")
    meta = _mapping(raw, "metadata", "metadata", required=True)
    namespace, name, uid = identity
    for key, value in (("name", name), ("namespace", namespace), ("uid", uid)):
        if not value:
            raise _Malformed(f"metadata.{key}")
    annotations = _mapping(meta, "annotations", "metadata.annotations")
    labels = meta.get("labels")
    spec = _mapping(raw, "spec", "spec", required=True)
    status = _mapping(raw, "status", "status")
    reading = kind.reading(version)
    seen = _conditions(status, reading.succeeded)
    if reading.run_policy:
        policy = _mapping(spec, "runPolicy", "spec.runPolicy")
        prefix = "spec.runPolicy"
    else:
        policy, prefix = spec, "spec"
    if reading.created_clock:
        start_time = _time(meta, "creationTimestamp", "metadata.creationTimestamp")
        if seen.resumed_at is not None and (start_time is None or seen.resumed_at > start_time):
            start_time = seen.resumed_at
    else:
        start_time = _time(status, "startTime", "status.startTime")
    # A reason (mpi-operator's copied from its launcher, the trainer's own), or the Training
    # Operator v1's message (docs/operator.md).
    if reading.failure_reason:
        by_deadline, by_sweeper = seen.deadline_reason, seen.reason_by_sweeper
    else:
        by_deadline, by_sweeper = seen.message, seen.by_sweeper
    deadline_seconds = _typed(
        policy, "activeDeadlineSeconds", f"{prefix}.activeDeadlineSeconds", int
    )
    if start_time is not None and deadline_seconds is not None and not overflows(deadline_seconds):
        try:
            start_time + timedelta(seconds=max(deadline_seconds, 0))
        except OverflowError:
            raise _Malformed("status.startTime") from None  # a deadline after the year 9999
    return Job(
        kind,
        version,
        *identity,
        start_time=start_time,
        deadline_seconds=deadline_seconds,
        declared_seconds=deadline_seconds,
        suspended=bool(_typed(policy, "suspend", f"{prefix}.suspend", bool)),
        suspended_condition=seen.suspended,
        managed_by=_typed(policy, "managedBy", f"{prefix}.managedBy", str),
        deleting=meta.get("deletionTimestamp") is not None,
        excluded=opted_out(annotations),
        # The sweeper's own memory; if someone garbled it, the next touch rewrites it.
        touched_at=last_touch(annotations),
        finished=seen.finished,
        failed_by_deadline=by_deadline,
        failed_by_sweeper=by_sweeper,
        clean_pod_policy=_clean_pod_policy(kind, reading, spec, policy),
        # Read only where a family's rules use them: the fast decoder of v1 lists skips them.
        completed=reading.completion and status.get("completionTime") is not None,
        failed_at=seen.failed_at if reading.failed_at else None,
        finished_at=seen.finished_at,
        queued=isinstance(labels, Mapping) and isinstance(labels.get(QUEUE_NAME_LABEL), str),
        replicas=_replicas(spec.get(kind.replica_specs) if kind.replica_specs else None, reading),
        launcher_waits=(
            reading.launcher_policy
            and _typed(spec, "launcherCreationPolicy", "spec.launcherCreationPolicy", str)
            == "WaitForWorkersReady"
        ),
    )


def _replicas(specs: object, reading: Reading) -> int | None:
    if not isinstance(specs, Mapping):
        return None
    total = 0
    for role, spec in specs.items():
        if reading.launcher_policy and role == "Launcher":
            continue
        count = spec.get("replicas") if isinstance(spec, Mapping) else None
        if type(count) is not int or count < 0:
            return None
        total += count
    return total


def _mapping(
    parent: Mapping[str, object], key: str, field: str, *, required: bool = False
) -> Mapping[str, object]:
    value = parent.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, Mapping):
        raise _Malformed(field)
    return value


def _typed(parent: Mapping[str, object], key: str, field: str, want: type[T]) -> T | None:
    value = parent.get(key)
    if value is None:
        return None
    # bool is an int in Python, never in the CRD schema.
    if not isinstance(value, want) or (isinstance(value, bool) and want is not bool):
        raise _Malformed(field)
    return value


def _time(parent: Mapping[str, object], key: str, field: str) -> datetime | None:
    value = parent.get(key)
    if value is None:
        return None
    parsed = parse_rfc3339(value)
    if parsed is None:
        raise _Malformed(field)
    return parsed


def _clean_pod_policy(
    kind: Kind, reading: Reading, spec: Mapping[str, object], run_policy: Mapping[str, object]
) -> str | None:
    if not reading.clean_pod_policy:
        return None
    policy = _typed(run_policy, "cleanPodPolicy", "spec.runPolicy.cleanPodPolicy", str)
    if policy is None and kind.legacy_clean_pod_policy and reading.legacy_clean_pod_policy:
        policy = _typed(spec, "cleanPodPolicy", "spec.cleanPodPolicy", str)
    return policy


@dataclass(frozen=True, slots=True)
class _Conditions:
    finished: str | None = None
    message: bool = False  # the Failed message is the Training Operator's deadline message
    deadline_reason: bool = False  # the Failed reason is DeadlineExceeded
    by_sweeper: bool = False  # ... and the sweeper wrote it
    reason_by_sweeper: bool = False
    suspended: bool = False
    failed_at: datetime | None = None
    resumed_at: datetime | None = None
    finished_at: datetime | None = None


def _conditions(status: Mapping[str, object], succeeded: str) -> _Conditions:
    conditions = status.get("conditions")
    if conditions is None:
        return _Conditions()
    if not isinstance(conditions, list):
        raise _Malformed("status.conditions")
    finished: str | None = None
    message = reason = by_sweeper = reason_by_sweeper = suspended = False
    failed_at = resumed_at = finished_at = None
    for index, condition in enumerate(conditions):
        field = f"status.conditions[{index}]"
        if not isinstance(condition, Mapping):
            raise _Malformed(field)
        ctype = condition.get("type")
        cstatus = condition.get("status")
        if not isinstance(ctype, str) or not isinstance(cstatus, str):
            raise _Malformed(field)
        if ctype == "Suspended" and cstatus == "True":
            suspended = True
        if ctype == "Suspended" and cstatus == "False":
            resumed_at = parse_rfc3339(condition.get("lastTransitionTime"))
        if ctype in (succeeded, "Failed") and cstatus == "True":
            # Failed wins: it is the one that can carry the deadline.
            if finished != "Failed":
                finished = ctype
                finished_at = parse_rfc3339(condition.get("lastTransitionTime"))
            if ctype != "Failed":
                continue
            failed_at = parse_rfc3339(condition.get("lastTransitionTime"))
            finished_at = failed_at
            text = condition.get("message")
            text = text if isinstance(text, str) else ""
            # As the fast decoder reads v1 lists: any deadline Failed condition counts.
            if DEADLINE_MESSAGE in text:
                message, by_sweeper = True, SWEEPER_MARK in text
            if condition.get("reason") == DEADLINE_EXCEEDED:
                reason, reason_by_sweeper = True, SWEEPER_MARK in text
    deadline = (message, reason, by_sweeper, reason_by_sweeper)
    return _Conditions(finished, *deadline, suspended, failed_at, resumed_at, finished_at)


def opted_out(annotations: Mapping[str, object]) -> bool:
    """Whether a job's annotations opt it out: ``"true"`` under either exclude key (0.1.0's too)."""
    for key in (EXCLUDE_ANNOTATION, LEGACY_EXCLUDE_ANNOTATION):
        value = annotations.get(key)
        if isinstance(value, str) and value.strip().lower() == "true":
            return True
    return False


def last_touch(annotations: Mapping[str, object]) -> datetime | None:
    """When the sweeper last touched a job: the later parsable stamp of the two touch keys.

    Both are there only after a 0.1.0 sweeper came back (a rollback) or by hand.
    """
    current = parse_rfc3339(annotations.get(TOUCHED_AT_ANNOTATION))
    legacy = annotations.get(LEGACY_TOUCHED_AT_ANNOTATION)
    if legacy is None:  # every job this release has touched
        return current
    old = parse_rfc3339(legacy)
    if current is None or (old is not None and old > current):
        return old
    return current


def parse_owned(raw: object) -> Owned | None:
    """The view of a listed object; ``None`` (never deleted) without a usable name and uid."""
    # Run for every pod of the fleet, so JSON's own types are checked (a dict, not a Mapping).
    if not isinstance(raw, dict):
        return None
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        return None
    name, uid = meta.get("name"), meta.get("uid")
    if not isinstance(name, str) or not isinstance(uid, str) or not name or not uid:
        return None
    controller_uid = None
    refs = meta.get("ownerReferences")
    if isinstance(refs, list):
        for ref in refs:
            if isinstance(ref, dict) and ref.get("controller") is True:
                ref_uid = ref.get("uid")
                controller_uid = ref_uid if isinstance(ref_uid, str) else None
                break
    status = raw.get("status")
    phase = status.get("phase") if isinstance(status, dict) else None
    return Owned(
        name=name,
        uid=uid,
        phase=phase if isinstance(phase, str) else None,
        controller_uid=controller_uid,
        deleting=meta.get("deletionTimestamp") is not None,
    )
