"""Reports: the JSON document per pass, the text table, the summary and the log lines."""

from __future__ import annotations

import io
import json
import logging
from dataclasses import replace
from typing import Any

import pytest

from sweeper.config import ClockMode, DryRun, OutputFormat
from sweeper.core.clock import human as duration
from sweeper.core.decide import decide
from sweeper.core.jobs import parse_job
from sweeper.core.model import Action, ActionKind, ActionMode, Enforcement, Outcome, Result, Why
from sweeper.core.tally import Tally
from sweeper.logs import MAX_LINE_BYTES
from sweeper.oneshot.ledger import Ledger
from sweeper.oneshot.report import (
    PassReport,
    Summary,
    job_record,
    log_outcome,
    summary,
    summary_line,
    write_json,
    write_text,
)
from tests.unit.objects import KIND, NOW, condition, job


def pass_report(*raws: dict[str, Any], results: dict[str, Result] | None = None) -> PassReport:
    plan = decide([parse_job(r, KIND[r["kind"]]) for r in raws], NOW, Enforcement())
    outcomes = []
    for entry in plan.entries:
        default = Result.SKIPPED if entry.decision == "skip" else Result.DONE
        result = (results or {}).get(entry.job.name, default)
        errors = ("cannot patch: forbidden (403)",) if result is Result.ERROR else ()
        outcomes.append(Outcome(entry, result, entry.detail, errors=errors))
    return PassReport(
        number=1,
        now=NOW,
        clock=ClockMode.SERVER,
        dry_run=None,
        action=ActionMode.TOUCH,
        outcomes=outcomes,
        duration_s=0.25,
    )


def test_the_streamed_json_is_one_valid_document_with_a_job_per_line() -> None:
    report = pass_report(job(name="a"), job(name="b", started_ago=10), job(name="c"))
    out = io.StringIO()
    write_json(out, report)
    text = out.getvalue()
    assert text.count("\n") == 5
    assert [line.strip()[:9] for line in text.splitlines()[1:4]] == ['{"kind": '] * 3
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
        job(name="a"),
        job(name="b"),
        job(name="c", started_ago=10),
        job(name="d", deadline=None),
        results={"b": Result.ERROR},
    )
    counts = summary(report)
    assert counts.document() == {
        "jobs": 4,
        "touch": 2,
        "fail": 0,
        "terminate-pods": 0,
        "delete-jobset": 0,
        "set-deadline": 0,
        "skip": 2,
        "skipped": {"no-deadline": 1, "not-yet-due": 1},
        "results": {"done": 1, "error": 1, "skipped": 2},
        "errors": 1,
        "duration_s": 0.25,
        "stopped_by": None,
        "unlisted": [],
        "misconfigured": [],
        "held": {
            state: {"pods": 0, "gpus": 0}
            for state in ("stuck-starting", "finished-holding", "waiting")
        },
    }
    assert summary_line(counts) == (
        "4 jobs: 2 touch, 0 fail, 0 terminate-pods, 0 delete-jobset, 0 set-deadline, "
        "2 skip (no-deadline 1, not-yet-due 1); 1 error; 0.2s"
    )


def test_no_json_line_exceeds_16_kib_even_for_a_job_with_thousands_of_pods() -> None:
    entry = pass_report(job(name="huge")).outcomes[0]
    pods = tuple(f"huge-worker-{i}" for i in range(3000))
    assert isinstance(entry.entry, Action)
    failed = replace(entry.entry, kind=ActionKind.FAIL)
    outcomes = [
        replace(
            entry,
            entry=failed,
            reclaimed=(*(("pods", p) for p in pods), *(("services", p) for p in pods)),
        ),
        *pass_report(*(job(name=f"j{i}") for i in range(300))).outcomes,
    ]
    base = pass_report()
    out = io.StringIO()
    write_json(out, replace(base, outcomes=outcomes))
    document = json.loads(out.getvalue())
    assert len(document["jobs"]) == 301
    assert document["jobs"][0]["deleted"]["pods"] == list(pods)
    assert max(len(line.encode()) for line in out.getvalue().splitlines()) < MAX_LINE_BYTES


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("detail", id="a-skip-detail-quoting-a-long-managedBy"),
        pytest.param("errors", id="a-server-error-message"),
    ],
)
def test_no_json_line_exceeds_16_kib_for_a_long_string_and_the_record_says_it_was_cut(
    where: str,
) -> None:
    report = pass_report(job(name="long"), job(name="short"))
    long, short = report.outcomes
    text = "x" * 20_000 + "\N{SNOWMAN}" * 5_000
    long = replace(long, detail=text) if where == "detail" else replace(long, errors=(text,))
    out = io.StringIO()
    write_json(out, replace(report, outcomes=[long, short]))
    assert max(len(line.encode()) for line in out.getvalue().splitlines()) <= MAX_LINE_BYTES
    first, second = json.loads(out.getvalue())["jobs"]
    value = first[where] if where == "detail" else first[where][0]
    assert value.startswith("x" * 1000)
    assert value.endswith(" more characters]")
    assert (first["truncated"], first["name"], first["uid"]) == (True, "long", long.entry.job.uid)
    assert "truncated" not in second
    assert second == job_record(short)


