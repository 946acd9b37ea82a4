"""The report of each pass: a table or JSON on stdout, log lines on stderr.

``-o text`` counts the skipped jobs by reason, ``-o wide`` lists them too. ``-o json`` is one
document per pass, written job by job, one job per line: container runtimes split lines over
16 KiB. Logs: one line per action and one summary line per pass.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from sweeper.config import ClockMode, DryRun
from sweeper.core.clock import format_rfc3339, human
from sweeper.core.held import HeldState
from sweeper.core.jobs import Job
from sweeper.core.model import (
    CLEAN_UPS,
    Action,
    ActionKind,
    ActionMode,
    Outcome,
    Result,
    SkipReason,
)
from sweeper.core.tally import Tally, has_errors
from sweeper.core.warn import Warned
from sweeper.logs import MAX_LINE_BYTES, job_fields, shorten
from sweeper.oneshot import holding, notice

log = logging.getLogger(__name__)

HELD_STATES = tuple(state.value for state in HeldState)

_RECORDS_PER_WRITE = 256
# json.dumps with its defaults, less the check for circular references: records are trees
# the report builds itself. Same bytes, a tenth less time per record (10,000 per pass).
_encode = json.JSONEncoder(check_circular=False).encode


@dataclass(frozen=True, slots=True)
class PassReport:
    """Everything one pass has to say; ``now`` is ``None`` when it stopped before any clock.

    ``outcomes``: those its ``Ledger`` kept, in listing order; ``unlisted``: the lists refused.
    """

    number: int
    now: datetime | None
    clock: ClockMode
    dry_run: DryRun | None
    action: ActionMode
    outcomes: Sequence[Outcome]
    duration_s: float
    stopped_by: str | None = None
    unlisted: tuple[str, ...] = ()
    warnings: Sequence[Warned] = ()
    held: holding.Found = field(default_factory=holding.Found)


@dataclass(frozen=True, slots=True)
class Summary:
    """A pass in numbers: the ``summary`` of ``-o json``, the last line of the table, the log.

    ``actions`` and ``skipped`` in their enums' order (no reason at 0); ``errors``: jobs (exit 1).
    """

    jobs: int
    actions: dict[str, int]
    skip: int
    skipped: dict[str, int]
    results: dict[str, int]
    errors: int
    duration_s: float
    stopped_by: str | None
    unlisted: tuple[str, ...] = ()
    misconfigured: tuple[str, ...] = ()
    held: dict[str, dict[str, int]] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        """The JSON form, keyed by decision as the report spells them (``terminate-pods``)."""
        return {
            "jobs": self.jobs,
            **self.actions,
            "skip": self.skip,
            "skipped": self.skipped,
            "results": self.results,
            "errors": self.errors,
            "duration_s": self.duration_s,
            "stopped_by": self.stopped_by,
            "unlisted": list(self.unlisted),
            "misconfigured": list(self.misconfigured),
            "held": self.held,
        }

    @classmethod
    def of(
        cls, tally: Tally, duration_s: float, stopped_by: str | None, unlisted: tuple[str, ...] = ()
    ) -> Summary:
        """A pass's summary from its tally (every kind summed)."""
        decisions, skipped = tally.decisions(), tally.reasons()
        return cls(
            jobs=tally.jobs,
            actions={kind.value: decisions[kind.value] for kind in ActionKind},
            skip=decisions["skip"],
            skipped={
                reason.value: skipped[reason.value]
                for reason in SkipReason
                if skipped[reason.value]
            },
            results=dict(sorted(tally.results().items())),
            errors=tally.errors,
            duration_s=round(duration_s, 3),
            stopped_by=stopped_by,
            unlisted=unlisted,
            misconfigured=tally.misconfigured,
            held={
                state: {
                    what: sum(n for (_, _, why), n in counted.items() if why == state)
                    for what, counted in (("pods", tally.held), ("gpus", tally.held_gpus))
                }
                for state in HELD_STATES
            },
        )


def summary(report: PassReport) -> Summary:
    """Count a pass's decisions, skip reasons, results and errors. Pure."""
    return Summary.of(
        Tally.of(report.outcomes), report.duration_s, report.stopped_by, report.unlisted
    )


def job_record(outcome: Outcome) -> dict[str, Any]:
    """Render one outcome as the ``jobs[]`` item of ``-o json``. Pure."""
    entry = outcome.entry
    job = entry.job
    record: dict[str, Any] = {
        "kind": job.kind.name,
        "apiVersion": f"{job.kind.group}/{job.version}",
        "namespace": job.namespace,
        "name": job.name,
        "uid": job.uid,
        "decision": entry.decision,
        "reason": entry.reason,
        "detail": outcome.detail or entry.detail,
        "started": _time(job.start_time),
        "deadline": _time(job.deadline),
        "deadline_source": job.deadline_source.value,
        "rule": job.rule,
        "seconds_overdue": entry.seconds_overdue,
        "result": outcome.result.value,
        "errors": list(outcome.errors),
    }
    if job.exemption_refused:
        record["exemption_refused"] = True
    if outcome.touch_refused:
        record["touch_refused"] = outcome.touch_refused
    if isinstance(entry, Action):
        record["patch"] = outcome.body
        if entry.kind is ActionKind.DELETE_JOBSET or outcome.jobsets:
            record["deleted"] = {"jobsets": list(outcome.jobsets)}
        elif entry.kind not in (ActionKind.TOUCH, ActionKind.SET_DEADLINE):
            record["deleted"] = {"pods": list(outcome.pods), "services": list(outcome.services)}
    return record


