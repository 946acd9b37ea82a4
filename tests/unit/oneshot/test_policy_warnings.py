"""A pass's ``DeadlineApproaching`` warnings under ``--policy`` (fake cluster, the CLI)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import Result

from sweeper.cli import Seams, command
from tests.cli_runner import runner
from tests.unit.fakes import FakeWatchCluster
from tests.unit.objects import NOW, job

RULES = """
rules:
  - name: gpu
    namespaceSelector: {matchLabels: {tier: gpu}}
    warnBefore: 30m
"""


def sweep(fake: FakeWatchCluster, tmp_path: Path, *args: str) -> Result:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    return runner().invoke(
        command,
        ["--log-format", "text", "--policy", str(rules), "-o", "json", *args],
        obj=Seams(connect=lambda _config, *, stop: fake),
        env={"KUBECONFIG": None, "SWEEPER_POLICY": None},
        catch_exceptions=False,
    )


def cluster() -> FakeWatchCluster:
    fake = FakeWatchCluster(date=NOW)
    fake.add_namespace("team-a", {"tier": "gpu"})
    fake.add_namespace("team-b", {})
    # 10 minutes left of a 1 h deadline: inside the 30 min window.
    fake.add_job(job(name="soon", deadline=3600, started_ago=3000))
    # 40 minutes left: not yet.
    fake.add_job(job(name="later", deadline=3600, started_ago=1200))
    # The same as "soon", in a namespace no rule selects.
    fake.add_job(job(name="soon", namespace="team-b", deadline=3600, started_ago=3000))
    return fake


def warning_events(fake: FakeWatchCluster) -> list[str]:
    return [e["metadata"]["name"] for e in fake.events if e["reason"] == "DeadlineApproaching"]


def test_passes_record_the_due_warning_once(tmp_path: Path) -> None:
    fake = cluster()
    results = []
    for _ in range(3):
        result = sweep(fake, tmp_path)
        assert result.exit_code == 0, result.output
        (warned,) = json.loads(result.stdout)["warnings"]
        assert (warned["namespace"], warned["name"]) == ("team-a", "soon")
        results.append(warned["result"])
    assert results == ["done", "left-alone", "left-alone"]
    (name,) = warning_events(fake)
    assert name.startswith("soon.deadline-approaching.")


def test_max_actions_does_not_count_warnings(tmp_path: Path) -> None:
    fake = cluster()
    fake.add_job(job(name="late-1", deadline=60, started_ago=7200))
    fake.add_job(job(name="late-2", deadline=60, started_ago=7200))
    result = sweep(fake, tmp_path, "--max-actions", "1")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["summary"]["touch"] == 1
    assert [w["result"] for w in document["warnings"]] == ["done"]
    assert len(warning_events(fake)) == 1


def test_a_client_dry_run_records_nothing_and_says_what_it_would(tmp_path: Path) -> None:
    fake = cluster()
    result = sweep(fake, tmp_path, "--dry-run")
    assert result.exit_code == 0, result.output
    (warned,) = json.loads(result.stdout)["warnings"]
    assert warned["result"] == "planned"
    assert "DeadlineApproaching -> planned" in result.stderr
    assert fake.events == []


def test_explain_shows_the_warning_step(tmp_path: Path) -> None:
    fake = cluster()
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    result = runner().invoke(
        command,
        ["--policy", str(rules), "--explain", "team-a/later"],
        obj=Seams(connect=lambda _config, *, stop: fake),
        env={"KUBECONFIG": None, "SWEEPER_POLICY": None},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "deadline-approaching" in result.stdout
    assert "warnBefore 30m00s: DeadlineApproaching at" in result.stdout
    assert "2024-05-01T12:10:00Z (in 10m00s), Event" in result.stdout
    assert fake.writes == []
