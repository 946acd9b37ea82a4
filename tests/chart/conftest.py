"""Fixtures for the chart and image checks: the real helm binary, renderings parsed as YAML.

Helm comes from the binary cache that ``scripts/build-binaries`` fills, found (at the version
its wrapper module pins) by ``devcluster.binaries``. Without it these tests skip with a reason
locally and fail in CI (``CI=true``), like the e2e tests.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml

from devcluster import binaries

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "chart"
CHECKOV_VENV = REPO / ".venv-checkov"

Doc = dict[str, Any]


def missing(reason: str) -> NoReturn:
    """Skip locally, fail in CI: CI must never pass by skipping a check."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def _find_helm() -> Path:
    try:
        return binaries.find("helm")
    except binaries.BinaryMissing as e:
        missing(str(e))


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm binary the chart is checked with."""
    return _find_helm()


class HelmError(Exception):
    """``helm template`` refused the values; the message is helm's stderr."""


@dataclass(frozen=True)
class Rendered:
    """The objects of one ``helm template`` run, parsed."""

    docs: list[Doc]

    def of_kind(self, kind: str) -> list[Doc]:
        """Every object of one kind, in rendering order."""
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str) -> Doc:
        """The only object of one kind (fails the test if there are none or several)."""
        found = self.of_kind(kind)
        assert len(found) == 1, f"expected one {kind}, got {len(found)}"
        return found[0]

    @property
    def cronjob(self) -> Doc:
        """The CronJob."""
        return self.one("CronJob")

    @property
    def job_spec(self) -> Doc:
        """The CronJob's Job spec."""
        spec: Doc = self.cronjob["spec"]["jobTemplate"]["spec"]
        return spec

    @property
    def pod_spec(self) -> Doc:
        """The CronJob's pod spec."""
        spec: Doc = self.job_spec["template"]["spec"]
        return spec

    @property
    def container(self) -> Doc:
        """The sweeper container of the CronJob's pod."""
        container: Doc
        (container,) = self.pod_spec["containers"]
        return container

    @property
    def args(self) -> list[str]:
        """The sweeper arguments of the CronJob."""
        return list(self.container["args"])

    @property
    def test_pod(self) -> Doc:
        """The ``helm test`` pod."""
        return self.one("Pod")


def _run_template(
    helm: Path, workdir: Path, values: Doc | None, extra: list[str]
) -> subprocess.CompletedProcess[str]:
    values_file = workdir / "values.json"
    # JSON is YAML: the values reach helm with their exact types (no --set coercion).
    values_file.write_text(json.dumps(values or {}), encoding="utf-8")
    return subprocess.run(
        [
            str(helm),
            "template",
            "sw",
            str(CHART),
            "--namespace",
            "sweeper",
            "--values",
            str(values_file),
            *extra,
        ],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def render(helm: Path, tmp_path: Path) -> Callable[..., Rendered]:
    """Render the chart with the given values (a dict), as ``helm install`` would.

    Raises HelmError with helm's stderr if helm refuses the values.
    """

    def _render(values: Doc | None = None, *extra: str) -> Rendered:
        done = _run_template(helm, tmp_path, values, list(extra))
        if done.returncode != 0:
            raise HelmError(done.stderr.strip())
        return Rendered([d for d in yaml.safe_load_all(done.stdout) if d])

    return _render


@pytest.fixture
def render_error(helm: Path, tmp_path: Path) -> Callable[..., str]:
    """Render the chart with values that must be refused; returns helm's error message."""

    def _render_error(values: Doc, *extra: str) -> str:
        done = _run_template(helm, tmp_path, values, list(extra))
        assert done.returncode != 0, f"helm accepted {values}:\n{done.stdout[:2000]}"
        return done.stderr

    return _render_error


@pytest.fixture(scope="session")
def checkov() -> Path:
    """The checkov executable, from its own virtual environment.

    checkov pins old versions of libraries the project also uses (packaging, python-dateutil)
    and brings ~70 packages, so it lives in ``.venv-checkov`` (created by scripts/test from
    tests/chart/checkov-requirements.txt), not in the dev environment.
    """
    exe = CHECKOV_VENV / "bin" / "checkov"
    if not os.access(exe, os.X_OK):
        missing(
            f"checkov is not installed ({exe}); run: python3 -m venv .venv-checkov && "
            ".venv-checkov/bin/pip install -r tests/chart/checkov-requirements.txt"
        )
    return exe
