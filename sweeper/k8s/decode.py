"""Job views straight from the bytes of a list page, and pods read for their views alone.

The only module that imports msgspec.

A page of 500 jobs is some 2 MB of JSON, and the decision needs a dozen fields of each job:
``managedFields``, the replica specs and most of the status are the bulk of the bytes and are
never read. Decoding the page into generic dicts and lists (``json.loads``) builds all of them
first; msgspec's typed decoder reads only the fields declared below and skips the rest without
building anything. That makes decoding the cheapest part of a pass (docs/benchmarks.md).

The views must be exactly those of ``sweeper.core.jobs.parse_job``, the reference, malformed
jobs included. So the fast path accepts only what is plainly well formed: a field of an
unexpected type fails the typed decoding, a value out of range or an unusable time fails the
checks below, and in either case the whole page is decoded again the reference way
(``json.loads``, then ``parse_job`` for every item). A malformed view therefore only ever
comes from the reference; a page without one never pays for it.

A pass also reads every pod a training operator labelled, some 5 KB each, of which its views
(``sweeper.core.jobs.parse_owned``, ``sweeper.core.held.parse_pod_load``) read a few fields:
``decode_pods`` builds the same JSON objects with those fields alone (``_Pod``), 6 times
faster than ``json.loads`` at 10,000 jobs of 4 pods (docs/benchmarks.md). A field those views
come to read must be declared there, or they read it as absent.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Required, TypedDict

import msgspec

from sweeper.core.clock import parse_rfc3339
from sweeper.core.jobs import SWEEPER_MARK, Job, last_touch, opted_out, overflows, parse_job
from sweeper.core.kinds import (
    DEADLINE_MESSAGE,
    GROUP,
    PODS,
    QUEUE_NAME_LABEL,
    VERSION,
    Kind,
    Resource,
)
from sweeper.core.platform import NO_PLATFORM, PlatformView


@dataclass(frozen=True, slots=True)
class DecodedPage:
    """One list page, decoded; ``continue_token`` is ``None`` on the last page."""

    jobs: list[Job]
    continue_token: str | None
    resource_version: str | None = None


# --- the fields the decision reads, and nothing else ---------------------------------------
# A value of another JSON type than declared fails the typed decoding (then the page takes
# the reference path), so each type below is the one parse_job accepts. gc=False: these
# objects hold only strings, numbers and each other; they never form a cycle.


class _Metadata(msgspec.Struct, rename="camel", gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    # Only whether it is set matters, whatever it holds.
    deletion_timestamp: Any = None


class _RunPolicy(msgspec.Struct, rename="camel", gc=False):
    active_deadline_seconds: int | None = None
    suspend: bool | None = None
    managed_by: str | None = None
    clean_pod_policy: str | None = None


class _Replica(msgspec.Struct, gc=False):
    replicas: int | None = None


_Specs = dict[str, _Replica] | None


class _Spec(msgspec.Struct, rename="camel", gc=False):
    run_policy: _RunPolicy | None = None
    # Read for MPIJob only; a string or nothing for every kind, as the CRDs say.
    clean_pod_policy: str | None = None
    # Each v1 kind's replica specs (Kind.replica_specs), read for their replicas alone.
    tf_replica_specs: _Specs = None
    pytorch_replica_specs: _Specs = None
    xgb_replica_specs: _Specs = None
    mpi_replica_specs: _Specs = None
    paddle_replica_specs: _Specs = None
    jax_replica_specs: _Specs = None
    mx_replica_specs: _Specs = None


class _Condition(msgspec.Struct, gc=False):
    type: str
    status: str
    message: str | None = None
    last_transition_time: str | None = msgspec.field(default=None, name="lastTransitionTime")


class _Status(msgspec.Struct, rename="camel", gc=False):
    start_time: str | None = None
    conditions: list[_Condition] | None = None


class _Item(msgspec.Struct, gc=False):
    metadata: _Metadata
    spec: _Spec
    status: _Status | None = None


class _ListMeta(msgspec.Struct, gc=False):
    continue_: str | None = msgspec.field(default=None, name="continue")
    resource_version: str | None = msgspec.field(default=None, name="resourceVersion")


class _List(msgspec.Struct, gc=False):
    # Required, as in every List the API server sends: a JSON object without it is not one.
    items: list[_Item] | None
    metadata: _ListMeta | None = None


_LIST_DECODER = msgspec.json.Decoder(_List)
_NO_RUN_POLICY = _RunPolicy()
_NO_LIST_META = _ListMeta()


class NotAList(ValueError):  # noqa: N818 - named after what the body is not
    """A JSON body that is not a List (a proxy's, a truncated one): never "no jobs"."""


class _Unusual(Exception):  # noqa: N818 - internal control flow, never escapes this module
    """A job the fast path does not vouch for: the page takes the reference path."""


def decode_jobs(
    data: bytes, kind: Kind, version: str, view: PlatformView = NO_PLATFORM
) -> DecodedPage:
    """Read a page of a job list exactly as ``reference_decode_jobs`` reads it.

    Raises ``ValueError`` (``NotAList`` among them) or ``RecursionError`` as ``json.loads`` does.
    """
    if kind.group != GROUP or version != VERSION:
        # mpi-operator's and Trainer's lists are few and small: the reference reads them.
        return reference_decode_jobs(data, kind, version, view)
    try:
        document = _LIST_DECODER.decode(data)
        jobs = [_view(item, kind, version, view) for item in document.items or ()]
    except (msgspec.ValidationError, msgspec.DecodeError, _Unusual):
        return reference_decode_jobs(data, kind, version, view)
    meta = document.metadata or _NO_LIST_META
    return DecodedPage(jobs, meta.continue_ or None, meta.resource_version or None)


def reference_decode_jobs(
    data: bytes, kind: Kind, version: str, view: PlatformView = NO_PLATFORM
) -> DecodedPage:
    """Read a page of a job list the reference way: ``json.loads``, ``parse_job``, ``view``."""
    items, token, resource_version = list_parts(json.loads(data))
    return DecodedPage(
        [view(parse_job(item, kind, version)) for item in items], token, resource_version
    )


def list_parts(document: object) -> tuple[list[Any], str | None, str | None]:
    """A List's items, continue token and resourceVersion; ``NotAList`` if it is none."""
    if not isinstance(document, dict):
        raise NotAList(f"a JSON {type(document).__name__}, not a List")
    if "items" not in document:
        raise NotAList("no 'items': not a List")
    items = document["items"]
    if items is not None and not isinstance(items, list):
        raise NotAList("'items' is not a list")
    metadata = document.get("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict) or not all(
        isinstance(metadata.get(key), str | None) for key in ("continue", "resourceVersion")
    ):
        raise NotAList("'metadata' is not a ListMeta")
    return items or [], metadata.get("continue") or None, metadata.get("resourceVersion") or None


def _view(item: _Item, kind: Kind, version: str, view: PlatformView) -> Job:
    """The view of a well-formed job, field for field as parse_job and ``view`` build it."""
    meta = item.metadata
    if not meta.name or not meta.namespace or not meta.uid:
        raise _Unusual
    annotations = meta.annotations or {}
    spec = item.spec
    run_policy = spec.run_policy or _NO_RUN_POLICY
    deadline = run_policy.active_deadline_seconds
    if overflows(deadline):
        raise _Unusual  # rare: the reference builds its view
    start_time, finished, finished_at, by_deadline, by_sweeper, suspended_condition = _status(
        item.status, deadline
    )
    clean_pod_policy = run_policy.clean_pod_policy
    if clean_pod_policy is None and kind.legacy_clean_pod_policy:
        clean_pod_policy = spec.clean_pod_policy
    return Job(
        kind=kind,
        version=version,
        # The namespace interned, the name and uid not, as parse_job does (and says why).
        namespace=sys.intern(meta.namespace),
        name=meta.name,
        uid=meta.uid,
        start_time=start_time,
        suspended=bool(run_policy.suspend),
        suspended_condition=suspended_condition,
        managed_by=_shared(run_policy.managed_by),
        deleting=meta.deletion_timestamp is not None,
        touched_at=last_touch(annotations),
        finished=finished,
        failed_by_deadline=by_deadline,
        failed_by_sweeper=by_sweeper,
        clean_pod_policy=_shared(clean_pod_policy),
        finished_at=finished_at,
        queued=meta.labels is not None and QUEUE_NAME_LABEL in meta.labels,
        replicas=_replicas(spec, kind),
        **view.terms(meta.namespace, kind.name, deadline, opted_out(annotations)),
    )


def _replicas(spec: _Spec, kind: Kind) -> int | None:
    # As parse_job sums them (a v1 kind's launcher is its own pod).
    specs: _Specs = getattr(spec, kind.replica_specs.replace("ReplicaSpecs", "_replica_specs"))
    if specs is None:
        return None
    counts = [replica.replicas for replica in specs.values()]
    if any(count is None or count < 0 for count in counts):
        return None
    return sum(count or 0 for count in counts)


def _shared(value: str | None) -> str | None:
    """One string for every job that holds the same value (a few values among thousands)."""
    return None if value is None else sys.intern(value)


def _status(
    status: _Status | None, deadline: int | None
) -> tuple[datetime | None, str | None, datetime | None, bool, bool, bool]:
    """Start time, finished how and when, failed by the deadline, by the sweeper, suspended."""
    if status is None:
        return None, None, None, False, False, False
    start_time = None
    if status.start_time is not None:
        start_time = parse_rfc3339(status.start_time)
        if start_time is None:
            raise _Unusual
        if deadline is not None:
            try:
                start_time + timedelta(seconds=max(deadline, 0))
            except OverflowError:
                raise _Unusual from None  # a deadline after the year 9999
    finished: str | None = None
    finished_at: datetime | None = None
    by_deadline = by_sweeper = False
    suspended_condition = False
    for condition in status.conditions or ():
        ctype, cstatus = condition.type, condition.status
        if ctype == "Suspended" and cstatus == "True":
            suspended_condition = True
        if ctype in ("Succeeded", "Failed") and cstatus == "True":
            # Failed wins: it is the one that can carry the deadline.
            if finished != "Failed":
                finished = "Failed" if ctype == "Failed" else "Succeeded"  # not the page's copy
                finished_at = parse_rfc3339(condition.last_transition_time)
            elif ctype == "Failed":
                finished_at = parse_rfc3339(condition.last_transition_time)
            message = condition.message
            if ctype == "Failed" and message is not None and DEADLINE_MESSAGE in message:
                by_deadline = True
                by_sweeper = SWEEPER_MARK in message
    return start_time, finished, finished_at, by_deadline, by_sweeper, suspended_condition


# --- pods: the fields their views read, as JSON objects --------------------------------------
# TypedDicts decode to plain dicts holding the declared keys alone; a value of another shape
# than a declared object or list fails the typed decoding, and the body is read by json.loads.


class _Container(TypedDict, total=False):
    resources: Any


class _PodSpec(TypedDict, total=False):
    nodeName: Any
    containers: list[_Container]
    initContainers: list[_Container]


class _PodMetadata(TypedDict, total=False):
    name: Any
    namespace: Any
    uid: Any
    labels: Any  # a TrainJob's pods are found by their JobSet's label
    creationTimestamp: Any
    ownerReferences: Any
    deletionTimestamp: Any


class _PodStatus(TypedDict, total=False):
    phase: Any
    conditions: Any


class _Pod(TypedDict, total=False):
    metadata: _PodMetadata
    spec: _PodSpec
    status: _PodStatus


class _PodList(TypedDict, total=False):
    items: Required[list[_Pod] | None]
    metadata: Any


_POD_LIST_DECODER = msgspec.json.Decoder(_PodList)


def decode_pods(data: bytes) -> Any:
    """A pod list's body as ``json.loads`` reads it, each pod with what its views read alone.

    Raises:
        ValueError: The body is not JSON at all (as ``json.loads`` raises it).
        RecursionError: The body nests deeper than ``json.loads`` can read.
    """
    try:
        return _POD_LIST_DECODER.decode(data)
    except msgspec.MsgspecError:
        return json.loads(data)


def loads(resource: Resource) -> Any:
    """How a list of ``resource`` is read: ``decode_pods`` for pods, else ``json.loads``."""
    return decode_pods if resource == PODS else json.loads
