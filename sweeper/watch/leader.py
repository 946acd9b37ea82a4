"""The Lease thread: it sends ``sweeper.watch.elector``'s requests and says whether we lead.

Only the leader writes to jobs: the transport asks before every attempt of a write, through the
run's ``Stop``, which the Lease fences. The timing is client-go's, with two fast paths of the
sweeper's own, and a lapse is no exit (docs/watch.md, "Leader election").
"""

from __future__ import annotations

import logging
import math
import random
import threading
from collections.abc import Mapping

from sweeper.config import JITTER_FACTOR
from sweeper.core.errors import ApiError, Conflict, Interrupted, NotFound
from sweeper.k8s.cluster import Answer
from sweeper.watch.context import WatchContext
from sweeper.watch.elector import Create, Elector, Lease, Update, Wait, lease_body, parse_lease
from sweeper.watch.inbox import Leadership

log = logging.getLogger(__name__)

# A standby waiting for a Lease to expire tries this long after the expiry it computed, so
# that its clock has surely passed it.
EXPIRY_MARGIN_S = 0.01
# A candidate whose Lease request got no answer at all (the API server down or restarting)
# tries again this soon: a refused connection costs the server nothing, and the jobs due during
# an outage are acted on within about a second of its end (the outage benchmark's bar is 2 s).
LEASE_RETRY_UNREACHABLE_S = 0.5


class Leader:
    """The Lease loop around the Elector; the one place that says whether this replica leads.

    It elects with ``--leader-elect``, never in a dry run (which writes nothing, the Lease
    included); otherwise it always leads.
    """

    def __init__(self, ctx: WatchContext) -> None:
        self.ctx = ctx
        settings = ctx.settings
        self.elects = settings.leader_elect and ctx.config.dry_run is None
        self.elector = Elector(settings.identity, settings.timing)
        self._lock = threading.Lock()
        # The Lease as last read or written: an update is written over it (lease_body).
        self._seen: Mapping[str, object] | None = None

    @property
    def namespace(self) -> str:
        """Where the Lease lives: ``--lease-namespace``, else the cluster's home namespace."""
        return self.ctx.settings.lease_namespace or self.ctx.cluster.home_namespace

    def leading(self) -> bool:
        """Whether this replica may write to jobs now."""
        if not self.elects:
            return True
        with self._lock:
            return self.elector.leading(self.ctx.clock.monotonic())

    def write_window(self) -> float:
        """Seconds a job write sent now may stay in flight (``Elector.write_window``)."""
        if not self.elects:
            return math.inf
        with self._lock:
            return self.elector.write_window(self.ctx.clock.monotonic())

    def run(self) -> None:
        """Take, renew or wait for the Lease every retry period until the run stops."""
        namespace, name, settings = self.namespace, self.ctx.settings.lease_name, self.ctx.settings
        was_leading, holder, read_first = False, "", False
        while not self.ctx.stop.is_set():
            now = self.ctx.clock.monotonic()
            with self._lock:
                if self.elector.lost(now):
                    # No write since the renew deadline passed (leading() says so). Exiting
                    # would cost a restart and a relist once the API server is back: a
                    # candidate keeps its timers, and takes the Lease back if it still can.
                    log.error(
                        "lost the Lease %s/%s: could not renew within %gs; stopped writing, "
                        "trying to take it back",
                        namespace,
                        name,
                        settings.timing.renew_deadline,
                    )
                    self.elector.step_down()
                    self.ctx.metrics.leader.set(0)
                    was_leading = False
                    self.ctx.inbox.put(Leadership(leading=False))
            answered = True
            try:
                self._round(namespace, name, read_first=read_first)
                read_first = False
            except Conflict:
                read_first = True  # someone else wrote it: read before the next try
                continue
            except Interrupted:
                continue  # a signal cut a retry wait short: stopping (the loop ends)
            except ApiError as error:
                log.warning("Lease %s/%s: %s", namespace, name, error)
                answered = error.status is not None
            leading = self.leading()
            if leading != was_leading:
                self.ctx.metrics.leader.set(1 if leading else 0)
                log.info(
                    "%s the Lease %s/%s",
                    "acquired" if leading else "do not hold",
                    namespace,
                    name,
                    extra={"identity": settings.identity},
                )
                was_leading = leading
                self.ctx.inbox.put(Leadership(leading))
            if not leading and self.elector.holder and self.elector.holder != holder:
                holder = self.elector.holder
                log.info("the leader is %s", holder, extra={"leader": holder})
            self.ctx.stop.wait(self._delay(leading=leading, answered=answered))
        # Released by the engine (finish), once the work the Lease guards has finished.

    def _delay(self, *, leading: bool, answered: bool) -> float:
        """client-go's retry period (jittered unless leading), and two fast paths.

        A standby tries the moment a Lease it saw expires, so a takeover comes within the lease
        duration of the last renewal; a round with no answer is tried again within half a second.
        """
        period = self.ctx.settings.timing.retry_period
        if leading:
            return period
        if not answered:
            return LEASE_RETRY_UNREACHABLE_S
        with self._lock:
            left = self.elector.expires_in(self.ctx.clock.monotonic())
        if left is not None and 0 < left < period:
            return left + EXPIRY_MARGIN_S
        return period * (1 + JITTER_FACTOR * random.random())  # noqa: S311 - spread, not crypto

    def _round(self, namespace: str, name: str, *, read_first: bool) -> None:
        wall = self.ctx.clock.now()
        with self._lock:
            step: Create | Update | Wait | None = None if read_first else self.elector.renewal(wall)
        if step is None:
            sent = self.ctx.clock.monotonic()
            try:
                answer = self.ctx.cluster.get_lease(namespace, name)
                current: Lease | None = parse_lease(answer.object)
                self.ctx.decision.saw_date(answer.server_date, sent, self.ctx.clock.monotonic())
                self._seen = answer.object
            except NotFound:
                current = None
            with self._lock:
                step = self.elector.attempt(current, self.ctx.clock.monotonic(), wall)
        if isinstance(step, Wait):
            return
        sent = self.ctx.clock.monotonic()
        answer = self._write(namespace, name, step)
        received = self.ctx.clock.monotonic()
        self._seen = answer.object
        self.ctx.decision.saw_date(answer.server_date, sent, received)
        with self._lock:
            self.elector.succeeded(parse_lease(answer.object), sent, received)

    def _write(self, namespace: str, name: str, step: Create | Update) -> Answer:
        if isinstance(step, Create):
            return self.ctx.cluster.create_lease(
                namespace, lease_body(namespace, name, step.record)
            )
        body = lease_body(namespace, name, step.record, step.resource_version, self._seen)
        return self.ctx.cluster.update_lease(namespace, name, body)

    def finish(self, busy: list[str]) -> bool:
        """Stop leading; hand the Lease back unless a thread was still ``busy``: whether it was.

        Otherwise it is left to expire: the next leader's first write cannot overlap ours.
        """
        namespace, name = self.namespace, self.ctx.settings.lease_name
        with self._lock:
            step = None if busy else self.elector.release(self.ctx.clock.now())
            self.elector.step_down()
        self.ctx.metrics.leader.set(0)
        if busy:
            log.warning(
                "stopping with work in flight (%s): the Lease %s/%s is left to expire",
                ", ".join(busy),
                namespace,
                name,
            )
            return False
        if step is not None:
            try:
                self._write(namespace, name, step)
                log.info("released the Lease %s/%s", namespace, name)
            except ApiError as error:
                log.warning("could not release the Lease %s/%s: %s", namespace, name, error)
        return True
