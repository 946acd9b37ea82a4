"""Lists read ahead of their reader: the API server's time and the sweeper's overlap.

``ReadAhead`` reads the lists (one per kind and namespace) on a few threads, each list by one
thread, while the caller takes the pages in the order it submitted the lists. Nothing changes
but the timing: the same requests, the same order, the same errors, raised from the caller's
iteration of that list. At most ``ahead`` pages wait, plus one of the caller's list (so it
never waits on a reader that waits for room) and one being read per reader
(docs/benchmarks.md). Pages and iterators are shared under one lock.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _End:
    """The last item of a list's pages: the list ended, with ``error`` if it failed."""

    error: BaseException | None = None


@dataclass(slots=True)
class _List(Generic[T]):
    open: Callable[[], Iterator[T]]
    # Guarded by ReadAhead._room.
    pages: deque[T | _End] = field(default_factory=deque)


class ReadAhead(Generic[T]):
    """Reads submitted lists ahead on ``workers`` threads; leaving the block cancels the rest."""

    def __init__(self, *, workers: int = 2, ahead: int = 8, name: str = "read-ahead") -> None:
        if workers < 1 or ahead < 1:
            raise ValueError("workers and ahead must be at least 1")
        self._ahead = ahead
        self._name = name
        self._workers = workers
        self._lists: dict[Hashable, _List[T]] = {}
        self._waiting: queue.SimpleQueue[_List[T] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._cancelled = threading.Event()
        # Guards every list's pages, the count and the caller's list; notified at every change.
        self._room = threading.Condition()
        self._queued = 0
        self._current: _List[T] | None = None

    def __enter__(self) -> ReadAhead[T]:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        self.close()

    def submit(self, key: Hashable, open_list: Callable[[], Iterator[T]]) -> None:
        """Queue a list under a unique ``key``; ``open_list`` is called on a reader thread."""
        if key in self._lists:
            raise ValueError(f"list {key!r} was submitted twice")
        entry: _List[T] = _List(open_list)
        self._lists[key] = entry
        self._waiting.put(entry)
        if len(self._threads) < self._workers:
            thread = threading.Thread(
                target=self._read, name=f"{self._name}-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def pages(self, key: Hashable) -> Iterator[T]:
        """The pages of a submitted list, in order; then whatever reading it raised, if any."""
        entry = self._lists[key]
        with self._room:
            # Its reader may be waiting for room: the caller's list always gets a place.
            self._current = entry
            self._room.notify_all()
        while True:
            with self._room:
                while not entry.pages:
                    self._room.wait()
                item = entry.pages.popleft()
                if not isinstance(item, _End):
                    self._queued -= 1
                    self._room.notify_all()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item

    def close(self) -> None:
        """Stop reading: readers finish the request they are in (daemons) and read nothing more."""
        self._cancelled.set()
        for _ in self._threads:
            self._waiting.put(None)
        with self._room:
            for entry in self._lists.values():
                entry.pages.clear()
            self._queued = 0
            self._room.notify_all()

    def _read(self) -> None:
        while not self._cancelled.is_set():
            entry = self._waiting.get()
            if entry is None:
                return
            self._read_list(entry)

    def _read_list(self, entry: _List[T]) -> None:
        end = _End()
        iterator: Iterator[T] | None = None
        try:
            iterator = entry.open()
            for page in iterator:
                if not self._put(entry, page):
                    return
        except BaseException as error:  # noqa: BLE001 - handed to the caller, raised there
            end = _End(error)
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()
        self._put(entry, end)

    def _put(self, entry: _List[T], item: T | _End) -> bool:
        """Add ``item`` once there is room; False when the reading was cancelled.

        An end takes no place, a page one of ``ahead``, or the caller's list's own (it moves).
        """
        with self._room:
            while not self._cancelled.is_set():
                if (
                    isinstance(item, _End)
                    or self._queued < self._ahead
                    or (entry is self._current and not entry.pages)
                ):
                    entry.pages.append(item)
                    if not isinstance(item, _End):
                        self._queued += 1
                    self._room.notify_all()
                    return True
                self._room.wait()
            return False
