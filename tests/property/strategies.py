"""Hypothesis strategies: Kubeflow job objects as the API returns them, clocks and policies.

A ``JobCase`` is the set of facts a job is made of (kind, deadline, start, conditions,
annotations...), and ``JobCase.raw()`` the JSON object the API server would return for it.
The property tests judge the object through the product's parser and decision, and check the
outcome against the facts themselves, written here from docs/operator.md and the CLI contract, not
from ``sweeper/``: so the oracle cannot share a mistake with the code it checks.

Cases lean on the borderline: start times and clocks are drawn around the exact instant
``startTime + activeDeadlineSeconds + grace`` (to the microsecond), deadlines include 0 and
the largest accepted value, and every skip condition is drawn on its own or combined.
``malformed_jobs`` breaks exactly one field of a valid job and says which.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from sweeper.core.model import ActionMode, Enforcement, PodsMode


@dataclass(frozen=True)
class Kind:
    """A Kubeflow v1 job kind as the operator's CRDs define it (not ``sweeper.core.kinds``).

    Attributes:
        name: The kind.
        replica_specs: The spec field holding its replica specs.
    """

    name: str
    replica_specs: str


# The oracle's own kind table, from the CRDs; an import-linter contract keeps
# sweeper.core.kinds out.
KINDS = (
    Kind("TFJob", "tfReplicaSpecs"),
    Kind("PyTorchJob", "pytorchReplicaSpecs"),
    Kind("XGBoostJob", "xgbReplicaSpecs"),
    Kind("MPIJob", "mpiReplicaSpecs"),
    Kind("PaddleJob", "paddleReplicaSpecs"),
    Kind("JAXJob", "jaxReplicaSpecs"),
    # Up to operator v1.8.x (kubeflow.org_mxjobs.yaml at v1.8.1); its RunPolicy has no managedBy.
    Kind("MXJob", "mxReplicaSpecs"),
)
# The kinds whose controller never checks managedBy: JAXJob's (v1.9.x jaxjob_controller.go) and
# MXJob's (gone before managedBy existed).
IGNORE_MANAGED_BY = ("JAXJob", "MXJob")
TRAINING_OPERATOR = "kubeflow.org/training-operator"
EXCLUDE = "kubeflow-deadline-sweeper.github.io/exclude"
TOUCHED_AT = "kubeflow-deadline-sweeper.github.io/touched-at"
# The keys of 0.1.0, which the sweeper still reads (opt-out under either; the touch under either).
OLD_EXCLUDE = "deadline-sweeper.kubeflow.org/exclude"
OLD_TOUCHED_AT = "deadline-sweeper.kubeflow.org/touched-at"
DEADLINE_TEXT = "has failed because it was active longer than specified deadline"
# The operator multiplies the deadline into int64 nanoseconds (time.Duration): beyond this many
# seconds either way it overflows, and no controller enforces it as written.
LARGEST_VALID_DEADLINE = (2**63 - 1) // 10**9
# A fixed, far-from-epoch origin: every clock is an offset from it.
ORIGIN = datetime(2031, 5, 17, 12, 0, 0, tzinfo=UTC)


def rfc3339(moment: datetime) -> str:
    """Format like metav1.Time: UTC, whole seconds, ``Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def whole_second(moment: datetime) -> datetime:
    """Drop the sub-second part (the API stores times to the second)."""
    return moment.replace(microsecond=0)


# --- building blocks --------------------------------------------------------------------------

kinds = st.sampled_from(KINDS)
names = st.from_regex(r"\A[a-z]([a-z0-9-]{0,20}[a-z0-9])?\Z")
uids = st.uuids().map(str)

