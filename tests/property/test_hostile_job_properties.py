"""One hostile job among good ones, through every path that reads it (issue 19).

Any job owner can write their job's annotations, and a broken client or controller can write
anything the CRD schema lets through (most of ``status`` and the replica specs are open).
Hypothesis builds a job in which the fields the sweeper reads (its annotations, identity,
``deletionTimestamp``, the run policy, the replica specs, ``startTime`` and the other status
times, the conditions) and fields it must ignore hold any JSON: any type, any string (RFC 3339
times whose UTC conversion leaves ``datetime``'s range among them), huge and negative numbers,
null, deep nesting. The job is placed among good, overdue jobs and read by both modes' paths:
the page decoder and the reference parser, ``decide``/``judge``, ``due_at``, and the watch's
listing and event handling, which arm the timers. The properties:

- nothing raises;
- the good jobs get exactly the views, the plan entries and the timers they get without it;
- the hostile job is either ``malformed`` (when a field it needs has a type or value the
  operator would not read), or read exactly as its *twin*: the same job with every field the
  sweeper ignores put back and every value the sweeper may read as absent removed (a garbled
  ``touched-at`` annotation is no touch). What the twin's view leads to is the decision the
  other property tests check against the operator's rules.

The twin is built from this module's own reading of each field (the oracle's RFC 3339 reader
below, the operator's types), not from ``sweeper/``.
"""

from __future__ import annotations

import copy
import functools
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from hypothesis import given, note, settings
from hypothesis import strategies as st

from sweeper.config import ClockMode, Config, WatchSettings
from sweeper.core.clock import SYSTEM_CLOCK
from sweeper.core.decide import decide, due_at, judge
from sweeper.core.families import lookup
from sweeper.core.jobs import Job, parse_job
from sweeper.core.model import ActionMode, Enforcement, Entry, SkipReason
from sweeper.k8s import decode
from sweeper.k8s.cluster import ServedKind, WatchCluster, WatchEvent
from sweeper.stop import Stop
from sweeper.watch import engine
from sweeper.watch.inbox import JobKey, Scope
from tests.property.strategies import (
    EXCLUDE,
    KINDS,
    LARGEST_VALID_DEADLINE,
    TOUCHED_AT,
    JobCase,
    clocks,
    job_cases,
    policies,
)
from tests.unit.fakes import FakeCluster
from tests.unit.watch.harness import Clock

GOOD_NAMESPACE = "good"
HOSTILE_NAMESPACE = "hostile"

# --- hostile values ------------------------------------------------------------------------------

# Times at the edges of datetime's range: valid RFC 3339 (Go's time.Parse reads every one), but
# those whose UTC instant falls before year 1 or after year 9999 cannot be held by a datetime.
EDGE_TIMES = (
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "0001-01-01T00:00:00+23:59",
    "9999-12-31T23:59:59-23:59",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59.999999Z",
    "0001-01-01T00:00:00-01:00",
    "9999-12-31T23:59:59+01:00",
)
HOSTILE_STRINGS = (
    *EDGE_TIMES,
    "",
    " ",
    "true",
    "TRUE",
    " True ",
    "maybe",
    "null",
    "yesterday",
    "2031-13-45T99:00:00Z",
    "2031-05-17T12:00:00",  # no zone
    "2031-05-17T12:00:00+24:00",
    "9" * 300,
    "1e400",
    "\u2028",
    "\ud800",
    "kubeflow.org/training-operator",
    "kueue.x-k8s.io/multikueue",
)
edge_times = st.builds(
    lambda base, sign, hours, minutes: f"{base}{sign}{hours:02d}:{minutes:02d}",
    st.sampled_from(["0001-01-01T00:00:00", "9999-12-31T23:59:59", "2031-05-17T12:00:00"]),
    st.sampled_from(["+", "-"]),
    st.integers(0, 23),
    st.integers(0, 59),
)
huge_numbers = st.sampled_from(
    [2**63, -(2**63) - 1, 2**64, 10**400, -(10**400), LARGEST_VALID_DEADLINE + 1, 1e308, -0.0]
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    huge_numbers,
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(HOSTILE_STRINGS),
    edge_times,
    st.text(max_size=12),
)


