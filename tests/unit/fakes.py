"""An in-memory implementation of the sweeper's own ``Cluster`` interface, for unit tests.

It fakes the project's boundary (sweeper.k8s.cluster.Cluster), never the Kubernetes client. It keeps
objects as decoded JSON, applies merge patches the way the API server does for the fields the
sweeper writes, checks ``resourceVersion`` and delete preconditions, and records every request.
Faults are injected per (method, object name) as exceptions to raise, in order.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sweeper.core.errors import Conflict, NotFound, RequestRef
from sweeper.core.jobs import parse_job
from sweeper.core.kinds import KINDS, VERSION
from sweeper.core.model import JSON
from sweeper.k8s.cluster import Answer, Discovery, JobPage, Page, ServedKind, WatchEvent

WRITE_VERBS = ("patch", "patch-status", "delete-pod", "delete-service", "create-event")


@dataclass
class Request:
    method: str
    namespace: str | None
    name: str | None
    dry_run: bool = False
    body: Any = None


@dataclass
class FakeCluster:
    served: tuple[ServedKind, ...] = tuple(ServedKind(k, VERSION) for k in KINDS)
    date: datetime | None = None
    jobs: dict[tuple[str, str, str], JSON] = field(default_factory=dict)
    pods: dict[tuple[str, str], JSON] = field(default_factory=dict)
    services: dict[tuple[str, str], JSON] = field(default_factory=dict)
    events: list[JSON] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    faults: dict[tuple[str, str | None], list[BaseException]] = field(default_factory=dict)
    before: Callable[[Request], None] | None = None
    closed: int = 0
    endpoint: str = 'server https://fake.invalid, context "fake"'
    # The watch boundary, as far as the unit tests drive it: each watch_jobs call replays
    # these events (scripted by the test) and ends, as a stream the server closed does.
    home_namespace: str = "default"
    watch_events: list[WatchEvent] = field(default_factory=list)

    def close(self) -> None:
        self.closed += 1

    # --- set-up ------------------------------------------------------------------------------

    def add_job(self, raw: JSON) -> JSON:
        kind = next(k for k in KINDS if k.name == raw["kind"])
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
        self, served: ServedKind, namespace: str | None, selector: str | None, page_size: int
    ) -> Iterator[JobPage]:
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
            jobs = [parse_job(item, served.kind, served.version) for item in page]
            yield JobPage(jobs, self.date)

    def get_job(self, served: ServedKind, namespace: str, name: str) -> JSON:
        self._record("get", namespace, name)
        raw = self.jobs.get((served.kind.plural, namespace, name))
        if raw is None:
            raise NotFound(RequestRef("get", served.kind.resource, namespace, name), 404)
        return copy.deepcopy(raw)

    def patch_job(
        self, served: ServedKind, namespace: str, name: str, patch: JSON, *, dry_run: bool
    ) -> None:
        self._record("patch", namespace, name, dry_run=dry_run, body=patch)
        raw = self._existing(served, namespace, name, "patch")
        if dry_run:
            return
        annotations = raw["metadata"].setdefault("annotations", {})
        for key, value in patch["metadata"]["annotations"].items():
            if value is None:  # a merge patch's null removes the key (RFC 7386)
                annotations.pop(key, None)
            else:
                annotations[key] = value
        _bump(raw)

    def patch_job_status(
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
        _bump(raw)

    def list_pods(self, namespace: str, selector: str) -> list[JSON]:
        self._record("list-pods", namespace, selector)
        return [
            copy.deepcopy(p)
            for (ns, _), p in sorted(self.pods.items())
            if ns == namespace and _matches(p, selector)
        ]

    def list_pod_pages(self, namespace: str | None, selector: str) -> Iterator[Page]:
        self._record("list-pod-pages", namespace, selector)
        yield Page(
            [
                copy.deepcopy(p)
                for (ns, _), p in sorted(self.pods.items())
                if namespace in (None, ns) and _matches(p, selector)
            ],
            self.date,
        )

    def list_services(self, namespace: str, selector: str) -> list[JSON]:
        self._record("list-services", namespace, selector)
        return [
            copy.deepcopy(s)
            for (ns, _), s in sorted(self.services.items())
            if ns == namespace and _matches(s, selector)
        ]

    def delete_pod(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> None:
        self._record("delete-pod", namespace, name, dry_run=dry_run)
        self._delete(self.pods, namespace, name, uid, dry_run=dry_run)

    def delete_service(self, namespace: str, name: str, uid: str, *, dry_run: bool) -> None:
        self._record("delete-service", namespace, name, dry_run=dry_run)
        self._delete(self.services, namespace, name, uid, dry_run=dry_run)

    def create_event(self, namespace: str, event: JSON, *, dry_run: bool) -> None:
        self._record(
            "create-event", namespace, event["involvedObject"]["name"], dry_run=dry_run, body=event
        )
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
    ) -> Iterator[_Stream]:
        self._record("watch", namespace, served.kind.plural, body=resource_version)
        yield _Stream(self.date, [copy.deepcopy(event) for event in self.watch_events])

    # --- internals -----------------------------------------------------------------------

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


def _bump(raw: JSON) -> None:
    meta = raw["metadata"]
    meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)


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