# Offsets around an instant that matter for a ">=" rule: exactly on it, a microsecond either
# side, a second either side, then anything within days.
boundary_offsets = st.one_of(
    st.sampled_from([0.0, 1e-6, -1e-6, 0.5, -0.5, 1.0, -1.0]),
    st.integers(-3 * 86400, 3 * 86400).map(float),
    st.floats(-86400, 86400, allow_nan=False).map(lambda s: round(s, 6)),
)
# Negative deadlines are valid (the CRD allows any int64): the operator finds them past at once.
deadlines = st.one_of(
    st.sampled_from([0, 1, 60, 3600, -1, -3600, LARGEST_VALID_DEADLINE, -LARGEST_VALID_DEADLINE]),
    st.integers(-(10**6), 10**6),
)
graces = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 30.0, 3600.0]), st.integers(0, 10**5).map(float))
policies = st.builds(
    Enforcement,
    action=st.sampled_from(list(ActionMode)),
    grace=graces,
    escalate_after=st.one_of(st.sampled_from([0.0, 120.0]), st.integers(0, 10**4).map(float)),
    max_actions=st.one_of(st.none(), st.integers(0, 5)),
    terminate_pods=st.sampled_from(list(PodsMode)),
    retouch_after=st.one_of(
        st.sampled_from([5.0, 0.5, 1e-6, 0.1234567, 120.0]), st.integers(1, 10**3).map(float)
    ),
    retouch_limit=st.integers(0, 4),
)

# The CRD has no enum: any string, with the values the operator special-cases and near misses.
clean_pod_policies = st.one_of(
    st.sampled_from([None, "None", "Running", "All", "", "all", "none", "running"]),
    st.text(max_size=8),
)

CONDITION_TYPES = ("Created", "Running", "Restarting", "Succeeded", "Failed", "Suspended")


@st.composite
def conditions(draw: st.DrawFn, kind: Kind, name: str, start: datetime) -> list[dict[str, Any]]:
    """Zero to four conditions of the operator's types, in any order and state."""
    result = []
    for ctype in draw(st.lists(st.sampled_from(CONDITION_TYPES), max_size=4, unique=True)):
        status = draw(st.sampled_from(["True", "False"]))
        stamp = rfc3339(start + timedelta(seconds=draw(st.integers(0, 10**5))))
        condition: dict[str, Any] = {
            "type": ctype,
            "status": status,
            "reason": f"{kind.name}{ctype}",
            "message": f"{kind.name} {name} is {ctype.lower()}.",
            "lastUpdateTime": stamp,
            "lastTransitionTime": stamp,
        }
        if ctype == "Failed" and draw(st.booleans()):
            condition["message"] = f"Job {name} {DEADLINE_TEXT}"
        result.append(condition)
    return result


