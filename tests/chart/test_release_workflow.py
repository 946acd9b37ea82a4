"""The release pipeline (.github/workflows/release.yml): valid for GitHub, and what it promises.

It cannot run here (it needs GitHub's runners, a registry and an OIDC token), so it is checked
the two ways that can fail here: actionlint (built from its Go module) finds no problem, and
the steps a release depends on are there: both architectures, the push, a keyless signature, an
SBOM attestation, the chart published as an OCI artifact, and an image name that is the chart's
default.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import binaries
from tests.chart.conftest import missing

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "release.yml"


@pytest.fixture(scope="module")
def workflow() -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return loaded


def _steps(workflow: dict[Any, Any], job: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = workflow["jobs"][job]["steps"]
    return steps


def _runs(workflow: dict[Any, Any], job: str) -> str:
    return "\n".join(step.get("run", "") for step in _steps(workflow, job))


def test_actionlint_finds_nothing() -> None:
    try:
        actionlint = binaries.find("actionlint")
    except binaries.BinaryMissing as e:
        missing(str(e))

    done = subprocess.run(
        [str(actionlint), "-no-color", str(WORKFLOW)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )

    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    try:
        actionlint = binaries.find("actionlint")
    except binaries.BinaryMissing as e:
        missing(str(e))
    broken = tmp_path / ".github" / "workflows" / "broken.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(
        WORKFLOW.read_text(encoding="utf-8").replace("runs-on: ubuntu-24.04", "runs-on: [", 1),
        encoding="utf-8",
    )

    done = subprocess.run(
        [str(actionlint), "-no-color", str(broken)], capture_output=True, text=True, check=False
    )

    assert done.returncode != 0


def test_every_action_is_pinned_to_a_commit_named_by_its_release() -> None:
    """A tag can be moved to other code after review; a commit cannot (supply-chain scanners)."""
    lines = [
        line.strip()
        for line in WORKFLOW.read_text(encoding="utf-8").splitlines()
        if re.match(r"^\s*(- )?uses:", line)
    ]
    pinned = re.compile(r"^(- )?uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")

    assert len(lines) >= 10  # the ten steps that use an action
    assert [line for line in lines if not pinned.match(line)] == []


def test_checkouts_keep_no_credentials_on_disk(workflow: dict[Any, Any]) -> None:
    checkouts = [
        step
        for job in workflow["jobs"].values()
        for step in job["steps"]
        if step.get("uses", "").startswith("actions/checkout@")
    ]

    assert len(checkouts) == 3  # test, image and chart
    assert all(step["with"]["persist-credentials"] is False for step in checkouts)


def test_releases_happen_on_version_tags_only(workflow: dict[Any, Any]) -> None:
    # PyYAML reads the key "on" as the boolean True.
    triggers = workflow[True]

    assert triggers["push"] == {"tags": ["v*.*.*"]}
    assert workflow["permissions"] == {"contents": "read"}


def test_the_image_is_built_for_both_architectures_and_signed(workflow: dict[Any, Any]) -> None:
    build = next(s for s in _steps(workflow, "image") if s.get("id") == "build")

    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["push"] is True
    assert workflow["jobs"]["image"]["permissions"]["id-token"] == "write"
    assert 'cosign sign --yes "${IMAGE}@${DIGEST}"' in _runs(workflow, "image")
    assert "cosign attest --yes --type spdxjson" in _runs(workflow, "image")


def test_the_projects_sbom_is_checked_against_the_lock_and_attached(
    workflow: dict[Any, Any],
) -> None:
    runs = _runs(workflow, "image")

    assert "python3 -P devcluster/sbom.py" in runs
    assert "--lock requirements.txt" in runs
    assert "for arch in amd64 arm64" in runs
    assert '--type cyclonedx --predicate "sbom-$arch.cdx.json"' in runs


def test_the_chart_is_published_as_an_oci_artifact(workflow: dict[Any, Any]) -> None:
    runs = _runs(workflow, "chart")

    assert workflow["env"]["CHART_REPOSITORY"].startswith("oci://ghcr.io/")
    assert 'helm push "dist/kubeflow-deadline-sweeper-${VERSION}.tgz" "$CHART_REPOSITORY"' in runs
    assert "cosign sign --yes" in runs


def test_the_published_image_is_the_charts_default(workflow: dict[Any, Any]) -> None:
    values = yaml.safe_load((REPO / "chart" / "values.yaml").read_text(encoding="utf-8"))
    owner = values["image"]["repository"].split("/")[1]

    assert workflow["env"]["IMAGE"] == (
        "ghcr.io/${{ github.repository_owner }}/kubeflow-deadline-sweeper"
    )
    assert values["image"]["repository"] == f"ghcr.io/{owner}/kubeflow-deadline-sweeper"
