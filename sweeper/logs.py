"""Logging set-up: structured lines on stderr, JSON by default (python-json-logger).

The configuration is built by a pure function (``logging_config``) and applied by
``configure``. Messages are lazy ``%`` templates; the job's reference and the decision travel
as ``extra`` fields. No line is longer than 16 KiB, above which container runtimes split a line
into partial entries: a longer one is cut down, and says so.
"""

from __future__ import annotations

import importlib
import json
import logging
import logging.config
from typing import Any

from sweeper.config import LogFormat
from sweeper.core.jobs import Job

LOGGER = "sweeper"

MAX_LINE_BYTES = 16 * 1024
# What a cut-down value keeps: enough to recognise the error.
_KEEP_CHARS = 1024

# The client's own loggers are noisy at INFO and would break the one-line-per-event rule.
_QUIET = ("urllib3", "kubernetes")


def job_fields(job: Job, name: str = "job_name") -> dict[str, Any]:
    """A job's reference as a log line's fields, or (``name="name"``) a report record's."""
    return {"kind": job.kind.name, "namespace": job.namespace, name: job.name}


def logging_config(log_format: LogFormat, level: str) -> dict[str, Any]:
    """Build the ``logging.config.dictConfig`` dictionary. Pure."""
    if log_format is LogFormat.JSON:
        formatter: dict[str, Any] = {
            "()": "sweeper.logs.bounded",
            "inner": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(levelname)s %(name)s %(message)s",
            # LogRecord reserves "name" (the logger's): jobs log theirs as job_name (job_fields).
            "rename_fields": {"levelname": "level", "name": "logger", "job_name": "name"},
            "timestamp": "time",
        }
    else:
        formatter = {
            "()": "sweeper.logs.bounded",
            "inner": "logging.Formatter",
            "fmt": "%(asctime)s %(levelname)-7s %(message)s",
        }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"sweeper": formatter},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "sweeper",
            }
        },
        "loggers": {
            LOGGER: {"level": level, "handlers": ["stderr"], "propagate": False},
            **{name: {"level": "WARNING"} for name in _QUIET},
        },
    }


class BoundedFormatter(logging.Formatter):
    """Wraps a formatter so that no line it makes exceeds ``limit`` UTF-8 bytes (tests lower it)."""

    def __init__(self, inner: logging.Formatter, limit: int = MAX_LINE_BYTES) -> None:
        super().__init__()
        self._inner = inner
        self._limit = limit

    def format(self, record: logging.LogRecord) -> str:
        """Format, then cut a long line down: a JSON one stays one object, marked ``truncated``."""
        line = self._inner.format(record)
        if len(line) * 4 < self._limit or len(line.encode()) <= self._limit:
            return line
        try:
            document = json.loads(line)
        except ValueError:
            document = None
        if isinstance(document, dict):
            shortened = {key: shorten(value) for key, value in document.items()}
            shortened["truncated"] = True
            line = json.dumps(shortened)
            if len(line.encode()) <= self._limit:
                return line
        marker = " ...[truncated]"
        cut = line.encode()[: self._limit - len(marker)].decode(errors="ignore")
        return cut + marker


def shorten(value: Any, *, lists: bool = True) -> Any:
    """Cut a JSON value's long strings down, and with ``lists`` its long lists, saying so."""
    if isinstance(value, str) and len(value) > _KEEP_CHARS:
        return value[:_KEEP_CHARS] + f"...[{len(value) - _KEEP_CHARS} more characters]"
    if lists and isinstance(value, list) and len(value) > 8:  # noqa: PLR2004 - a few show it
        return [shorten(v) for v in value[:8]] + [f"...[{len(value) - 8} more]"]
    if isinstance(value, list):
        return [shorten(v, lists=lists) for v in value]
    if isinstance(value, dict):
        return {k: shorten(v, lists=lists) for k, v in value.items()}
    return value


def bounded(inner: str, limit: int = MAX_LINE_BYTES, **kwargs: Any) -> BoundedFormatter:
    """Build a bounded formatter (the ``()`` factory of ``logging_config``) around ``inner``."""
    module, _, name = inner.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    return BoundedFormatter(cls(**kwargs), limit)


def configure(log_format: LogFormat, level: str) -> None:
    """Apply the logging configuration."""
    logging.config.dictConfig(logging_config(log_format, level))