# --- valid jobs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobCase:
    """The facts one job is made of; ``raw()`` is the object the API would return.

    Attributes:
        kind: The job's kind.
        name: ``metadata.name``.
        namespace: ``metadata.namespace``.
        uid: ``metadata.uid``.
        deadline_seconds: ``spec.runPolicy.activeDeadlineSeconds``; None when absent.
        start_time: ``status.startTime`` (whole seconds); None when absent.
        suspend: ``spec.runPolicy.suspend``; None when absent.
        managed_by: ``spec.runPolicy.managedBy``; None when absent.
        deleting: Whether ``metadata.deletionTimestamp`` is set.
        exclude: The opt-out annotation's value; None when absent.
        touched_at: The sweeper's touch annotation's value; None when absent.
        exclude_key: The key the opt-out annotation is written under (either is honoured).
        touched_key: The key the touch annotation is written under (either is read).
        conditions: ``status.conditions``.
        clean_pod_policy: ``spec.runPolicy.cleanPodPolicy``; None when absent.
        extra_status: Other status fields the operator writes (replica statuses...).
    """

    kind: Kind
    name: str
    namespace: str
    uid: str
    deadline_seconds: int | None
    start_time: datetime | None
    suspend: bool | None = None
    managed_by: str | None = None
    deleting: bool = False
    exclude: str | None = None
    touched_at: str | None = None
    exclude_key: str = EXCLUDE
    touched_key: str = TOUCHED_AT
    conditions: tuple[dict[str, Any], ...] = ()
    clean_pod_policy: str | None = None
    extra_status: dict[str, Any] = field(default_factory=dict)

    # --- the facts the decision must respect (docs/operator.md, the CLI contract) ---

    @property
    def deadline(self) -> datetime | None:
        """``startTime + activeDeadlineSeconds``; None when either is missing.

        A negative deadline is due at ``startTime``: the operator's ``now - startTime >=
        activeDeadlineSeconds`` holds for any started job.
        """
        if self.start_time is None or self.deadline_seconds is None:
            return None
        return self.start_time + timedelta(seconds=max(self.deadline_seconds, 0))

    @property
    def resuming(self) -> bool:
        """``Suspended=True`` in the status while ``suspend`` is not true: the operator's next
        reconcile resets ``startTime`` to now before it checks the deadline."""
        return not self.suspend and any(
            c["type"] == "Suspended" and c["status"] == "True" for c in self.conditions
        )

    @property
    def finished(self) -> bool:
        """A ``Succeeded=True`` or ``Failed=True`` condition."""
        return any(
            c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in self.conditions
        )

    @property
    def failed_by_deadline(self) -> bool:
        """A ``Failed=True`` condition whose message is the operator's deadline message."""
        return any(
            c["type"] == "Failed"
            and c["status"] == "True"
            and DEADLINE_TEXT in c.get("message", "")
            for c in self.conditions
        )

    @property
    def excluded(self) -> bool:
        """The opt-out annotation says ``"true"``."""
        return self.exclude == "true"

    @property
    def managed_elsewhere(self) -> bool:
        """``managedBy`` names another controller, on a kind whose operator checks it."""
        return (
            self.managed_by is not None
            and self.managed_by != TRAINING_OPERATOR
            and self.kind.name not in IGNORE_MANAGED_BY
        )

    def due(self, now: datetime, grace: float) -> bool:
        """Past ``startTime + activeDeadlineSeconds + grace`` at ``now`` (the operator's ``>=``)."""
        deadline = self.deadline
        return deadline is not None and now >= deadline + timedelta(seconds=grace)

    def may_be_acted_on(self, now: datetime, grace: float) -> bool:
        """Whether a touch or a fail is allowed at all (issue 7's first property)."""
        return (
            self.due(now, grace)
            and not self.finished
            and not self.suspend
            and not self.resuming
            and not self.deleting
            and not self.excluded
            and not self.managed_elsewhere
        )

    def raw(self) -> dict[str, Any]:
        """The job object as the API server returns it."""
        metadata: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "resourceVersion": "4242",
            "creationTimestamp": rfc3339(ORIGIN - timedelta(days=30)),
        }
        annotations = {}
        if self.exclude is not None:
            annotations[self.exclude_key] = self.exclude
        if self.touched_at is not None:
            annotations[self.touched_key] = self.touched_at
        if annotations:
            metadata["annotations"] = annotations
        if self.deleting:
            metadata["deletionTimestamp"] = rfc3339(ORIGIN)
            metadata["finalizers"] = ["example.com/keep"]
        run_policy: dict[str, Any] = {}
        for key, value in (
            ("activeDeadlineSeconds", self.deadline_seconds),
            ("suspend", self.suspend),
            ("managedBy", self.managed_by),
            ("cleanPodPolicy", self.clean_pod_policy),
        ):
            if value is not None:
                run_policy[key] = value
        replica = {
            "replicas": 1,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}},
        }
        spec: dict[str, Any] = {self.kind.replica_specs: {"Worker": replica}}
        if run_policy:
            spec["runPolicy"] = run_policy
        status: dict[str, Any] = dict(self.extra_status)
        if self.conditions:
            status["conditions"] = [dict(c) for c in self.conditions]
        if self.start_time is not None:
            status["startTime"] = rfc3339(self.start_time)
        job: dict[str, Any] = {
            "apiVersion": "kubeflow.org/v1",
            "kind": self.kind.name,
            "metadata": metadata,
            "spec": spec,
        }
        if status:
            job["status"] = status
        return job


