"""A pass's ``DeadlineApproaching`` warnings in its text and JSON reports, and its tally."""

from __future__ import annotations

import io
import json
from dataclasses import replace

from sweeper import metrics
from sweeper.config import ClockMode, DryRun
from sweeper.core.jobs import DeadlineSource, parse_job
from sweeper.core.model import ActionMode, Enforcement, Result
from sweeper.core.tally import Tally
from sweeper.core.warn import DeadlineWarning, Warned, warning_due
from sweeper.oneshot.report import PassReport, write_json, write_text
from tests.unit.objects import KIND, NOW, job


def warning() -> DeadlineWarning:
    raw = job(name="soon", deadline=3600, started_ago=3000)
    view = replace(
        parse_job(raw, KIND["PyTorchJob"]),
        warn_before=900.0,
        rule="gpu",
        deadline_source=DeadlineSource.DEFAULT,
    )
    due = warning_due(view, NOW, Enforcement())
    assert due is not None
    return due


def report(*warned: Warned) -> PassReport:
    return PassReport(
        number=1,
        now=NOW,
        clock=ClockMode.SERVER,
        dry_run=DryRun.CLIENT,
        action=ActionMode.TOUCH,
        outcomes=[],
        duration_s=0.1,
        warnings=warned,
    )


def test_the_json_report_lists_the_warnings_beside_the_jobs() -> None:
    out = io.StringIO()
    write_json(out, report(Warned(warning(), Result.PLANNED)))
    (record,) = json.loads(out.getvalue())["warnings"]
    assert record == {
        "kind": "PyTorchJob",
        "namespace": "team-a",
        "name": "soon",
        "event": warning().name,
        "at": "2024-05-01T11:55:00Z",
        "deadline": "2024-05-01T12:10:00Z",
        "deadline_source": "default",
        "rule": "gpu",
        "message": (
            "deadline 2024-05-01T12:10:00Z (in 10m00s), set by the default of platform rule "
            "gpu: the sweeper fails it; then its Running and Pending pods are deleted, giving "
            "their GPUs back"
        ),
        "result": "planned",
        "detail": "",
    }


def test_a_pass_without_warnings_has_no_warnings_key() -> None:
    out = io.StringIO()
    write_json(out, report())
    assert "warnings" not in json.loads(out.getvalue())


def test_the_text_report_has_a_line_per_warning() -> None:
    out = io.StringIO()
    write_text(out, report(Warned(warning(), Result.LEFT_ALONE, "already recorded")))
    assert (
        "Warned: DeadlineApproaching PyTorchJob team-a/soon -> left-alone: already recorded: "
        "deadline 2024-05-01T12:10:00Z (in 10m00s)"
    ) in out.getvalue()


def test_the_tally_counts_the_warnings_recorded_by_family_kind_and_rule() -> None:
    tally = Tally()
    for result in (Result.DONE, Result.PLANNED, Result.LEFT_ALONE, Result.ERROR):
        tally.warned(Warned(warning(), result))
    assert dict(tally.warnings) == {("training-operator", "PyTorchJob", "gpu"): 2}


def test_the_pushed_metrics_carry_the_warnings_by_family_kind_and_rule() -> None:
    tally = Tally()
    tally.warned(Warned(warning(), Result.DONE))
    values = metrics.figures(tally, exit_code=0, ended_at=NOW, duration_s=1.0).values
    assert values["deadline_sweeper_warnings"] == {("training-operator", "PyTorchJob", "gpu"): 1.0}
