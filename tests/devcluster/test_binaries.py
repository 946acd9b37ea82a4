"""devcluster.binaries: what is built comes from tools/binaries.txt, each version from go.mod.

Other versions than the pinned ones: what may be asked for, the wrapper module generated for
them, and the one line that says why a version is refused or cannot be built.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster import binaries
from devcluster.__main__ import main as devcluster_main

GO_MOD = """\
module github.com/kubeflow-deadline-sweeper/tools/kubernetes

go 1.26.0

require k8s.io/api v0.36.3

tool (
\tk8s.io/kubernetes/cmd/kube-apiserver
)

require (
\tgithub.com/kubeflow/training-operator v1.9.4 // indirect
\tk8s.io/kubernetes v1.36.3 // indirect
\tk8s.io/kubernetes/staging v0.0.1 // a longer path holding the package wins
)
"""

VERSIONS = [
    pytest.param("k8s.io/kubernetes/cmd/kubectl", "v1.36.3", id="package-in-a-block-require"),
    pytest.param("k8s.io/api/core/v1", "v0.36.3", id="package-in-a-one-line-require"),
    pytest.param("k8s.io/kubernetes/staging/x", "v0.0.1", id="the-longest-module-path-wins"),
    pytest.param("github.com/kubeflow/training-operator", "v1.9.4", id="the-module-itself"),
]


@pytest.mark.parametrize(("package", "version"), VERSIONS)
def test_the_version_is_the_one_go_mod_requires(package: str, version: str) -> None:
    assert binaries.module_version(package, GO_MOD) == version


@pytest.mark.parametrize(
    "package",
    [
        pytest.param("k8s.io/kubernetesx/cmd", id="a-prefix-that-is-not-a-path"),
        pytest.param("helm.sh/helm/v3/cmd/helm", id="not-required-at-all"),
    ],
)
def test_a_package_no_required_module_holds_is_an_error(package: str) -> None:
    with pytest.raises(ValueError, match=r"no module in go\.mod holds"):
        binaries.module_version(package, GO_MOD)


def test_the_table_gives_rows_in_order_with_versions_and_skips_comments() -> None:
    table = (
        "# name|module|package\n\nkubectl|kubernetes|k8s.io/kubernetes/cmd/kubectl\n"
        "api|kubernetes|k8s.io/api\n"
    )
    targets = binaries.parse_targets(table, {"kubernetes": GO_MOD}.__getitem__)
    assert list(targets.values()) == [
        binaries.Target("kubectl", "kubernetes", "k8s.io/kubernetes/cmd/kubectl", "v1.36.3"),
        binaries.Target("api", "kubernetes", "k8s.io/api", "v0.36.3"),
    ]


def test_every_row_of_the_repository_table_has_a_version_in_its_go_mod() -> None:
    targets = binaries.targets()
    assert set(targets) >= {"etcd", "kube-apiserver", "kubectl", "helm", "training-operator"}
    assert all(target.version.startswith("v") for target in targets.values())


# --- other versions ----------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _pinned_afterwards() -> Iterator[None]:
    """Whatever a test selects, the next one starts from the pinned versions."""
    yield
    binaries.select()


@pytest.mark.parametrize(
    ("text", "tag"),
    [("v1.7.0", "v1.7.0"), ("1.8.1", "v1.8.1"), ("v1.9.3", "v1.9.3"), (" v1.9.4 ", "v1.9.4")],
)
def test_an_operator_release_from_v1_7_is_accepted_as_its_tag(text: str, tag: str) -> None:
    assert binaries.operator_version(text) == tag


@pytest.mark.parametrize(
    ("text", "why"),
    [
        pytest.param("v1.6.0", "out of range", id="older-than-v1.7"),
        pytest.param("v2.0.0", "out of range", id="not-v1"),
        pytest.param("v0.9.0", "out of range", id="v0"),
        pytest.param("v1.9", "not a release version", id="a-minor-alone"),
        pytest.param("v1.9.4-rc.0", "not a release version", id="a-pre-release"),
        pytest.param("latest", "not a release version", id="a-word"),
    ],
)
def test_an_operator_version_out_of_range_or_malformed_says_why(text: str, why: str) -> None:
    with pytest.raises(binaries.VersionError, match=why) as error:
        binaries.operator_version(text)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("text", "tag"), [("1.32.13", "v1.32.13"), ("v1.34.4", "v1.34.4"), ("v1.37.2", "v1.37.2")]
)
def test_a_kubernetes_release_of_1_32_to_1_37_is_accepted_as_its_tag(text: str, tag: str) -> None:
    assert binaries.kubernetes_version(text) == tag


@pytest.mark.parametrize(
    ("text", "why"),
    [
        pytest.param("v1.31.14", "out of range: minors 1.32 to 1.37", id="older-than-1.32"),
        pytest.param("1.38.0", "out of range: minors 1.32 to 1.37", id="newer-than-1.37"),
        pytest.param("v2.32.0", "out of range", id="not-major-1"),
        pytest.param("1.32", "a patch release, not a minor alone", id="a-minor-alone"),
        pytest.param("v1.32.x", "not a release version", id="a-pattern"),
    ],
)
def test_a_kubernetes_version_out_of_range_or_malformed_says_why(text: str, why: str) -> None:
    with pytest.raises(binaries.VersionError, match=why) as error:
        binaries.kubernetes_version(text)
    assert "\n" not in str(error.value)


def test_a_selected_version_moves_every_kubernetes_binary_and_the_operator(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(binaries, "cache_dir", lambda: tmp_path)
    binaries.select(operator="1.7.0", kubernetes="1.32.13")
    assert binaries.path("kube-apiserver") == tmp_path / "kube-apiserver-v1.32.13/kube-apiserver"
    assert {binaries.version(name) for name in binaries.KUBERNETES} == {"v1.32.13"}
    assert binaries.path("training-operator").parent.name == "training-operator-v1.7.0"
    assert binaries.version("etcd") == binaries.targets()["etcd"].version
    assert not binaries.pinned("kubectl")
    with pytest.raises(binaries.BinaryMissing) as missing:
        binaries.find("kubectl")
    assert "run scripts/build-binaries --kubernetes-version v1.32.13 kubectl" in str(missing.value)
    binaries.select()
    assert binaries.pinned("kubectl")
    assert binaries.pinned("training-operator")


def test_a_bad_selection_changes_nothing() -> None:
    binaries.select(operator="v1.8.1")
    with pytest.raises(binaries.VersionError):
        binaries.select(operator="v1.9.3", kubernetes="1.31.0")
    assert binaries.version("training-operator") == "v1.8.1"


UPSTREAM_GO_MOD = """\
module k8s.io/kubernetes

