"""The report of each pass: a table or JSON on stdout, log lines on stderr.

stdout carries only the report. ``-o text``: a table of the actions (errors included), the
skipped jobs counted by reason, and a one-line summary, so ten thousand finished jobs cost one
line, not ten thousand; ``-o wide`` lists the skipped jobs too. ``-o json``: one JSON document
per pass with every job, written job by job (a pass over thousands of jobs never holds its
whole document in memory), one job per line: container runtimes split lines longer than
16 KiB, so no line of the report (nor of the logs, see ``sweeper.logs``) is allowed to be.
Logs: one line per action and one summary line per pass, with the job's reference and the
decision as fields. People read durations as ``1h02m``; JSON keeps exact seconds.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from sweeper.act import Outcome, Result
from sweeper.clock import format_rfc3339, human
from sweeper.config import ClockMode, DryRun
from sweeper.decide import Action, ActionKind, ActionMode, SkipReason

log = logging.getLogger(__name__)

_FAILED = (Result.ERROR,)
_RECORDS_PER_WRITE = 256
# json.dumps with its defaults, less the check for circular references: records are trees
# the report builds itself. Same bytes, a tenth less time per record (10,000 per pass).
_encode = json.JSONEncoder(check_circular=False).encode
# Container runtimes (CRI) split longer lines into partial log entries.
MAX_LINE_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class PassReport:
    """Everything one pass has to say.

    Attributes:
        number: The pass number, from 1.
        now: The pass's instant (``None`` when it stopped before reading a clock).
        clock: Whose clock ``now`` is.
        dry_run: The dry-run mode, ``None`` when writing.
        action: ``--action``.
        outcomes: One per listed job, in listing order.
        duration_s: Seconds the pass took.
        stopped_by: What stopped the pass early (a signal, ``--timeout``), if anything.
    """

    number: int
    now: datetime | None
    clock: ClockMode
    dry_run: DryRun | None
    action: ActionMode
    outcomes: Sequence[Outcome]
    duration_s: float
    stopped_by: str | None = None


def has_errors(outcome: Outcome) -> bool:
    """Whether an outcome counts as an error (exit code 1).

    Returns:
        True when its action failed or any of its requests did.
    """
    return outcome.result in _FAILED or bool(outcome.errors)


@dataclass(frozen=True, slots=True)
class Summary:
    """A pass in numbers: the ``summary`` of ``-o json``, the last line of the table, the log.

    Attributes:
        jobs: Jobs listed.
        touch: Touches planned.
        fail: Fails planned.
        terminate_pods: Pod clean-ups of jobs already failed by their deadline.
        skip: Jobs left alone.
        skipped: Skips by reason, in :class:`~sweeper.decide.SkipReason` order, none at 0.
        results: Outcomes by result, by name.
        errors: Jobs with an error (exit code 1).
        duration_s: Seconds the pass took, to the millisecond.
        stopped_by: What stopped the pass early, if anything.
    """

    jobs: int
    touch: int
    fail: int
    terminate_pods: int
    skip: int
    skipped: dict[str, int]
    results: dict[str, int]
    errors: int
    duration_s: float
    stopped_by: str | None

    def document(self) -> dict[str, Any]:
        """The JSON form, keyed by decision as the report spells them (``terminate-pods``)."""
        document: dict[str, Any] = {"jobs": self.jobs}
        for kind in ActionKind:
            document[kind.value] = self.actions(kind)
        return document | {
            "skip": self.skip,
            "skipped": self.skipped,
            "results": self.results,
            "errors": self.errors,
            "duration_s": self.duration_s,
            "stopped_by": self.stopped_by,
        }

    def actions(self, kind: ActionKind) -> int:
        """How many actions of one kind were planned."""
        return {
            ActionKind.TOUCH: self.touch,
            ActionKind.FAIL: self.fail,
            ActionKind.TERMINATE_PODS: self.terminate_pods,
        }[kind]


def summary(report: PassReport) -> Summary:
    """Count a pass's decisions, skip reasons, results and errors. Pure."""
    decisions: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    results: Counter[str] = Counter()
    errors = 0
    for outcome in report.outcomes:
        decisions[outcome.entry.decision] += 1
        results[outcome.result.value] += 1
        if not isinstance(outcome.entry, Action):
            skipped[outcome.entry.reason] += 1
        errors += has_errors(outcome)
    return Summary(
        jobs=len(report.outcomes),
        touch=decisions[ActionKind.TOUCH.value],
        fail=decisions[ActionKind.FAIL.value],
        terminate_pods=decisions[ActionKind.TERMINATE_PODS.value],
        skip=decisions["skip"],
        skipped={
            reason.value: skipped[reason.value] for reason in SkipReason if skipped[reason.value]
        },
        results=dict(sorted(results.items())),
        errors=errors,
        duration_s=round(report.duration_s, 3),
        stopped_by=report.stopped_by,
    )


