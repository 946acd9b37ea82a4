"""Who may act on each job, and when to look at it again: the watch's one book of jobs.

Per job: its timer, the actor acting on it now (its timer's fire or a resync pass), a look that
came due meanwhile, the warning recorded and the count of failed fires. One lock covers it all,
so an actor and the timer that comes due while it acts can never drift apart. A pass leaves
alone a job its timer took since the pass began listing: the timer judged it on a newer read,
and the pass's touch would move the annotation back to the pass's older instant.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta

from sweeper.core.clock import Clock
from sweeper.core.schedule import Schedule
from sweeper.k8s.transport import RetryPolicy
from sweeper.watch.inbox import Ending, Event, Fired, JobKey, Listed, Message, Pending

# A fired job whose action failed is tried again 5 to 10 s later (or at its next event), twice
# as late after each further failure, up to 300 s: an action that keeps failing (a webhook
# refusing every update, a 403) costs the API server one GET and one write per job every few
# minutes, not every few seconds. The transport's backoff, with equal jitter.
_FIRE_BACKOFF = RetryPolicy(backoff_base_s=10.0, backoff_cap_s=300.0)
# A fire that asks to look at its job again at once is looked at this much later: no job is
# re-read in a loop, faster than the API server answers. A read that got no answer, or an action
# not started (the Lease lost), is tried again as soon: the transport has just spent its own
# retries (about 2 s), so the job is tried again within about a second of the server's return.
REFIRE_AFTER_S = 0.5
_FAILURES_COUNTED = 20  # 2**20 steps is far past the cap; no float overflow however long


class Agenda:
    """The timers, the actors and the failure counts of the jobs a replica watches."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._timers: Schedule[JobKey] = Schedule()
        # Jobs an actor holds, each with the earliest look that came due meanwhile.
        self._held: dict[JobKey, datetime | None] = {}
        self._failures: dict[JobKey, int] = {}
        # The warning each job's fire recorded or found recorded (an Event name): its timer
        # then wakes only for its due instant. Dropped with the job, or once it has neither.
        self._warned: dict[JobKey, str] = {}
        # While a resync pass runs: the jobs timers took since it began listing.
        self._taken_in_pass: set[JobKey] | None = None

    def __len__(self) -> int:
        return len(self._timers)

    def __iter__(self) -> Iterator[JobKey]:
        return iter(self._timers)

    def when(self, key: JobKey) -> datetime | None:
        """The instant a job's timer is armed for, ``None`` when it has none."""
        return self._timers.when(key)

    def next_due(self) -> datetime | None:
        """The earliest armed instant (what the main loop sleeps until)."""
        with self._lock:
            return self._timers.next_due()

    def overdue(self, now: datetime) -> Counter[str]:
        """The jobs due at ``now`` and not taken yet, by kind (the overdue gauge)."""
        with self._lock:
            return Counter(key.kind for key in self._timers.due_keys(now))

    # --- the main loop ---------------------------------------------------------------------

    def apply(self, message: Message) -> list[JobKey]:
        """Arm, re-arm or drop the timers a message is about; return those a relist found gone."""
        with self._lock:
            if isinstance(message, Event):
                self._failures.pop(message.key, None)  # the job changed: backoff starts over
                self._timers.arm(message.key, self._look(message.key, message.due, message.pending))
            elif isinstance(message, Listed):
                for key, due in message.due.items():
                    pending = message.pending.get(key)
                    if not message.earlier_only:
                        self._timers.arm(key, self._look(key, due, pending))
                    elif due is not None or pending is not None:
                        self._arm_earlier(key, self._look(key, due, pending))
                if message.relist:
                    scope, listed = message.scope, message.due
                    gone = self._timers.drop_where(lambda k: scope.holds(k) and k not in listed)
                    for key in gone:
                        self._failures.pop(key, None)
                        self._warned.pop(key, None)
                    return gone
            elif isinstance(message, Fired):
                self._release(message)
            # Leadership only wakes the loop up.
            return []

    def _look(self, key: JobKey, due: datetime | None, pending: Pending | None) -> datetime | None:
        """When to look at a job: its warning's instant first, unless that warning is done.

        Done: recorded (or found recorded) by a fire, or its deadline came without it (the
        sweeper was down, or the job's events came late): a look then would warn of nothing.
        """
        if pending is None:
            if due is None:
                self._warned.pop(key, None)  # gone, or never due as it stands
            return due
        done = self._warned.get(key) == pending.name or self._clock.now() >= pending.deadline
        if done or (due is not None and due <= pending.at):
            return due
        return pending.at

    def _arm_earlier(self, key: JobKey, look: datetime | None) -> None:
        # The earlier wins: an extra look re-reads and judges the job as it is now; one armed
        # late, or a timer dropped, would be a deadline not enforced.
        current = self._timers.when(key)
        if look is not None and (current is None or look < current):
            self._timers.arm(key, look)

    def take_due(self, now: datetime) -> list[tuple[JobKey, datetime]]:
        """Take every due timer for its fire, with its instant, unless another actor holds it.

        A timer that comes due while an actor holds its job is looked at once the job is let go.
        """
        with self._lock:
            fire: list[tuple[JobKey, datetime]] = []
            for key, due in self._timers.pop_due(now):
                if key in self._held:
                    deferred = self._held[key]
                    self._held[key] = due if deferred is None else min(deferred, due)
                    continue
                self._held[key] = None
                if self._taken_in_pass is not None:
                    self._taken_in_pass.add(key)
                fire.append((key, due))
            return fire

    def _release(self, fired: Fired) -> None:
        if fired.warned is not None:
            self._warned[fired.key] = fired.warned
        deferred = self._held.pop(fired.key, None)
        self._arm_earlier(fired.key, self._retry(fired))
        self._arm_earlier(fired.key, deferred)

    def _retry(self, fired: Fired) -> datetime | None:
        """When to look at a fired job again: its backoff after a failure, else as it said."""
        if fired.ending is Ending.SETTLED:
            self._failures.pop(fired.key, None)
        if fired.ending is not Ending.FAILED:
            now = self._clock.now()
            if fired.rearm is not None and fired.rearm <= now:
                return now + timedelta(seconds=REFIRE_AFTER_S)
            return fired.rearm
        failures = min(self._failures.get(fired.key, 0) + 1, _FAILURES_COUNTED)
        self._failures[fired.key] = failures
        delay = _FIRE_BACKOFF.backoff(failures, random.uniform)
        return self._clock.now() + timedelta(seconds=delay)

    def warned(self, key: JobKey) -> str | None:
        """The warning (its Event's name) a fire recorded or found recorded for the job."""
        with self._lock:
            return self._warned.get(key)

    def failures(self, key: JobKey) -> int:
        """Consecutive failed fires of a job (0 after a success, a change, or its deletion)."""
        with self._lock:
            return self._failures.get(key, 0)

    # --- the resync thread -----------------------------------------------------------------

    @contextlib.contextmanager
    def passing(self) -> Iterator[None]:
        """Note the jobs timers take while a resync pass runs."""
        with self._lock:
            self._taken_in_pass = set()
        try:
            yield
        finally:
            with self._lock:
                self._taken_in_pass = None

    def take_for_pass(self, key: JobKey) -> bool:
        """Hold a job for a resync pass's action, unless its timer has it or took it.

        The pass lets it go through the inbox, for the main loop to re-arm a look due meanwhile.
        """
        with self._lock:
            taken = self._taken_in_pass is not None and key in self._taken_in_pass
            if taken or key in self._held:
                return False
            self._held[key] = None
            return True
