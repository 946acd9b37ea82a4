"""GPUs held for nothing: jobs stuck half-started, and finished jobs that keep their pods. Pure.

A gang whose scheduler placed some pods and left the others Pending holds the placed pods'
GPUs while it cannot run; a job that finished (any reason but its deadline, which the
deadline rules reclaim) with pods still Running or Pending holds theirs, outside Kueue's quota
once Kueue saw it finish. Both are read from the pass's pod lists: each pod becomes a
``PodLoad`` (what it holds, whether it is placed, when it was scheduled), the pods of a job
(``pods_of``) sum into a ``Load``, and ``classify`` says what the job is doing with them.
``reclaim`` turns a platform rule's ``startDeadline`` or ``reclaimFailedAfter`` into an action;
without one nothing is ever written.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from sweeper.core.clock import format_rfc3339, human, parse_rfc3339
from sweeper.core.errors import ConfigError
from sweeper.core.families import family_of
from sweeper.core.jobs import Job, Owned, parse_owned
from sweeper.core.kinds import COMPONENT, PODS, Leftovers
from sweeper.core.model import Action, ActionKind, Entry, Skip, SkipReason, Why
from sweeper.core.platform import PlatformRule

# An extended resource's name: a DNS subdomain prefix, then a name; a trailing * matches any
# rest of the name.
_PATTERN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[-A-Za-z0-9_.]*\*?")
# A whole number of devices: extended resources are never fractional.
_WHOLE = re.compile(r"\+?[0-9]{1,9}")
_ACTIVE = ("Running", "Pending")


# The Event recorded once per episode on a job holding pods for nothing.
EVENT_REASON = "GPUsHeld"
# The Event recorded once per episode a rule's warnBefore ahead of its startDeadline.
START_WARNING_REASON = "StartDeadlineApproaching"
# The Event recorded after a rule's reclaimFailedAfter deleted a finished job's pods.
HELD_PODS_REASON = "HeldPodsDeleted"
_NAME_MAX = 253  # an Event's name is a DNS subdomain
_HASH_CHARS = 10


class HeldState(StrEnum):
    """What a job is doing with the pods it holds."""

    # Some pods placed (their GPUs held), others Pending unscheduled, past --stuck-after.
    STUCK = "stuck-starting"
    # Succeeded or Failed, not by its deadline, with Running or Pending pods past the grace.
    FINISHED = "finished-holding"
    # Every pod Pending and none placed: it holds nothing yet (reported, never acted on).
    WAITING = "waiting"


def parse_gpu_resources(text: str) -> tuple[str, ...]:
    """Read ``--gpu-resources``: comma-separated resource names, each may end in ``*``.

    Raises:
        ConfigError: One line naming the entry that is not an extended resource's name.
    """
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not names:
        raise ConfigError("--gpu-resources: expected a resource name, e.g. nvidia.com/gpu")
    for name in names:
        if not _PATTERN.fullmatch(name) or name.endswith("/"):
            raise ConfigError(
                f"--gpu-resources: "
                f"{name!r}: not an extended resource name (domain/name, a trailing * "
                "matches the rest, e.g. nvidia.com/mig-*)"
            )
    return names


@functools.lru_cache(maxsize=1024)  # asked of every pod's few resource names: the same few
def is_gpu(resource: str, patterns: Sequence[str]) -> bool:
    """Whether a resource name is one of ``patterns`` (a trailing ``*`` matches the rest)."""
    for pattern in patterns:
        if pattern.endswith("*"):
            if resource.startswith(pattern[:-1]):
                return True
        elif resource == pattern:
            return True
    return False


@dataclass(frozen=True, slots=True)
class PodLoad:
    """What one pod holds, as the held-GPU rules read it.

    Attributes:
        placed: Bound to a node (``spec.nodeName``): its devices are taken, running or not.
        scheduled_at: When ``PodScheduled`` turned ``True``; ``None`` if unknown.
        gpus: The devices it asks for: per matched resource, the larger of request and
            limit of each container summed, or of the largest init container if larger (as
            the scheduler counts a pod).
        created_at: ``metadata.creationTimestamp``; ``None`` if unknown.
    """

    pod: Owned
    placed: bool
    scheduled_at: datetime | None
    gpus: int
    created_at: datetime | None = None


def parse_pod_load(raw: object, owned: Owned, patterns: Sequence[str]) -> PodLoad:
    """Read what a listed pod holds; never raises (an unreadable field counts as absent)."""
    # Read of every pod of the fleet: JSON's own types are checked (dict, not Mapping: faster).
    meta, spec, status = _field(raw, "metadata"), _field(raw, "spec"), _field(raw, "status")
    node = spec.get("nodeName")
    scheduled_at = None
    conditions = status.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if (
            isinstance(condition, dict)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "True"
        ):
            scheduled_at = parse_rfc3339(condition.get("lastTransitionTime"))
    # The scheduler's sum: the containers together, or the largest init container if larger.
    regular = sum(_container_devices(c, patterns) for c in _list(spec.get("containers")))
    init = max(
        (_container_devices(c, patterns) for c in _list(spec.get("initContainers"))), default=0
    )
    return PodLoad(
        pod=owned,
        placed=(isinstance(node, str) and bool(node)) or owned.phase == "Running",
        scheduled_at=scheduled_at,
        gpus=max(regular, init),
        created_at=parse_rfc3339(meta.get("creationTimestamp")),
    )


def _field(raw: object, key: str) -> dict[str, object]:
    value = raw.get(key) if isinstance(raw, dict) else None
    return value if isinstance(value, dict) else {}


def _container_devices(container: object, patterns: Sequence[str]) -> int:
    resources = container.get("resources") if isinstance(container, dict) else None
    if not isinstance(resources, dict):
        return 0
    wanted: dict[str, int] = {}
    for part in ("requests", "limits"):
        values = resources.get(part)
        if not isinstance(values, dict):
            continue
        for name, quantity in values.items():
            if isinstance(name, str) and is_gpu(name, patterns):
                wanted[name] = max(wanted.get(name, 0), _whole(quantity))
    return sum(wanted.values())


def _whole(quantity: object) -> int:
    if isinstance(quantity, int) and not isinstance(quantity, bool):
        return max(quantity, 0)
    if isinstance(quantity, str) and _WHOLE.fullmatch(quantity.strip()):
        return int(quantity.strip())
    return 0


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


@dataclass(slots=True)
class Load:
    """The active pods of one job, summed as the pod list comes (one per job, not per pod).

    Of the placed pods only their count is kept (a pass reads every pod of the fleet); the
    pods that wait are few, and kept to be named.

    Attributes:
        placed: Running, or Pending on a node.
        gpus: The devices the placed pods hold.
        first_scheduled: The earliest ``PodScheduled`` of its placed pods.
        waiting: Pending with no node: unschedulable, or not yet looked at.
        created: Its pods, whatever their phase (those its controller created).
        last_created: The newest ``creationTimestamp`` of its pods.
    """

    placed: int = 0
    gpus: int = 0
    first_scheduled: datetime | None = None
    waiting: list[Owned] = field(default_factory=list)
    created: int = 0
    last_created: datetime | None = None

    def add(self, load: PodLoad) -> None:
        """Count one of the job's pods (finished and deleting pods hold nothing: only counted)."""
        self.created += 1
        if load.created_at is not None and (
            self.last_created is None or load.created_at > self.last_created
        ):
            self.last_created = load.created_at
        pod = load.pod
        if pod.phase not in _ACTIVE or pod.deleting:
            return
        if not load.placed:
            self.waiting.append(pod)
            return
        self.placed += 1
        self.gpus += load.gpus
        at = load.scheduled_at
        if at is not None and (self.first_scheduled is None or at < self.first_scheduled):
            self.first_scheduled = at


