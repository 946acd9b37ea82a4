"""What chart tooling and a first install read: Chart.yaml's metadata, the install notes, ci/.

``helm template`` does not render NOTES.txt, and ``helm install --dry-run`` needs a cluster, so
the notes are rendered from a copy of the chart in which they are a named template included by
a ConfigMap: the same text, the same values, through the real helm.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweeper.core.model import ActionMode, PodsMode
from tests.chart.conftest import CHART, REPO

CHART_YAML = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
VALUES = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
SCHEMA = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
ANNOTATIONS: dict[str, str] = CHART_YAML["annotations"]
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
# Artifact Hub's kinds of change (its annotations reference).
CHANGE_KINDS = {"added", "changed", "deprecated", "removed", "fixed", "security"}


def test_chart_yaml_names_maintainers_and_the_kubernetes_it_needs() -> None:
    assert CHART_YAML["kubeVersion"].startswith(">=1.")
    assert CHART_YAML["maintainers"]
    assert all(m["name"] and m["url"].startswith("https://") for m in CHART_YAML["maintainers"])


def test_the_annotated_license_is_the_packages() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert ANNOTATIONS["artifacthub.io/license"] == pyproject["project"]["license"]


def test_the_annotated_image_is_the_one_the_chart_runs_by_default() -> None:
    images = yaml.safe_load(ANNOTATIONS["artifacthub.io/images"])
    expected = f"{VALUES['image']['repository']}:{CHART_YAML['appVersion']}"
    assert [image["image"] for image in images] == [expected]


def test_links_and_changes_are_in_artifact_hubs_shape() -> None:
    links = yaml.safe_load(ANNOTATIONS["artifacthub.io/links"])
    assert links and all(link["name"] and link["url"].startswith("https://") for link in links)
    changes = yaml.safe_load(ANNOTATIONS["artifacthub.io/changes"])
    assert changes
    for change in changes:
        assert set(change) == {"kind", "description"}
        assert change["kind"] in CHANGE_KINDS
        assert isinstance(change["description"], str) and change["description"]
    assert ANNOTATIONS["artifacthub.io/prerelease"] in ("true", "false")


def render_notes(helm: Path, tmp_path: Path, values: dict[str, Any], prerelease: str) -> str:
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    notes = (chart / "templates" / "NOTES.txt").read_text(encoding="utf-8")
    (chart / "templates" / "_notes_under_test.tpl").write_text(
        '{{- define "test.notes" -}}\n' + notes + "\n{{- end }}\n", encoding="utf-8"
    )
    (chart / "templates" / "notes-under-test.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\n"
        'data:\n  notes: {{ include "test.notes" . | toJson }}\n',
        encoding="utf-8",
    )
    chart_yaml = chart / "Chart.yaml"
    text = chart_yaml.read_text(encoding="utf-8")
    text = re.sub(
        r'artifacthub\.io/prerelease: "\w+"', f'artifacthub.io/prerelease: "{prerelease}"', text
    )
    chart_yaml.write_text(text, encoding="utf-8")
    values_file = tmp_path / "values.json"
    values_file.write_text(json.dumps(values), encoding="utf-8")
    done = subprocess.run(
        [
            *(str(helm), "template", "sw", str(chart), "-n", "sweeper"),
            *("--values", str(values_file), "--show-only", "templates/notes-under-test.yaml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    notes_text: str = yaml.safe_load(done.stdout)["data"]["notes"]
    return notes_text


OWN_IMAGE = {"image": {"repository": "registry.example.com/ml/kubeflow-deadline-sweeper"}}


@pytest.mark.parametrize(
    ("values", "prerelease", "warned"),
    [
        pytest.param({}, "true", True, id="default-image-before-a-release"),
        pytest.param({"mode": "watch"}, "true", True, id="default-image-watch"),
        pytest.param(OWN_IMAGE, "true", False, id="own-image"),
        pytest.param({}, "false", False, id="default-image-once-released"),
    ],
)
def test_the_notes_warn_while_the_default_image_is_unpublished(
    helm: Path, tmp_path: Path, values: dict[str, Any], prerelease: str, warned: bool
) -> None:
    notes = render_notes(helm, tmp_path, values, prerelease)
    warning = (
        "WARNING: the image ghcr.io/kubeflow-deadline-sweeper/kubeflow-deadline-sweeper:0.1.0 "
        "is the chart's default"
    )
    assert (" ".join(notes.split()).count(warning) == 1) is warned


@pytest.mark.parametrize(
    ("priority", "said"),
    [
        pytest.param(None, True, id="default-critical"),
        pytest.param("", False, id="cluster-default"),
        pytest.param("batch-high", False, id="own-class"),
    ],
)
def test_the_notes_say_the_critical_priority_and_what_refuses_it(
    helm: Path, tmp_path: Path, priority: str | None, said: bool
) -> None:
    values = dict(OWN_IMAGE) | ({} if priority is None else {"priorityClassName": priority})
    notes = " ".join(render_notes(helm, tmp_path, values, "true").split())
    assert ("priorityClassName system-cluster-critical" in notes) is said
    assert ('set priorityClassName=""' in notes) is said


@pytest.mark.parametrize(
    ("values", "kinds"),
    [
        pytest.param(
            {},
            "TFJob, PyTorchJob, XGBoostJob, MPIJob, PaddleJob, JAXJob, MXJob, TrainJob "
            "(families training-operator, mpi-operator, trainer)",
            id="every-family",
        ),
        pytest.param({"families": ["trainer"]}, "TrainJob (families trainer)", id="trainer"),
        pytest.param(
            {"kinds": ["TrainJob", "TFJob"], "families": ["training-operator", "trainer"]},
            "TFJob, TrainJob (families training-operator, trainer)",
            id="kinds",
        ),
    ],
)
def test_the_notes_name_the_kinds_and_families_swept(
    helm: Path, tmp_path: Path, values: dict[str, Any], kinds: str
) -> None:
    notes = render_notes(helm, tmp_path, OWN_IMAGE | values, "true")
    assert f"  kinds      {kinds}\n" in notes


def test_ci_holds_value_sets() -> None:
    assert len(CI_VALUES) >= 3


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name)
def test_each_ci_value_set_lints_and_renders(helm: Path, values: Path) -> None:
    lint = subprocess.run(
        [str(helm), "lint", str(CHART), "--strict", "--values", str(values)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    done = subprocess.run(
        [str(helm), "template", "sw", str(CHART), "-n", "sweeper", "--values", str(values)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    kinds = {doc["kind"] for doc in yaml.safe_load_all(done.stdout) if doc}
    assert kinds & {"CronJob", "Deployment"}


def test_exclude_namespaces_become_flags(render: Any) -> None:
    rendered = render({"excludeNamespaces": ["kube-system", "sandbox"]})
    args = rendered.args
    assert [a for a in args if a.startswith("--exclude-namespace")] == [
        "--exclude-namespace=kube-system",
        "--exclude-namespace=sandbox",
    ]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param(
            {"namespaces": ["a"], "excludeNamespaces": ["a"]},
            'namespace "a" is both in namespaces and in excludeNamespaces',
            id="both",
        ),
        pytest.param({"excludeNamespaces": ["Not_OK"]}, "excludeNamespaces", id="bad-name"),
    ],
)
def test_exclude_namespaces_are_checked_at_install(
    render_error: Any, values: dict[str, Any], message: str
) -> None:
    assert message in render_error(values)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        pytest.param("action", [m.value for m in ActionMode], id="action"),
        pytest.param("terminatePods", [m.value for m in PodsMode], id="terminatePods"),
    ],
)
def test_the_chart_takes_the_clis_words_and_no_other_spelling(
    render_error: Any, value: str, words: list[str]
) -> None:
    # The CLI takes them exactly as written, lower case (tests/unit/test_cli_edges.py).
    assert SCHEMA["properties"][value]["enum"] == words
    assert value in render_error({value: words[-1].capitalize()})


def test_install_md_counts_the_kinds_the_chart_takes() -> None:
    count = len(SCHEMA["properties"]["kinds"]["items"]["enum"])
    numbers = {6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}
    text = (REPO / "docs" / "install.md").read_text(encoding="utf-8")
    said = set(re.findall(r"\ball (six|seven|eight|nine|ten)\b", text))
    assert said == {numbers[count]}
