"""An in-memory implementation of the sweeper's own ``Cluster`` interface, for unit tests.

It fakes the project's boundary (sweeper.k8s.cluster.Cluster), never the Kubernetes client. It keeps
objects as decoded JSON, applies merge patches the way the API server does for the fields the
sweeper writes, checks ``resourceVersion`` and delete preconditions, and records every request.
Faults are injected per (method, object name) as exceptions to raise, in order.

It also speaks the watch mode's boundary (``WatchCluster``), as the API server does: every
change a test makes with :meth:`FakeCluster.emit` (and every write the sweeper makes to a job)
takes the next cluster-wide resourceVersion and goes to the open watch streams; a watch opened
from a resourceVersion replays the changes after it, or fails with 410 Gone once
:meth:`FakeCluster.compact` forgot them; the test can send bookmarks, close, stall or break the
open streams. An idle stream blocks (never a busy loop) until one of those, or until
:meth:`FakeCluster.close_streams`. Leases are stored with resourceVersion preconditions: a
create of an existing Lease and an update with a stale resourceVersion are 409 Conflict.
Nothing here reads a clock or sleeps: the tests drive time through the watcher's injected one.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sweeper.core.errors import ApiError, Conflict, Gone, NotFound, RequestRef, WatchStalled
from sweeper.core.families import KINDS, trainer
from sweeper.core.jobs import parse_job
from sweeper.core.kinds import BATCH_JOBS, DEPLOYMENTS, EVENTS, NAMESPACES, PODS, SERVICES, Resource
from sweeper.core.model import JSON
from sweeper.core.platform import NO_PLATFORM, PlatformView
from sweeper.k8s.cluster import Answer, Discovery, JobPage, Page, ServedKind, WatchEvent

WRITE_VERBS = (
    "patch",
    "patch-status",
    "delete-pod",
    "delete-service",
    "delete-jobset",
    "patch-batch-job",
    "create-event",
)
JOB_WRITES = ("patch", "patch-status")
LEASE_RESOURCE = "leases.coordination.k8s.io"
JOBSETS = trainer.LEFTOVERS.resource


@dataclass
class Request:
    method: str
    namespace: str | None
    name: str | None
    dry_run: bool = False
    body: Any = None


@dataclass
class FakeCluster:
    served: tuple[ServedKind, ...] = tuple(ServedKind(k, k.versions[0]) for k in KINDS)
    date: datetime | None = None
    jobs: dict[tuple[str, str, str], JSON] = field(default_factory=dict)
    pods: dict[tuple[str, str], JSON] = field(default_factory=dict)
    services: dict[tuple[str, str], JSON] = field(default_factory=dict)
    jobsets: dict[tuple[str, str], JSON] = field(default_factory=dict)
    batch_jobs: dict[tuple[str, str], JSON] = field(default_factory=dict)
    namespaces: dict[str, JSON] = field(default_factory=dict)
    deployments: dict[tuple[str, str], JSON] = field(default_factory=dict)
    events: list[JSON] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    faults: dict[tuple[str, str | None], list[BaseException]] = field(default_factory=dict)
    before: Callable[[Request], None] | None = None
    closed: int = 0
    endpoint: str = 'server https://fake.invalid, context "fake"'
    # The watch boundary. ``watch_events``, when set, is a fixed script every watch_jobs call
    # replays before it ends (a stream the server closed; ``[]`` ends each at once); otherwise
    # streams follow the cluster's changes (see the module docstring).
    home_namespace: str = "default"
    watch_events: list[WatchEvent] | None = None
    revision: int = 100  # the cluster-wide resourceVersion: the last change's
    history: list[tuple[int, WatchEvent, ServedKind]] = field(default_factory=list)
    compacted: int = 0  # a watch from before this resourceVersion is 410 Gone
    leases: dict[tuple[str, str], JSON] = field(default_factory=dict)
    _open: list[_LiveStream] = field(default_factory=list, init=False, repr=False)
    _changed: threading.Condition = field(
        default_factory=threading.Condition, init=False, repr=False
    )

    def close(self) -> None:
        self.closed += 1

    # --- set-up ------------------------------------------------------------------------------

    def add_job(self, raw: JSON) -> JSON:
        kinds = (*(s.kind for s in self.served), *KINDS)
        kind = next(k for k in kinds if k.name == raw["kind"])
        meta = raw["metadata"]
        self.jobs[(kind.plural, meta["namespace"], meta["name"])] = copy.deepcopy(raw)
        return raw

    def add_pod(self, raw: JSON) -> None:
        meta = raw["metadata"]
        self.pods[(meta["namespace"], meta["name"])] = copy.deepcopy(raw)

    def add_service(self, raw: JSON) -> None:
        meta = raw["metadata"]
        self.services[(meta["namespace"], meta["name"])] = copy.deepcopy(raw)

    def fail(self, method: str, name: str | None, *errors: BaseException) -> None:
        self.faults.setdefault((method, name), []).extend(errors)

    def job(self, plural: str, namespace: str, name: str) -> JSON:
        return self.jobs[(plural, namespace, name)]

    @property
    def writes(self) -> list[Request]:
        return [r for r in self.requests if r.method in WRITE_VERBS]

    def methods(self) -> list[str]:
        return [r.method for r in self.requests]

    # --- the Cluster interface ------------------------------------------------------------

    def _record(
        self,
        method: str,
        namespace: str | None = None,
        name: str | None = None,
        *,
        dry_run: bool = False,
        body: Any = None,
    ) -> None:
        request = Request(method, namespace, name, dry_run, copy.deepcopy(body))
        self.requests.append(request)
        if self.before is not None:
            self.before(request)
        for key in ((method, name), (method, None)):
            queue = self.faults.get(key)
            if queue:
                raise queue.pop(0)

    def discover(self) -> Discovery:
        self._record("discover")
        return Discovery(self.served, self.date)

    def list_job_views(
        self,
        served: ServedKind,
        namespace: str | None,
        selector: str | None,
        page_size: int,
        view: PlatformView = NO_PLATFORM,
    ) -> Iterator[JobPage]:
        self._served_or_404("list", served, namespace)
        matching = [
            copy.deepcopy(raw)
            for (plural, ns, _), raw in sorted(self.jobs.items())
            if plural == served.kind.plural and namespace in (None, ns) and _matches(raw, selector)
        ]
        first = True
        while first or matching:
            first = False
            self._record("list", namespace, served.kind.plural)
            page, matching = matching[:page_size], matching[page_size:]
            jobs = [view(parse_job(item, served.kind, served.version)) for item in page]
            # The list's resourceVersion (where a watch starts) comes with the last page.
            yield JobPage(jobs, self.date, "" if matching else str(self.revision))

    # --- the generic verbs: each resource's store, and the name a request is recorded by ---

    def _job_kind(self, resource: Resource) -> ServedKind | None:
        for kind in (*(s.kind for s in self.served), *KINDS):
            if (kind.group, kind.plural) == (resource.group, resource.plural):
                return ServedKind(kind, resource.version)
        return None

    def _store(self, resource: Resource) -> tuple[dict[Any, JSON], str]:
        # The store of a resource that is not a job kind, and its singular (request names).
        stores: dict[Resource, tuple[dict[Any, JSON], str]] = {
            PODS: (self.pods, "pod"),
            SERVICES: (self.services, "service"),
            JOBSETS: (self.jobsets, "jobset"),
            BATCH_JOBS: (self.batch_jobs, "batch-job"),
            DEPLOYMENTS: (self.deployments, "deployment"),
            NAMESPACES: (self.namespaces, "namespace"),
        }
        return stores[resource]

    def get(self, resource: Resource, namespace: str | None, name: str) -> JSON:
        served = self._job_kind(resource)
        if served is not None:
            self._record("get", namespace, name)
            raw = self.jobs.get((served.kind.plural, namespace or "", name))
            if raw is None:
                raise NotFound(RequestRef("get", served.kind.resource, namespace, name), 404)
            return copy.deepcopy(raw)
        store, singular = self._store(resource)
        self._record(f"get-{singular}", namespace, name)
        key: Any = name if not resource.namespaced else (namespace, name)
        found = store.get(key)
        if found is None:
            ref = RequestRef(
                "get", resource.name, namespace, name, cluster_scoped=not resource.namespaced
            )
            raise NotFound(ref, 404)
        return copy.deepcopy(found)

    def list_pages(
        self, resource: Resource, namespace: str | None, selector: str | None = None
    ) -> Iterator[Page]:
        store, _ = self._store(resource)
        self._record(f"list-{resource.plural}", namespace, selector)
        if not resource.namespaced:
            yield Page(copy.deepcopy(list(store.values())), self.date)
            return
        yield Page(
            [
                copy.deepcopy(o)
                for (ns, _), o in sorted(store.items())
                if namespace in (None, ns) and _matches(o, selector or "")
            ],
            self.date,
        )

    def patch(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        patch: JSON,
        *,
        subresource: str = "",
        dry_run: bool,
    ) -> None:
        served = self._job_kind(resource)
        if served is None:
            self._patch_batch_job(resource, namespace, name, patch, dry_run=dry_run)
        elif subresource == "status":
            self._patch_status(served, namespace, name, patch, dry_run=dry_run)
        else:
            self._patch_job(served, namespace, name, patch, dry_run=dry_run)

    def _patch_job(
        self, served: ServedKind, namespace: str, name: str, patch: JSON, *, dry_run: bool
    ) -> None:
        self._record("patch", namespace, name, dry_run=dry_run, body=patch)
        raw = self._existing(served, namespace, name, "patch")
        expected = patch["metadata"].get("resourceVersion")
        if expected is not None and expected != raw["metadata"]["resourceVersion"]:
            raise Conflict(RequestRef("patch", served.kind.resource, namespace, name), 409)
        if dry_run:
            return
        annotations = raw["metadata"].setdefault("annotations", {})
        for key, value in patch["metadata"].get("annotations", {}).items():
            if value is None:  # a merge patch's null removes the key (RFC 7386)
                annotations.pop(key, None)
            else:
                annotations[key] = value
        raw.setdefault("spec", {}).update(copy.deepcopy(patch.get("spec", {})))
        self._bump(served, raw)

    def _patch_status(
        self, served: ServedKind, namespace: str, name: str, patch: JSON, *, dry_run: bool
    ) -> None:
        self._record("patch-status", namespace, name, dry_run=dry_run, body=patch)
        raw = self._existing(served, namespace, name, "patch")
        if patch["metadata"]["resourceVersion"] != raw["metadata"]["resourceVersion"]:
            status = RequestRef("patch", f"{served.kind.resource}/status", namespace, name)
            raise Conflict(status, 409)
        if dry_run:
            return
        raw.setdefault("status", {}).update(copy.deepcopy(patch["status"]))
        self._bump(served, raw)

    def _patch_batch_job(
        self, resource: Resource, namespace: str, name: str, patch: JSON, *, dry_run: bool
    ) -> None:
        store, singular = self._store(resource)
        self._record(f"patch-{singular}", namespace, name, dry_run=dry_run, body=patch)
        raw = store.get((namespace, name))
        ref = RequestRef("patch", resource.name, namespace, name)
        if raw is None:
            raise NotFound(ref, 404)
        if patch["metadata"]["resourceVersion"] != raw["metadata"].get("resourceVersion"):
            raise Conflict(ref, 409)
        if not dry_run:
            raw["spec"].update(copy.deepcopy(patch["spec"]))

    def delete(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        uid: str,
        *,
        propagation: str = "",
        dry_run: bool,
    ) -> None:
        store, singular = self._store(resource)
        self._record(
            f"delete-{singular}", namespace, name, dry_run=dry_run, body=propagation or None
        )
        self._delete(store, namespace, name, uid, dry_run=dry_run)

    def add_namespace(self, name: str, labels: dict[str, str]) -> None:
        self.namespaces[name] = {"metadata": {"name": name, "labels": dict(labels)}}

    def create(self, resource: Resource, namespace: str, event: JSON, *, dry_run: bool) -> None:
        assert resource == EVENTS  # the one object the sweeper creates through Cluster
        self._record(
            "create-event", namespace, event["involvedObject"]["name"], dry_run=dry_run, body=event
        )
        name = event["metadata"].get("name")
        if name is not None and any(
            e["metadata"].get("name") == name and e["metadata"]["namespace"] == namespace
            for e in self.events
        ):  # 409 AlreadyExists, dry run or not
            raise Conflict(RequestRef("create", "events", namespace, name), 409)
        if not dry_run:
            self.events.append(copy.deepcopy(event))

    @contextlib.contextmanager
    def watch_jobs(
        self,
        served: ServedKind,
        namespace: str | None,
        selector: str | None,
        resource_version: str,
        *,
        timeout_s: int,
        read_timeout_s: float,
    ) -> Iterator[_Stream | _LiveStream]:
        self._record("watch", namespace, served.kind.plural, body=resource_version)
        self._served_or_404("watch", served, namespace)
        if self.watch_events is not None:
            yield _Stream(self.date, [copy.deepcopy(event) for event in self.watch_events])
            return
        if not resource_version.isdigit():
            # The sweeper always watches from what a list or an event said.
            ref = RequestRef("watch", served.kind.resource, namespace, None)
            raise ApiError(ref, 400, f"invalid resourceVersion {resource_version!r}")
        since = int(resource_version)

        def wanted(kind: ServedKind, event: WatchEvent) -> bool:
            meta = event.object["metadata"]
            return (
                kind.kind == served.kind
                and namespace in (None, meta["namespace"])
                and _matches(event.object, selector)
            )

        with self._changed:
            stream = _LiveStream(self.date, self._changed, wanted)
            if since < self.compacted:
                ref = RequestRef("watch", served.kind.resource, namespace, None)
                stream.items.append(Gone(ref, 410, "too old resource version"))
            else:
                for revision, event, kind in self.history:
                    if revision > since and wanted(kind, event):
                        stream.items.append(copy.deepcopy(event))
            self._open.append(stream)
        try:
            yield stream
        finally:
            with self._changed:
                self._open.remove(stream)

    def get_lease(self, namespace: str, name: str) -> Answer:
        self._record("get-lease", namespace, name)
        with self._changed:
            lease = self.leases.get((namespace, name))
            if lease is None:
                raise NotFound(RequestRef("get", LEASE_RESOURCE, namespace, name), 404)
            return Answer(copy.deepcopy(lease), self.date)

    def create_lease(self, namespace: str, body: JSON) -> Answer:
        self._record("create-lease", namespace, body["metadata"]["name"], body=body)
        name = body["metadata"]["name"]
        with self._changed:
            if (namespace, name) in self.leases:  # 409 AlreadyExists
                raise Conflict(RequestRef("create", LEASE_RESOURCE, namespace, name), 409)
            if "resourceVersion" in body["metadata"]:  # the server refuses one on create
                ref = RequestRef("create", LEASE_RESOURCE, namespace, name)
                raise ApiError(
                    ref, 400, "resourceVersion should not be set on objects to be created"
                )
            _check_lease_integers("create", namespace, name, body)
            return self._store_lease(namespace, name, body)

    def update_lease(self, namespace: str, name: str, body: JSON) -> Answer:
        self._record("update-lease", namespace, name, body=body)
        with self._changed:
            stored = self.leases.get((namespace, name))
            if stored is None:
                raise NotFound(RequestRef("update", LEASE_RESOURCE, namespace, name), 404)
            if body["metadata"].get("resourceVersion") != stored["metadata"]["resourceVersion"]:
                raise Conflict(RequestRef("update", LEASE_RESOURCE, namespace, name), 409)
            _check_lease_integers("update", namespace, name, body)
            return self._store_lease(namespace, name, body)

    # --- the watch boundary, as the test drives it ------------------------------------------

    def emit(self, kind: str, raw: JSON) -> JSON:
        """Change a job as its owner or the operator would: ADDED, MODIFIED or DELETED.

        The stored job (deleted for DELETED) takes the next resourceVersion, and the event
        goes to every open stream that watches its kind, namespace and labels.
        """
        served = next(s for s in self.served if s.kind.name == raw["kind"])
        key = (served.kind.plural, raw["metadata"]["namespace"], raw["metadata"]["name"])
        with self._changed:
            self.revision += 1
            raw = copy.deepcopy(raw)
            raw["metadata"]["resourceVersion"] = str(self.revision)
            if kind == "DELETED":
                self.jobs.pop(key, None)
            else:
                self.jobs[key] = copy.deepcopy(raw)
            self._publish(served, WatchEvent(kind, raw))
        return raw

    def miss(self, kind: str, raw: JSON) -> JSON:
        """Change a job while no open stream hears of it (a watch that was down, say).

        Until :meth:`compact`, a watch opened from before it still replays it.
        """
        with self._changed:
            streams, self._open = self._open, []
            try:
                return self.emit(kind, raw)
            finally:
                self._open = streams

    def expire_streams(self) -> None:
        """Compact, and end every open stream with 410 Gone (it fell behind the window)."""
        self.compact()
        self._to_streams(Gone(RequestRef("watch", "jobs", None, None), 410, "too old"))

    def bookmark(self) -> None:
        """Send every open stream a BOOKMARK at the current resourceVersion."""
        self._to_streams(
            WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": str(self.revision)}})
        )

    def send(self, event: WatchEvent) -> None:
        """Send every open stream an event as is (a hostile or malformed one, say)."""
        self._to_streams(event)

    def compact(self) -> None:
        """Forget the changes so far (etcd's compaction): a watch from before now is Gone."""
        with self._changed:
            self.compacted = self.revision
            self.history.clear()

    def close_streams(self) -> None:
        """End every open stream, as the server does at its timeout or a restart."""
        self._to_streams(_CLOSE)

    def stall_streams(self) -> None:
        """Make every open stream time out on its read (nothing came, not even a bookmark)."""
        ref = RequestRef("watch", "jobs", None, None)
        self._to_streams(WatchStalled(ref, None, "no event within the read timeout"))

    def break_streams(self, error: BaseException) -> None:
        """Make every open stream raise (an ERROR event, a reset connection)."""
        self._to_streams(error)

    def open_streams(self) -> int:
        with self._changed:
            return len(self._open)

    def set_lease(self, namespace: str, name: str, spec: JSON) -> JSON:
        """Write a Lease as another replica would (a new resourceVersion)."""
        with self._changed:
            body = {"metadata": {"name": name, "namespace": namespace}, "spec": spec}
            return self._store_lease(namespace, name, body).object

    # --- internals -----------------------------------------------------------------------

    def _store_lease(self, namespace: str, name: str, body: JSON) -> Answer:
        self.revision += 1
        lease = copy.deepcopy(body)
        lease.setdefault("apiVersion", "coordination.k8s.io/v1")
        lease.setdefault("kind", "Lease")
        lease["metadata"]["resourceVersion"] = str(self.revision)
        self.leases[(namespace, name)] = lease
        return Answer(copy.deepcopy(lease), self.date)

    def _bump(self, served: ServedKind, raw: JSON) -> None:
        # A write is a change like any other: the next resourceVersion, and a MODIFIED event.
        with self._changed:
            self.revision += 1
            raw["metadata"]["resourceVersion"] = str(self.revision)
            self._publish(served, WatchEvent("MODIFIED", copy.deepcopy(raw)))

    def _publish(self, served: ServedKind, event: WatchEvent) -> None:
        self.history.append((self.revision, event, served))
        for stream in self._open:
            if stream.wanted(served, event):
                stream.items.append(copy.deepcopy(event))
        self._changed.notify_all()

    def _to_streams(self, item: WatchEvent | BaseException | object) -> None:
        with self._changed:
            for stream in self._open:
                stream.items.append(item)
            self._changed.notify_all()

    def _served_or_404(self, verb: str, served: ServedKind, namespace: str | None) -> None:
        # A kind whose CRD is gone (or not yet installed) answers 404, as kube-apiserver does.
        if served.kind not in {s.kind for s in self.served}:
            raise NotFound(RequestRef(verb, served.kind.resource, namespace, None), 404)

    def _existing(self, served: ServedKind, namespace: str, name: str, verb: str) -> JSON:
        raw = self.jobs.get((served.kind.plural, namespace, name))
        if raw is None:
            raise NotFound(RequestRef(verb, served.kind.resource, namespace, name), 404)
        return raw

    @staticmethod
    def _delete(
        store: dict[tuple[str, str], JSON],
        namespace: str,
        name: str,
        uid: str,
        *,
        dry_run: bool,
    ) -> None:
        obj = store.get((namespace, name))
        if obj is None:
            raise NotFound(RequestRef("delete", "pods", namespace, name), 404)
        if obj["metadata"]["uid"] != uid:
            raise Conflict(RequestRef("delete", "pods", namespace, name), 409)
        if not dry_run:
            del store[(namespace, name)]


@dataclass
class _Stream:
    server_date: datetime | None
    events: list[WatchEvent]

    def __iter__(self) -> Iterator[WatchEvent]:
        return iter(self.events)


_CLOSE = object()


class _LiveStream:
    """An open watch: the events queued for it, in order, then whatever the test sends."""

    def __init__(
        self,
        server_date: datetime | None,
        changed: threading.Condition,
        wanted: Callable[[ServedKind, WatchEvent], bool],
    ) -> None:
        self.server_date = server_date
        self.items: deque[WatchEvent | BaseException | object] = deque()
        self.wanted = wanted
        self._changed = changed

    def __iter__(self) -> Iterator[WatchEvent]:
        while True:
            with self._changed:
                while not self.items:
                    self._changed.wait()
                item = self.items.popleft()
            if item is _CLOSE:
                return
            if isinstance(item, BaseException):
                raise item
            assert isinstance(item, WatchEvent)
            yield item


def _check_lease_integers(verb: str, namespace: str, name: str, body: JSON) -> None:
    # The Lease's integers are int32: kube-apiserver cannot decode a larger one (400).
    for field_name in ("leaseDurationSeconds", "leaseTransitions"):
        value = body["spec"].get(field_name)
        if isinstance(value, int) and not -(2**31) <= value < 2**31:
            ref = RequestRef(verb, LEASE_RESOURCE, namespace, name)
            raise ApiError(ref, 400, f"spec.{field_name}: cannot unmarshal into an int32")


def _matches(raw: JSON, selector: str | None) -> bool:
    if not selector:
        return True
    labels = raw["metadata"].get("labels") or {}
    for requirement in selector.split(","):
        key, equals, value = requirement.partition("=")
        if (labels.get(key) != value) if equals else (key not in labels):
            return False
    return True


@dataclass
class FakeWatchCluster(FakeCluster):
    """A FakeCluster typed as a WatchCluster, for unit tests of the watch mode's timers and
    resync, which are driven directly: no stream and no Lease is ever opened."""

    def get_lease(self, namespace: str, name: str) -> Answer:
        raise AssertionError("the Lease is the e2e tests' business")

    def create_lease(self, namespace: str, body: JSON) -> Answer:
        raise AssertionError("the Lease is the e2e tests' business")

    def update_lease(self, namespace: str, name: str, body: JSON) -> Answer:
        raise AssertionError("the Lease is the e2e tests' business")
