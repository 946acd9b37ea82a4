"""helm lint --strict, and the versions the chart, the image and the package must agree on."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

import sweeper

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "chart"


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="defaults"),
        pytest.param({"action": "auto", "namespaces": ["team-a", "team-b"]}, id="namespaced"),
        pytest.param({"intervalSeconds": 15, "dryRun": True, "kinds": ["JAXJob"]}, id="sub-minute"),
    ],
)
def test_helm_lint_strict_passes(helm, tmp_path, values):
    values_file = tmp_path / "values.json"
    values_file.write_text(json.dumps(values))

    done = subprocess.run(
        [str(helm), "lint", "--strict", str(CHART), "--values", str(values_file)],
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout
    assert "[ERROR]" not in done.stdout


def test_chart_is_helm_v2_and_runs_this_release_of_the_sweeper():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())

    assert chart["apiVersion"] == "v2"
    assert chart["type"] == "application"
    assert chart["appVersion"] == sweeper.__version__


def test_image_labels_this_release_of_the_sweeper():
    dockerfile = (REPO / "Dockerfile").read_text()

    match = re.search(r"^ARG VERSION=(\S+)$", dockerfile, re.MULTILINE)
    assert match is not None
    assert match[1] == sweeper.__version__
