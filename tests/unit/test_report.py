"""Reports: the JSON document per pass, the text table, the summary and the log lines."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest

from sweeper.act import Outcome, Result
from sweeper.config import ClockMode, DryRun
from sweeper.decide import ActionMode, Policy, decide
from sweeper.jobs import parse_job
from sweeper.report import (
    PassReport,
    duration,
    job_record,
    log_outcome,
    summary,
    summary_line,
    write_json,
    write_text,
)
from tests.unit.objects import KIND, NOW, job


def pass_report(*raws: dict[str, Any], results: dict[str, Result] | None = None) -> PassReport:
    plan = decide([parse_job(r, KIND[r["kind"]]) for r in raws], NOW, Policy())
    outcomes = []
    for entry in plan.entries:
        default = Result.SKIPPED if entry.decision == "skip" else Result.DONE
        result = (results or {}).get(entry.job.name, default)
        errors = ("cannot patch: forbidden (403)",) if result is Result.ERROR else ()
        outcomes.append(Outcome(entry, result, entry.detail, errors=errors))
    return PassReport(
        number=1, now=NOW, clock=ClockMode.SERVER, dry_run=None, action=ActionMode.TOUCH,
        outcomes=outcomes, duration_s=0.25,
    )


def test_the_streamed_json_is_one_valid_document_per_line() -> None:
    report = pass_report(job(name="a"), job(name="b", started_ago=10), job(name="c"))
    out = io.StringIO()
    write_json(out, report)
    text = out.getvalue()
    assert text.count("\n") == 1
    document = json.loads(text)
    assert [j["name"] for j in document["jobs"]] == ["a", "b", "c"]
    assert document["jobs"][0] == job_record(report.outcomes[0])
    assert document["summary"] == summary(report).document()


def test_an_empty_pass_is_still_a_document() -> None:
    out = io.StringIO()
    write_json(out, pass_report())
    assert json.loads(out.getvalue())["jobs"] == []


def test_summary_counts_decisions_skip_reasons_results_and_errors() -> None:
    report = pass_report(
        job(name="a"), job(name="b"), job(name="c", started_ago=10), job(name="d", deadline=None),
        results={"b": Result.ERROR},
    )
    counts = summary(report)
    assert counts.document() == {
        "jobs": 4, "touch": 2, "fail": 0, "terminate-pods": 0, "skip": 2,
        "skipped": {"no-deadline": 1, "not-yet-due": 1},
        "results": {"done": 1, "error": 1, "skipped": 2},
        "errors": 1, "duration_s": 0.25, "stopped_by": None,
    }
    assert summary_line(counts) == (
        "4 jobs: 2 touch, 0 fail, 0 terminate-pods, 2 skip (no-deadline 1, not-yet-due 1); "
        "1 errors; 0.25s"
    )


def test_the_text_report_aligns_columns() -> None:
    out = io.StringIO()
    write_text(out, pass_report(job(name="short"), job("TFJob", name="longer", started_ago=10)))
    lines = out.getvalue().splitlines()
    assert lines[0] == "Pass 1 at 2024-05-01T12:00:00Z (server clock), action touch"
    assert lines[1].index("STARTED") == lines[2].index("2024") == lines[3].index("2024")
    assert lines[1].index("DECISION") == lines[2].index("touch") == lines[3].index("skip")
    assert lines[3].endswith("skip (not-yet-due)  due in 3590s")
    assert lines[-1].startswith("2 jobs: 1 touch")


def test_the_text_report_of_an_empty_pass() -> None:
    out = io.StringIO()
    write_text(out, pass_report())
    assert "No Kubeflow jobs found." in out.getvalue()


DURATIONS = [(None, "-"), (0, "0s"), (59.9, "59s"), (61, "1m01s"), (3723, "1h02m03s"),
             (-45, "-45s"), (-3600, "-1h00m00s")]


@pytest.mark.parametrize(("seconds", "text"), DURATIONS)
def test_duration(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text


def test_action_log_lines_carry_the_job_reference_as_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outcome = pass_report(job()).outcomes[0]
    with caplog.at_level(logging.DEBUG, logger="sweeper"):
        log_outcome(outcome, DryRun.SERVER)
    record = caplog.records[0]
    assert record.getMessage() == (
        "PyTorchJob team-a/train: touch (overdue) -> done 3600s past its deadline"
    )
    fields = {k: getattr(record, k) for k in ("kind", "namespace", "job_name", "action",
                                              "reason", "seconds_overdue", "dry_run")}
    assert fields == {
        "kind": "PyTorchJob", "namespace": "team-a", "job_name": "train", "action": "touch",
        "reason": "overdue", "seconds_overdue": 3600.0, "dry_run": "server",
    }


def test_skips_are_logged_only_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    outcome = pass_report(job(started_ago=10)).outcomes[0]
    with caplog.at_level(logging.INFO, logger="sweeper"):
        log_outcome(outcome, None)
    assert caplog.records == []


def test_errors_are_logged_at_error_level(caplog: pytest.LogCaptureFixture) -> None:
    outcome = pass_report(job(), results={"train": Result.ERROR}).outcomes[0]
    with caplog.at_level(logging.INFO, logger="sweeper"):
        log_outcome(outcome, None)
    assert caplog.records[0].levelno == logging.ERROR
    assert "forbidden (403)" in caplog.records[0].getMessage()


def test_a_large_pass_is_written_in_chunks_that_still_form_one_document() -> None:
    report = pass_report(*(job(name=f"j{i:04d}") for i in range(600)))
    out = io.StringIO()
    write_json(out, report)
    names = [j["name"] for j in json.loads(out.getvalue())["jobs"]]
    assert names == [f"j{i:04d}" for i in range(600)]
