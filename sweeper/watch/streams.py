"""The watch's streams: per served kind and namespace, a thread lists, then watches.

Each object becomes the instant its job falls due (``due_at``), queued for the main loop, which
owns the timers; never the object itself. How a stream resumes, backs off and lists again is
client-go's reflector's (docs/watch.md).
"""

from __future__ import annotations

import logging
import random
import threading
from datetime import datetime
from http import HTTPStatus

from sweeper.core.decide import due_at
from sweeper.core.errors import ApiError, Gone, SweeperError, WatchStalled
from sweeper.core.jobs import Job, parse_job
from sweeper.core.model import JSON, Enforcement
from sweeper.core.platform import PlatformView
from sweeper.core.scope import RunScope
from sweeper.core.warn import warning_of
from sweeper.k8s.cluster import ServedKind
from sweeper.k8s.transport import RetryPolicy
from sweeper.watch.context import WatchContext
from sweeper.watch.inbox import Event, JobKey, Listed, Pending, Scope

log = logging.getLogger(__name__)

# A watch request's server-side timeout, randomised as client-go's reflector does.
WATCH_TIMEOUT_RANGE_S = (300, 600)
# The transport's backoff (equal jitter), capped at 1 s after no answer at all (the API server
# down or restarting): trying costs it nothing, and every second of backoff after it is back
# is a second of lateness for each job that came due meanwhile.
_BACKOFF = RetryPolicy(backoff_base_s=0.5, backoff_cap_s=30.0)
_BACKOFF_UNREACHABLE = RetryPolicy(backoff_base_s=0.5, backoff_cap_s=1.0)
# A stream that ends sooner than this with no event (bookmarks included) is a failure, as
# client-go's reflector counts a "very short watch": the server's own close comes after
# minutes (the watch timeout), so one this short was cut by something in between.
SHORT_WATCH_S = 1.0
_FAILURES_COUNTED = 17  # either cap is reached long before 0.5 s * 2**16; no float overflow