def record_lines(outcome: Outcome) -> str:
    """A job's record as the lines of ``-o json`` hold it: one, if it fits in one."""
    record = job_record(outcome)
    line = _encode(record)
    if _fits(line):
        return "    " + line
    # A string longer than a line may be (a server's message, a field no webhook checks) is
    # cut down as the logs cut theirs; the pods and services deleted are all kept.
    shortened = shorten(record, lists=False)
    if shortened != record:
        record = shortened | {"truncated": True}
        line = _encode(record)
        if _fits(line):
            return "    " + line
    # Hundreds of deleted pods: one value per line instead.
    return "    " + json.dumps(record, indent=2).replace("\n", "\n    ")


def _fits(line: str) -> bool:
    # Room for the record's indent and its comma.
    return len(line) * 4 < MAX_LINE_BYTES or len(line.encode()) < MAX_LINE_BYTES - 8


def write_json(
    stream: TextIO,
    report: PassReport,
    counts: Summary | None = None,
    records: Iterable[str] | None = None,
) -> None:
    """Write one pass as one JSON document, one job per line.

    ``counts``: ``summary(report)``, if the caller has it; ``records``: a ``Ledger``'s lines.
    """
    head = {
        "pass": report.number,
        "now": _time(report.now),
        "clock": report.clock.value,
        "dry_run": report.dry_run.value if report.dry_run else None,
        "action": report.action.value,
    }
    stream.write(json.dumps(head)[:-1])
    stream.write(', "jobs": [')
    lines = iter(records if records is not None else map(record_lines, report.outcomes))
    # Chunks of records: one write per record costs more than encoding it, one write for
    # all would hold the whole document in memory.
    first = True
    while chunk := list(itertools.islice(lines, _RECORDS_PER_WRITE)):
        stream.write("\n" if first else ",\n")
        stream.write(",\n".join(chunk))
        first = False
    stream.write("]" if first else "\n  ]")
    notice.write_json(stream, report.warnings, report.now)
    holding.write_json(stream, report.held.jobs)
    stream.write(', "summary": ')
    stream.write(json.dumps((counts or summary(report)).document()))
    stream.write("}\n")
    stream.flush()


_COLUMNS = ("KIND", "NAMESPACE", "NAME", "STARTED", "DEADLINE", "OVERDUE BY", "DECISION", "RESULT")


def table_row(outcome: Outcome) -> tuple[str, ...]:
    """Render one outcome as a row of the text table, in ``_COLUMNS`` order. Pure."""
    entry = outcome.entry
    job = entry.job
    decision = f"{entry.decision} ({entry.reason})"
    if outcome.result is Result.SKIPPED:
        result = outcome.detail or entry.detail or "-"
    else:
        parts = [outcome.result.value, outcome.detail, _deleted(outcome), *outcome.errors]
        result = ": ".join(part for part in parts if part)
    return (
        job.kind.name,
        job.namespace or "-",
        job.name or "-",
        _time(job.start_time) or "-",
        _deadline(job),
        human(entry.seconds_overdue),
        decision,
        result,
    )


def _deadline(job: Job) -> str:
    # Under a platform rule, where the deadline comes from: 2024-05-01T12:00:00Z (24h default,
    # rule gpu), and an exclude annotation the rule refused.
    cell = _time(job.deadline) or "-"
    if job.rule is None:
        return cell
    source = (
        f"{human(job.deadline_seconds)} {job.deadline_source.value}, "
        if job.deadline_seconds is not None
        else ""
    )
    refused = ", exclude ignored" if job.exemption_refused else ""
    return f"{cell} ({source}rule {job.rule}{refused})"


_NAMED = 3  # names a table cell shows of what a clean-up deleted; the rest are counted


def _deleted(outcome: Outcome) -> str:
    # What a clean-up deleted, or would delete in a dry run: the names, not only a count.
    named = []
    for what, names in (("pods", outcome.pods), ("jobset", outcome.jobsets)):
        if names:
            more = f" (+{len(names) - _NAMED} more)" if len(names) > _NAMED else ""
            named.append(f"{what} {', '.join(names[:_NAMED])}{more}")
    return "; ".join(named)


