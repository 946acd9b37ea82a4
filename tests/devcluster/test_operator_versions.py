"""The operator harness starts each Training Operator release as that release's main.go reads.

v1.7.0 to v1.8.x register MXJob and not JAXJob (``pkg/controller.v1/register_controller.go``);
v1.7.0 has no webhooks, and its manager's port flag is ``--monitoring-port``, not
``--webhook-server-port``, which v1.7.0 would refuse as an unknown flag and exit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from devcluster import binaries
from devcluster.operator import Operator


@pytest.fixture(autouse=True)
def _pinned_afterwards() -> Iterator[None]:
    yield
    binaries.select()


def started_as(version: str | None, tmp_path: Path) -> tuple[tuple[str, ...], list[str]]:
    """The schemes the harness waits for and the argv it starts the operator with."""
    binaries.select(operator=version)
    cp: Any = SimpleNamespace(kubeconfig=tmp_path / "kubeconfig", workdir=tmp_path)
    operator = Operator(cp, binary=tmp_path / "training-operator")
    return operator.schemes, operator._argv(webhook_port=12345)


@pytest.mark.parametrize(
    ("version", "served", "port_flag"),
    [
        pytest.param("v1.7.0", "mxjob", "--monitoring-port=12345", id="v1.7.0"),
        pytest.param("v1.8.1", "mxjob", "--webhook-server-port=12345", id="v1.8.1"),
        pytest.param("v1.9.3", "jaxjob", "--webhook-server-port=12345", id="v1.9.3"),
        pytest.param(None, "jaxjob", "--webhook-server-port=12345", id="pinned"),
    ],
)
def test_each_release_serves_its_own_schemes_on_its_own_port_flag(
    tmp_path: Path, version: str | None, served: str, port_flag: str
) -> None:
    schemes, argv = started_as(version, tmp_path)
    gone = {"mxjob", "jaxjob"} - {served}
    assert served in schemes
    assert not gone & set(schemes)
    assert len(schemes) == len(("tf", "pytorch", "xgboost", "mpi", "paddle", served))
    assert port_flag in argv
    assert not [
        a
        for a in argv
        if a.startswith(("--webhook-server-port", "--monitoring-port")) and a != port_flag
    ]
    # All the release serves: no --enable-scheme (which would name a scheme it lacks).
    assert not [a for a in argv if a.startswith("--enable-scheme")]


def test_a_subset_of_schemes_is_asked_for_by_name(tmp_path: Path) -> None:
    binaries.select(operator="v1.7.0")
    cp: Any = SimpleNamespace(kubeconfig=tmp_path / "kubeconfig", workdir=tmp_path)
    operator = Operator(cp, schemes=("MXJob",), binary=tmp_path / "training-operator")
    assert operator._argv(webhook_port=1)[-1:] == ["--enable-scheme=mxjob"]
