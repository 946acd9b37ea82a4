"""What a pass keeps of its outcomes for its report: as little as the output format needs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from sweeper.config import OutputFormat
from sweeper.core.model import Outcome
from sweeper.core.tally import Tally
from sweeper.oneshot import report


class Ledger:
    """A pass's outcomes in listing order, kept only as far as its report needs them.

    A skip is final when judged (``settle``); an action holds its place (``expect``) until it ran
    (``resolve``). ``-o json`` keeps record lines, ``-o wide`` outcomes; every one is counted.
    """

    def __init__(self, output: OutputFormat) -> None:
        self._output = output
        self.tally = Tally()
        self.kept: list[Outcome] = []
        # -o wide: every outcome, None where one is expected.
        self._wide: list[Outcome | None] = []
        # -o json: the record lines, and the places of the expected outcomes.
        self._records: list[str | int] = []
        self._expected = 0

    def settle(self, outcome: Outcome) -> None:
        """Add a final outcome (a skip's), at the next place in listing order."""
        self.tally.add(outcome)
        if self._output is OutputFormat.JSON:
            self._records.append(report.record_lines(outcome))
        elif self._output is OutputFormat.WIDE:
            self._wide.append(outcome)

    def expect(self) -> None:
        """Hold the next place for an outcome ``resolve`` will supply."""
        if self._output is OutputFormat.JSON:
            self._records.append(self._expected)
        elif self._output is OutputFormat.WIDE:
            self._wide.append(None)
        self._expected += 1

    def resolve(self, outcomes: Sequence[Outcome]) -> None:
        """Supply the expected outcomes, in the order their places were held."""
        if len(outcomes) != self._expected:
            raise ValueError(f"{len(outcomes)} outcomes for {self._expected} expected places")
        for outcome in outcomes:
            self.tally.add(outcome)
        if self._output is OutputFormat.WIDE:
            # Wide keeps every outcome: the resolved ones go back to their places.
            resolved = iter(outcomes)
            self.kept = [next(resolved) if o is None else o for o in self._wide]
            self._wide = []
        else:
            self.kept = list(outcomes)
        self._expected = 0

    def records(self) -> Iterator[str]:
        """``-o json``'s record lines, in listing order (after ``resolve``)."""
        for record in self._records:
            yield report.record_lines(self.kept[record]) if isinstance(record, int) else record