class Streams:
    """The stream threads' work: ``run`` is one scope's thread; the run's stop ends them all."""

    def __init__(self, ctx: WatchContext) -> None:
        self.ctx = ctx
        # Whose jobs are kept: the watch API cannot leave a namespace out, so the jobs of an
        # --exclude-namespace are dropped here: never tracked, so never acted on.
        self.covered: RunScope[ServedKind] = RunScope.of(
            (), namespaces=ctx.config.namespaces, excluded=ctx.config.exclude_namespaces
        )
        self._lock = threading.Lock()
        self._threads: dict[Scope, threading.Thread] = {}
        self._retired: set[Scope] = set()  # their threads end at their next turn
        self._kinds: list[str] | None = None  # the served kinds watched, as last logged

    def watch(self, scopes: list[Scope]) -> None:
        """Run a stream for each scope, and end those of scopes no longer given (not served)."""
        wanted = set(scopes)
        kinds = sorted({scope.served.kind.name for scope in scopes})
        if self._kinds is None:
            self.ctx.health.expect(len(scopes))  # /readyz: the streams found at start-up
        if kinds != self._kinds:
            self._kinds = kinds
            log.info(
                "watching %s: %d stream(s)",
                ", ".join(kinds) or "no served kind",
                len(scopes),
                extra={"kinds": ",".join(kinds), "streams": len(scopes)},
            )
        with self._lock:
            self._threads = {s: t for s, t in self._threads.items() if s in wanted or t.is_alive()}
            retired = [s for s in self._threads if s not in wanted and s not in self._retired]
            self._retired = {s for s in self._threads if s not in wanted}
            for scope in scopes:
                thread = self._threads.get(scope)
                if thread is None or not thread.is_alive():
                    thread = threading.Thread(
                        target=self.run, args=(scope,), name=f"watch {scope}", daemon=True
                    )
                    self._threads[scope] = thread
                    thread.start()
        for scope in retired:
            log.info("%s no longer served: its stream ends", scope)

    def _ended(self, scope: Scope) -> bool:
        return self.ctx.stop.is_set() or scope in self._retired

    def run(self, scope: Scope) -> None:
        """List, then watch, one scope until the run stops; never raises."""
        metrics = self.ctx.metrics
        version: str | None = None
        failures = 0
        refused = False  # the last failure got no answer at all
        listed_once = False
        while not self._ended(scope):
            unreachable = False
            try:
                if version is None:
                    version = self.list_one(scope, relist=listed_once)
                    if not listed_once:
                        self.ctx.health.listed(scope)
                    listed_once = True
                version = self.follow(scope, version)
                failures, refused = 0, False
                metrics.watch_restarts.labels("closed").inc()
                continue
            except _ShortWatch:
                # Something between us and the API server (a proxy, a gateway, a load
                # balancer) ends every stream at once: each reopen would follow at once too.
                log.warning("watch of %s ended at once with no event; reopening", scope)
                reason = "short"
            except Gone:
                log.info("watch of %s: resourceVersion too old (410); listing again", scope)
                metrics.relists.inc()
                version = None
                failures, refused = 0, False
                continue
            except WatchStalled as error:
                log.warning("watch of %s stalled (%s); reopening", scope, error.detail)
                reason = "stalled"
            except ApiError as error:
                if error.status == HTTPStatus.FORBIDDEN:
                    # RBAC refuses this scope (a namespace deleted with its Role, a kind outside
                    # the grant): the other scopes' views are whole without it, so it does not
                    # hold /readyz; it keeps being tried, backed off, and logged each time.
                    self.ctx.health.listed(scope)
                log.warning("watch of %s failed: %s", scope, error)
                reason = "error"
                unreachable = error.status is None
                if not unreachable and refused:
                    # The server answers again (a restarted one says 429 or 503 while its
                    # caches fill): back off from the start, not from the outage's count.
                    failures = 0
                refused = unreachable
            except Exception:  # a stream thread must never die silently
                log.exception("watch of %s: unexpected error", scope)
                reason = "error"
            metrics.watch_restarts.labels(reason).inc()
            failures += 1
            self._backoff(failures, unreachable=unreachable)
        if not self.ctx.stop.is_set():
            # Retired: its kind is no longer served, and with it every job of the scope.
            self.ctx.inbox.put(Listed(scope, {}, relist=True))

    def _backoff(self, failures: int, *, unreachable: bool) -> None:
        backoff = _BACKOFF_UNREACHABLE if unreachable else _BACKOFF
        self.ctx.stop.wait(backoff.backoff(min(failures, _FAILURES_COUNTED), random.uniform))

    def follow_rules(self, before: PlatformView, after: PlatformView) -> None:
        """List again, once, the scopes whose jobs a rule selects since ``before`` was read.

        Their timers were armed without that rule; the list only brings them forward.
        """
        with self._lock:
            scopes = [scope for scope in self._threads if scope not in self._retired]
        for scope in _newly_ruled(scopes, before, after):
            try:
                self.list_one(scope, relist=False, earlier_only=True)
            except SweeperError as error:
                log.warning(
                    "listing %s for a new rule failed: %s; left to the resync", scope, error
                )

    def list_one(self, scope: Scope, *, relist: bool, earlier_only: bool = False) -> str:
        """List a scope and queue every job's due instant; return where the watch starts.

        Pages are read into views, never into objects: the streams list at the same time at
        start-up, and six pages in flight hold about what one page of objects did.
        """
        ctx = self.ctx
        due: dict[JobKey, datetime | None] = {}
        pending: dict[JobKey, Pending] = {}
        version = ""
        enforcement, kept, view = ctx.config.enforcement, self.covered.kept, ctx.view()
        pages = iter(
            ctx.cluster.list_job_views(
                scope.served, scope.namespace, ctx.config.selector, ctx.config.page_size
            )
        )
        while True:
            sent = ctx.clock.monotonic()
            page = next(pages, None)
            if page is None:
                break
            ctx.decision.saw_date(page.server_date, sent, ctx.clock.monotonic())
            now = ctx.decision.now()
            for job in page.jobs:
                if not kept(job.namespace):
                    continue
                try:
                    key = JobKey(job.kind.name, job.namespace, job.name)
                    due[key], warning = _timer(view(job), now, enforcement)
                    if warning is not None:
                        pending[key] = warning
                except Exception:  # noqa: BLE001 - one object never stops a kind's listing
                    _unreadable(scope, job.namespace, job.name, "list")
            version = page.resource_version or version
        ctx.inbox.put(Listed(scope, due, relist, pending, earlier_only))
        log.info("listed %s: %d job(s)", scope, len(due))
        return version

    def follow(self, scope: Scope, version: str) -> str:
        """Watch a scope from ``version`` until the stream ends; return the last version seen.

        Raises ``_ShortWatch`` when it ended within ``SHORT_WATCH_S`` with no event at all.
        """
        ctx = self.ctx
        enforcement, kept = ctx.config.enforcement, self.covered.kept
        sent = ctx.clock.monotonic()
        seen = False
        with ctx.cluster.watch_jobs(
            scope.served,
            scope.namespace,
            ctx.config.selector,
            version,
            timeout_s=random.randint(*WATCH_TIMEOUT_RANGE_S),  # noqa: S311 - spread, not crypto
            read_timeout_s=ctx.settings.watch_timeout,
        ) as stream:
            ctx.decision.saw_date(stream.server_date, sent, ctx.clock.monotonic())
            for event in stream:
                if self._ended(scope):
                    break
                seen = True
                obj = event.object
                meta = _metadata(obj)
                rv = meta.get("resourceVersion")
                version = rv if isinstance(rv, str) and rv else version
                if event.type == "BOOKMARK":
                    continue
                try:
                    job = parse_job(obj, scope.served.kind, scope.served.version)
                    if not kept(job.namespace):
                        continue
                    key = JobKey(job.kind.name, job.namespace, job.name)
                    deleted = event.type == "DELETED"
                    if deleted:
                        due, warning = None, None
                    else:
                        due, warning = _timer(ctx.view()(job), ctx.decision.now(), enforcement)
                except Exception:  # noqa: BLE001 - one object never stops a stream
                    # The resourceVersion has moved past it: the stream is never replayed
                    # from before it. Its timer (if any) stays as it was; the resync judges it.
                    _unreadable(scope, meta.get("namespace"), meta.get("name"), event.type)
                    continue
                ctx.inbox.put(Event(key, due, warning))
        if not seen and ctx.clock.monotonic() - sent < SHORT_WATCH_S and not self._ended(scope):
            raise _ShortWatch
        return version