def nested(depth: int) -> Any:
    """A list nested ``depth`` deep, with an object at the bottom."""
    value: Any = {"x": None}
    for _ in range(depth):
        value = [value]
    return value


trees = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=6,
)
deep = st.integers(20, 120).map(nested)
hostile_json = st.one_of(trees, deep)
# Drawn directly, not filtered: a filter that rejects a whole branch makes hypothesis give up.
not_a_mapping = st.one_of(scalars, st.lists(trees, max_size=3), deep)
not_a_list = st.one_of(scalars, st.dictionaries(st.text(max_size=8), trees, max_size=3))
# Values for a time field. Random text is kept free of a "T": the oracle's reader below is
# strict RFC 3339, so a lenient ISO 8601 form (``20310517T12Z``) that Python reads and the
# oracle does not must not be drawn; every RFC 3339 shape comes from the lists above.
time_values = st.one_of(
    st.sampled_from(EDGE_TIMES),
    st.sampled_from(EDGE_TIMES),
    st.sampled_from(HOSTILE_STRINGS),
    edge_times,
    hostile_json.filter(lambda v: not (isinstance(v, str) and "t" in v.lower())),
)
# The two time fields the decision computes with: an instant at the edge of the range most
# of the time, and a third of the time one near its end (any sum with it leaves the range).
NEAR_THE_END = (
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:59+01:00",
    "9999-12-31T12:00:00-01:00",
)
edge_first = st.one_of(st.sampled_from(NEAR_THE_END), st.sampled_from(EDGE_TIMES), time_values)
hostile_policies = st.one_of(
    policies,
    # --grace and --escalate-after beyond datetime's range (issue 19, S9).
    st.builds(
        lambda base, grace, escalate, retouch: replace(
            base, grace=grace, escalate_after=escalate, retouch_after=retouch
        ),
        policies,
        st.sampled_from([0.0, 30.0, 3.2e11, 8.64e13, 1e15, 1e300]),
        st.sampled_from([0.0, 120.0, 3.2e11, 1e15, 1e300]),
        st.sampled_from([5.0, 1e-6, 1e15, 1e300]),
    ),
)


# --- the oracle's reading of each field ---------------------------------------------------------

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{6}))?(Z|([+-])(\d{2}):(\d{2}))"
)


def instant(value: object) -> datetime | None:
    """An RFC 3339 time with a zone, as a UTC instant; ``None`` if it is not one a datetime holds.

    Written without ``fromisoformat`` and ``astimezone``: the offset is subtracted from the
    local time by hand.
    """
    if not isinstance(value, str):
        return None
    match = _RFC3339.fullmatch(value)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match[i]) for i in range(1, 7))
    micro = int(match[7] or 0)
    try:
        local = datetime(year, month, day, hour, minute, second, micro)  # noqa: DTZ001 - by hand
        if match[8] == "Z":
            return local.replace(tzinfo=UTC)
        offset = timedelta(hours=int(match[10]), minutes=int(match[11]))
        if offset >= timedelta(hours=24):
            return None
        return (local - offset if match[9] == "+" else local + offset).replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        return None


MALFORMED = "malformed"
_Twin = Callable[[Any, Any], Any]  # (hostile value, original value) -> twin value, or MALFORMED
_ABSENT = object()


def _ignored(_value: Any, original: Any) -> Any:
    return original  # the sweeper never reads it: the twin has the original back


def _as_is(value: Any, _original: Any) -> Any:
    return value  # read, never malformed: whatever it holds, the twin holds too


def _instant(value: Any, _original: Any) -> Any:
    moment = instant(value)
    return _ABSENT if moment is None else moment.isoformat().replace("+00:00", "Z")


# A garbled touch is no touch (the next touch rewrites it); a garbled transition, no instant.
_touched = _instant


def _exclude(value: Any, _original: Any) -> Any:
    return value if isinstance(value, str) else _ABSENT


def _optional(check: Callable[[Any], bool]) -> _Twin:
    def twin(value: Any, _original: Any) -> Any:
        if value is None:
            return _ABSENT
        return value if check(value) else MALFORMED

    return twin