def test_the_empty_json_document() -> None:
    out = io.StringIO()
    write_json(out, pass_report())
    assert json.loads(out.getvalue())["jobs"] == []


def many_jobs(total: int, overdue: int) -> PassReport:
    raws = [job(name=f"late-{i}") for i in range(overdue)]
    raws += [
        job(name=f"done-{i}", conditions=[condition("Succeeded")])
        for i in range(total - overdue - 10)
    ]
    raws += [job(name=f"young-{i}", started_ago=10) for i in range(10)]
    return pass_report(*raws)


def test_the_text_report_of_10000_jobs_lists_the_100_actions_and_counts_the_rest() -> None:
    report = many_jobs(10_000, 100)
    out = io.StringIO()
    write_text(out, report)
    lines = out.getvalue().splitlines()
    # Header, column titles, 100 actions, the skips by reason, the summary.
    assert len(lines) == 104
    assert lines[-2] == "Skipped 9900 jobs (finished 9890, not-yet-due 10); -o wide lists them."
    assert lines[-1].startswith("10000 jobs: 100 touch, ")
    wide = io.StringIO()
    write_text(wide, report, wide=True)
    assert len(wide.getvalue().splitlines()) == 10_003


def test_errors_are_listed_by_default() -> None:
    report = pass_report(
        job(name="bad"), job(name="young", started_ago=10), results={"bad": Result.ERROR}
    )
    out = io.StringIO()
    write_text(out, report)
    text = out.getvalue()
    assert "cannot patch: forbidden (403)" in text
    assert "young" not in text
    assert "Skipped 1 job (not-yet-due 1)" in text


def test_a_pass_with_nothing_to_do_says_so() -> None:
    out = io.StringIO()
    write_text(out, pass_report(job(name="young", started_ago=10)))
    assert out.getvalue().splitlines()[1] == "Nothing to do."


def test_the_text_report_aligns_columns() -> None:
    out = io.StringIO()
    write_text(
        out, pass_report(job(name="short"), job("TFJob", name="longer", started_ago=10)), wide=True
    )
    lines = out.getvalue().splitlines()
    assert lines[0] == "Pass 1 at 2024-05-01T12:00:00Z (server clock), action touch"
    assert lines[1].index("STARTED") == lines[2].index("2024") == lines[3].index("2024")
    assert lines[1].index("DECISION") == lines[2].index("touch") == lines[3].index("skip")
    assert lines[3].endswith("skip (not-yet-due)  due in 59m50s")
    assert lines[-1].startswith("2 jobs: 1 touch")


def test_the_text_report_of_an_empty_pass() -> None:
    out = io.StringIO()
    write_text(out, pass_report())
    assert "No Kubeflow jobs found." in out.getvalue()


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(None, "-", id="unknown"),
        pytest.param(0, "0s", id="zero"),
        pytest.param(0.412, "0.4s", id="a-fraction-below-10s"),
        pytest.param(59.9, "59s", id="whole-seconds-above-10s"),
        pytest.param(61, "1m01s", id="minutes"),
        pytest.param(3720.0, "1h02m", id="hours-drop-the-seconds"),
        pytest.param(3723, "1h02m", id="hours"),
        pytest.param(-45, "-45s", id="negative"),
        pytest.param(-3600, "-1h00m", id="negative-hours"),
        pytest.param(2 * 86400 + 3 * 3600 + 59, "2d03h", id="days"),
    ],
)
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
        "PyTorchJob team-a/train: touch (overdue) -> done 1h00m past its deadline"
    )
    fields = {
        k: getattr(record, k)
        for k in ("kind", "namespace", "job_name", "action", "reason", "seconds_overdue", "dry_run")
    }
    assert fields == {
        "kind": "PyTorchJob",
        "namespace": "team-a",
        "job_name": "train",
        "action": "touch",
        "reason": "overdue",
        "seconds_overdue": 3600.0,
        "dry_run": "server",
    }


