"""The resync: a full pass of the one-shot code every ``--resync`` seconds, on the leader.

Before each, on every replica, discovery runs again, so that the streams follow the kinds the
cluster serves.

A safety net for anything a stream missed; as kube-janitor runs the same clean-up for
``--once`` and for its loop, both modes make the same decisions by construction. A job is
acted on by one actor at a time, its timer's fire or the pass
(``sweeper.watch.agenda.Agenda``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import TextIO

from sweeper.config import Config, WatchSettings
from sweeper.core.clock import Clock
from sweeper.core.errors import SweeperError
from sweeper.core.model import Action
from sweeper.core.platform import PlatformView
from sweeper.core.warn import DeadlineWarning
from sweeper.k8s.cluster import Cluster
from sweeper.metrics import WatchMetrics
from sweeper.oneshot.run import sweep
from sweeper.stop import Stop
from sweeper.watch.agenda import Agenda
from sweeper.watch.inbox import Ending, Fired, Inbox, JobKey

log = logging.getLogger(__name__)


class Resync:
    """The resync thread's work: ``run`` is the thread; only the leader runs passes.

    ``rediscover`` runs before each pass, on every replica (the streams follow what is
    served); ``inbox`` is told when a pass is done with a job (the main loop re-arms its timer).
    """

    def __init__(
        self,
        config: Config,
        settings: WatchSettings,
        cluster: Cluster,
        out: TextIO,
        *,
        rediscover: Callable[[], None],
        agenda: Agenda,
        inbox: Inbox,
        leading: Callable[[], bool],
        stop: Stop,
        metrics: WatchMetrics,
        clock: Clock,
        view: Callable[[], PlatformView] = PlatformView,
    ) -> None:
        self.config = config
        self.view = view
        self.settings = settings
        self.cluster = cluster
        self.out = out
        self.rediscover = rediscover
        self.agenda = agenda
        self.inbox = inbox
        self.leading = leading
        self.stop = stop
        self.metrics = metrics
        self.clock = clock

    def run(self) -> None:
        """Every ``--resync`` seconds: discover again, then a pass while leading."""
        number = 0
        while not self.stop.wait(self.settings.resync):
            self.rediscover()
            if not self.leading():
                # A former leader's count would outlive its passes: a standby holds nothing.
                self.metrics.set_held_pods({})
                self.metrics.set_misconfigured(())
                continue
            number += 1
            self.pass_once(number)

    def pass_once(self, number: int) -> None:
        """Run pass ``number``; a failed pass is logged and counted, never raised.

        ``--timeout`` bounds each pass from its start, as it bounds a one-shot run: no page is
        judged and no write starts once it is reached (the request in flight completes, within
        ``--request-timeout``); the pass is reported as stopped, and the next one comes a
        ``--resync`` later. Timer fires are not passes: ``--request-timeout`` bounds theirs.
        """
        stop = self.stop.within(self.config.timeout, "in resync pass")
        with self.agenda.passing():
            try:
                outcome = sweep(
                    number,
                    self.config,
                    self.cluster,
                    stop,
                    self.out,
                    clock=self.clock,
                    claim=self._claim,
                    view=self.view(),
                    warned=self._warned,
                )
                failed = outcome.errors or outcome.unlisted
                for rule, honoured in (outcome.tally.exemptions if outcome.tally else {}).items():
                    self.metrics.exemptions.labels(rule).inc(honoured)
                if outcome.tally is not None:
                    for labels, count in outcome.tally.warnings.items():
                        self.metrics.warnings.labels(*labels).inc(count)
                    self.metrics.set_held_pods(outcome.tally.held, outcome.tally.held_gpus)
                    self.metrics.set_misconfigured(outcome.tally.misconfigured)
                result = "stopped" if outcome.stopped_by else ("errors" if failed else "ok")
            except SweeperError as error:
                log.warning("resync pass %d failed: %s", number, error)
                result = "failed"
        self.metrics.resyncs.labels(result).inc()

    def _warned(self, warning: DeadlineWarning) -> bool:
        job = warning.job
        return self.agenda.warned(JobKey(job.kind.name, job.namespace, job.name)) == warning.name

    @contextlib.contextmanager
    def _claim(self, action: Action) -> Iterator[bool]:
        """Hold a job for a resync pass's action, unless its timer has it or had it.

        A job its timer took since the pass began listing was judged by the timer on a newer
        read than the pass's: the pass leaves it alone (its touch would move the annotation
        back to the pass's older instant). While the pass acts, the job's timer waits.
        """
        job = action.job
        key = JobKey(job.kind.name, job.namespace, job.name)
        ours = self.agenda.take_for_pass(key)
        try:
            yield ours
        finally:
            if ours:
                # Through the main loop, which re-arms a timer that came due meanwhile.
                self.inbox.put(Fired(key, None, Ending.RELEASED))