def _required(check: Callable[[Any], bool]) -> _Twin:
    def twin(value: Any, _original: Any) -> Any:
        return value if check(value) else MALFORMED

    return twin


def _deleting(value: Any, _original: Any) -> Any:
    return _ABSENT if value is None else "2031-05-17T12:00:00Z"


def _message(value: Any, _original: Any) -> Any:
    return value if isinstance(value, str) else _ABSENT


def _is_deadline(value: Any) -> bool:
    # Any integer: one beyond the operator's time.Duration is never due, not malformed.
    return isinstance(value, int) and not isinstance(value, bool)


def _never(_value: Any) -> bool:
    return False


@dataclass(frozen=True)
class Field:
    """A field of a job, where it is, what values to try and how the twin reads it."""

    path: tuple[str | int, ...]
    values: st.SearchStrategy[Any]
    twin: _Twin


def fields(case: JobCase) -> tuple[Field, ...]:
    """Every field worth breaking in this job (the condition ones only when it has one)."""
    legacy = case.kind.name == "MPIJob" and case.clean_pod_policy is None
    return _fields(case.kind.replica_specs, legacy=legacy, conditions=bool(case.conditions))


@functools.cache
def _fields(specs: str, *, legacy: bool, conditions: bool) -> tuple[Field, ...]:
    # Built once per shape: a strategy built anew for every example costs more than the test.
    found = [
        Field(("metadata",), not_a_mapping, _required(_never)),
        Field(
            ("metadata", "name"), hostile_json, _required(lambda v: isinstance(v, str) and bool(v))
        ),
        Field(
            ("metadata", "namespace"),
            hostile_json.filter(lambda v: v != GOOD_NAMESPACE),
            _required(lambda v: isinstance(v, str) and bool(v)),
        ),
        Field(
            ("metadata", "uid"), hostile_json, _required(lambda v: isinstance(v, str) and bool(v))
        ),
        Field(("metadata", "annotations"), not_a_mapping, _optional(_never)),
        Field(("metadata", "annotations", TOUCHED_AT), edge_first, _touched),
        Field(("metadata", "annotations", EXCLUDE), hostile_json, _exclude),
        Field(("metadata", "annotations", "example.com/other"), hostile_json, _ignored),
        Field(("metadata", "labels"), hostile_json, _ignored),
        Field(("metadata", "resourceVersion"), hostile_json, _ignored),
        Field(("metadata", "creationTimestamp"), time_values, _ignored),
        Field(("metadata", "deletionTimestamp"), time_values, _deleting),
        Field(("metadata", "ownerReferences"), hostile_json, _ignored),
        Field(("apiVersion",), hostile_json, _ignored),
        Field(("kind",), hostile_json, _ignored),
        Field(("spec",), not_a_mapping, _required(_never)),
        # The replicas are read (a count unknown where a role has no whole number).
        Field(("spec", specs), hostile_json, _as_is),
        Field(("spec", "runPolicy"), not_a_mapping, _optional(_never)),
        Field(
            ("spec", "runPolicy", "activeDeadlineSeconds"),
            st.one_of(hostile_json, st.integers(-(10**12), 10**12)),
            _optional(_is_deadline),
        ),
        Field(
            ("spec", "runPolicy", "suspend"),
            hostile_json,
            _optional(lambda v: isinstance(v, bool)),
        ),
        Field(
            ("spec", "runPolicy", "managedBy"),
            hostile_json,
            _optional(lambda v: isinstance(v, str)),
        ),
        Field(
            ("spec", "runPolicy", "cleanPodPolicy"),
            hostile_json,
            _optional(lambda v: isinstance(v, str)),
        ),
        Field(("spec", "runPolicy", "backoffLimit"), hostile_json, _ignored),
        Field(("spec", "runPolicy", "ttlSecondsAfterFinished"), hostile_json, _ignored),
        Field(("spec", "runPolicy", "schedulingPolicy"), hostile_json, _ignored),
        Field(("status",), not_a_mapping, _optional(_never)),
        Field(("status", "startTime"), edge_first, _optional(lambda v: instant(v) is not None)),
        Field(("status", "completionTime"), time_values, _ignored),
        Field(("status", "lastReconcileTime"), time_values, _ignored),
        Field(("status", "replicaStatuses"), hostile_json, _ignored),
        Field(("status", "conditions"), not_a_list, _optional(_never)),
    ]
    if legacy:
        # MPIJob's legacy spec.cleanPodPolicy is read when runPolicy has none.
        found.append(
            Field(("spec", "cleanPodPolicy"), hostile_json, _optional(lambda v: isinstance(v, str)))
        )
    else:
        found.append(Field(("spec", "cleanPodPolicy"), hostile_json, _ignored))
    if conditions:
        found += [
            Field(("status", "conditions", 0), not_a_mapping, _required(_never)),
            Field(
                ("status", "conditions", 0, "type"),
                hostile_json,
                _required(lambda v: isinstance(v, str)),
            ),
            Field(
                ("status", "conditions", 0, "status"),
                hostile_json,
                _required(lambda v: isinstance(v, str)),
            ),
            Field(("status", "conditions", 0, "message"), hostile_json, _message),
            Field(("status", "conditions", 0, "reason"), hostile_json, _ignored),
            # Read now: when the job finished (the held GPUs' grace counts from it).
            Field(("status", "conditions", 0, "lastTransitionTime"), time_values, _instant),
            Field(("status", "conditions", 0, "lastUpdateTime"), time_values, _ignored),
        ]
    return tuple(found)


