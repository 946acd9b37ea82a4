"""Logging configuration: a pure dictionary, JSON lines with the job's fields."""

from __future__ import annotations

import io
import json
import logging
import logging.config

from sweeper.config import LogFormat
from sweeper.logs import LOGGER, logging_config


def emit_json(**extra: object) -> dict[str, object]:
    config = logging_config(LogFormat.JSON, "INFO")
    stream = io.StringIO()
    config["handlers"]["stderr"]["stream"] = stream
    logging.config.dictConfig(config)
    logging.getLogger(f"{LOGGER}.test").info("hello %s", "world", extra=extra)
    line = stream.getvalue()
    assert line.count("\n") == 1
    parsed: dict[str, object] = json.loads(line)
    return parsed


def test_json_lines_rename_the_record_fields_and_keep_the_job_name() -> None:
    line = emit_json(kind="PyTorchJob", job_name="train", namespace="a")
    assert line["message"] == "hello world"
    assert (line["level"], line["logger"]) == ("INFO", "sweeper.test")
    assert (line["kind"], line["name"], line["namespace"]) == ("PyTorchJob", "train", "a")
    assert "time" in line


def test_the_levels_are_configured_and_the_client_is_quieted() -> None:
    config = logging_config(LogFormat.TEXT, "DEBUG")
    assert config["loggers"][LOGGER]["level"] == "DEBUG"
    assert config["loggers"]["urllib3"]["level"] == "WARNING"
    assert "format" in config["formatters"]["sweeper"]
