"""sweeper.k8s.readahead.ReadAhead: order, errors in place, bounded memory, cancellation."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from sweeper.k8s.readahead import ReadAhead

WAIT_S = 10.0


class Source:
    """A list of ``pages`` pages (then ``error``, if given) that records what was read."""

    def __init__(self, name: str, pages: int | None, error: Exception | None = None) -> None:
        self.name = name
        self.pages = pages
        self.error = error
        self.produced = 0
        self.opened = threading.Event()
        self.closed = threading.Event()
        self.thread: str | None = None

    def open(self) -> Iterator[str]:
        self.opened.set()
        self.thread = threading.current_thread().name
        return self._pages()

    def _pages(self) -> Iterator[str]:
        try:
            while self.pages is None or self.produced < self.pages:
                self.produced += 1
                yield f"{self.name}{self.produced}"
            if self.error is not None:
                raise self.error
        finally:
            self.closed.set()


def _until(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.005)


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_pages_come_in_submission_order_list_by_list(workers: int) -> None:
    sources = [Source(name, pages) for name, pages in zip("abcde", [3, 1, 0, 5, 2], strict=True)]
    with ReadAhead[str](workers=workers, ahead=1) as ahead:
        for source in sources:
            ahead.submit(source.name, source.open)
        got = [list(ahead.pages(source.name)) for source in sources]
    assert got == [[f"{s.name}{i}" for i in range(1, (s.pages or 0) + 1)] for s in sources]
    assert all(source.closed.is_set() for source in sources)


def test_lists_run_on_reader_threads_at_most_workers_at_once() -> None:
    sources = [Source(name, None) for name in "abc"]
    with ReadAhead[str](workers=2, ahead=2, name="list") as ahead:
        for source in sources:
            ahead.submit(source.name, source.open)
        _until(lambda: sources[0].opened.is_set() and sources[1].opened.is_set(), "a and b")
        # The two places are taken and both readers hold a page: c waits for one of them.
        _until(lambda: sources[0].produced + sources[1].produced == 4, "the places to fill")
        time.sleep(0.1)
        assert sources[0].produced + sources[1].produced == 4
        assert not sources[2].opened.is_set()
        assert {sources[0].thread, sources[1].thread} == {"list-0", "list-1"}


def test_at_most_ahead_pages_wait_in_every_list_together() -> None:
    sources = [Source(name, 2) for name in "abcdef"]
    with ReadAhead[str](workers=2, ahead=3) as ahead:
        for source in sources:
            ahead.submit(source.name, source.open)
        # Short lists are read to their end and the readers go on to the next ones, until
        # three pages wait and each reader holds one more (a bound per list would let 12 wait).
        _until(lambda: sum(s.produced for s in sources) == 5, "the places to fill")
        time.sleep(0.2)
        assert sum(s.produced for s in sources) == 5
        got = [list(ahead.pages(source.name)) for source in sources]
    assert got == [[f"{s.name}1", f"{s.name}2"] for s in sources]


def test_a_long_list_is_read_ahead_while_the_caller_is_on_the_one_before() -> None:
    short = Source("a", 2)
    long = Source("b", 12)
    with ReadAhead[str](workers=2, ahead=8) as ahead:
        ahead.submit("a", short.open)
        ahead.submit("b", long.open)
        a_pages = ahead.pages("a")
        assert next(a_pages) == "a1"
        # The caller is still on a: b's reader takes the places a2 leaves, and holds one more.
        _until(lambda: long.produced == 8, "b to be read ahead")
        time.sleep(0.2)
        assert long.produced == 8
        assert list(a_pages) == ["a2"]
        assert list(ahead.pages("b")) == [f"b{i}" for i in range(1, 13)]


def test_the_callers_list_moves_when_later_lists_hold_every_place() -> None:
    slow = Source("a", 3)
    later = [Source(name, 4) for name in "bc"]
    gate = threading.Event()

    def open_slow() -> Iterator[str]:
        # a's first page comes only after b has taken every place.
        gate.wait(WAIT_S)
        return slow.open()

    with ReadAhead[str](workers=2, ahead=2) as ahead:
        ahead.submit("a", open_slow)
        for source in later:
            ahead.submit(source.name, source.open)
        _until(lambda: later[0].produced == 3, "b to take both places and hold a third page")
        gate.set()
        # No place is free, but a is the caller's list and has nothing waiting: it moves.
        got: list[list[str]] = []
        caller = threading.Thread(target=lambda: got.append(list(ahead.pages("a"))), daemon=True)
        caller.start()
        caller.join(WAIT_S)
        assert got == [["a1", "a2", "a3"]], "the caller's list never moved"
        assert [list(ahead.pages(s.name)) for s in later] == [
            [f"{s.name}{i}" for i in range(1, 5)] for s in later
        ]


def test_an_error_is_raised_after_the_pages_before_it_and_only_for_its_list() -> None:
    broken = Source("b", 2, error=RuntimeError("b broke"))
    after = Source("c", 2)
    with ReadAhead[str](workers=2, ahead=1) as ahead:
        ahead.submit("b", broken.open)
        ahead.submit("c", after.open)
        got: list[str] = []
        with pytest.raises(RuntimeError, match="b broke"):
            for page in ahead.pages("b"):
                got.append(page)
        assert got == ["b1", "b2"]
        assert list(ahead.pages("c")) == ["c1", "c2"]


def test_an_error_opening_a_list_is_raised_from_its_pages() -> None:
    def refuse() -> Iterator[str]:
        raise PermissionError("forbidden")

    with ReadAhead[str]() as ahead:
        ahead.submit("a", refuse)
        with pytest.raises(PermissionError, match="forbidden"):
            list(ahead.pages("a"))


def test_leaving_the_block_stops_the_readers_and_closes_their_lists() -> None:
    endless = Source("a", None)
    waiting = Source("b", None)
    with ReadAhead[str](workers=1, ahead=1) as ahead:
        ahead.submit("a", endless.open)
        ahead.submit("b", waiting.open)
        assert next(ahead.pages("a")) == "a1"
    _until(endless.closed.is_set, "the reader to close its list")
    produced = endless.produced
    time.sleep(0.2)
    assert endless.produced == produced
    # A list no reader had started is never started.
    assert not waiting.opened.is_set()


def test_a_caller_error_mid_list_stops_the_reading() -> None:
    endless = Source("a", None)
    with pytest.raises(KeyError), ReadAhead[str](workers=1, ahead=2) as ahead:
        ahead.submit("a", endless.open)
        for page in ahead.pages("a"):
            if page == "a3":
                raise KeyError(page)
    _until(endless.closed.is_set, "the reader to close its list")
    assert endless.produced <= 3 + 2 + 1


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ReadAhead[str](workers=0)
    with pytest.raises(ValueError, match="at least 1"):
        ReadAhead[str](ahead=0)
    with ReadAhead[str]() as ahead:
        ahead.submit("a", Source("a", 1).open)
        with pytest.raises(ValueError, match="submitted twice"):
            ahead.submit("a", Source("a", 1).open)


def test_the_reader_threads_end_with_the_block_so_repeated_passes_leak_none() -> None:
    before = set(threading.enumerate())
    for _ in range(3):
        with ReadAhead[str](workers=2, ahead=1, name="pass") as ahead:
            for name in "abc":
                ahead.submit(name, Source(name, 2).open)
            for name in "abc":
                assert len(list(ahead.pages(name))) == 2
    _until(lambda: set(threading.enumerate()) <= before, "the readers to end")
