"""The fire pool's work: a job's timer came due, so read the job again, judge it now and act."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from sweeper.act.executor import Executor
from sweeper.core.decide import ALWAYS, due_at, judge
from sweeper.core.errors import ApiError, NotFound
from sweeper.core.families import family_of
from sweeper.core.jobs import parse_job
from sweeper.core.model import Action, ActionKind, Outcome, Plan, Result
from sweeper.core.tally import RECLAIMED
from sweeper.core.warn import DeadlineWarning, warning_due
from sweeper.k8s.cluster import ServedKind
from sweeper.oneshot import notice, report
from sweeper.watch.context import WatchContext
from sweeper.watch.inbox import Ending, Fired, JobKey

log = logging.getLogger(__name__)


class Fire:
    """Acts on one job whose timer came due, with the one-shot mode's guards."""

    def __init__(self, ctx: WatchContext, served: Mapping[str, ServedKind]) -> None:
        self.ctx = ctx
        self.served = served

    def run(self, key: JobKey, due: datetime) -> None:
        """The pool's task: fire, and tell the inbox how it ended, whatever happened."""
        fired = Fired(key, None, Ending.FAILED)
        try:
            fired = self.fire(key, due)
        except Exception:  # a worker must never swallow a failure: log it, look again later
            log.exception("acting on %s %s/%s failed", key.kind, key.namespace, key.name)
        finally:
            self.ctx.inbox.put(fired)

    def fire(self, key: JobKey, due: datetime) -> Fired:
        """Read the job again, judge it now, act; say when to look at it again, if ever."""
        ctx, served = self.ctx, self.served[key.kind]
        try:
            raw = ctx.cluster.get(served.resource, key.namespace, key.name)
        except NotFound:
            return Fired(key, None)  # deleted meanwhile; its DELETED event is on its way
        except ApiError as error:
            log.warning(
                "cannot read %s %s/%s at its deadline: %s", key.kind, key.namespace, key.name, error
            )
            if error.status is None:  # no answer: looked at again in a moment (the agenda)
                return Fired(key, due, Ending.NOT_TRIED)
            return Fired(key, None, Ending.FAILED)
        view = ctx.view()
        job = view(parse_job(raw, served.kind, served.version))
        now = ctx.decision.now()  # the one reading for this job
        enforcement = ctx.config.enforcement  # never a cap: --watch refuses --max-actions
        executor = Executor(
            ctx.cluster,
            dry_run=ctx.config.dry_run,
            stop=ctx.stop,
            on_outcome=self._outcome,
            view=view,
        )
        entry = judge(job, now, enforcement)
        if not isinstance(entry, Action):
            # A warning never delays nor replaces an action: one due with it (a TrainJob's
            # deadline to write) comes with the job's next event, as at the next pass.
            warning = warning_due(job, now, enforcement)
            then = due_at(job, now, enforcement)
            if warning is not None:
                return self._warn(key, due, executor, warning, now=now, then=then)
            # Changed since the event, or the server clock is not surely there yet.
            return Fired(key, then)
        if (
            entry.kind not in (ActionKind.TERMINATE_PODS, ActionKind.DELETE_JOBSET)
            and due != ALWAYS
        ):
            self.ctx.metrics.lateness.observe(max((now - due).total_seconds(), 0.0))
        execution = executor.execute(Plan(now=now, enforcement=enforcement, entries=(entry,)))
        return _ended(key, due, execution.outcomes[0])

    def _warn(
        self,
        key: JobKey,
        due: datetime,
        executor: Executor,
        warning: DeadlineWarning,
        *,
        now: datetime,
        then: datetime | None,
    ) -> Fired:
        """Record a job's warning (once: a second create of its name is refused), then wait.

        ``then`` is the job's due instant, the timer's next; a warning not tried (a stop,
        the Lease lost) keeps the timer where it was, a refused one backs off.
        """
        (warned,), _stopped = executor.warn((warning,), now)
        notice.log_warned(warned, now, self.ctx.config.dry_run)
        if warned.result is Result.NOT_STARTED:
            return Fired(key, due, Ending.NOT_TRIED)
        if warned.result is Result.ERROR:
            return Fired(key, None, Ending.FAILED)
        if warned.result is not Result.LEFT_ALONE:
            job = warning.job
            self.ctx.metrics.warnings.labels(warning.family, job.kind.name, job.rule or "").inc()
        return Fired(key, then, warned=warning.name)

    def _outcome(self, outcome: Outcome) -> None:
        report.log_outcome(outcome, self.ctx.config.dry_run)
        entry = outcome.entry
        if isinstance(entry, Action):
            job = entry.job
            self.ctx.metrics.actions.labels(
                job.kind.name, entry.kind.value, outcome.result.value, job.rule or ""
            ).inc()
            family = family_of(job.kind, job.version).NAME
            for what, _name in outcome.reclaimed:
                if what in RECLAIMED:  # a pod's service goes with it, uncounted
                    self.ctx.metrics.reclaimed.labels(family, job.kind.name, what).inc()


def _ended(key: JobKey, due: datetime, outcome: Outcome) -> Fired:
    if outcome.result is Result.NOT_STARTED:
        return Fired(key, due, Ending.NOT_TRIED)  # not this job's failure: no backoff
    if outcome.result is Result.ERROR or outcome.errors:
        # Tried again after the job's backoff (or by the next event, or by the resync); so is
        # an action done in part (some pods deleted, one refused): the re-read judges again.
        return Fired(key, None, Ending.FAILED)
    return Fired(key, None)  # done: the job's next event (our own write's, too) re-arms it