def _newly_ruled(scopes: list[Scope], before: PlatformView, after: PlatformView) -> list[Scope]:
    """The scopes holding a Namespace that a rule selects in ``after`` and did not in ``before``.

    One that no rule selects any more costs nothing: its timers fire early and judge again.
    """
    kinds = {scope.served.kind.name for scope in scopes}
    ruled = {
        (namespace, kind)
        for namespace in after.labels
        for kind in kinds
        if (rule := after.rule(namespace, kind)) is not None
        and rule != before.rule(namespace, kind)
    }
    return [
        scope
        for scope in scopes
        if any(
            kind == scope.served.kind.name and scope.namespace in (None, namespace)
            for namespace, kind in ruled
        )
    ]


def _timer(
    job: Job, now: datetime, enforcement: Enforcement
) -> tuple[datetime | None, Pending | None]:
    """When a job seen at ``now`` falls due, and the warning its timer wakes for."""
    warning = None if job.warn_before is None else warning_of(job, enforcement)
    pending = None if warning is None else Pending(warning.at, warning.deadline, warning.name)
    return due_at(job, now, enforcement), pending


class _ShortWatch(Exception):  # noqa: N818 - a stream's ending, not an error raised to callers
    """A watch that ended within ``SHORT_WATCH_S`` with no event."""


def _metadata(obj: JSON) -> JSON:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}


def _unreadable(scope: Scope, namespace: object, name: object, seen_in: str) -> None:
    """Log a job that could not be turned into a timer (a bug: parsing never raises)."""
    log.error(
        "watch of %s: cannot read %s/%s (%s); left to the resync",
        scope,
        namespace,
        name,
        seen_in,
        exc_info=True,
        extra={
            "kind": scope.served.kind.name,
            "namespace": str(namespace),
            "job_name": str(name),
            "reason": "malformed",
        },
    )