def pods_of(job: Job) -> tuple[Leftovers, bool]:
    """Where the job's pods are listed; whether their label, not their controller, names it.

    A TrainJob's pods are its JobSet's Jobs', the JobSet named after it.
    """
    family = family_of(job.kind, job.version)
    return family.PODS, family.PODS != family.LEFTOVERS


def load_of(job: Job, pods: Iterable[object], patterns: Sequence[str]) -> Load:
    """Sum the job's pods among one list of them (``pods_of(job)[0].of(job.name)``). Pure."""
    load = Load()
    _, named = pods_of(job)
    for raw in pods:
        pod = parse_owned(raw)
        if pod is not None and (named or pod.controller_uid == job.uid):
            load.add(parse_pod_load(raw, pod, patterns))
    return load


@dataclass(frozen=True, slots=True)
class Held:
    """A job holding pods (and their GPUs) for nothing, or waiting for all of them.

    Attributes:
        since: When the grace started: the first pod scheduled (stuck), the end (finished);
            ``None`` for a waiting job.
        seconds: How long ago ``since`` was (0 for a waiting job).
        placed: How many pods hold devices or a node.
        waiting: The pods never placed.
        gpus: The devices the placed pods hold.
        warning: The words of the warning due ahead of its rule's ``startDeadline``
            (``start_warning``); empty when none is.
        missing: The pods its controller has not created (of ``Job.replicas``).
    """

    job: Job
    state: HeldState
    since: datetime | None
    seconds: float
    placed: int
    waiting: tuple[Owned, ...]
    gpus: int
    warning: str = ""
    missing: int = 0

    @property
    def pods(self) -> int:
        """How many active pods the job has, or should have."""
        return self.placed + len(self.waiting) + self.missing

    def never_started(self, named: int | None = None) -> str:
        """The pods that wait (the first ``named`` by name), and how many were never created."""
        names = [pod.name for pod in self.waiting[:named]]
        if len(self.waiting) > len(names):
            names.append(f"+{len(self.waiting) - len(names)} more")
        return ", ".join(names + ([f"{self.missing} not created"] if self.missing else []))