def _get(raw: Any, path: tuple[str | int, ...]) -> Any:
    target = raw
    for key in path:
        if isinstance(key, int):
            target = target[key] if isinstance(target, list) and len(target) > key else _ABSENT
        else:
            target = target.get(key, _ABSENT) if isinstance(target, dict) else _ABSENT
        if target is _ABSENT:
            return _ABSENT
    return target


def _put(raw: Any, path: tuple[str | int, ...], value: Any) -> None:
    target = raw
    for key in path[:-1]:
        target = target.setdefault(key, {}) if isinstance(key, str) else target[key]
    last = path[-1]
    if value is _ABSENT:
        if isinstance(last, str):
            target.pop(last, None)
        return
    target[last] = value


@dataclass(frozen=True)
class Hostile:
    """The hostile job and its twin.

    Attributes:
        raw: The hostile object.
        twin: The object it must read as; ``None`` when it must be ``malformed``.
        broken: The fields that were given hostile values.
    """

    raw: Any
    twin: Any
    broken: tuple[str, ...]


@st.composite
def hostile_jobs(draw: st.DrawFn, now: datetime, grace: float, kind_name: str) -> Hostile:
    """A job of that kind with some of its fields given hostile values, or not a job object at all.

    Of the page's kind, as every item of a real list is: the fields the twin reads depend on it
    (MPIJob's legacy ``spec.cleanPodPolicy``).
    """
    # Most of them overdue before the damage: the jobs whose arithmetic goes furthest.
    case = draw(job_cases(now, grace, overdue=draw(st.integers(0, 3)) > 0))
    kind = next(k for k in KINDS if k.name == kind_name)
    case = replace(case, kind=kind, name="hostile", namespace=HOSTILE_NAMESPACE)
    original = case.raw()
    if draw(st.integers(0, 19)) == 0:
        raw = draw(not_a_mapping)  # not an object at all
        return Hostile(raw, None, ("object",))
    options = fields(case)
    # Two jobs in three break a time the decision reads: the fields most worth the budget.
    touch_field, start_field = (
        next(f for f in options if f.path[-1] == key) for key in (TOUCHED_AT, "startTime")
    )
    first = draw(st.one_of(st.just(touch_field), st.just(start_field), st.sampled_from(options)))
    others = draw(st.lists(st.sampled_from(options), max_size=3))
    chosen = list({f.path: f for f in (first, *others)}.values())
    # A field inside one that is replaced as a whole is gone: keep the outer one.
    chosen = [
        f for f in chosen if not any(o.path == f.path[: len(o.path)] for o in chosen if o is not f)
    ]
    raw = copy.deepcopy(original)
    values = {f.path: draw(f.values) for f in chosen}
    for item in sorted(chosen, key=lambda f: len(f.path)):
        _put(raw, item.path, values[item.path])
    twin: Any = copy.deepcopy(raw)
    for item in chosen:
        read = item.twin(values[item.path], _get(original, item.path))
        if read is MALFORMED:
            twin = None
            break
        _put(twin, item.path, read)
    if twin is not None:
        start = instant(_get(twin, ("status", "startTime")))
        deadline = _get(twin, ("spec", "runPolicy", "activeDeadlineSeconds"))
        if start is not None and isinstance(deadline, int):
            try:
                start + timedelta(seconds=max(deadline, 0))
            except OverflowError:
                twin = None  # a deadline after the year 9999: the sweeper cannot hold it
    broken = tuple(".".join(map(str, f.path)) for f in chosen)
    note(f"broken: {broken}")
    return Hostile(raw, twin, broken)


