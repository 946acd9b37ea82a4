"""What a newcomer meets first: the wrong cluster, a broken kubeconfig, a silent server.

Each case is one clear line on stderr and a documented exit code (docs/cli.md), and a report
that never reads as an empty cluster when the pass did not list one.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from sweeper.cli import command
from sweeper.core.errors import ApiError, RequestRef
from tests.cli_runner import runner
from tests.unit.fakes import FakeWatchCluster
from tests.unit.objects import NOW, job
from tests.unit.test_cli import Harness

ENDPOINT = '(server https://fake.invalid, context "fake")'


def test_a_cluster_that_serves_no_kubeflow_kind_exits_three_naming_context_and_server() -> None:
    harness = Harness(FakeWatchCluster(date=NOW, served=()))
    result = harness.invoke("--dry-run")
    assert result.exit_code == 3
    message = (
        "the cluster serves no Kubeflow job kind: is the Training Operator installed, "
        f"and is this the right context? {ENDPOINT}"
    )
    assert result.stderr.splitlines()[-1] == f"sweeper: error: {message}"
    assert "No Kubeflow jobs found." not in result.stdout
    assert result.stdout.splitlines()[-1].endswith(f"; stopped: {message}")


def test_a_pass_that_failed_never_says_no_jobs_were_found() -> None:
    harness = Harness()
    refused = ApiError(RequestRef("discover", "API group kubeflow.org"), None, "connection refused")
    harness.fake.fail("discover", None, refused)
    result = harness.invoke("--dry-run")
    assert result.exit_code == 3
    assert "No Kubeflow jobs found." not in result.stdout
    assert result.stdout.splitlines()[-1].startswith("0 jobs: ")


def test_an_empty_cluster_still_says_no_jobs_were_found() -> None:
    result = Harness().invoke("--dry-run")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1] == "No Kubeflow jobs found."


@pytest.mark.parametrize(
    ("flag", "word"),
    [
        pytest.param("--action", "Fail", id="action"),
        pytest.param("--output", "JSON", id="output"),
        pytest.param("--terminate-pods", "All", id="terminate-pods"),
    ],
)
def test_fixed_words_are_taken_as_the_chart_takes_them_lower_case(flag: str, word: str) -> None:
    harness = Harness()
    result = harness.invoke(flag, word)
    assert result.exit_code == 2
    assert f"invalid value for {flag}: {word!r} is not one of" in result.stderr
    assert harness.config is None


def test_log_levels_are_taken_in_any_case_as_logging_names_them() -> None:
    assert Harness().invoke("--dry-run", "--log-level", "debug").exit_code == 0


@pytest.mark.parametrize(
    ("text", "found"),
    [
        pytest.param("hello\n", "a string", id="a-word"),
        pytest.param("- clusters\n- users\n", "a list", id="a-list"),
        pytest.param("42\n", "a number", id="a-number"),
    ],
)
def test_a_kubeconfig_that_is_yaml_but_not_a_mapping_says_so(
    tmp_path: Path, text: str, found: str
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(text)
    result = runner().invoke(command, ["--dry-run", "--kubeconfig", str(kubeconfig)])
    assert result.exit_code == 2
    assert result.stderr == (
        f"sweeper: error: kubeconfig {kubeconfig}: not a kubeconfig (a YAML mapping with "
        f"clusters, contexts and users; found {found})\n"
    )


def test_no_kubeconfig_names_every_place_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    result = runner().invoke(command, ["--dry-run"], env={"KUBECONFIG": None})
    assert result.exit_code == 2
    assert result.stderr == (
        "sweeper: error: no kubeconfig found (--kubeconfig, KUBECONFIG, or ~/.kube/config) "
        "and not running in a cluster\n"
    )


@contextlib.contextmanager
def black_hole() -> Iterator[int]:
    """A loopback port whose kernel completes every connection that nothing ever reads."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield int(listener.getsockname()[1])


def test_a_server_that_never_answers_says_so_after_each_silent_attempt(tmp_path: Path) -> None:
    with black_hole() as port:
        kubeconfig = tmp_path / "config"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: hole\n"
            f"clusters: [{{name: hole, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
            "users: [{name: u, user: {token: t}}]\n"
            "contexts: [{name: hole, context: {cluster: hole, user: u}}]\n"
        )
        result = runner().invoke(
            command,
            [
                *("--dry-run", "--kubeconfig", str(kubeconfig)),
                *("--request-timeout", "300ms", "--log-format", "text"),
            ],
        )
    assert result.exit_code == 3
    lines = result.stderr.splitlines()
    waits = [line for line in lines if "no answer to discover API group kubeflow.org" in line]
    assert len(waits) == 3
    assert "trying again (attempt 2 of 4)" in waits[0]
    assert lines[-1] == (
        "sweeper: error: cannot discover API group kubeflow.org: timed out (--request-timeout) "
        f'(server https://127.0.0.1:{port}, context "hole")'
    )


def test_one_job_is_one_job_and_the_summary_spells_its_keys_as_the_report_does() -> None:
    harness = Harness()
    harness.fake.add_job(job())
    result = harness.invoke("-o", "json", "--log-format", "json")
    report = json.loads(result.stdout)["summary"]
    logged = json.loads(result.stderr.splitlines()[-1])
    assert logged["message"].startswith("pass 1: 1 job: 1 touch, 0 fail, 0 terminate-pods")
    assert {key: logged[key] for key in report} == report
    assert "terminate_pods" not in logged
