"""sweeper.k8s.kubeconfig on kubeconfig files written in tmp_path: every field, merges, faults.

Nothing here connects; tests/e2e/test_sweeper_credentials.py presents each credential to the
real kube-apiserver.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweeper.core.errors import ConfigError
from sweeper.k8s import kubeconfig
from sweeper.k8s.kubeconfig import ExecPlugin, Target

SERVER = "https://127.0.0.1:6443"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def write(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return path


def config(
    cluster: dict[str, Any] | None = None,
    user: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "dev",
        "clusters": [{"name": "c", "cluster": {"server": SERVER, **(cluster or {})}}],
        "users": [{"name": "u", "user": user or {}}],
        "contexts": [{"name": "dev", "context": {"cluster": "c", "user": "u", **(context or {})}}],
    }


def load(tmp_path: Path, document: Any, context: str | None = None) -> Target:
    return kubeconfig.load(str(write(tmp_path / "kube" / "config", document)), context)


# --- clusters ----------------------------------------------------------------------------------


CLUSTERS = [
    pytest.param({}, {"server": SERVER, "ca_file": None, "insecure": False}, id="server-only"),
    pytest.param({"server": SERVER + "/"}, {"server": SERVER}, id="trailing-slash-dropped"),
    pytest.param(
        {"certificate-authority": "pki/ca.crt"}, {"ca_file": "{dir}/pki/ca.crt"}, id="ca-relative"
    ),
    pytest.param({"certificate-authority": "/etc/ca.crt"}, {"ca_file": "/etc/ca.crt"}, id="ca-abs"),
    pytest.param(
        {"certificate-authority-data": b64("PEM")}, {"ca_data": "PEM"}, id="ca-data-decoded"
    ),
    pytest.param({"insecure-skip-tls-verify": True}, {"insecure": True}, id="insecure"),
    pytest.param({"tls-server-name": "kubernetes"}, {"tls_server_name": "kubernetes"}, id="sni"),
    pytest.param(
        {"proxy-url": "http://127.0.0.1:3128"}, {"proxy_url": "http://127.0.0.1:3128"}, id="proxy"
    ),
]


@pytest.mark.parametrize(("cluster", "expected"), CLUSTERS)
def test_cluster_fields(tmp_path: Path, cluster: dict[str, Any], expected: dict[str, Any]) -> None:
    target = load(tmp_path, config(cluster=cluster))
    folder = str(tmp_path / "kube")
    for name, value in expected.items():
        wanted = value.format(dir=folder) if isinstance(value, str) else value
        assert getattr(target, name) == wanted, name


# --- users -------------------------------------------------------------------------------------


USERS = [
    pytest.param({"token": "abc"}, {"token": "abc", "token_file": None}, id="token"),
    pytest.param({"tokenFile": "tok"}, {"token_file": "{dir}/tok"}, id="token-file-relative"),
    pytest.param(
        {"token": "abc", "tokenFile": "tok"}, {"token": "abc", "token_file": None}, id="token-wins"
    ),
    pytest.param(
        {"client-certificate": "tls.crt", "client-key": "/k/tls.key"},
        {"cert_file": "{dir}/tls.crt", "key_file": "/k/tls.key"},
        id="cert-files",
    ),
    pytest.param(
        {"client-certificate-data": b64("CERT"), "client-key-data": b64("KEY")},
        {"cert_data": b"CERT", "key_data": b"KEY"},
        id="cert-data",
    ),
    pytest.param(
        {"username": "ada", "password": "s3cret"}, {"basic": ("ada", "s3cret")}, id="basic"
    ),
    pytest.param({"username": "ada"}, {"basic": None}, id="basic-needs-both"),
    pytest.param(
        {"token": "abc", "username": "ada", "password": "p"},
        {"token": "abc", "basic": None},
        id="token-before-basic",
    ),
    pytest.param({}, {"token": None, "basic": None, "exec_plugin": None}, id="anonymous"),
]


@pytest.mark.parametrize(("user", "expected"), USERS)
def test_user_fields(tmp_path: Path, user: dict[str, Any], expected: dict[str, Any]) -> None:
    target = load(tmp_path, config(user=user))
    folder = str(tmp_path / "kube")
    for name, value in expected.items():
        wanted = value.format(dir=folder) if isinstance(value, str) else value
        assert getattr(target, name) == wanted, name


def test_an_exec_plugin_is_read_whole(tmp_path: Path) -> None:
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "aws",
            "args": ["eks", "get-token"],
            "env": [{"name": "AWS_PROFILE", "value": "ml"}],
            "interactiveMode": "Never",
            "installHint": "install the\n aws CLI",
            "provideClusterInfo": True,
        }
    }
    cluster = {
        "certificate-authority-data": b64("PEM"),
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"a": 1}}],
    }
    target = load(tmp_path, config(cluster=cluster, user=user))
    assert target.exec_plugin == ExecPlugin(
        api_version="client.authentication.k8s.io/v1",
        command="aws",
        args=("eks", "get-token"),
        env=(("AWS_PROFILE", "ml"),),
        interactive_mode="Never",
        install_hint="install the aws CLI",
        cluster={"server": SERVER, "certificate-authority-data": b64("PEM"), "config": {"a": 1}},
    )


EXEC_COMMANDS = [
    pytest.param("gke-gcloud-auth-plugin", "gke-gcloud-auth-plugin", id="a-name-on-path"),
    pytest.param("./bin/plugin", "{dir}/bin/plugin", id="relative-to-the-file"),
    pytest.param("/usr/bin/plugin", "/usr/bin/plugin", id="absolute"),
]


@pytest.mark.parametrize(("command", "expected"), EXEC_COMMANDS)
def test_an_exec_command_with_a_folder_is_relative_to_its_file(
    tmp_path: Path, command: str, expected: str
) -> None:
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": command}}
    plugin = load(tmp_path, config(user=user)).exec_plugin
    assert plugin is not None
    assert plugin.command == expected.format(dir=tmp_path / "kube")
    assert plugin.interactive_mode == "IfAvailable"  # v1beta1's default
    assert plugin.cluster is None


def test_the_exec_plugin_comes_after_a_token_and_before_basic(tmp_path: Path) -> None:
    exec_ = {"apiVersion": "client.authentication.k8s.io/v1", "command": "p"}
    assert load(tmp_path, config(user={"token": "t", "exec": exec_})).exec_plugin is None
    both = load(tmp_path, config(user={"exec": exec_, "username": "a", "password": "b"}))
    assert both.exec_plugin is not None
    assert both.basic is None


# --- contexts and merges -----------------------------------------------------------------------


def test_the_context_gives_the_namespace_and_context_flag_wins(tmp_path: Path) -> None:
    document = config(context={"namespace": "team-a"})
    document["contexts"].append({"name": "prod", "context": {"cluster": "c", "user": "u"}})
    assert load(tmp_path, document).namespace == "team-a"
    assert load(tmp_path, document).context == "dev"
    chosen = load(tmp_path, document, context="prod")
    assert (chosen.context, chosen.namespace) == ("prod", "default")


def test_a_list_is_merged_first_file_wins(tmp_path: Path) -> None:
    """As kubectl: the first to set current-context or a name wins; relative paths per file."""
    first = write(
        tmp_path / "a" / "config",
        {
            "current-context": "one",
            "users": [{"name": "u", "user": {"tokenFile": "token"}}],
            "contexts": [{"name": "one", "context": {"cluster": "c", "user": "u"}}],
        },
    )
    second = write(
        tmp_path / "b" / "config",
        {
            "current-context": "two",
            "clusters": [
                {"name": "c", "cluster": {"server": SERVER, "certificate-authority": "ca"}}
            ],
            "users": [{"name": "u", "user": {"token": "later"}}],
            "contexts": [{"name": "two", "context": {"cluster": "c", "user": "u"}}],
        },
    )
    source = os.pathsep.join([str(tmp_path / "missing"), str(first), "", str(second)])
    target = kubeconfig.load(source)
    assert target.context == "one"
    assert target.token_file == str(tmp_path / "a" / "token")
    assert target.token is None
    assert target.ca_file == str(tmp_path / "b" / "ca")
    assert kubeconfig.load(source, "two").context == "two"


def test_an_empty_file_in_a_list_is_skipped(tmp_path: Path) -> None:
    empty = write(tmp_path / "empty", "")
    full = write(tmp_path / "full", config())
    assert kubeconfig.load(os.pathsep.join([str(empty), str(full)])).server == SERVER


# --- faults: one line each, starting with the source -------------------------------------------


def without(document: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k != key}


FAULTS = [
    pytest.param(": : :\n  - [", "not valid YAML: ", id="malformed-yaml"),
    pytest.param("hello\n", "not a kubeconfig (a YAML mapping with clusters", id="a-string"),
    pytest.param("", "no current-context is set (and no --context given)", id="empty"),
    pytest.param(
        without(config(), "current-context"), "no current-context is set", id="no-current"
    ),
    pytest.param(
        {**config(), "current-context": "nowhere"}, 'context "nowhere" not found', id="ctx"
    ),
    pytest.param(
        config(context={"cluster": "x"}), 'context "dev": cluster "x" not found', id="cluster"
    ),
    pytest.param(config(context={"user": "x"}), 'context "dev": user "x" not found', id="user"),
    pytest.param(
        {**config(), "clusters": [{"name": "c", "cluster": {}}]},
        'cluster "c" has no server',
        id="no-server",
    ),
    pytest.param({**config(), "users": "u"}, "users: not a list", id="section-not-a-list"),
    pytest.param(
        {**config(), "users": [{"user": {}}]},
        "users: each entry needs a name and a mapping",
        id="entry-without-name",
    ),
    pytest.param(
        config(cluster={"server": 6443}), 'cluster "c": server: not a string', id="wrong-type"
    ),
    pytest.param(
        config(cluster={"insecure-skip-tls-verify": "yes"}),
        'cluster "c": insecure-skip-tls-verify: not true or false',
        id="insecure-not-bool",
    ),
    pytest.param(
        config(cluster={"proxy-url": "socks5://127.0.0.1:1080"}),
        'cluster "c": proxy-url socks5://127.0.0.1:1080: only http:// and https:// proxies',
        id="socks-proxy",
    ),
    pytest.param(
        config(user={"client-certificate-data": b64("CERT")}),
        'user "u": client-certificate without client-key',
        id="cert-without-key",
    ),
    pytest.param(
        config(user={"auth-provider": {"name": "gcp", "config": {}}}),
        'user "u": auth-provider gcp is not supported (kubectl dropped these plugins in 1.26): '
        "use its exec plugin instead (gcp: gke-gcloud-auth-plugin",
        id="auth-provider-gcp",
    ),
    pytest.param(
        config(user={"exec": {"apiVersion": "client.authentication.k8s.io/v1alpha1"}}),
        "user \"u\": exec: apiVersion 'client.authentication.k8s.io/v1alpha1' is not one of "
        "client.authentication.k8s.io/v1, client.authentication.k8s.io/v1beta1",
        id="exec-v1alpha1",
    ),
    pytest.param(
        config(user={"exec": {"apiVersion": "client.authentication.k8s.io/v1"}}),
        'user "u": exec: no command',
        id="exec-no-command",
    ),
    pytest.param(
        config(
            user={
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": "p",
                    "interactiveMode": "Sometimes",
                }
            }
        ),
        "user \"u\": exec: interactiveMode 'Sometimes' is not one of Never, IfAvailable, Always",
        id="exec-bad-mode",
    ),
    pytest.param(
        config(
            user={
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": "p",
                    "env": [{"name": "A"}],
                }
            }
        ),
        'user "u": exec: env: each entry needs a name and a value',
        id="exec-bad-env",
    ),
    pytest.param(
        config(
            user={
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": "p",
                    "args": "x",
                }
            }
        ),
        'user "u": exec: args: not a list of strings',
        id="exec-bad-args",
    ),
]


@pytest.mark.parametrize(("document", "message"), FAULTS)
def test_a_broken_kubeconfig_is_one_line_naming_the_file(
    tmp_path: Path, document: Any, message: str
) -> None:
    path = write(tmp_path / "config", document)
    with pytest.raises(ConfigError) as raised:
        kubeconfig.load(str(path))
    text = str(raised.value)
    assert text.startswith(f"kubeconfig {path}: {message}")
    assert "\n" not in text


def test_in_a_list_the_fault_names_the_file(tmp_path: Path) -> None:
    good = write(tmp_path / "good", config())
    bad = write(tmp_path / "bad", "- a list\n")
    source = os.pathsep.join([str(good), str(bad)])
    with pytest.raises(ConfigError, match=f"^kubeconfig {source}: {bad}: not a kubeconfig"):
        kubeconfig.load(source)


def test_a_list_of_missing_files_is_no_such_file(tmp_path: Path) -> None:
    source = os.pathsep.join([str(tmp_path / "a"), "", str(tmp_path / "b")])
    with pytest.raises(ConfigError) as raised:
        kubeconfig.load(source)
    assert str(raised.value) == f"kubeconfig {source}: no such file"


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = write(tmp_path / "config", config())
    path.chmod(0)
    try:
        with pytest.raises(ConfigError, match=f"^kubeconfig {path}: cannot read it: "):
            kubeconfig.load(str(path))
    finally:
        path.chmod(0o600)


# --- in a cluster ------------------------------------------------------------------------------


@pytest.fixture
def account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text("tok")
    (folder / "ca.crt").write_text("PEM")
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT", folder)
    return folder


HOSTS = [
    pytest.param("10.0.0.1", "https://10.0.0.1:443", id="ipv4"),
    pytest.param("fd00::1", "https://[fd00::1]:443", id="ipv6-bracketed"),
    pytest.param("kubernetes.default.svc", "https://kubernetes.default.svc:443", id="name"),
]


@pytest.mark.parametrize(("host", "server"), HOSTS)
def test_in_cluster_reads_the_service_and_the_account(
    account: Path, host: str, server: str
) -> None:
    (account / "namespace").write_text("kubeflow\n")
    target = kubeconfig.in_cluster(
        {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}
    )
    assert target == Target(
        server=server,
        context="in-cluster",
        namespace="kubeflow",
        ca_file=str(account / "ca.crt"),
        token_file=str(account / "token"),
        refresh_token_file=True,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("  \n", "default", id="blank-is-default"),
        pytest.param(None, "default", id="absent-is-default"),
    ],
)
def test_in_cluster_home_namespace(account: Path, text: str | None, expected: str) -> None:
    if text is not None:
        (account / "namespace").write_text(text)
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert kubeconfig.in_cluster(env).namespace == expected


def test_in_cluster_without_a_port_is_a_config_error(account: Path) -> None:
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_PORT must both be set"):
        kubeconfig.in_cluster({"KUBERNETES_SERVICE_HOST": "10.0.0.1"})


@pytest.mark.parametrize("name", ["token", "ca.crt"])
def test_in_cluster_without_the_account_files_is_a_config_error(account: Path, name: str) -> None:
    (account / name).unlink()
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(ConfigError) as raised:
        kubeconfig.in_cluster(env)
    assert str(raised.value) == f"in-cluster configuration: {account / name} does not exist"