def graces(
    stuck_after: float, finished_after: float, rule: PlatformRule | None
) -> tuple[float, float]:
    """The graces a job is classified with: the flags', or its rule's keys when shorter. Pure.

    A rule's ``startDeadline`` (``reclaimFailedAfter``) acts from its own instant whatever
    ``--stuck-after`` (``--reclaim-grace``) says: the job is stuck (finished holding) by then.
    """
    if rule is None:
        return stuck_after, finished_after
    start = stuck_after
    if rule.start_deadline is not None:
        # Stuck from the warning on, when the rule warns before it ends the job.
        start = min(start, max(rule.start_deadline - (rule.warn_before or 0.0), 0.0))
    return start, min(finished_after, rule.reclaim_failed_after or finished_after)


def classify(
    job: Job,
    load: Load | None,
    now: datetime,
    *,
    stuck_after: float,
    finished_after: float,
) -> Held | None:
    """What a job does with its active pods; ``None`` when nothing to report. Pure.

    - finished (not by its deadline: those are the deadline rules'), with active pods, at
      least ``finished_after`` after the end: ``finished-holding``;
    - running (not suspended, not being deleted), some pods placed and some not, at least
      ``stuck_after`` after its first pod was scheduled: ``stuck-starting``;
    - running, pods Pending and none placed: ``waiting`` (it holds nothing).

    A running job's pods not yet created (fewer than its ``replicas``) wait too. The stuck
    clock starts again at each pod created: a controller still creating pods, or one that
    just re-created one, is within the grace. A job whose end or first scheduling time is
    unknown is never past its grace.
    """
    if load is None or job.malformed is not None or job.deleting:
        return None
    waiting = tuple(load.waiting)
    if not load.placed and not waiting:
        return None
    missing = 0
    if job.finished is not None:
        # A deadline failure's pods are the deadline rules' (terminate-pods, delete-jobset).
        since = None if job.failed_by_deadline else job.finished_at
        state, grace = HeldState.FINISHED, finished_after
    elif job.suspended:
        return None
    else:
        missing = max((job.replicas or 0) - load.created, 0)
        if not load.placed:
            return Held(job, HeldState.WAITING, None, 0.0, 0, waiting, 0, missing=missing)
        since = load.first_scheduled if waiting or missing else None
        if since is not None and load.last_created is not None:
            since = max(since, load.last_created)
        state, grace = HeldState.STUCK, stuck_after
    if since is None or (now - since).total_seconds() < grace:
        return None
    seconds = (now - since).total_seconds()
    return Held(job, state, since, seconds, load.placed, waiting, load.gpus, missing=missing)


