"""The resync: a full pass of the one-shot code every ``--resync`` seconds, on the leader.

A safety net for anything a stream missed; as kube-janitor runs the same clean-up for
``--once`` and for its loop, both modes make the same decisions by construction. A job is
acted on by one actor at a time, its timer's fire or the pass (:class:`Claims`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TextIO

from sweeper.config import Config, WatchSettings
from sweeper.core.errors import SweeperError
from sweeper.core.model import Action
from sweeper.k8s.cluster import Cluster
from sweeper.metrics import WatchMetrics
from sweeper.oneshot.run import sweep
from sweeper.stop import StopFlag
from sweeper.watch.inbox import Ending, Fired, Inbox, JobKey

log = logging.getLogger(__name__)


class Claims:
    """Which jobs are being acted on, by a timer's fire or by a resync pass."""

    def __init__(self) -> None:
        self.in_flight: set[JobKey] = set()
        self._lock = threading.Lock()
        # During a resync pass, the jobs its timers took since the pass began listing: the
        # pass's view of them is older than the timer's, so the pass leaves them alone.
        self._fired_in_pass: set[JobKey] | None = None

    def take(self, key: JobKey) -> bool:
        """Take a job for its timer's fire; ``False`` while another actor has it."""
        with self._lock:
            if key in self.in_flight:
                return False
            self.in_flight.add(key)
            if self._fired_in_pass is not None:
                self._fired_in_pass.add(key)
            return True

    def release(self, key: JobKey) -> None:
        """Let a job go (its actor is done with it)."""
        with self._lock:
            self.in_flight.discard(key)

    @contextlib.contextmanager
    def passing(self) -> Iterator[None]:
        """Note the jobs timers take while a resync pass runs."""
        with self._lock:
            self._fired_in_pass = set()
        try:
            yield
        finally:
            with self._lock:
                self._fired_in_pass = None

    def take_for_pass(self, key: JobKey) -> bool:
        """Take a job for a resync pass's action, unless its timer has it or had it."""
        with self._lock:
            seen = self._fired_in_pass is not None and key in self._fired_in_pass
            ours = not seen and key not in self.in_flight
            if ours:
                self.in_flight.add(key)
            return ours


class Resync:
    """The resync thread's work: :meth:`run` is the thread.

    Args:
        config: The run's settings.
        settings: The watch settings (``--resync``).
        cluster: The cluster.
        out: Where the passes' reports go.
        claims: Who acts on which job.
        inbox: Told when a pass is done with a job (the main loop re-arms its timer).
        leading: Whether this replica leads (only the leader runs passes).
        flag_for_pass: A new pass's stop flag.
        stopping: Set on SIGTERM or SIGINT: the thread ends.
        metrics: The watch metrics (resyncs).
    """

    def __init__(
        self,
        config: Config,
        settings: WatchSettings,
        cluster: Cluster,
        out: TextIO,
        *,
        claims: Claims,
        inbox: Inbox,
        leading: Callable[[], bool],
        flag_for_pass: Callable[[], StopFlag],
        stopping: threading.Event,
        metrics: WatchMetrics,
    ) -> None:
        self.config = config
        self.settings = settings
        self.cluster = cluster
        self.out = out
        self.claims = claims
        self.inbox = inbox
        self.leading = leading
        self.flag_for_pass = flag_for_pass
        self.stopping = stopping
        self.metrics = metrics

    def run(self) -> None:
        """A pass every ``--resync`` seconds while leading, until the run stops."""
        number = 0
        while not self.stopping.wait(self.settings.resync):
            if not self.leading():
                continue
            number += 1
            self.pass_once(number)

    def pass_once(self, number: int) -> None:
        """Run pass ``number``; a failed pass is logged and counted, never raised."""
        flag = self.flag_for_pass()
        with self.claims.passing():
            try:
                outcome = sweep(
                    number, self.config, self.cluster, flag, self.out, claim=self._claim
                )
                failed = outcome.errors or outcome.unlisted
                result = "stopped" if outcome.stopped_by else ("errors" if failed else "ok")
            except SweeperError as error:
                log.warning("resync pass %d failed: %s", number, error)
                result = "failed"
        self.metrics.resyncs.labels(result).inc()

    @contextlib.contextmanager
    def _claim(self, action: Action) -> Iterator[bool]:
        """Hold a job for a resync pass's action, unless its timer has it or had it.

        A job its timer took since the pass began listing was judged by the timer on a newer
        read than the pass's: the pass leaves it alone (its touch would move the annotation
        back to the pass's older instant). While the pass acts, the job's timer waits.
        """
        job = action.job
        key = JobKey(job.kind.name, job.namespace, job.name)
        ours = self.claims.take_for_pass(key)
        try:
            yield ours
        finally:
            if ours:
                # Through the main loop, which re-arms a timer that came due meanwhile.
                self.inbox.put(Fired(key, None, Ending.RELEASED))
