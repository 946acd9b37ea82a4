"""The resync: a full pass of the one-shot code every ``--resync`` seconds, on the leader.

A safety net for anything a stream missed; as kube-janitor runs one clean-up for ``--once`` and
for its loop, both modes make the same decisions by construction.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import TextIO

from sweeper.core.errors import SweeperError
from sweeper.core.model import Action
from sweeper.core.warn import DeadlineWarning
from sweeper.oneshot.run import sweep
from sweeper.watch.agenda import Agenda
from sweeper.watch.context import WatchContext
from sweeper.watch.inbox import Ending, Fired, JobKey

log = logging.getLogger(__name__)


class Resync:
    """The resync thread's work: ``rediscover`` on every replica, then a pass on the leader."""

    def __init__(
        self,
        ctx: WatchContext,
        out: TextIO,
        *,
        agenda: Agenda,
        rediscover: Callable[[], None],
        leading: Callable[[], bool],
    ) -> None:
        self.ctx = ctx
        self.out = out
        self.agenda = agenda
        self.rediscover = rediscover
        self.leading = leading

    def run(self) -> None:
        """Every ``--resync`` seconds: discover again, then a pass while leading."""
        number, metrics = 0, self.ctx.metrics
        while not self.ctx.stop.wait(self.ctx.settings.resync):
            self.rediscover()
            if not self.leading():
                # A former leader's count would outlive its passes: a standby holds nothing.
                metrics.set_held_pods({})
                metrics.set_misconfigured(())
                continue
            number += 1
            self.pass_once(number)

    def pass_once(self, number: int) -> None:
        """Run pass ``number``, bounded by ``--timeout``; a failure is logged, never raised."""
        ctx, metrics = self.ctx, self.ctx.metrics
        stop = ctx.stop.within(ctx.config.timeout, "in resync pass")
        with self.agenda.passing():
            try:
                outcome = sweep(
                    number,
                    ctx.config,
                    ctx.cluster,
                    stop,
                    self.out,
                    clock=ctx.clock,
                    claim=self._claim,
                    view=ctx.view(),
                    warned=self._warned,
                )
                failed = outcome.errors or outcome.unlisted
                if outcome.tally is not None:
                    for rule, honoured in outcome.tally.exemptions.items():
                        metrics.exemptions.labels(rule).inc(honoured)
                    for labels, count in outcome.tally.warnings.items():
                        metrics.warnings.labels(*labels).inc(count)
                    metrics.set_held_pods(outcome.tally.held, outcome.tally.held_gpus)
                    metrics.set_misconfigured(outcome.tally.misconfigured)
                result = "stopped" if outcome.stopped_by else ("errors" if failed else "ok")
            except SweeperError as error:
                log.warning("resync pass %d failed: %s", number, error)
                result = "failed"
        metrics.resyncs.labels(result).inc()

    def _warned(self, warning: DeadlineWarning) -> bool:
        job = warning.job
        return self.agenda.warned(JobKey(job.kind.name, job.namespace, job.name)) == warning.name

    @contextlib.contextmanager
    def _claim(self, action: Action) -> Iterator[bool]:
        """Hold a job for the pass's action, unless its timer has it or had it (the agenda)."""
        job = action.job
        key = JobKey(job.kind.name, job.namespace, job.name)
        ours = self.agenda.take_for_pass(key)
        try:
            yield ours
        finally:
            if ours:
                self.ctx.inbox.put(Fired(key, None, Ending.RELEASED))