def write_text(
    stream: TextIO, report: PassReport, *, wide: bool = False, counts: Summary | None = None
) -> None:
    """Write one pass: a header, actions and errors (``wide``: every job), skips, a summary."""
    mode = f", dry run ({report.dry_run.value})" if report.dry_run else ""
    when = _time(report.now) or "-"
    stream.write(
        f"Pass {report.number} at {when} ({report.clock.value} clock), "
        f"action {report.action.value}{mode}\n"
    )
    counts = counts or summary(report)
    shown = [o for o in report.outcomes if wide or isinstance(o.entry, Action) or has_errors(o)]
    rows = [table_row(outcome) for outcome in shown]
    if rows:
        widths = [max(len(row[i]) for row in [_COLUMNS, *rows]) for i in range(len(_COLUMNS))]
        for row in [_COLUMNS, *rows]:
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
            stream.write("  ".join(cells).rstrip() + "\n")
    elif counts.jobs:
        stream.write("Nothing to do.\n")
    elif not counts.unlisted and not counts.stopped_by:
        # A pass that stopped, or could not list everything, did not find "no jobs": the
        # summary line and the unlisted lines say why.
        stream.write("No Kubeflow jobs found.\n")
    for unlisted in counts.unlisted:
        stream.write(f"Not listed, its jobs not judged: {unlisted}\n")
    notice.write_text(stream, report.warnings, report.now)
    holding.write_text(stream, report.held, wide=wide)
    hidden = counts.jobs - len(shown)
    if hidden:
        by_reason = ", ".join(f"{reason} {n}" for reason, n in counts.skipped.items())
        stream.write(f"Skipped {_count(hidden, 'job')} ({by_reason}); -o wide lists them.\n")
    stream.write(summary_line(counts) + "\n")
    stream.flush()


def summary_line(counts: Summary) -> str:
    """Render a summary as one human line (``3 jobs: 1 touch, ... 0 errors; 0.4s``). Pure."""
    skipped = ", ".join(f"{reason} {n}" for reason, n in counts.skipped.items())
    actions = ", ".join(f"{n} {decision}" for decision, n in counts.actions.items())
    line = (
        f"{_count(counts.jobs, 'job')}: {actions}, {counts.skip} skip"
        f"{f' ({skipped})' if skipped else ''}; {_count(counts.errors, 'error')}; "
        f"{human(counts.duration_s)}"
    )
    if counts.unlisted:
        line += f"; lists refused: {len(counts.unlisted)}"
    if counts.misconfigured:  # a WARNING of the pass says what and the fix
        line += f"; misconfigured: {', '.join(counts.misconfigured)}"
    if counts.stopped_by:
        line += f"; stopped: {counts.stopped_by}"
    return line


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def log_outcome(outcome: Outcome, dry_run: DryRun | None) -> None:
    """Log one line for an action's outcome (skips only at debug level)."""
    if outcome.result is Result.SKIPPED and not log.isEnabledFor(logging.DEBUG):
        return  # thousands of skips per pass: do not even build their fields
    entry = outcome.entry
    job = entry.job
    fields: dict[str, Any] = {
        **job_fields(job),
        "action": entry.decision,
        "reason": entry.reason,
        "seconds_overdue": entry.seconds_overdue,
        "dry_run": dry_run.value if dry_run else None,
        "result": outcome.result.value,
    }
    if outcome.errors:
        fields["errors"] = list(outcome.errors)
    if outcome.touch_refused:
        fields["touch_refused"] = outcome.touch_refused
    detail = "; ".join(part for part in (outcome.detail or entry.detail, *outcome.errors) if part)
    result = "" if outcome.result is Result.SKIPPED else f" -> {outcome.result.value}"
    if not result:
        log_at = log.debug
    elif has_errors(outcome):
        log_at = log.error
    elif outcome.touch_refused:
        log_at = log.warning  # handled, but the operator (or admission) refused its nudge
    elif (
        outcome.result is Result.LEFT_ALONE
        and isinstance(entry, Action)
        and entry.kind in CLEAN_UPS
    ):
        # Nothing left to reclaim: a watch timer fires the clean-up right after its own fail,
        # when the pods are often gone already (a pass plans it as a skip: finished).
        log_at = log.debug
    else:
        log_at = log.info
    log_at(
        "%s %s/%s: %s (%s)%s %s",
        job.kind.name,
        job.namespace,
        job.name,
        entry.decision,
        entry.reason,
        result,
        detail,
        extra=fields,
    )


def log_summary(report: PassReport, counts: Summary | None = None) -> None:
    """Log a pass's one summary line; its fields are ``-o json``'s ``summary``, keys included."""
    counts = counts or summary(report)
    log.info(
        "pass %d: %s",
        report.number,
        summary_line(counts),
        extra={
            "pass": report.number,
            "now": _time(report.now),
            "clock": report.clock.value,
            "dry_run": report.dry_run.value if report.dry_run else None,
            **counts.document(),
        },
    )


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else format_rfc3339(moment)