@st.composite
def job_cases(
    draw: st.DrawFn, now: datetime, grace: float = 0.0, *, overdue: bool = False
) -> JobCase:
    """A valid job whose deadline lands near ``now - grace``, with any mix of skip conditions.

    With ``overdue``, a job the sweeper must act on: started, past its deadline plus grace,
    and none of the skip conditions.
    """
    kind = draw(kinds)
    name = draw(names)
    if overdue:
        deadline_seconds: int | None = draw(deadlines)
    else:
        deadline_seconds = draw(
            st.one_of(deadlines, st.none()) if draw(st.integers(0, 9)) == 0 else deadlines
        )
    started = overdue or draw(st.integers(0, 19)) != 0
    # Whole seconds, as the API returns them; the clock's own fraction provides the sub-second
    # borderline.
    offset = abs(draw(boundary_offsets)) if overdue else draw(boundary_offsets)
    start = whole_second(
        now - timedelta(seconds=grace + max(deadline_seconds or 0, 0)) - timedelta(seconds=offset)
    )
    touched = draw(
        st.one_of(
            st.none(),
            boundary_offsets.map(lambda s: rfc3339(now - timedelta(seconds=abs(s)))),
            st.sampled_from(["yesterday", "", "2031-13-45T99:00:00Z"]),
            # RFC 3339 whose UTC instant leaves datetime's range (unparsable), and a touch at
            # the end of it (parsable: any sum with it does; issue 19).
            st.sampled_from(
                ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "9999-12-31T23:59:59Z"]
            ),
        )
    )
    extra_status: dict[str, Any] = {}
    if started and draw(st.booleans()):
        extra_status["replicaStatuses"] = {"Worker": {"active": draw(st.integers(0, 4))}}
        extra_status["lastReconcileTime"] = rfc3339(start)
    if draw(st.booleans()):
        extra_status["completionTime"] = rfc3339(
            start + timedelta(seconds=draw(st.integers(0, 10**5)))
        )
    all_conditions = tuple(draw(conditions(kind, name, start)))
    if overdue:
        return JobCase(
            kind=kind,
            name=name,
            namespace=draw(names),
            uid=draw(uids),
            deadline_seconds=deadline_seconds,
            start_time=start,
            suspend=draw(st.sampled_from([None, False])),
            managed_by=draw(st.sampled_from([None, TRAINING_OPERATOR])),
            exclude=draw(st.sampled_from([None, "false"])),
            touched_at=touched,
            exclude_key=draw(st.sampled_from([EXCLUDE, OLD_EXCLUDE])),
            touched_key=draw(st.sampled_from([TOUCHED_AT, OLD_TOUCHED_AT])),
            conditions=tuple(
                c
                for c in all_conditions
                if c["type"] not in ("Succeeded", "Failed", "Suspended") or c["status"] != "True"
            ),
            clean_pod_policy=draw(clean_pod_policies),
            extra_status=extra_status,
        )
    return JobCase(
        kind=kind,
        name=name,
        namespace=draw(names),
        uid=draw(uids),
        deadline_seconds=deadline_seconds,
        start_time=start if started else None,
        suspend=draw(st.sampled_from([None, None, False, True])),
        managed_by=draw(
            st.sampled_from([None, None, None, TRAINING_OPERATOR, "kueue.x-k8s.io/multikueue"])
        ),
        deleting=draw(st.integers(0, 7)) == 0,
        exclude=draw(st.sampled_from([None, None, None, "true", "false", "no"])),
        touched_at=touched,
        exclude_key=draw(st.sampled_from([EXCLUDE, OLD_EXCLUDE])),
        touched_key=draw(st.sampled_from([TOUCHED_AT, OLD_TOUCHED_AT])),
        conditions=all_conditions,
        clean_pod_policy=draw(clean_pod_policies),
        extra_status=extra_status,
    )


# A clock: the origin plus any offset, with or without a sub-second part (--clock local reads
# microseconds; the server's Date header has whole seconds).
clocks = st.one_of(
    st.integers(-(10**6), 10**6).map(lambda s: ORIGIN + timedelta(seconds=s)),
    st.floats(-(10**6), 10**6, allow_nan=False).map(
        lambda s: ORIGIN + timedelta(seconds=round(s, 6))
    ),
)


# --- malformed jobs -----------------------------------------------------------------------------


