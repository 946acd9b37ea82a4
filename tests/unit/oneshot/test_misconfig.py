"""--training-operator-deployment: a Training Operator running its v1 MPIJob controller beside
mpi-operator's v2beta1 CRD is reported (a WARNING, a gauge, the summary), never acted on."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
from typing import Any

import pytest

from sweeper import metrics
from sweeper.config import Config, OutputFormat
from sweeper.core.clock import SYSTEM_CLOCK
from sweeper.core.errors import ApiError, RequestRef
from sweeper.core.families import KINDS
from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION, MPIJOB
from sweeper.core.families.training_operator import PYTORCHJOB
from sweeper.k8s.cluster import ServedKind
from sweeper.oneshot import run as oneshot
from sweeper.oneshot.misconfig import enabled_schemes
from sweeper.stop import Stop
from tests.unit.fakes import FakeCluster
from tests.unit.objects import NOW, job
from tests.unit.test_cli import Harness

V2BETA1 = (ServedKind(PYTORCHJOB, "v1"), ServedKind(MPIJOB, MPI_OPERATOR_VERSION))
V1 = tuple(ServedKind(kind, kind.versions[0]) for kind in KINDS)
CHECKED = Config(
    output=OutputFormat.TEXT, training_operator_deployment=("kubeflow", "training-operator")
)
OTHERS = [f"--enable-scheme={s}" for s in ("tfjob", "pytorchjob", "xgboostjob", "paddlejob")]
WARNING = "runs its kubeflow.org/v1 MPIJob controller"


def deployment(*containers: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"namespace": "kubeflow", "name": "training-operator"},
        "spec": {"template": {"spec": {"containers": list(containers)}}},
    }


def operator(args: list[str] | None = None, command: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "training-operator", "command": command or ["/manager"]}
    if args is not None:
        container["args"] = args
    return deployment(container)


@pytest.mark.parametrize(
    ("raw", "schemes"),
    [
        pytest.param(operator(), None, id="upstream: no flag, every scheme"),
        pytest.param(operator(["--enable-scheme=MPIJob"]), {"mpijob"}, id="equals, any case"),
        pytest.param(operator(["--enable-scheme", "mpijob"]), {"mpijob"}, id="next word"),
        pytest.param(operator(["-enable-scheme=tfjob"]), {"tfjob"}, id="one dash, as Go reads"),
        pytest.param(
            operator(command=["/manager", "--enable-scheme=tfjob", "--enable-scheme", "PaddleJob"]),
            {"tfjob", "paddlejob"},
            id="in the command, repeated",
        ),
        pytest.param(
            deployment({"name": "sidecar", "args": ["--enable-scheme=x"]}, {"name": "manager"}),
            {"x"},
            id="any container",
        ),
        pytest.param(operator(["--enable-schemes=mpijob"]), None, id="another flag"),
        pytest.param(operator(["--enable-scheme"]), None, id="no value: not a scheme"),
        pytest.param({"spec": None}, None, id="no template"),
    ],
)
def test_the_schemes_are_read_from_command_and_args_as_the_operator_reads_them(
    raw: dict[str, Any], schemes: set[str] | None
) -> None:
    assert enabled_schemes(raw) == schemes


def one_pass(fake: FakeCluster, config: Config = CHECKED) -> tuple[oneshot.PassOutcome, str]:
    out = io.StringIO()
    outcome = oneshot.sweep(1, config, fake, Stop(SYSTEM_CLOCK), out, clock=SYSTEM_CLOCK)
    return outcome, out.getvalue()


def cluster(raw: dict[str, Any] | None, served: tuple[ServedKind, ...] = V2BETA1) -> FakeCluster:
    fake = FakeCluster(served=served, date=NOW)
    fake.add_job(job())  # overdue by an hour: touched whatever the check says
    if raw is not None:
        fake.deployments[("kubeflow", "training-operator")] = raw
    return fake


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def gauge(outcome: oneshot.PassOutcome) -> float:
    run = metrics.figures(outcome.tally, exit_code=0, ended_at=NOW, duration_s=1)
    return run.values[metrics.MISCONFIGURED.name][("training-operator-mpijob-scheme",)]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(operator(), id="no --enable-scheme"),
        pytest.param(operator([*OTHERS, "--enable-scheme=MPIJOB"]), id="mpijob among them"),
    ],
)
def test_an_operator_with_its_mpijob_scheme_on_is_reported_once_per_pass_and_nothing_else(
    raw: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    fake = cluster(raw)

    with caplog.at_level(logging.INFO):
        outcome, report = one_pass(fake)
        second, _ = one_pass(fake)

    (first_warning, second_warning) = [w for w in warnings(caplog) if WARNING in w]
    assert first_warning == second_warning
    assert "kubeflow/training-operator" in first_warning
    assert "kubeflow.org/v2beta1" in first_warning
    assert "--enable-scheme for each kind it should run but mpijob" in first_warning
    assert gauge(outcome) == gauge(second) == 1
    assert report.splitlines()[-1].endswith("; misconfigured: training-operator-mpijob-scheme")
    # The overdue job touched once (the second pass finds it recently touched), nothing more.
    assert [(r.method, r.name) for r in fake.writes] == [
        ("patch", "train"),
        ("create-event", "train"),
    ]
    assert [r.method for r in fake.requests].count("get-deployment") == 2


@pytest.mark.parametrize(
    ("deployment", "found"),
    [(operator(), ["training-operator-mpijob-scheme"]), (operator(OTHERS), [])],
    ids=["misconfigured", "not"],
)
def test_the_json_summary_lists_what_the_pass_found_misconfigured(
    deployment: dict[str, Any], found: list[str]
) -> None:
    _, report = one_pass(
        cluster(deployment), dataclasses.replace(CHECKED, output=OutputFormat.JSON)
    )
    assert json.loads(report)["summary"]["misconfigured"] == found


def test_an_operator_with_every_scheme_but_mpijob_is_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = cluster(operator(OTHERS))

    with caplog.at_level(logging.INFO):
        outcome, report = one_pass(fake)

    assert not [w for w in warnings(caplog) if "enable-scheme" in w]
    assert gauge(outcome) == 0
    assert "misconfigured" not in report


@pytest.mark.parametrize(
    ("served", "config"),
    [
        pytest.param(V1, CHECKED, id="MPIJob at v1: the operator's own"),
        pytest.param(V2BETA1, dataclasses.replace(CHECKED, training_operator_deployment=None)),
    ],
)
def test_nothing_is_read_without_the_flag_or_without_mpi_operators_crd(
    served: tuple[ServedKind, ...], config: Config
) -> None:
    fake = cluster(operator(), served)

    outcome, _ = one_pass(fake, config)

    assert "get-deployment" not in [r.method for r in fake.requests]
    assert gauge(outcome) == 0


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(None, id="404: no such Deployment"),
        pytest.param(ApiError(RequestRef("get", "deployments.apps"), 403, "forbidden"), id="403"),
        pytest.param(ApiError(RequestRef("get", "deployments.apps"), None, "refused"), id="down"),
    ],
)
def test_a_deployment_that_cannot_be_read_is_one_warning_and_the_pass_goes_on(
    error: ApiError | None, caplog: pytest.LogCaptureFixture
) -> None:
    fake = cluster(None if error is None else operator())
    if error is not None:
        fake.fail("get-deployment", "training-operator", error)

    with caplog.at_level(logging.INFO):
        outcome, _ = one_pass(fake)

    (line,) = [w for w in warnings(caplog) if "training-operator-deployment" in w]
    assert line.startswith("cannot check the Training Operator's schemes")
    assert (outcome.errors, outcome.unlisted) == (0, [])
    assert [r.method for r in fake.writes] == ["patch", "create-event"]
    assert gauge(outcome) == 0


@pytest.mark.parametrize("value", ["training-operator", "kubeflow/", "Kube_flow/x", "/x"])
def test_a_malformed_deployment_reference_is_exit_2_with_one_line(value: str) -> None:
    harness = Harness()

    result = harness.invoke("--training-operator-deployment", value)

    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert "--training-operator-deployment" in line
    assert harness.config is None


def test_the_flag_and_its_twin_name_the_deployment() -> None:
    for args, env in (
        (["--training-operator-deployment", "kubeflow/training-operator"], {}),
        ([], {"SWEEPER_TRAINING_OPERATOR_DEPLOYMENT": "kubeflow/training-operator"}),
    ):
        harness = Harness()
        harness.fake.add_job(job())
        harness.invoke("--dry-run", *args, env=env)
        assert harness.config is not None
        assert harness.config.training_operator_deployment == ("kubeflow", "training-operator")


def test_it_is_checked_whatever_kinds_the_sweeper_sweeps(caplog: pytest.LogCaptureFixture) -> None:
    # The crash loop stops the operator enforcing every v1 kind: PyTorchJob-only runs need it.
    fake = cluster(operator())

    with caplog.at_level(logging.INFO):
        outcome, _ = one_pass(fake, dataclasses.replace(CHECKED, kinds=(PYTORCHJOB,)))

    assert len([w for w in warnings(caplog) if WARNING in w]) == 1
    assert gauge(outcome) == 1
