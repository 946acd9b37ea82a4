"""devcluster.binaries: what is built comes from tools/binaries.txt, each version from go.mod."""

from __future__ import annotations

import pytest

from devcluster import binaries

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