def test_skips_are_logged_only_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    outcome = pass_report(job(started_ago=10)).outcomes[0]
    with caplog.at_level(logging.INFO, logger="sweeper"):
        log_outcome(outcome, None)
    assert caplog.records == []


@pytest.mark.parametrize(
    ("kind", "result", "level"),
    [
        (ActionKind.TERMINATE_PODS, Result.LEFT_ALONE, logging.DEBUG),
        (ActionKind.DELETE_JOBSET, Result.LEFT_ALONE, logging.DEBUG),
        (ActionKind.TERMINATE_PODS, Result.DONE, logging.INFO),
        (ActionKind.FAIL, Result.LEFT_ALONE, logging.INFO),
    ],
    ids=["no-pods-left", "jobset-gone", "pods-deleted", "fail-left-alone"],
)
def test_a_clean_up_that_found_nothing_left_is_logged_at_debug(
    caplog: pytest.LogCaptureFixture, kind: ActionKind, result: Result, level: int
) -> None:
    # A watch timer's clean-up right after its own fail: nothing to reclaim, nothing to read.
    viewed = parse_job(job(), KIND["PyTorchJob"])
    outcome = Outcome(Action(viewed, kind, Why.FAILED_BY_DEADLINE, 1.0), result, "")
    with caplog.at_level(logging.DEBUG, logger="sweeper"):
        log_outcome(outcome, None)
    assert [r.levelno for r in caplog.records] == [level]


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


# --- the ledger: a pass's outcomes kept as far as its report needs them ---------------------


def mixed_pass(jobs: int, every: int) -> PassReport:
    """``jobs`` jobs, every ``every``-th overdue (an action), one with 3,000 pods (its record
    is pretty-printed over many lines), one action with an error."""
    raws = [job(name=f"j{i:05d}", started_ago=7200 if i % every == 0 else 600) for i in range(jobs)]
    report = pass_report(*raws, results={"j00000": Result.ERROR})
    huge = next((o for o in report.outcomes if o.entry.job.name == f"j{every:05d}"), None)
    pods = tuple(f"worker-{i}" for i in range(3000))
    reclaimed = tuple(("pods", pod) for pod in pods)
    outcomes = [replace(o, reclaimed=reclaimed) if o is huge else o for o in report.outcomes]
    return replace(report, outcomes=outcomes)


def through_ledger(report: PassReport, output: OutputFormat) -> Ledger:
    ledger = Ledger(output)
    actions = []
    for outcome in report.outcomes:
        if isinstance(outcome.entry, Action):
            ledger.expect()
            actions.append(outcome)
        else:
            ledger.settle(outcome)
    ledger.resolve(actions)
    return ledger


@pytest.mark.parametrize("jobs", [0, 1, 7, 600])
@pytest.mark.parametrize("output", list(OutputFormat))
def test_a_ledger_reports_byte_for_byte_what_the_outcomes_report(
    jobs: int, output: OutputFormat
) -> None:
    report = mixed_pass(jobs, every=5)
    expected, got = io.StringIO(), io.StringIO()
    ledger = through_ledger(report, output)
    counts = Summary.of(ledger.tally, report.duration_s, report.stopped_by)
    assert counts == summary(report)
    flat = replace(report, outcomes=ledger.kept)
    if output is OutputFormat.JSON:
        write_json(expected, report)
        write_json(got, flat, counts, ledger.records())
    else:
        wide = output is OutputFormat.WIDE
        write_text(expected, report, wide=wide)
        write_text(got, flat, wide=wide, counts=counts)
    assert got.getvalue() == expected.getvalue()
    # Every outcome was counted once, by kind: the tally the metrics are pushed from.
    assert vars(ledger.tally) == vars(Tally.of(report.outcomes))


def test_a_json_ledger_keeps_no_skip_outcome() -> None:
    # A skip's record line is kept as text; its outcome (the view, the decision) is dropped.
    report = mixed_pass(2000, every=100)
    ledger = through_ledger(report, OutputFormat.JSON)
    assert ledger.kept == [o for o in report.outcomes if isinstance(o.entry, Action)]


def test_a_text_ledger_keeps_only_the_actions() -> None:
    report = mixed_pass(300, every=10)
    ledger = through_ledger(report, OutputFormat.TEXT)
    assert ledger.kept == [o for o in report.outcomes if isinstance(o.entry, Action)]


def test_a_ledger_refuses_outcomes_that_do_not_fill_its_places() -> None:
    ledger = Ledger(OutputFormat.JSON)
    ledger.expect()
    with pytest.raises(ValueError, match="0 outcomes for 1 expected places"):
        ledger.resolve([])
