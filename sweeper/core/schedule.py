"""The watch mode's timers: one per job, at the instant the job becomes due. Pure data.

Each event about a job re-arms its timer (``arm``) or drops it; the loop sleeps until the
earliest and takes every timer due (gone until the next event re-arms it). A binary heap with
lazy deletion: a re-armed timer's old entry is stale by its sequence number, and the heap is
rebuilt when stale entries outnumber live ones, so memory stays with the jobs tracked.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterator
from datetime import datetime
from typing import Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)


class Schedule(Generic[Key]):
    """At most one timer per key, each at an instant (an aware datetime)."""

    def __init__(self) -> None:
        self._armed: dict[Key, tuple[datetime, int]] = {}
        self._heap: list[tuple[datetime, int, Key]] = []
        self._sequence = itertools.count()

    def __len__(self) -> int:
        return len(self._armed)

    def __contains__(self, key: object) -> bool:
        return key in self._armed

    def __iter__(self) -> Iterator[Key]:
        return iter(list(self._armed))

    def when(self, key: Key) -> datetime | None:
        """The instant a key's timer is armed for, if any."""
        armed = self._armed.get(key)
        return None if armed is None else armed[0]

    def arm(self, key: Key, due: datetime | None) -> None:
        """Arm (or re-arm) the key's timer at ``due``; ``None`` (never due as is) disarms it."""
        if due is None:
            self.drop(key)
            return
        current = self._armed.get(key)
        if current is not None and current[0] == due:
            return  # an event that changed nothing due-related: keep the entry
        sequence = next(self._sequence)
        self._armed[key] = (due, sequence)
        heapq.heappush(self._heap, (due, sequence, key))
        self._compact()

    def drop(self, key: Key) -> None:
        """Disarm the key's timer (a DELETED event, or a job no longer listed)."""
        if self._armed.pop(key, None) is not None:
            self._compact()

    def drop_where(self, gone: Callable[[Key], bool]) -> list[Key]:
        """Drop every timer whose key ``gone`` picks (a relist: the vanished jobs of its scope)."""
        vanished = [key for key in self._armed if gone(key)]
        for key in vanished:
            self.drop(key)
        return vanished

    def next_due(self) -> datetime | None:
        """The earliest armed instant, ``None`` when nothing is armed."""
        self._discard_stale()
        return self._heap[0][0] if self._heap else None

    def due_keys(self, now: datetime) -> list[Key]:
        """The keys whose timers are due at ``now``, in no order, not taken (the overdue gauge)."""
        return [key for key, (due, _sequence) in self._armed.items() if due <= now]

    def pop_due(self, now: datetime) -> list[tuple[Key, datetime]]:
        """Take (disarm) every timer due at ``now``, earliest first, with its instant."""
        taken: list[tuple[Key, datetime]] = []
        while True:
            self._discard_stale()
            if not self._heap or self._heap[0][0] > now:
                return taken
            due, _sequence, key = heapq.heappop(self._heap)
            del self._armed[key]
            taken.append((key, due))

    def _discard_stale(self) -> None:
        heap = self._heap
        while heap:
            due, sequence, key = heap[0]
            if self._armed.get(key) == (due, sequence):
                return
            heapq.heappop(heap)

    def _compact(self) -> None:
        if len(self._heap) > 2 * len(self._armed) + 64:
            self._heap = [(due, seq, key) for key, (due, seq) in self._armed.items()]
            heapq.heapify(self._heap)
