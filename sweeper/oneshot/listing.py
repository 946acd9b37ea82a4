"""A pass's listing: discover, list every job page by page, judge each page, the pass's instant.

The lists (one per kind and namespace) are read ahead on two threads
(``sweeper.k8s.readahead``); ``now`` is taken once, from the first page's ``Date``; each
page's jobs are judged as they come (a skip is final there: only what the report prints of it
is kept, ``sweeper.oneshot.ledger.Ledger``). What is left for the plan is the actions.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from datetime import datetime
from http import HTTPStatus

from sweeper.config import ClockMode, Config
from sweeper.core.clock import DATE_RESOLUTION_S, Clock, human
from sweeper.core.decide import judge
from sweeper.core.errors import ApiError, ClusterUnavailable, ConfigError, Gone, NotFound
from sweeper.core.families import family_of
from sweeper.core.held import may_act, watched
from sweeper.core.jobs import MAX_DEADLINE_SECONDS, DeadlineSource, Job, overflows
from sweeper.core.model import Entry, Skip, settled
from sweeper.core.platform import PlatformView
from sweeper.core.scope import RunScope
from sweeper.core.tally import held_reason
from sweeper.core.warn import DeadlineWarning, warning_due
from sweeper.k8s import readahead
from sweeper.k8s.cluster import Cluster, JobPage, ServedKind
from sweeper.logs import job_fields
from sweeper.oneshot import holding, misconfig, namespaces, report
from sweeper.oneshot.ledger import Ledger
from sweeper.stop import Stop

log = logging.getLogger(__name__)

# Lists read at once, and pages (of every list together) that may wait for the pass
# (sweeper.k8s.readahead): two readers keep the API server busy while this process decodes
# and judges (a third measured no better), and eight pages let a reader go on into the next list
# while the pass is on another, at some 200 KB of views a page of 500 (docs/benchmarks.md).
_READERS = 2
_AHEAD = 8


def list_pass(
    cluster: Cluster,
    config: Config,
    clock: Clock,
    stop: Stop,
    fresh: Callable[[], Ledger],
    *,
    view: PlatformView | None = None,
) -> Listing:
    """Discover, then list and judge every job of the pass, starting over once if need be.

    ``fresh`` makes the pass's empty ledger; ``view`` is read after discovery when not given.
    ``ConfigError``: a selector the server rejects; ``ClusterUnavailable``: discovery or a list
    failed for good (but a list RBAC refuses, kept in ``unlisted``), or no job kind is served.
    """
    listing = Listing(config, clock, stop, fresh())
    covered = _discover(cluster, config, listing)
    listing.view = view or namespaces.read_view(cluster, config)
    try:
        listing.list_all(cluster, covered)
    except StartOver as cause:
        # A continue token expired (a very long list), or a kind vanished mid-list:
        # what was judged is dropped, and the pass lists everything again, once.
        log.warning("%s; listing every kind again", cause)
        first, listing = listing, Listing(config, clock, stop, fresh())
        listing.discovery_date, listing.view = first.discovery_date, first.view
        listing.misconfigured = first.misconfigured
        try:
            listing.list_all(cluster, covered)
        except StartOver as again:
            raise ClusterUnavailable(
                f"{again} (the list expired again after starting over)"
            ) from again.__cause__
    return listing


def _discover(cluster: Cluster, config: Config, listing: Listing) -> RunScope[ServedKind]:
    try:
        discovery = cluster.discover()
    except ApiError as error:
        raise ClusterUnavailable(f"{error} ({cluster.endpoint})") from error
    listing.discovery_date = discovery.server_date
    if not discovery.served:
        # The wrong context, or a cluster without the operator: an empty report and exit 0
        # would read as "no job is overdue".
        raise ClusterUnavailable(
            f"the cluster serves no Kubeflow job kind: is the Training Operator installed, "
            f"and is this the right context? ({cluster.endpoint})"
        )
    scope = config.scope(discovery.served)
    for kind in scope.missing:
        log.info("%s is not served by this cluster; skipped", kind.name, extra={"kind": kind.name})
    for served in scope.left_out:
        log.info(
            "%s is served at %s/%s by the %s family, which --family leaves out; skipped",
            served.kind.name,
            served.kind.group,
            served.version,
            served.family,
            extra={"kind": served.kind.name},
        )
    for served in scope.kinds:
        family = family_of(served.kind, served.version)
        if family is not family_of(served.kind, ""):
            # One CRD per kind can exist: say whose this cluster has (mpi-operator's MPIJob).
            log.info(
                "%s is served at %s/%s: %s's; judged by its family",
                served.kind.name,
                served.kind.group,
                served.version,
                family.NAME,
                extra={"kind": served.kind.name},
            )
    if misconfig.check_mpijob_scheme(
        cluster, config.training_operator_deployment, discovery.served
    ):
        listing.misconfigured = (misconfig.MPIJOB_SCHEME,)
    return scope


def _exemption(job: Job) -> None:
    # Once per pass and job: the platform's engineers see who opted out, and who tried to.
    said, allows, exemption = (
        ("honoured", "exemptions", "honoured")
        if job.excluded
        else ("ignored", "no exemption", "refused")
    )
    (log.info if job.excluded else log.warning)(
        "%s %s/%s: exclude annotation %s (platform rule %s allows %s)",
        job.kind.name,
        job.namespace,
        job.name,
        said,
        job.rule,
        allows,
        extra={**job_fields(job), "rule": job.rule, "exemption": exemption},
    )


def _overflowing(job: Job) -> None:
    # Once per pass and job: a deadline no controller enforces is a tenant's way out of every
    # deadline but a cap, and the platform's engineers see it whether or not a rule caps it.
    capped = job.deadline_source is DeadlineSource.CAP
    log.warning(
        "%s %s/%s: activeDeadlineSeconds %d overflows Go's time.Duration (beyond %d s either"
        " way): no controller enforces it as written; %s",
        job.kind.name,
        job.namespace,
        job.name,
        job.declared_seconds,
        MAX_DEADLINE_SECONDS,
        f"enforced at the cap of platform rule {job.rule}"
        if capped
        else "never due: no platform rule caps it",
        extra={**job_fields(job), "declared_seconds": job.declared_seconds, "rule": job.rule},
    )


class StartOver(Exception):  # noqa: N818 - a signal to the pass, not an error it reports
    """A list ended after some of its pages were judged: the pass must list again."""


class Listing:
    """Lists every job of a pass, judges each page as it comes, and keeps the clocks.

    An action (or a skip a rule's pod keys may overrule) is kept for the plan, its place held in
    the ledger; a skip is final then and there. Jobs that may hold pods are kept by uid until the
    pass's pod list; else nothing of a page outlives it, and memory does not grow with the fleet.
    A list cut short after some pages were judged raises ``StartOver``; one RBAC refuses (403) is
    kept in ``unlisted`` and the pass goes on (no decision depends on another list's jobs).
    """

    def __init__(self, config: Config, clock: Clock, stop: Stop, ledger: Ledger) -> None:
        self.config = config
        self.clock = clock
        self._stop = stop
        self.ledger = ledger
        # The actions, and the skips a rule may yet overrule once the pods are read.
        self.actions: list[Entry] = []
        self.warnings: list[DeadlineWarning] = []
        # Skipped jobs that may hold pods (held_reason): uid -> (namespace, family, kind, why).
        self.holders: dict[str, tuple[str, str, str, str]] = {}
        self.unlisted: list[ClusterUnavailable] = []
        # What the pass found misconfigured around it (sweeper.oneshot.misconfig), by name.
        self.misconfigured: tuple[str, ...] = ()
        self.discovery_date: datetime | None = None
        self.server_date: datetime | None = None
        self.local_date: datetime | None = None
        self._now: datetime | None = None
        self.view = PlatformView()
        # The jobs whose pods the pass's pod list sums (sweeper.core.held), in listing order,
        # and those it found holding them for nothing.
        self.watched: dict[str, Job] = {}
        self.found = holding.Found()

    def list_all(self, cluster: Cluster, covered: RunScope[ServedKind]) -> None:
        """List and judge every job the pass covers, in order (kind, then namespace)."""
        config = self.config
        lists = covered.lists
        with readahead.ReadAhead[JobPage](workers=_READERS, ahead=_AHEAD, name="list") as ahead:
            for kind, namespace in lists:
                ahead.submit(
                    (kind, namespace),
                    functools.partial(
                        cluster.list_job_views,
                        kind,
                        namespace,
                        config.selector,
                        config.page_size,
                        self.view,
                    ),
                )
            for kind, namespace in lists:
                self._list_one(cluster, covered, kind, ahead.pages((kind, namespace)))

    def _list_one(
        self,
        cluster: Cluster,
        covered: RunScope[ServedKind],
        served: ServedKind,
        pages: Iterator[JobPage],
    ) -> None:
        config = self.config
        judged = False
        try:
            for page in pages:
                if self.server_date is None:
                    self._saw(page.server_date)
                jobs = page.jobs
                if covered.excluded:
                    # The list API cannot leave a namespace out; the jobs are dropped here,
                    # before any decision: an excluded namespace is never acted on nor reported.
                    jobs = [job for job in jobs if covered.kept(job.namespace)]
                self._judge(jobs)
                judged = True
                cause = self._stop.reason()
                if cause is not None:
                    raise cause
        except NotFound as error:
            if judged:
                # The kind vanished after some of its pages were judged: the pass lists again,
                # and the kind is then skipped as a whole, as when it is gone from the start.
                raise StartOver(str(error)) from error
            log.warning(
                "%s is no longer served; skipped (%s)",
                served.kind.name,
                error,
                extra={"kind": served.kind.name},
            )
        except Gone as error:
            raise StartOver(str(error)) from error
        except ApiError as error:
            if error.status == HTTPStatus.BAD_REQUEST and config.selector:
                raise ConfigError(
                    f"invalid label selector {config.selector!r} (--selector): "
                    f"{error.detail or 'rejected by the API server'}"
                ) from error
            unlisted = ClusterUnavailable(f"{error} ({cluster.endpoint})")
            if error.status != HTTPStatus.FORBIDDEN:
                raise unlisted from error
            self.unlisted.append(unlisted)
            log.error(  # noqa: TRY400 - the server's refusal, one line: no traceback
                "%s; its jobs are not judged this pass",
                unlisted,
                extra={"kind": served.kind.name, "namespace": error.request.namespace},
            )

    def _judge(self, jobs: list[Job]) -> None:
        # A skip's line (debug level) is logged here: a pass whose later list fails has logged
        # the skips before it, though it acts on nothing and reports no job.
        now, config, ledger = self.now(), self.config, self.ledger
        for job in jobs:
            if job.rule is not None and (job.excluded or job.exemption_refused):
                _exemption(job)
            if overflows(job.declared_seconds) and job.finished is None:
                _overflowing(job)
            entry = judge(job, now, config.enforcement)
            if watched(job):
                self.watched[job.uid] = job
            if isinstance(entry, Skip):
                # Only before its deadline, so only a skip: never alongside an action.
                warning = warning_due(job, now, config.enforcement)
                if warning is not None:
                    self.warnings.append(warning)
                held = held_reason(entry, config.enforcement)
                if held is not None:
                    family = family_of(job.kind, job.version).NAME
                    self.holders[job.uid] = (job.namespace, family, job.kind.name, held)
                if may_act(job, entry, self.view.rule(job.namespace, job.kind.name)):
                    # Its rule's startDeadline or reclaimFailedAfter may yet act, by its pods.
                    self.actions.append(entry)
                    ledger.expect()
                    continue
                outcome = settled(entry)
                report.log_outcome(outcome, config.dry_run)
                ledger.settle(outcome)
            else:
                self.actions.append(entry)
                ledger.expect()

    def _saw(self, server_date: datetime | None) -> None:
        # One local reading, as close as possible to the server's answer.
        self.local_date = self.clock.now()
        self.server_date = server_date

    def now(self) -> datetime:
        """The pass's one instant (``--clock``), the same at every call; warns of clock skew."""
        if self._now is None:
            self._now = self._choose_now()
        return self._now

    def _choose_now(self) -> datetime:
        if self.local_date is None:
            self._saw(self.discovery_date)
        local = self.local_date or self.clock.now()
        server = self.server_date
        if server is None:
            if self.config.clock is ClockMode.SERVER:
                log.warning("the API server sent no Date header; using the local clock")
            return local
        skew = (local - server).total_seconds()
        if self.config.clock is ClockMode.LOCAL:
            if abs(skew) > self.config.enforcement.grace + DATE_RESOLUTION_S:
                log.warning(
                    "the local clock is %s %s the API server's; --clock local decides by it",
                    human(abs(skew)),
                    "ahead of" if skew > 0 else "behind",
                    extra={"skew_s": round(skew, 3), "clock": "local"},
                )
            return local
        log.debug("clock skew (local - server): %.3fs", skew, extra={"skew_s": round(skew, 3)})
        return server