def reclaim(held: Held, rule: PlatformRule | None) -> Action | None:
    """What the job's platform rule has the sweeper do about it; ``None``: report only. Pure.

    ``startDeadline``: a job stuck starting that long after its first pod was scheduled is
    failed (then its active pods deleted), never a Kueue-managed one (Kueue's
    ``waitForPodsReady`` owns that decision). ``reclaimFailedAfter``: the Running and Pending
    pods a job finished that long ago controls are deleted (or the JobSet that controls
    them), whatever its ``cleanPodPolicy``. Never what its controller would re-create (its
    family's ``recreates_pods``).
    """
    job = held.job
    family = family_of(job.kind, job.version)
    if rule is None or held.since is None or family.recreates_pods(job):
        return None
    if held.state is HeldState.STUCK:
        after = rule.start_deadline
        if after is None or job.queued or held.seconds < after:
            return None
        never = len(held.waiting) + held.missing
        return Action(
            job,
            ActionKind.FAIL,
            Why.START_DEADLINE,
            held.seconds - after,
            f"stuck starting {human(held.seconds)}, past startDeadline {human(after)} of "
            f"platform rule {rule.name}: {never} pod(s) never started ({held.never_started()}); "
            f"{held.gpus} GPU(s) freed",
        )
    after = rule.reclaim_failed_after
    if after is None or held.seconds < after:
        return None
    # The executor deletes what the pass listed of the job's leftovers, each by uid.
    own = family.LEFTOVERS.resource == PODS
    return Action(
        job,
        ActionKind.TERMINATE_PODS if own else ActionKind.DELETE_JOBSET,
        Why.FINISHED_HOLDING,
        held.seconds - after,
        f"{job.finished} {human(held.seconds)} ago, past reclaimFailedAfter {human(after)} of "
        f"platform rule {rule.name}: {held.pods} pod(s) holding {held.gpus} GPU(s)",
    )


# The skips a held job's rule may overrule: the deadline rules found nothing to do. Never the
# shared invariants (malformed, being deleted, opted out, managed elsewhere, suspended...).
_IDLE = (
    SkipReason.NO_DEADLINE,
    SkipReason.NOT_STARTED,
    SkipReason.NOT_YET_DUE,
    SkipReason.OPERATOR_ENFORCED,
    SkipReason.FINISHED,
)


def watched(job: Job) -> bool:
    """Whether a job could hold pods for nothing: its pods are looked at after the listing. Pure.

    Running and not suspended (stuck starting, or waiting), or finished otherwise than by its
    deadline (those pods are the deadline rules'); never a malformed job or one being deleted.
    """
    if job.malformed is not None or job.deleting:
        return False
    if job.finished is not None:
        return not job.failed_by_deadline
    return not job.suspended


def may_act(job: Job, entry: Entry, rule: PlatformRule | None) -> bool:
    """Whether the job's rule might replace its skip once its pods are known (``overrule``). Pure.

    A pass holds such a skip back until its pod list is read, as it holds an action.
    """
    if rule is None or not isinstance(entry, Skip) or entry.why not in _IDLE:
        return False
    after = rule.reclaim_failed_after if job.finished else rule.start_deadline
    return after is not None and watched(job)


