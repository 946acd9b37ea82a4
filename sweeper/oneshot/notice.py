"""The ``DeadlineApproaching`` warnings as a pass reports them: a log line, a line, a record.

A warning is no action on the job (no ``--max-actions`` slot, no decision of its own), so it
has its own lines; the watch mode's fires log theirs the same way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TextIO

from sweeper.config import DryRun
from sweeper.core.clock import format_rfc3339
from sweeper.core.model import Result
from sweeper.core.warn import REASON, Warned, message
from sweeper.logs import job_fields

log = logging.getLogger(__name__)


def record(warned: Warned, now: datetime) -> dict[str, Any]:
    """The warning's record in ``-o json``'s ``warnings``."""
    warning = warned.warning
    job = warning.job
    return {
        **job_fields(job, "name"),
        "event": warning.name,
        "at": format_rfc3339(warning.at),
        "deadline": format_rfc3339(warning.deadline),
        "deadline_source": job.deadline_source.value,
        "rule": job.rule,
        "message": message(warning, now),
        "result": warned.result.value,
        "detail": warned.detail,
    }


def line(warned: Warned, now: datetime) -> str:
    """The warning's line in the text report."""
    job = warned.warning.job
    result = ": ".join(part for part in (warned.result.value, warned.detail) if part)
    return (
        f"{REASON} {job.kind.name} {job.namespace}/{job.name} -> {result}: "
        f"{message(warned.warning, now)}"
    )


def write_json(stream: TextIO, warnings: Sequence[Warned], now: datetime | None) -> None:
    """Write ``, "warnings": [...]`` into a pass's JSON document, one warning per line."""
    if warnings and now is not None:
        records = ",\n".join(json.dumps(record(w, now)) for w in warnings)
        stream.write(f', "warnings": [\n{records}\n  ]')


def write_text(stream: TextIO, warnings: Sequence[Warned], now: datetime | None) -> None:
    """Write a ``Warned:`` line per warning into a pass's text report."""
    if now is not None:
        for warned in warnings:
            stream.write(f"Warned: {line(warned, now)}\n")


def log_warned(warned: Warned, now: datetime, dry_run: DryRun | None) -> None:
    """Log one line for a warning: recorded, would be recorded, already there, or refused."""
    warning = warned.warning
    job = warning.job
    fields: dict[str, Any] = {
        **job_fields(job),
        "event": warning.name,
        "reason": REASON,
        "rule": job.rule,
        "dry_run": dry_run.value if dry_run else None,
        "result": warned.result.value,
    }
    log_at = log.error if warned.result is Result.ERROR else log.info
    if warned.result is Result.LEFT_ALONE:
        log_at = log.debug  # every pass in the warning's window finds it recorded
    log_at(
        "%s %s/%s: %s -> %s%s %s",
        job.kind.name,
        job.namespace,
        job.name,
        REASON,
        warned.result.value,
        f" ({warned.detail})" if warned.detail else "",
        message(warning, now),
        extra=fields,
    )