@st.composite
def good_jobs(draw: st.DrawFn, now: datetime, grace: float) -> list[dict[str, Any]]:
    """One or two valid overdue jobs of one kind, in their own namespace.

    The second is the first under another name and uid: generating a job costs more than
    the whole test does with it.
    """
    case = draw(job_cases(now, grace, overdue=True))
    return [
        replace(
            case, name=f"good-{index}", namespace=GOOD_NAMESPACE, uid=f"{case.uid}-{index}"
        ).raw()
        for index in range(draw(st.integers(1, 2)))
    ]


@dataclass(frozen=True)
class Scene:
    """Good jobs with one hostile job among them, a clock and a policy."""

    goods: list[dict[str, Any]]
    hostile: Hostile
    position: int
    now: datetime
    enforcement: Enforcement

    @property
    def kind_name(self) -> str:
        return str(self.goods[0]["kind"])

    @property
    def items(self) -> list[Any]:
        return [*self.goods[: self.position], self.hostile.raw, *self.goods[self.position :]]


@st.composite
def scenes(draw: st.DrawFn) -> Scene:
    enforcement = replace(draw(hostile_policies), max_actions=None)
    now = draw(clocks)
    grace = enforcement.grace if enforcement.grace < 10**6 else 0.0
    goods = draw(good_jobs(now, grace))
    hostile = draw(hostile_jobs(now, grace, str(goods[0]["kind"])))
    position = draw(st.integers(0, len(goods)))
    return Scene(goods, hostile, position, now, enforcement)


def page(items: list[Any]) -> bytes:
    return json.dumps(
        {"kind": "JobList", "items": items, "metadata": {"resourceVersion": "7"}}
    ).encode()


def same(entry: Entry) -> tuple[Any, ...]:
    return (entry.job, entry.decision, entry.reason, entry.seconds_overdue, entry.detail)


# --- the properties --------------------------------------------------------------------------