def job_record(outcome: Outcome) -> dict[str, Any]:
    """Render one outcome as the ``jobs[]`` item of ``-o json``. Pure."""
    entry = outcome.entry
    job = entry.job
    record: dict[str, Any] = {
        "kind": job.kind.name,
        "apiVersion": f"kubeflow.org/{job.version}",
        "namespace": job.namespace,
        "name": job.name,
        "uid": job.uid,
        "decision": entry.decision,
        "reason": entry.reason,
        "detail": outcome.detail or entry.detail,
        "started": _time(job.start_time),
        "deadline": _time(job.deadline),
        "seconds_overdue": entry.seconds_overdue,
        "result": outcome.result.value,
        "errors": list(outcome.errors),
    }
    if outcome.touch_refused:
        record["touch_refused"] = outcome.touch_refused
    if isinstance(entry, Action):
        record["patch"] = outcome.body
        if entry.kind is not ActionKind.TOUCH:
            record["deleted"] = {"pods": list(outcome.pods), "services": list(outcome.services)}
    return record


def _record_lines(outcome: Outcome) -> str:
    line = _encode(job_record(outcome))
    if len(line) * 4 < MAX_LINE_BYTES or len(line.encode()) < MAX_LINE_BYTES - 8:
        return "    " + line
    # Hundreds of deleted pods: one value per line instead.
    return "    " + json.dumps(job_record(outcome), indent=2).replace("\n", "\n    ")


