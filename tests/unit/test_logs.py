"""Logging configuration: a pure dictionary, JSON lines with the job's fields."""

from __future__ import annotations

import io
import json
import logging
import logging.config

from sweeper.config import LogFormat
from sweeper.logs import LOGGER, MAX_LINE_BYTES, logging_config


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
    assert config["formatters"]["sweeper"]["inner"] == "logging.Formatter"


def emit(log_format: LogFormat, limit: int, message: str, **extra: object) -> str:
    config = logging_config(log_format, "INFO")
    stream = io.StringIO()
    config["handlers"]["stderr"]["stream"] = stream
    config["formatters"]["sweeper"]["limit"] = limit
    logging.config.dictConfig(config)
    logging.getLogger(f"{LOGGER}.test").error("%s", message, extra=extra)
    return stream.getvalue()


def test_a_json_line_longer_than_the_limit_is_shortened_and_stays_one_object() -> None:
    errors = [f"cannot delete pods 'p{i}': " + "x" * 3000 for i in range(40)]
    line = emit(LogFormat.JSON, MAX_LINE_BYTES, "y" * 50_000, errors=errors, kind="TFJob")
    assert line.count("\n") == 1
    assert len(line.encode()) <= MAX_LINE_BYTES + 1
    parsed = json.loads(line)
    assert (parsed["truncated"], parsed["kind"]) == (True, "TFJob")
    assert parsed["message"].startswith("yyy")
    assert parsed["errors"][0].startswith("cannot delete pods 'p0'")
    assert parsed["errors"][-1] == "...[32 more]"


def test_a_short_json_line_is_left_alone() -> None:
    line = emit(LogFormat.JSON, MAX_LINE_BYTES, "short", errors=["one"])
    assert "truncated" not in json.loads(line)


def test_a_long_text_line_is_cut_and_marked() -> None:
    line = emit(LogFormat.TEXT, 200, "z" * 1000)
    assert len(line.encode()) <= 201
    assert line.rstrip("\n").endswith("...[truncated]")