require k8s.io/api v0.0.0

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/endpointslice => ./staging/src/k8s.io/endpointslice // a comment
\tgithub.com/some/fork => github.com/other/fork v1.2.3
)

replace k8s.io/kms => ./staging/src/k8s.io/kms
"""


def test_the_local_staging_replaces_become_the_published_releases_of_that_version() -> None:
    assert binaries.staging_replaces(UPSTREAM_GO_MOD, "v1.32.13") == {
        "k8s.io/api": "v0.32.13",
        "k8s.io/endpointslice": "v0.32.13",
        "k8s.io/kms": "v0.32.13",
    }


def test_a_generated_wrapper_has_the_tools_the_requirement_and_the_replaces() -> None:
    text = binaries.wrapper_go_mod(
        "kubernetes",
        ["k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kubectl"],
        "k8s.io/kubernetes",
        "v1.32.13",
        {"k8s.io/api": "v0.32.13"},
    )
    assert binaries.tools_of(text) == {
        "k8s.io/kubernetes/cmd/kube-apiserver",
        "k8s.io/kubernetes/cmd/kubectl",
    }
    assert binaries.required_versions(text) == {"k8s.io/kubernetes": "v1.32.13"}
    assert "replace k8s.io/api => k8s.io/api v0.32.13\n" in text


def test_tools_are_read_in_both_forms() -> None:
    assert binaries.tools_of("tool a/b\ntool (\n\tc/d // x\n\te/f\n)\nrequire g/h v1\n") == {
        "a/b",
        "c/d",
        "e/f",
    }


def test_go_s_reason_is_the_failing_module_and_the_proxy_s_answer_in_one_line() -> None:
    output = (
        "go: downloading k8s.io/api v0.32.13\n"
        "go: k8s.io/kubernetes/cmd/kube-controller-manager imports\n"
        "\tk8s.io/kubernetes/pkg/controller/endpoint imports\n"
        "\tk8s.io/endpointslice/util: k8s.io/endpointslice@v0.32.13: 403 Forbidden\n"
        "\tserver response: This module version is not available.\n"
    )
    assert binaries._first_error(output) == (
        "k8s.io/endpointslice/util: k8s.io/endpointslice@v0.32.13: 403 Forbidden "
        "(server response: This module version is not available.)"
    )


def _build_binaries(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # A cache of its own, and no network: the Go module proxy is never asked.
    env = dict(os.environ, SWEEPER_BIN_CACHE=str(tmp_path / "bin"), GOPROXY="off")
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "build-binaries"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "why"),
    [
        pytest.param(
            ["--operator-version", "v1.6.0"], "training-operator v1.6.0 is out of range", id="v1.6"
        ),
        pytest.param(
            ["--kubernetes-version=1.31.14"], "Kubernetes 1.31.14 is out of range", id="1.31"
        ),
        pytest.param(["--kubernetes-version"], "--kubernetes-version needs a version", id="none"),
        pytest.param(["--operator-version", "v1.9.4", "kube-apisrever"], "no binary", id="name"),
    ],
)
def test_build_binaries_refuses_a_version_out_of_range_in_one_line(
    tmp_path: Path, args: list[str], why: str
) -> None:
    result = _build_binaries(tmp_path, *args)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1
    assert why in result.stderr
    assert not (tmp_path / "bin").exists()


@pytest.mark.skipif(shutil.which("go") is None, reason="needs Go")
def test_build_binaries_says_in_one_line_why_a_version_cannot_be_built(tmp_path: Path) -> None:
    # v1.9.99 does not exist; with GOPROXY=off go answers from the module cache alone.
    result = _build_binaries(tmp_path, "--operator-version", "v1.9.99")
    assert result.returncode == 2, result.stderr
    [reason] = [line for line in result.stderr.splitlines() if "cannot" in line]
    assert reason.startswith(
        "build-binaries: github.com/kubeflow/training-operator@v1.9.99 cannot be fetched: "
    )
    assert not (tmp_path / "bin" / "training-operator-v1.9.99" / "training-operator").exists()


@pytest.mark.parametrize(
    ("args", "why"),
    [
        pytest.param(["--operator-version", "v1.6.0"], "training-operator v1.6.0", id="v1.6"),
        pytest.param(["--kubernetes-version", "v1.38.0"], "Kubernetes v1.38.0", id="1.38"),
    ],
)
def test_devcluster_up_refuses_a_version_out_of_range_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    why: str,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert devcluster_main(["up", "--operator", *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"devcluster: {why} is out of range" + err.split("is out of range", 1)[1]
    assert err.count("\n") == 1
    assert not (tmp_path / "kubeflow-deadline-sweeper").exists()