def write_json(stream: TextIO, report: PassReport, counts: Summary | None = None) -> None:
    """Write one pass as one JSON document, job by job, one job per line.

    ``counts`` is ``summary(report)`` when the caller has it already.
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
    outcomes = report.outcomes
    # Chunks of records: one write per record costs more than encoding it, one write for
    # all would hold the whole document in memory.
    for start in range(0, len(outcomes), _RECORDS_PER_WRITE):
        chunk = outcomes[start : start + _RECORDS_PER_WRITE]
        stream.write(",\n" if start else "\n")
        stream.write(",\n".join(_record_lines(outcome) for outcome in chunk))
    stream.write("\n  ]" if outcomes else "]")
    stream.write(', "summary": ')
    stream.write(json.dumps((counts or summary(report)).document()))
    stream.write("}\n")
    stream.flush()


_COLUMNS = ("KIND", "NAMESPACE", "NAME", "STARTED", "DEADLINE", "OVERDUE BY", "DECISION", "RESULT")


def table_row(outcome: Outcome) -> tuple[str, ...]:
    """Render one outcome as a row of the text table. Pure.

    Returns:
        The cells, in ``_COLUMNS`` order.
    """
    entry = outcome.entry
    job = entry.job
    decision = f"{entry.decision} ({entry.reason})"
    if outcome.result is Result.SKIPPED:
        result = outcome.detail or entry.detail or "-"
    else:
        parts = [outcome.result.value, outcome.detail, *outcome.errors]
        result = ": ".join(part for part in parts if part)
    return (
        job.kind.name,
        job.namespace or "-",
        job.name or "-",
        _time(job.start_time) or "-",
        _time(job.deadline) or "-",
        duration(entry.seconds_overdue),
        decision,
        result,
    )


def write_text(
    stream: TextIO, report: PassReport, *, wide: bool = False, counts: Summary | None = None
) -> None:
    """Write one pass: a header line, a table, the skips by reason and a summary line.

    Args:
        stream: stdout.
        report: The pass.
        wide: List every job (``-o wide``); by default only actions and errors, the skipped
            jobs being counted by reason.
        counts: ``summary(report)``, when the caller has it already.
    """
    mode = f", dry run ({report.dry_run.value})" if report.dry_run else ""
    when = _time(report.now) or "-"
    stream.write(
        f"Pass {report.number} at {when} ({report.clock.value} clock), "
        f"action {report.action.value}{mode}\n"
    )
    shown = [o for o in report.outcomes if wide or isinstance(o.entry, Action) or has_errors(o)]
    rows = [table_row(outcome) for outcome in shown]
    if rows:
        widths = [max(len(row[i]) for row in [_COLUMNS, *rows]) for i in range(len(_COLUMNS))]
        for row in [_COLUMNS, *rows]:
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
            stream.write("  ".join(cells).rstrip() + "\n")
    elif report.outcomes:
        stream.write("Nothing to do.\n")
    else:
        stream.write("No Kubeflow jobs found.\n")
    counts = counts or summary(report)
    hidden = len(report.outcomes) - len(shown)
    if hidden:
        by_reason = ", ".join(f"{reason} {n}" for reason, n in counts.skipped.items())
        stream.write(f"Skipped {hidden} jobs ({by_reason}); -o wide lists them.\n")
    stream.write(summary_line(counts) + "\n")
    stream.flush()


def summary_line(counts: Summary) -> str:
    """Render a summary as one human line. Pure.

    Returns:
        For example ``3 jobs: 1 touch, 0 fail, 0 terminate-pods, 2 skip (not-yet-due 2);
        0 errors; 0.4s``.
    """
    skipped = ", ".join(f"{reason} {n}" for reason, n in counts.skipped.items())
    actions = ", ".join(f"{counts.actions(kind)} {kind.value}" for kind in ActionKind)
    line = (
        f"{counts.jobs} jobs: {actions}, {counts.skip} skip"
        f"{f' ({skipped})' if skipped else ''}; {counts.errors} errors; "
        f"{human(counts.duration_s)}"
    )
    if counts.stopped_by:
        line += f"; stopped: {counts.stopped_by}"
    return line


def log_outcome(outcome: Outcome, dry_run: DryRun | None) -> None:
    """Log one line for an action's outcome (skips only at debug level)."""
    if outcome.result is Result.SKIPPED and not log.isEnabledFor(logging.DEBUG):
        return  # thousands of skips per pass: do not even build their fields
    entry = outcome.entry
    job = entry.job
    fields: dict[str, Any] = {
        "kind": job.kind.name,
        "namespace": job.namespace,
        # LogRecord reserves "name"; the JSON formatter renames this key back (sweeper.logs).
        "job_name": job.name,
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
    if outcome.result is Result.SKIPPED:
        log.debug(
            "%s %s/%s: skip (%s) %s",
            job.kind.name,
            job.namespace,
            job.name,
            entry.reason,
            detail,
            extra=fields,
        )
        return
    if has_errors(outcome):
        log_at = log.error
    elif outcome.touch_refused:
        log_at = log.warning  # handled, but the operator (or admission) refused its nudge
    else:
        log_at = log.info
    log_at(
        "%s %s/%s: %s (%s) -> %s %s",
        job.kind.name,
        job.namespace,
        job.name,
        entry.decision,
        entry.reason,
        outcome.result.value,
        detail,
        extra=fields,
    )


def log_summary(report: PassReport, counts: Summary | None = None) -> None:
    """Log the one summary line of a pass (``counts``: ``summary(report)``, if known)."""
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
            **dataclasses.asdict(counts),
        },
    )


def duration(seconds: float | None) -> str:
    """Render signed seconds for a person (``1h02m``, ``-45s``). Pure.

    Returns:
        The text, ``-`` for ``None``.
    """
    return human(seconds)


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else format_rfc3339(moment)
