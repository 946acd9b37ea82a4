"""Logging set-up: structured lines on stderr, JSON by default (python-json-logger).

The configuration is built by a pure function (:func:`logging_config`) and applied by
:func:`configure`. Messages are lazy ``%`` templates; the job's reference and the decision travel
as ``extra`` fields (kind, namespace, name, action, reason, seconds_overdue, dry_run), which the
JSON formatter turns into keys.
"""

from __future__ import annotations

import logging
import logging.config
from typing import Any

from sweeper.config import LogFormat

LOGGER = "sweeper"

# The client's own loggers are noisy at INFO and would break the one-line-per-event rule.
_QUIET = ("urllib3", "kubernetes")


def logging_config(log_format: LogFormat, level: str) -> dict[str, Any]:
    """Build the ``logging.config.dictConfig`` dictionary. Pure.

    Args:
        log_format: ``json`` (one JSON object per line) or ``text`` (for humans).
        level: A level name, for example ``INFO``.
    """
    if log_format is LogFormat.JSON:
        formatter: dict[str, Any] = {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(levelname)s %(name)s %(message)s",
            # LogRecord reserves "name" (the logger's): jobs log theirs as job_name.
            "rename_fields": {"levelname": "level", "name": "logger", "job_name": "name"},
            "timestamp": "time",
        }
    else:
        formatter = {"format": "%(asctime)s %(levelname)-7s %(message)s"}
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


def configure(log_format: LogFormat, level: str) -> None:
    """Apply the logging configuration."""
    logging.config.dictConfig(logging_config(log_format, level))