def _set(path: tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(job: dict[str, Any]) -> None:
        target: Any = job
        for key in path[:-1]:
            target = target.setdefault(key, {}) if isinstance(key, str) else target[key]
        target[path[-1]] = value

    return mutate


def _delete(path: tuple[str, ...]) -> Callable[[dict[str, Any]], None]:
    def mutate(job: dict[str, Any]) -> None:
        target: Any = job
        for key in path[:-1]:
            target = target[key]
        target.pop(path[-1], None)

    return mutate


# Values of the wrong JSON type for any field that expects a mapping, a string, a bool or an int.
not_a_mapping = st.one_of(
    st.text(max_size=5), st.integers(), st.lists(st.integers(), max_size=2), st.booleans()
)
not_a_string: st.SearchStrategy[Any] = st.one_of(
    st.integers(), st.booleans(), st.lists(st.text(max_size=3), max_size=2), st.just({})
)
not_a_bool: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(["true", "false", "True", "1", ""]), st.integers(0, 1), st.just([])
)
# Any integer is a deadline (one beyond the operator's time.Duration is never due): only
# another type is malformed.
bad_deadlines = st.one_of(
    st.booleans(),
    # Integral floats are left out: the API server returns 60.0 as 60 anyway.
    st.floats(allow_nan=True).filter(lambda f: not f.is_integer()),
    st.sampled_from(["60", "1h", ""]),
    st.just([60]),
)
bad_times = st.one_of(
    st.sampled_from(
        [
            "",
            "yesterday",
            "2031-05-17",
            "2031-05-17 12:00",
            "2031-13-01T00:00:00Z",
            "2031-05-17T25:00:00Z",
            "2031-05-17T12:00:00",  # no zone
            "0001-01-01T00:00:00+01:00",  # before year 1 in UTC
            "9999-12-31T23:59:59-01:00",  # after 9999 in UTC
        ]
    ),
    st.integers(),
    st.just({"seconds": 0}),
)


@dataclass(frozen=True)
class Broken:
    """A job with one field broken.

    Attributes:
        case: The valid job it was made from.
        field: The field the sweeper must name, in the product's dotted notation.
        raw: The broken object.
    """

    case: JobCase
    field: str
    raw: dict[str, Any]


@st.composite
def malformed_jobs(draw: st.DrawFn, now: datetime) -> Broken:
    """A valid job with exactly one field given a value of the wrong type or range."""
    case = draw(job_cases(now))
    # (field named in the skip, mutation)
    options: list[tuple[str, st.SearchStrategy[Callable[[dict[str, Any]], None]]]] = [
        ("metadata", not_a_mapping.map(lambda v: _set(("metadata",), v))),
        (
            "metadata.name",
            st.one_of(st.just(""), not_a_string).map(lambda v: _set(("metadata", "name"), v)),
        ),
        ("metadata.name", st.just(_delete(("metadata", "name")))),
        ("metadata.namespace", st.just(_delete(("metadata", "namespace")))),
        (
            "metadata.uid",
            st.one_of(st.just(""), not_a_string).map(lambda v: _set(("metadata", "uid"), v)),
        ),
        ("metadata.annotations", not_a_mapping.map(lambda v: _set(("metadata", "annotations"), v))),
        ("spec", not_a_mapping.map(lambda v: _set(("spec",), v))),
        ("spec", st.just(_delete(("spec",)))),
        ("spec.runPolicy", not_a_mapping.map(lambda v: _set(("spec", "runPolicy"), v))),
        (
            "spec.runPolicy.activeDeadlineSeconds",
            bad_deadlines.map(lambda v: _set(("spec", "runPolicy", "activeDeadlineSeconds"), v)),
        ),
        (
            "spec.runPolicy.suspend",
            not_a_bool.map(lambda v: _set(("spec", "runPolicy", "suspend"), v)),
        ),
        (
            "spec.runPolicy.managedBy",
            not_a_string.map(lambda v: _set(("spec", "runPolicy", "managedBy"), v)),
        ),
        ("status", not_a_mapping.map(lambda v: _set(("status",), v))),
        ("status.startTime", bad_times.map(lambda v: _set(("status", "startTime"), v))),
        (
            "status.conditions",
            not_a_mapping.filter(lambda v: not isinstance(v, list)).map(
                lambda v: _set(("status", "conditions"), v)
            ),
        ),
    ]
    if case.conditions:
        index = draw(st.integers(0, len(case.conditions) - 1))
        bad_condition = st.one_of(
            not_a_mapping,
            st.just({"status": "True"}),  # no type
            st.just({"type": "Failed"}),  # no status
            st.just({"type": "Failed", "status": True}),
        )
        options.append(
            (
                f"status.conditions[{index}]",
                bad_condition.map(functools.partial(_set, ("status", "conditions", index))),
            )
        )
    field_name, mutation = draw(st.sampled_from(options))
    raw = copy.deepcopy(case.raw())
    draw(mutation)(raw)
    return Broken(case, field_name, raw)


# Arbitrary JSON, for "never raises" on objects that are not jobs at all.
json_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=10)
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
