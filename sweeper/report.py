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

import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from sweeper import logs
from sweeper.act import Outcome, Result
from sweeper.clock import format_rfc3339, human
from sweeper.config import ClockMode, DryRun
from sweeper.decide import Action, ActionKind, ActionMode, SkipReason

log = logs.get("report")

_FAILED = (Result.ERROR,)
_RECORDS_PER_WRITE = 256
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

    Args:
        outcome: The outcome.

    Returns:
        True when its action failed or any of its requests did.
    """
    return outcome.result in _FAILED or bool(outcome.errors)


def summary(report: PassReport) -> dict[str, Any]:
    """Count a pass's decisions, skip reasons, results and errors. Pure.

    Args:
        report: The pass.

    Returns:
        ``{"jobs", "touch", "fail", "terminate-pods", "skip", "skipped": {reason: n},
        "results": {result: n}, "errors", "duration_s", "stopped_by"}``.
    """
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
    counts: dict[str, Any] = {"jobs": len(report.outcomes)}
    for kind in ActionKind:
        counts[kind.value] = decisions[kind.value]
    counts["skip"] = decisions["skip"]
    counts["skipped"] = {reason.value: skipped[reason.value] for reason in SkipReason
                         if skipped[reason.value]}
    counts["results"] = dict(sorted(results.items()))
    counts["errors"] = errors
    counts["duration_s"] = round(report.duration_s, 3)
    counts["stopped_by"] = report.stopped_by
    return counts


def job_record(outcome: Outcome) -> dict[str, Any]:
    """Render one outcome as the ``jobs[]`` item of ``-o json``. Pure.

    Args:
        outcome: The outcome.

    Returns:
        The JSON-ready dictionary.
    """
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
    line = json.dumps(job_record(outcome))
    if len(line) * 4 < MAX_LINE_BYTES or len(line.encode()) < MAX_LINE_BYTES - 8:
        return "    " + line
    # Hundreds of deleted pods: one value per line instead.
    return "    " + json.dumps(job_record(outcome), indent=2).replace("\n", "\n    ")


def write_json(stream: TextIO, report: PassReport) -> None:
    """Write one pass as one JSON document, job by job, one job per line.

    Args:
        stream: stdout.
        report: The pass.
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
        chunk = outcomes[start:start + _RECORDS_PER_WRITE]
        stream.write(",\n" if start else "\n")
        stream.write(",\n".join(_record_lines(outcome) for outcome in chunk))
    stream.write("\n  ]" if outcomes else "]")
    stream.write(', "summary": ')
    stream.write(json.dumps(summary(report)))
    stream.write("}\n")
    stream.flush()


_COLUMNS = ("KIND", "NAMESPACE", "NAME", "STARTED", "DEADLINE", "OVERDUE BY", "DECISION", "RESULT")


def table_row(outcome: Outcome) -> tuple[str, ...]:
    """Render one outcome as a row of the text table. Pure.

    Args:
        outcome: The outcome.

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


def write_text(stream: TextIO, report: PassReport, *, wide: bool = False) -> None:
    """Write one pass: a header line, a table, the skips by reason and a summary line.

    Args:
        stream: stdout.
        report: The pass.
        wide: List every job (``-o wide``); by default only actions and errors, the skipped
            jobs being counted by reason.
    """
    mode = f", dry run ({report.dry_run.value})" if report.dry_run else ""
    when = _time(report.now) or "-"
    stream.write(
        f"Pass {report.number} at {when} ({report.clock.value} clock), "
        f"action {report.action.value}{mode}\n"
    )
    shown = [o for o in report.outcomes
             if wide or isinstance(o.entry, Action) or has_errors(o)]
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
    counts = summary(report)
    hidden = len(report.outcomes) - len(shown)
    if hidden:
        by_reason = ", ".join(f"{reason} {n}" for reason, n in counts["skipped"].items())
        stream.write(f"Skipped {hidden} jobs ({by_reason}); -o wide lists them.\n")
    stream.write(summary_line(counts) + "\n")
    stream.flush()


def summary_line(counts: dict[str, Any]) -> str:
    """Render a summary as one human line. Pure.

    Args:
        counts: The result of :func:`summary`.

    Returns:
        For example ``3 jobs: 1 touch, 0 fail, 0 terminate-pods, 2 skip (not-yet-due 2);
        0 errors; 0.4s``.
    """
    skipped = ", ".join(f"{reason} {n}" for reason, n in counts["skipped"].items())
    actions = ", ".join(f"{counts[kind.value]} {kind.value}" for kind in ActionKind)
    line = (
        f"{counts['jobs']} jobs: {actions}, {counts['skip']} skip"
        f"{f' ({skipped})' if skipped else ''}; {counts['errors']} errors; "
        f"{human(counts['duration_s'])}"
    )
    if counts["stopped_by"]:
        line += f"; stopped: {counts['stopped_by']}"
    return line


def log_outcome(outcome: Outcome, dry_run: DryRun | None) -> None:
    """Log one line for an action's outcome (skips only at debug level).

    Args:
        outcome: The outcome.
        dry_run: The dry-run mode.
    """
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
            "%s %s/%s: skip (%s) %s", job.kind.name, job.namespace, job.name, entry.reason,
            detail, extra=fields,
        )
        return
    if has_errors(outcome):
        log_at = log.error
    elif outcome.touch_refused:
        log_at = log.warning  # handled, but the operator (or admission) refused its nudge
    else:
        log_at = log.info
    log_at(
        "%s %s/%s: %s (%s) -> %s %s", job.kind.name, job.namespace, job.name, entry.decision,
        entry.reason, outcome.result.value, detail, extra=fields,
    )


def log_summary(report: PassReport) -> None:
    """Log the one summary line of a pass.

    Args:
        report: The pass.
    """
    counts = summary(report)
    log.info(
        "pass %d: %s", report.number, summary_line(counts),
        extra={
            "pass": report.number,
            "now": _time(report.now),
            "clock": report.clock.value,
            "dry_run": report.dry_run.value if report.dry_run else None,
            **{key.replace("-", "_"): value for key, value in counts.items()},
        },
    )


def duration(seconds: float | None) -> str:
    """Render signed seconds for a person (``1h02m``, ``-45s``). Pure.

    Args:
        seconds: Seconds, or ``None``.

    Returns:
        The text, ``-`` for ``None``.
    """
    return human(seconds)


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else format_rfc3339(moment)
