"""Every ``helm`` command the README and docs/install.md show renders, and names what kubectl reads.

A newcomer copies these commands before anything else. Each ``helm install``, ``upgrade`` or
``template`` is rendered with ``helm template`` under its own release name and namespace and
exactly its ``--set`` values (an upgrade with ``--reuse-values`` on top of the values before
it), so a value the schema refuses, or a release name that renames the objects, fails here.
The ``kubectl`` commands beside them must name the CronJob and the labels those renderings
have.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.markdown import code_lines

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "chart"
PAGES = [REPO / "README.md", REPO / "docs" / "install.md"]
OCI_CHART = "oci://ghcr.io/kubeflow-deadline-sweeper/charts/kubeflow-deadline-sweeper"


@dataclass
class HelmCommand:
    """One ``helm install|upgrade|template`` line of a page, as parsed."""

    line: str
    release: str
    chart: str
    namespace: str
    sets: list[str]
    reuse_values: bool


@dataclass
class Page:
    """The helm and kubectl commands of one page, in order."""

    helm: list[HelmCommand] = field(default_factory=list)
    other_helm: list[list[str]] = field(default_factory=list)
    kubectl: list[list[str]] = field(default_factory=list)


def _namespace(argv: list[str]) -> str:
    for i, arg in enumerate(argv):
        if arg in ("-n", "--namespace"):
            return argv[i + 1]
        if arg.startswith("--namespace="):
            return arg.split("=", 1)[1]
    return "default"


def parse(text: str) -> Page:
    """The commands of a page's code blocks; comments and shell pipelines around them cut off."""
    page = Page()
    for line in code_lines(text):
        if line.lstrip().startswith("#"):
            continue
        try:
            argv = shlex.split(line, comments=True)
        except ValueError:  # an unbalanced quote: not a command line
            continue
        if argv[:1] == ["kubectl"]:
            page.kubectl.append(argv)
        if argv[:1] != ["helm"] or len(argv) < 2:
            continue
        if argv[1] not in ("install", "upgrade", "template"):
            page.other_helm.append(argv)
            continue
        positional = [a for a in argv[2:] if not a.startswith("-")]
        values = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
        flagged = {a for a in argv if a.startswith("-")}
        # The positionals include the values of -n/--set/--version; the first two are the
        # release and the chart, which come before any flag in these pages.
        page.helm.append(
            HelmCommand(
                line=line,
                release=positional[0],
                chart=positional[1],
                namespace=_namespace(argv),
                sets=values,
                reuse_values="--reuse-values" in flagged,
            )
        )
    return page


def render(helm: Path, command: HelmCommand, sets: list[str]) -> list[dict[str, Any]]:
    """``helm template`` of the repository's chart with this command's release and values."""
    assert command.chart in ("./chart", OCI_CHART), command.line
    argv = [str(helm), "template", command.release, str(CHART), "--namespace", command.namespace]
    for value in sets:
        argv += ["--set", value]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{command.line}\n{done.stderr.strip()}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_helm_command_renders_and_names_what_kubectl_reads(helm: Path, path: Path) -> None:
    page = parse(path.read_text(encoding="utf-8"))
    assert page.helm, f"no helm command found in {path.name}"
    objects: list[dict[str, Any]] = []
    values: list[str] = []
    for command in page.helm:
        values = [*values, *command.sets] if command.reuse_values else list(command.sets)
        objects += [{**d, "_release": command.release} for d in render(helm, command, values)]

    releases = {(c.release, c.namespace) for c in page.helm}
    assert len(releases) == 1, f"one release in one namespace throughout: {releases}"
    ((release, namespace),) = releases
    for argv in page.other_helm:  # helm test, helm uninstall: the same release
        assert release in argv, shlex.join(argv)
        assert namespace == _namespace(argv), shlex.join(argv)

    cronjobs = {o["metadata"]["name"] for o in objects if o["kind"] == "CronJob"}
    instances = {
        o["metadata"]["labels"]["app.kubernetes.io/instance"]
        for o in objects
        if o["kind"] in ("CronJob", "Deployment")
    }
    for argv in page.kubectl:
        assert _namespace(argv) == namespace, shlex.join(argv)
        for arg in argv:
            if arg.startswith("--from=cronjob/"):
                assert arg.removeprefix("--from=cronjob/") in cronjobs, shlex.join(argv)
        selectors = [argv[i + 1] for i, arg in enumerate(argv) if arg in ("-l", "--selector")]
        for selector in selectors:
            key, _, value = selector.partition("=")
            if key == "app.kubernetes.io/instance":
                assert value in instances, shlex.join(argv)


def test_the_readme_renders_the_names_its_kubectl_commands_use(helm: Path) -> None:
    # The object names are the release name alone (not doubled), which the kubectl
    # commands rely on.
    page = parse((REPO / "README.md").read_text(encoding="utf-8"))
    install = page.helm[0]
    rendered = render(helm, install, install.sets)
    names = {d["metadata"]["name"] for d in rendered}
    assert {d["metadata"]["name"] for d in rendered if d["kind"] == "CronJob"} == {install.release}
    assert all(n == install.release or n.startswith(f"{install.release}-") for n in names), names
    assert not [n for n in names if n.count("kubeflow-deadline-sweeper") > 1], names


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(
            "```sh\nhelm install kubeflow-deadline-sweeper ./chart -n x --set dryRun=maybe\n```",
            "dryRun",
            id="a-value-the-schema-refuses",
        ),
        pytest.param(
            "```sh\nhelm install sweeper ./chart -n x\n"
            "kubectl -n x create job --from=cronjob/kubeflow-deadline-sweeper y\n```",
            "--from=cronjob/kubeflow-deadline-sweeper",
            id="a-doubled-name",
        ),
        pytest.param(
            "```sh\nhelm install kubeflow-deadline-sweeper ./chart -n x\n"
            "kubectl -n y logs job/z\n```",
            "kubectl -n y",
            id="another-namespace",
        ),
    ],
)
def test_the_check_catches(helm: Path, tmp_path: Path, text: str, problem: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    with pytest.raises(AssertionError, match=re.escape(problem)):
        test_every_helm_command_renders_and_names_what_kubectl_reads(helm, page)
