"""A pass under ``--policy``: the Namespaces' labels choose each job's rule (fake cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from sweeper.cli import Seams, command
from sweeper.core.errors import ApiError, RequestRef
from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION, MPIJOB
from sweeper.core.kinds import EXCLUDE_ANNOTATION, TOUCHED_AT_ANNOTATION
from sweeper.k8s.cluster import ServedKind
from tests.cli_runner import runner
from tests.unit.fakes import FakeWatchCluster
from tests.unit.objects import NOW, job, mpijob, trainjob
from tests.unit.test_act_platform import launcher

RULES = """
rules:
  - name: gpu
    namespaceSelector: {matchLabels: {tier: gpu}}
    defaultDeadline: 1h
    maxDeadline: 90m
  - name: sandbox
    namespaceSelector: {matchLabels: {tier: sandbox}}
    maxDeadline: 1h
    allowExemption: true
"""


class Harness:
    def __init__(self, tmp_path: Path, rules: str = RULES) -> None:
        self.fake = FakeWatchCluster(date=NOW)
        self.rules = tmp_path / "rules.yaml"
        self.rules.write_text(rules)

    def invoke(self, *args: str, policy: bool = True) -> Result:
        flags = ["--policy", str(self.rules)] if policy else []
        return runner().invoke(
            command,
            ["--log-format", "text", *flags, *args],
            obj=Seams(connect=lambda _config, *, stop: self.fake),
            env={"KUBECONFIG": None, "SWEEPER_POLICY": None},
            catch_exceptions=False,
        )

    def report(self, *args: str) -> dict[str, dict[str, Any]]:
        result = self.invoke("-o", "json", "--dry-run", *args)
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        return {record["name"]: record for record in document["jobs"]}


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    made = Harness(tmp_path)
    made.fake.add_namespace("team-a", {"tier": "gpu"})
    made.fake.add_namespace("team-b", {"tier": "sandbox"})
    made.fake.add_namespace("team-c", {})
    return made


def test_a_default_deadline_is_enforced_by_failing_the_job_whatever_the_action(
    harness: Harness,
) -> None:
    harness.fake.add_job(job(name="none", deadline=None, started_ago=7200))
    result = harness.invoke("--action", "touch")
    assert result.exit_code == 0, result.output
    (write,) = [r for r in harness.fake.writes if r.method == "patch-status"]
    failed = write.body["status"]["conditions"][-1]
    assert failed["message"] == (
        "Job none has failed because it was active longer than specified deadline "
        "(1h00m, the default of platform rule gpu) (enforced by kubeflow-deadline-sweeper)"
    )
    assert "platform-deadline" in result.stderr


def test_the_report_says_where_each_deadline_comes_from(harness: Harness) -> None:
    harness.fake.add_job(job(name="none", deadline=None, started_ago=600))
    harness.fake.add_job(job(name="long", deadline=7 * 3600, started_ago=600))
    harness.fake.add_job(job(name="short", deadline=1800, started_ago=600))
    harness.fake.add_job(job(name="today", namespace="team-c", deadline=None, started_ago=9000))
    records = harness.report()
    seen = {name: (r["deadline_source"], r["rule"], r["decision"]) for name, r in records.items()}
    assert seen == {
        "none": ("default", "gpu", "skip"),
        "long": ("cap", "gpu", "skip"),
        "short": ("job", "gpu", "skip"),
        "today": ("job", None, "skip"),
    }
    assert records["today"]["reason"] == "no-deadline"
    wide = harness.invoke("-o", "wide", "--dry-run").stdout
    assert "(1h30m cap, rule gpu)" in wide


def test_a_trainjob_kueue_just_resumed_is_left_to_the_trainer_to_restart_its_clock(
    harness: Harness,
) -> None:
    # Suspended past its cap, then admitted: until the trainer flips Suspended to False (and
    # so restarts its clock), creation + the cap reads as long past.
    harness.fake.add_job(
        trainjob(deadline=100 * 3600, created_ago=80 * 3600, suspend=False, still_suspended=True)
    )
    result = harness.invoke("--action", "touch", "-o", "json")
    assert result.exit_code == 0, result.output
    assert harness.fake.writes == []
    (record,) = json.loads(result.stdout)["jobs"]
    assert (record["decision"], record["reason"], record["rule"]) == ("skip", "resuming", "gpu")


def test_a_stamp_a_tenant_wrote_in_the_future_stops_no_touch(harness: Harness) -> None:
    forged = {TOUCHED_AT_ANNOTATION: "2125-01-01T00:00:00Z"}
    harness.fake.add_job(
        job(name="forged", deadline=3600, started_ago=3 * 3600, annotations=forged)
    )
    harness.fake.add_job(job(name="honest", deadline=3600, started_ago=3 * 3600))
    result = harness.invoke("--action", "touch", "-o", "json")
    assert result.exit_code == 0, result.output
    assert sorted((r.method, r.name) for r in harness.fake.writes if r.method == "patch") == [
        ("patch", "forged"),
        ("patch", "honest"),
    ]
    stamp = harness.fake.job("pytorchjobs", "team-a", "forged")["metadata"]["annotations"]
    assert stamp[TOUCHED_AT_ANNOTATION] == "2024-05-01T12:00:00Z"


OVERFLOWING = 22446744074  # Go's time.Duration(v) * time.Second wraps to about 127 years


def test_a_deadline_no_controller_can_represent_is_enforced_at_the_cap_and_said_once(
    tmp_path: Path,
) -> None:
    harness = Harness(tmp_path, "rules:\n  - name: gpu\n    maxDeadline: 1h\n")
    harness.fake.add_namespace("team-a", {})
    harness.fake.add_job(job(name="pt-capped", deadline=7200, started_ago=3 * 3600))
    harness.fake.add_job(job(name="pt-evader", deadline=OVERFLOWING, started_ago=3 * 3600))
    harness.fake.add_job(trainjob("tj-evader", deadline=OVERFLOWING, created_ago=3 * 3600))
    result = harness.invoke("-o", "json", "--dry-run")
    assert result.exit_code == 0, result.output
    records = {r["name"]: r for r in json.loads(result.stdout)["jobs"]}
    assert {name: (r["decision"], r["reason"]) for name, r in records.items()} == {
        "pt-capped": ("fail", "platform-deadline"),
        "pt-evader": ("fail", "platform-deadline"),
        "tj-evader": ("fail", "platform-deadline"),
    }
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line]
    for name in ("pt-evader", "tj-evader"):
        (line,) = [line for line in warnings if f"/{name}:" in line]
        assert f"activeDeadlineSeconds {OVERFLOWING} overflows" in line
        assert "enforced at the cap of platform rule gpu" in line
    assert len(warnings) == 2


def test_without_a_rule_a_deadline_no_controller_can_represent_is_never_due_and_said(
    tmp_path: Path,
) -> None:
    harness = Harness(tmp_path)
    harness.fake.add_job(job(name="evader", deadline=OVERFLOWING, started_ago=3 * 3600))
    result = harness.invoke("-o", "json", "--dry-run", policy=False)
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.stdout)["jobs"]
    assert (record["decision"], record["reason"]) == ("skip", "not-yet-due")
    (line,) = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert f"/evader: activeDeadlineSeconds {OVERFLOWING} overflows" in line
    assert "never due: no platform rule caps it" in line


def test_an_mpijob_deadline_added_or_shortened_after_its_launcher_is_enforced(
    harness: Harness,
) -> None:
    # Rule gpu: default 1h, cap 90m. mpi-operator copies the deadline only when it creates the
    # launcher (newLauncherJob), 10 s after the MPIJob started.
    harness.fake.served = (ServedKind(MPIJOB, MPI_OPERATOR_VERSION),)
    for name, own, carried in (
        ("added-later", 3600, None),
        ("no-deadline", None, None),
        ("shortened", 3600, 360000),
        ("carried", 3600, 3600),
    ):
        raw = harness.fake.add_job(mpijob(name, deadline=own, started_ago=3 * 3600))
        harness.fake.batch_jobs[("team-a", f"{name}-launcher")] = launcher(
            raw, started_ago=3 * 3600 - 10, own=carried
        )
    result = harness.invoke("-o", "json")
    assert result.exit_code == 0, result.output
    records = {r["name"]: r for r in json.loads(result.stdout)["jobs"]}
    assert {n: (r["decision"], r["result"]) for n, r in records.items()} == {
        "added-later": ("set-deadline", "done"),
        "no-deadline": ("set-deadline", "done"),
        "shortened": ("set-deadline", "done"),
        "carried": ("set-deadline", "left-alone"),
    }
    written = {
        name: harness.fake.batch_jobs[("team-a", f"{name}-launcher")]["spec"].get(
            "activeDeadlineSeconds"
        )
        for name in records
    }
    assert written == {"added-later": 3590, "no-deadline": 3590, "shortened": 3590, "carried": 3600}


def test_a_job_within_its_rule_is_touched_as_without_a_policy(harness: Harness) -> None:
    harness.fake.add_job(job(name="own", deadline=3000, started_ago=3600))
    records = harness.report()
    assert (records["own"]["decision"], records["own"]["reason"]) == ("touch", "overdue")


@pytest.mark.parametrize(
    ("namespace", "decision", "log"),
    [
        ("team-a", "fail", "exclude annotation ignored (platform rule gpu allows no exemption)"),
        ("team-b", "skip", "exclude annotation honoured (platform rule sandbox allows exemptions)"),
    ],
    ids=["forbidden", "allowed"],
)
def test_the_exclude_annotation_is_honoured_only_where_the_rule_allows(
    harness: Harness, namespace: str, decision: str, log: str
) -> None:
    harness.fake.add_job(
        job(
            name="mine",
            namespace=namespace,
            deadline=None,
            started_ago=9000,
            annotations={EXCLUDE_ANNOTATION: "true"},
        )
    )
    result = harness.invoke("-o", "json", "--dry-run")
    (record,) = json.loads(result.stdout)["jobs"]
    assert record["decision"] == decision
    assert record.get("exemption_refused", False) is (decision == "fail")
    assert result.stderr.count(log) == 1


def test_the_namespaces_are_read_once_per_pass_and_only_with_a_policy(harness: Harness) -> None:
    harness.fake.add_job(job(name="own"))
    harness.invoke("--dry-run")
    assert harness.fake.methods().count("list-namespaces") == 1
    harness.fake.requests.clear()
    harness.invoke("--dry-run", policy=False)
    assert "list-namespaces" not in harness.fake.methods()
    harness.fake.requests.clear()
    harness.invoke("--dry-run", "-n", "team-a", "-n", "team-b")
    assert harness.fake.methods().count("get-namespace") == 2
    assert "list-namespaces" not in harness.fake.methods()


def test_a_namespace_it_may_not_read_is_one_error_line_and_the_sweep_goes_on(
    harness: Harness,
) -> None:
    refused = ApiError(RequestRef("get", "namespaces", name="team-a", cluster_scoped=True), 403)
    harness.fake.fail("get-namespace", "team-a", refused)
    harness.fake.add_job(job(name="a", namespace="team-a", deadline=None, started_ago=9000))
    harness.fake.add_job(job(name="b", namespace="team-b", deadline=7200, started_ago=9000))
    result = harness.invoke("-o", "json", "--dry-run", "-n", "team-a", "-n", "team-b")
    assert result.exit_code == 0, result.output
    records = {r["name"]: r for r in json.loads(result.stdout)["jobs"]}
    assert (records["a"]["reason"], records["a"]["rule"]) == ("no-deadline", None)
    assert (records["b"]["reason"], records["b"]["rule"]) == ("platform-deadline", "sandbox")
    lines = [
        line for line in result.stderr.splitlines() if "cannot get namespaces 'team-a'" in line
    ]
    assert len(lines) == 1
    assert "judged by their own deadlines" in lines[0]


def test_a_bad_rules_file_is_exit_two_before_any_request(harness: Harness, tmp_path: Path) -> None:
    harness.rules.write_text("rules:\n  - {name: gpu, maxDeadline: 3x}\n")
    result = harness.invoke()
    assert result.exit_code == 2
    assert f"--policy {harness.rules}: rule gpu: maxDeadline: '3x' is not a duration" in (
        result.stderr
    )
    assert harness.fake.requests == []
    missing = harness.invoke("--policy", str(tmp_path / "absent.yaml"), policy=False)
    assert missing.exit_code == 2
    assert "absent.yaml: cannot read: No such file or directory" in missing.stderr


_HUGE = "1" + "0" * 340  # past a float: int too large to convert


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            f"rules:\n  - {{name: gpu, maxDeadline: {_HUGE}}}\n",
            "rule gpu: maxDeadline: 1000",
            id="huge-integer",
        ),
        pytest.param(
            f"rules:\n  - {{name: gpu, warnBefore: -{_HUGE}}}\n",
            "rule gpu: warnBefore: -1000",
            id="huge-negative-integer",
        ),
        pytest.param(
            f"rules:\n  - {{name: gpu, defaultDeadline: 0x{'f' * 300}}}\n",
            "rule gpu: defaultDeadline: ",
            id="huge-hexadecimal",
        ),
        pytest.param(
            f"rules:\n  - {{name: gpu, maxDeadline: 1{'0' * 5000}}}\n",
            "not YAML",
            id="integer-past-python-digit-limit",
        ),
        pytest.param("rules: " + "[" * 3000 + "]" * 3000 + "\n", "not YAML", id="deep-lists"),
        pytest.param(
            "rules:\n  - " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
            "not YAML",
            id="deep-mappings",
        ),
        pytest.param(
            "rules:\n  - {name: gpu, kinds: " + "[" * 400 + "]" * 400 + "}\n",
            "rule gpu: kinds: ",
            id="nested-kinds",
        ),
        pytest.param(
            "rules:\n  - {name: gpu, maxDeadline: 2001-13-45}\n",
            "not YAML",
            id="impossible-date",
        ),
        pytest.param(
            "rules:\n  - {name: gpu, maxDeadline: 2001-12-14t25:59:43.10-05:00}\n",
            "not YAML",
            id="impossible-timestamp",
        ),
        pytest.param(
            "rules:\n  - {name: " + "a" * 100_000 + "}\n",
            "rules[0]: name: 'aaa",
            id="huge-name",
        ),
        pytest.param(
            "rules:\n  - {name: gpu, maxDeadline: '" + "1h" * 100_000 + "'}\n",
            "rule gpu: maxDeadline: '1h1h",
            id="huge-duration-text",
        ),
    ],
)
def test_a_hostile_rules_file_is_one_short_line_and_exit_two(
    harness: Harness, text: str, message: str
) -> None:
    harness.rules.write_text(text)
    result = harness.invoke()
    assert result.exit_code == 2, result.stderr[-300:]
    (line,) = result.stderr.splitlines()
    assert f"--policy {harness.rules}: {message}" in line
    assert len(line) < 400  # the value is quoted in part, never whole
    assert harness.fake.requests == []


def test_the_environment_twin_names_the_file(harness: Harness) -> None:
    harness.fake.add_job(job(name="none", deadline=None, started_ago=9000))
    result = runner().invoke(
        command,
        ["--log-format", "text", "-o", "json", "--dry-run"],
        obj=Seams(connect=lambda _config, *, stop: harness.fake),
        env={"KUBECONFIG": None, "SWEEPER_POLICY": str(harness.rules)},
        catch_exceptions=False,
    )
    (record,) = json.loads(result.stdout)["jobs"]
    assert (record["reason"], record["rule"]) == ("platform-deadline", "gpu")


def test_explain_names_the_rule_and_the_source(harness: Harness) -> None:
    harness.fake.add_job(job(name="none", deadline=None, started_ago=600))
    result = harness.invoke("--explain", "team-a/none", "-o", "json")
    assert result.exit_code == 0, result.output
    (explained,) = json.loads(result.stdout)
    step = explained["rules"][0]
    assert (step["rule"], step["outcome"]) == ("platform-rule", "passes")
    assert step["seen"] == (
        "rule gpu; deadline 1h00m, the default of platform rule gpu (the job declares none)"
    )


def test_explain_names_a_deadline_no_controller_can_represent(tmp_path: Path) -> None:
    harness = Harness(tmp_path, "rules:\n  - name: gpu\n    maxDeadline: 1h\n")
    harness.fake.add_namespace("team-a", {})
    harness.fake.add_job(job(name="evader", deadline=OVERFLOWING, started_ago=3 * 3600))

    def steps(*, policy: bool) -> dict[str, dict[str, str]]:
        result = harness.invoke("--explain", "team-a/evader", "-o", "json", policy=policy)
        assert result.exit_code == 0, result.output
        (explained,) = json.loads(result.stdout)
        return {step["rule"]: step for step in explained["rules"]}

    capped = steps(policy=True)
    assert (
        "(the job declares 22446744074 s, beyond Go's time.Duration: longer than any cap)"
        in (capped["platform-rule"]["seen"])
    )
    assert capped["duration-overflow"]["outcome"] == "passes"
    uncapped = steps(policy=False)["duration-overflow"]
    assert uncapped["seen"].startswith(f"activeDeadlineSeconds {OVERFLOWING} overflows")
    assert uncapped["outcome"].startswith("skip")