def overrule(entry: Entry, held: Held | None, rule: PlatformRule | None) -> Entry:
    """The job's entry once its held pods are known: ``reclaim``'s action, else as judged. Pure.

    Only a skip for lack of anything due is replaced: an action of the deadline rules comes
    first, and a job left alone by a shared invariant stays alone.
    """
    if held is None or not isinstance(entry, Skip) or entry.why not in _IDLE:
        return entry
    return reclaim(held, rule) or entry


def explain_held(held: Held, rule: PlatformRule | None) -> str:
    """What ``--explain``'s ``held-gpus`` step saw: the job's pods, and what its rule does. Pure."""
    job = held.job
    waiting = held.never_started() or "none"
    if held.state is HeldState.WAITING:
        return f"waiting: none of its {held.pods} pod(s) placed ({waiting}); it holds nothing"
    parts = [
        f"{held.state.value} for {human(held.seconds)}: {held.placed} pod(s) placed holding "
        f"{held.gpus} GPU(s), waiting: {waiting}"
    ]
    key, after = (
        ("startDeadline", rule.start_deadline if rule else None)
        if held.state is HeldState.STUCK
        else ("reclaimFailedAfter", rule.reclaim_failed_after if rule else None)
    )
    if held.state is HeldState.STUCK and job.queued:
        parts.append("Kueue's job: its waitForPodsReady decides, the sweeper never ends it")
    elif rule is None or after is None:
        parts.append(f"reported only: no platform rule sets {key}")
    elif family_of(job.kind, job.version).recreates_pods(job):
        parts.append("reported only: its controller would re-create what the sweeper deletes")
    else:
        parts.append(f"{key} {human(after)} of platform rule {rule.name}")
    return "; ".join(parts)


def start_warning(held: Held, rule: PlatformRule | None) -> str:
    """The warning due before the rule's ``startDeadline`` ends the job; empty when none. Pure.

    Due from ``startDeadline - warnBefore`` after the first pod was scheduled until the end;
    never for a Kueue job, which the rule does not end.
    """
    if held.state is not HeldState.STUCK or held.since is None or held.job.queued:
        return ""
    if rule is None or rule.start_deadline is None or rule.warn_before is None:
        return ""
    if not rule.start_deadline - rule.warn_before <= held.seconds < rule.start_deadline:
        return ""
    ends = format_rfc3339(held.since + timedelta(seconds=rule.start_deadline))
    return (
        f"stuck starting for {human(held.seconds)}: platform rule {rule.name} ends it at {ends} "
        f"(startDeadline {human(rule.start_deadline)}) unless its "
        f"{len(held.waiting) + held.missing} waiting "
        f"pod(s) start; {held.gpus} GPU(s) held"
    )


def event_name(held: Held, what: str = "") -> str:
    """The Event's name for this episode: ``<job>.<state or what>.<hash>``, alike in every pass.

    An episode is the job (its uid), its state and when the state's grace started: a gang
    whose pods are re-created, or a job that finishes again after a resume, is another one.
    """
    what = what or held.state.value
    since = "" if held.since is None else held.since.isoformat()
    digest = hashlib.sha256(f"{held.job.uid}/{what}/{since}".encode()).hexdigest()
    suffix = f".{what}.{digest[:_HASH_CHARS]}"
    return f"{held.job.name[: _NAME_MAX - len(suffix)].rstrip('-.')}{suffix}"


def event_message(held: Held) -> str:
    """The Event's words: what the job holds, for how long, and which pods wait."""
    waiting = held.never_started(named=5)
    what = "stuck starting" if held.state is HeldState.STUCK else f"{held.job.finished}"
    return f"{what} for {human(held.seconds)}, {held.placed} pod(s) holding {held.gpus} GPU(s)" + (
        f"; waiting: {waiting}" if waiting else ""
    )


def held_pods_deleted(
    what: str, deleted: Sequence[str], companions: Sequence[str], detail: str
) -> str:
    """The Event's words after a ``reclaimFailedAfter`` deleted a finished job's ``what``."""
    also = f" and services {', '.join(companions)}" if companions else ""
    return f"Deleted {what} {', '.join(deleted)}{also} of a job {detail} ({COMPONENT})"