# Half the profile's examples: each one is a page of up to three jobs through a whole path,
# and generating the jobs is most of the time (each test stays within the unit budget).
BUDGET = settings(max_examples=max(10, settings().max_examples // 2))


@BUDGET
@given(scenes())
def test_a_hostile_job_is_read_as_malformed_or_as_its_twin_and_leaves_the_others_alone(
    scene: Scene,
) -> None:
    kind = lookup(scene.kind_name)
    views = decode.decode_jobs(page(scene.items), kind, "v1").jobs
    reference = [parse_job(item, kind, "v1") for item in scene.items]
    assert views == reference
    alone = decode.decode_jobs(page(scene.goods), kind, "v1").jobs
    assert [v for i, v in enumerate(views) if i != scene.position] == alone

    hostile = views[scene.position]
    if scene.hostile.twin is None:
        assert hostile.malformed is not None
    else:
        assert hostile == parse_job(scene.hostile.twin, kind, "v1")
        assert hostile.malformed is None


@BUDGET
@given(scenes())
def test_a_hostile_job_changes_no_decision_or_timer_of_the_others(scene: Scene) -> None:
    kind = lookup(scene.kind_name)
    views = [parse_job(item, kind, "v1") for item in scene.items]
    alone = [parse_job(item, kind, "v1") for item in scene.goods]

    plan = decide(views, scene.now, scene.enforcement)
    without = decide(alone, scene.now, scene.enforcement)
    entries = [same(e) for i, e in enumerate(plan.entries) if i != scene.position]
    assert entries == [same(e) for e in without.entries]
    hostile = views[scene.position]
    entry = judge(hostile, scene.now, scene.enforcement)
    if hostile.malformed is not None:
        assert entry.reason == SkipReason.MALFORMED.value
    for view in views:
        due_at(view, scene.now, scene.enforcement)
    # The per-pass cap orders every action: it must cope with the hostile one too.
    decide(views, scene.now, replace(scene.enforcement, max_actions=1))


def watch_policy(enforcement: Enforcement) -> Enforcement:
    """The policy as ``--watch`` accepts it: no per-pass cap, re-touches a second apart."""
    retouch_after = enforcement.retouch_after
    if enforcement.retouch_limit > 0 and retouch_after < 1:
        retouch_after = 1.0
    escalate_after = enforcement.escalate_after
    if enforcement.action is ActionMode.TOUCH and escalate_after < 1:
        escalate_after = 1.0
    return replace(
        enforcement, max_actions=None, retouch_after=retouch_after, escalate_after=escalate_after
    )


def watcher_for(scene: Scene, cluster: FakeCluster) -> engine.Watcher:
    config = Config(
        enforcement=watch_policy(scene.enforcement),
        clock=ClockMode.LOCAL,
        watch=WatchSettings(leader_elect=False, health_port=0),
    )
    assert config.watch is not None
    # No Lease: leader election is off, so the fake needs only the watch boundary. The local
    # clock reads the scene's instant: a stamp counts or not as judged then.
    return engine.Watcher(
        config,
        config.watch,
        cast("WatchCluster", cluster),
        Stop(SYSTEM_CLOCK),
        io.StringIO(),
        clock=Clock(wall=scene.now),
    )


def timers(watcher: engine.Watcher) -> dict[JobKey, datetime | None]:
    while not watcher.ctx.inbox.empty():
        watcher._apply(watcher.ctx.inbox.get_nowait())
    return {key: watcher.agenda.when(key) for key in watcher.agenda}


def expected_timers(
    views: list[Job], now: datetime, enforcement: Enforcement
) -> dict[JobKey, datetime | None]:
    armed: dict[JobKey, datetime | None] = {}
    for view in views:
        due = due_at(view, now, enforcement)
        if due is not None:
            armed[JobKey(view.kind.name, view.namespace, view.name)] = due
    return armed


@BUDGET
@given(scenes())
def test_the_watch_arms_every_good_job_whatever_the_hostile_one_holds(scene: Scene) -> None:
    kind = lookup(scene.kind_name)
    served = ServedKind(kind, "v1")
    cluster = FakeCluster(served=(served,), date=scene.now)
    for index, item in enumerate(scene.items):
        # Keyed by position: the hostile object's own identity may be anything.
        cluster.jobs[(kind.plural, "ns", f"{index:02d}")] = item
    watcher = watcher_for(scene, cluster)
    scope = Scope(served, None)
    views = [parse_job(item, kind, "v1") for item in scene.items]

    version = watcher.streams.list_one(scope, relist=False)

    assert version == str(cluster.revision)  # the list's, whatever its items hold
    assert timers(watcher) == expected_timers(views, scene.now, watch_policy(scene.enforcement))

    # The same objects as watch events: the hostile one modified, a good one deleted, then
    # a bookmark; the stream must reach the bookmark's resourceVersion.
    deleted = scene.goods[-1]
    cluster.watch_events = [
        *(WatchEvent("MODIFIED", item) for item in scene.items),
        WatchEvent("DELETED", deleted),
        WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "999"}}),
    ]
    assert watcher.streams.follow(scope, "7") == "999"
    gone = JobKey(kind.name, GOOD_NAMESPACE, str(deleted["metadata"]["name"]))
    expected = expected_timers(views, scene.now, watch_policy(scene.enforcement))
    expected.pop(gone, None)
    assert timers(watcher) == expected
    watcher._pool.shutdown()
