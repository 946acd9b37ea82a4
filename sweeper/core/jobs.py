"""Typed, compact views of the objects the sweeper reads: jobs, and the pods and services they own.

A view keeps only what the decision needs, so that a list page can be dropped as soon as it has
been read (memory stays flat with the number of jobs). Parsing never raises: an object that
cannot be understood becomes a view whose ``malformed`` names the offending field.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

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
# What the sweeper appends to the operator's deadline message
# (sweeper.core.patches.failure_message).
SWEEPER_MARK = f"(enforced by {COMPONENT})"


def overflows(seconds: int | None) -> bool:
    """Whether an ``activeDeadlineSeconds`` is beyond what the controllers' ``time.Duration`` holds.

    No controller enforces such a deadline as written, so it is longer than any other: a
    platform rule's cap replaces it (``sweeper.core.platform.terms``), and uncapped it is never
    due (``sweeper.core.rules.DURATION_OVERFLOW``). Never ``malformed``: a tenant could then
    evade every cap with one.
    """
    return seconds is not None and not -MAX_DEADLINE_SECONDS <= seconds <= MAX_DEADLINE_SECONDS


class DeadlineSource(StrEnum):
    """Where a job's effective deadline comes from (``sweeper.core.platform.apply``)."""

    JOB = "job"  # its own activeDeadlineSeconds (or none at all)
    DEFAULT = "default"  # the platform rule's defaultDeadline: the job declares none
    CAP = "cap"  # the platform rule's maxDeadline: the job declares a longer one, or none


@dataclass(frozen=True, slots=True)
class Job:
    """What the sweeper knows about one job after listing it.

    Attributes:
        version: The API version it was listed at (``v1``; ``v2beta1`` for mpi-operator's
            MPIJob; ``v1alpha1`` for TrainJob).
        start_time: Where the job's controller starts its deadline clock: ``status.startTime``
            for the Training Operator and mpi-operator (set at the first start, reset on
            resume); creation or the last resume for a TrainJob.
        deadline_seconds: The effective deadline in seconds: ``declared_seconds``, else the
            platform rule's default, capped by its maximum (``sweeper.core.platform.apply``);
            every family's rules and ``deadline`` read this one.
        declared_seconds: The job's own ``activeDeadlineSeconds`` (negative values included:
            the Training Operator finds them already past).
        deadline_source: Which of the job, the rule's default or its cap set
            ``deadline_seconds``.
        rule: The name of the platform rule the job falls under, ``None`` without one.
        exemption_refused: The job carries the exclude annotation, and its rule does not allow
            exemptions (``excluded`` is then false).
        warn_before: The rule's ``warnBefore`` in seconds.
        suspended_condition: Whether the status still has ``Suspended=True``. With
            ``suspend`` no longer true the job is resuming: the operator's next reconcile
            sets ``startTime`` to now before it checks the deadline.
        excluded: Whether the opt-out annotation says ``"true"``.
        touched_at: When the sweeper last touched it (its own annotation), if parsable.
        finished: ``"Succeeded"`` (a TrainJob's ``"Complete"``) or ``"Failed"`` when such a
            condition is ``"True"``.
        failed_by_deadline: Whether the ``Failed`` condition says the deadline caused it (the
            operator's message, which the sweeper's message extends).
        failed_by_sweeper: Whether that message also says the sweeper enforced it (counted apart
            in the metrics: when only the operator fails jobs any more, the tool can go).
        clean_pod_policy: The effective ``cleanPodPolicy`` as written, ``None`` when absent
            (for MPIJob ``spec.runPolicy.cleanPodPolicy`` wins over ``spec.cleanPodPolicy``).
        completed: Whether ``status.completionTime`` is set (mpi-operator cleans up and stops
            re-creating workers only then).
        failed_at: When the ``Failed=True`` condition was written (``lastTransitionTime``).
        finished_at: When the condition ``finished`` names turned ``True``, every family
            (``lastTransitionTime``; ``None`` when unfinished or unreadable).
        queued: Kueue's job (the ``kueue.x-k8s.io/queue-name`` label): Kueue decides whether
            it waits or goes (``waitForPodsReady``).
        replicas: The pods its controller creates for it, its replica specs' ``replicas``
            summed (a launcher that is a batch Job's pod left out); ``None`` when unknown (a
            TrainJob, a role without a whole number).
        launcher_waits: An MPIJob v2beta1 whose launcher is created only once every worker is
            ready (``launcherCreationPolicy: WaitForWorkersReady``).
        malformed: The field that made the object unusable, ``None`` for a usable job.
    """

    kind: Kind
    version: str
    namespace: str
    name: str
    uid: str
    start_time: datetime | None = None
    deadline_seconds: int | None = None
    suspended: bool = False
    suspended_condition: bool = False
    managed_by: str | None = None
    deleting: bool = False
    excluded: bool = False
    touched_at: datetime | None = None
    finished: str | None = None
    failed_by_deadline: bool = False
    failed_by_sweeper: bool = False
    clean_pod_policy: str | None = None
    completed: bool = False
    failed_at: datetime | None = None
    launcher_waits: bool = False
    malformed: str | None = None
    declared_seconds: int | None = None
    deadline_source: DeadlineSource = DeadlineSource.JOB
    rule: str | None = None
    exemption_refused: bool = False
    warn_before: float | None = None
    finished_at: datetime | None = None
    queued: bool = False
    replicas: int | None = None

    @property
    def deadline(self) -> datetime | None:
        """``startTime + activeDeadlineSeconds``, when both are known.

        A negative deadline is due at ``startTime``: the operator compares
        ``now - startTime >= activeDeadlineSeconds``, already true for any job it started. One
        that :func:`overflows` has no instant.
        """
        if self.start_time is None or self.deadline_seconds is None:
            return None
        if overflows(self.deadline_seconds):
            return None
        return self.start_time + timedelta(seconds=max(self.deadline_seconds, 0))


@dataclass(frozen=True, slots=True)
class Owned:
    """A pod or service that may belong to a job.

    Attributes:
        phase: ``status.phase`` for pods, ``None`` for services.
        controller_uid: The uid of the controller ``ownerReference``, if any.
        deleting: Whether ``metadata.deletionTimestamp`` is set: a pod being deleted keeps its
            phase (``Running``) for its termination grace period, or while a finalizer holds
            it; deleting it again changes nothing (the operator's ``DeletePod`` skips it too).
    """

    name: str
    uid: str
    phase: str | None
    controller_uid: str | None
    deleting: bool = False


class _Malformed(Exception):  # noqa: N818 - internal control flow, never escapes this module
    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


def parse_job(raw: object, kind: Kind, version: str = VERSION) -> Job:
    """Build the view of one listed job; never raises.

    An unusable object gives a view with ``malformed`` set to the field at fault (and
    whatever identity could be read).
    """
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
        return _parse(raw, kind, version, identity=(namespace, name, uid))
    except _Malformed as bad:
        return Job(kind, version, namespace, name, uid, malformed=bad.field)


def _identity(meta: object, key: str) -> str:
    value = meta.get(key) if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) else ""


def _parse(raw: object, kind: Kind, version: str, *, identity: tuple[str, str, str]) -> Job:
    namespace, name, uid = identity
    if not isinstance(raw, Mapping):
        raise _Malformed("object")
    meta = _mapping(raw, "metadata", "metadata", required=True)
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
    deadline_seconds = _deadline(policy, f"{prefix}.activeDeadlineSeconds")
    if start_time is not None and deadline_seconds is not None and not overflows(deadline_seconds):
        try:
            start_time + timedelta(seconds=max(deadline_seconds, 0))
        except OverflowError:
            raise _Malformed("status.startTime") from None  # a deadline after the year 9999
    return Job(
        kind=kind,
        version=version,
        namespace=namespace,
        name=name,
        uid=uid,
        start_time=start_time,
        deadline_seconds=deadline_seconds,
        declared_seconds=deadline_seconds,
        suspended=_bool(policy, "suspend", f"{prefix}.suspend"),
        suspended_condition=seen.suspended,
        managed_by=_string(policy, "managedBy", f"{prefix}.managedBy"),
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
            and _string(spec, "launcherCreationPolicy", "spec.launcherCreationPolicy")
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


def _string(parent: Mapping[str, object], key: str, field: str) -> str | None:
    value = parent.get(key)
    if value is not None and not isinstance(value, str):
        raise _Malformed(field)
    return value


def _bool(parent: Mapping[str, object], key: str, field: str) -> bool:
    value = parent.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
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


def _deadline(policy: Mapping[str, object], field: str) -> int | None:
    value = policy.get("activeDeadlineSeconds")
    if value is None:
        return None
    # bool is an int in Python, never in the CRD schema.
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Malformed(field)
    return value


def _clean_pod_policy(
    kind: Kind, reading: Reading, spec: Mapping[str, object], run_policy: Mapping[str, object]
) -> str | None:
    if not reading.clean_pod_policy:
        return None
    policy = _string(run_policy, "cleanPodPolicy", "spec.runPolicy.cleanPodPolicy")
    if policy is None and kind.legacy_clean_pod_policy and reading.legacy_clean_pod_policy:
        policy = _string(spec, "cleanPodPolicy", "spec.cleanPodPolicy")
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
    return _Conditions(
        finished,
        message,
        reason,
        by_sweeper,
        reason_by_sweeper,
        suspended,
        failed_at,
        resumed_at,
        finished_at,
    )


def opted_out(annotations: Mapping[str, object]) -> bool:
    """Whether a job's annotations opt it out: ``"true"`` under either exclude key.

    The key of 0.1.0 (``LEGACY_EXCLUDE_ANNOTATION``) is honoured as well as the current one,
    so that a job someone excluded before the prefix changed is still left alone.
    """
    for key in (EXCLUDE_ANNOTATION, LEGACY_EXCLUDE_ANNOTATION):
        value = annotations.get(key)
        if isinstance(value, str) and value.strip().lower() == "true":
            return True
    return False


def last_touch(annotations: Mapping[str, object]) -> datetime | None:
    """When the sweeper last touched a job: the later parsable stamp of the two touch keys.

    A job touched by 0.1.0 carries the old key only, one touched since the new one (a touch
    removes the old key); should both be there (a 0.1.0 sweeper back after a rollback, or a
    hand-made annotation), the later stamp is the last touch. ``None`` when neither parses.
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
    """Build the view of a listed pod or service; ``None`` without a usable name and uid.

    Such an object is never deleted.
    """
    if not isinstance(raw, Mapping):
        return None
    meta = raw.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    name, uid = meta.get("name"), meta.get("uid")
    if not isinstance(name, str) or not isinstance(uid, str) or not name or not uid:
        return None
    controller_uid = None
    refs = meta.get("ownerReferences")
    if isinstance(refs, list):
        for ref in refs:
            if isinstance(ref, Mapping) and ref.get("controller") is True:
                ref_uid = ref.get("uid")
                controller_uid = ref_uid if isinstance(ref_uid, str) else None
                break
    status = raw.get("status")
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return Owned(
        name=name,
        uid=uid,
        phase=phase if isinstance(phase, str) else None,
        controller_uid=controller_uid,
        deleting=meta.get("deletionTimestamp") is not None,
    )
