"""sweeper.k8s.connection.kubeconfig on kubeconfig files in tmp_path: every field, merges, faults.

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
from sweeper.k8s.connection import kubeconfig
from sweeper.k8s.connection.kubeconfig import ExecPlugin, Target

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
        {"token": "abc", "tokenFile": "tok"},
        {"token": "abc", "token_file": "{dir}/tok"},
        id="token-and-file-both-kept",  # the file wins once read (credentials)
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


def test_in_a_pod_pod_namespace_wins_over_the_account_file(account: Path) -> None:
    """client-go reads POD_NAMESPACE (the downward API) first, then the account's file."""
    (account / "namespace").write_text("kubeflow\n")
    env = {
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "POD_NAMESPACE": "ml-platform",
    }
    assert kubeconfig.in_cluster(env).namespace == "ml-platform"
    assert kubeconfig.in_cluster({**env, "POD_NAMESPACE": ""}).namespace == "kubeflow"


# --- impersonation, plain http, what kubectl does with them -----------------------------------


def test_impersonation_is_read(tmp_path: Path) -> None:
    user = {
        "token": "t",
        "as": "restricted-sweeper",
        "as-uid": "1234",
        "as-groups": ["sweepers", "auditors"],
        "as-user-extra": {"scopes": ["view", "list"], "example.com/team": ["ml"]},
    }
    assert load(tmp_path, config(user=user)).impersonate == kubeconfig.Impersonation(
        user="restricted-sweeper",
        uid="1234",
        groups=("sweepers", "auditors"),
        extra=(("example.com/team", ("ml",)), ("scopes", ("view", "list"))),
    )
    assert load(tmp_path, config(user={"token": "t"})).impersonate is None


IMPERSONATION_FAULTS = [
    pytest.param(
        {"as-groups": ["g"]},
        'user "u": as-groups, as-uid or as-user-extra without as (the user to impersonate)',
        id="groups-without-user",
    ),
    pytest.param(
        {"as": "a", "as-groups": "g"}, 'user "u": as-groups: not a list of strings', id="groups"
    ),
    pytest.param(
        {"as": "a", "as-user-extra": {"k": "v"}},
        'user "u": as-user-extra: not a mapping of lists of strings',
        id="extra-not-lists",
    ),
]


@pytest.mark.parametrize(("user", "message"), IMPERSONATION_FAULTS)
def test_broken_impersonation_is_one_line(
    tmp_path: Path, user: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, config(user=user))
    assert str(raised.value).endswith(message)


PLAIN_HTTP_USERS = [
    pytest.param({"token": "SECRET"}, ("token",), id="token"),
    pytest.param({"tokenFile": "tok"}, ("tokenFile",), id="token-file"),
    pytest.param({"username": "ada", "password": "SECRET"}, ("username and password",), id="basic"),
    pytest.param(
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "p"}},
        ("exec",),
        id="exec",
    ),
    pytest.param(
        {"client-certificate-data": b64("CERT"), "client-key-data": b64("KEY"), "token": "SECRET"},
        ("token", "client certificate"),
        id="cert-and-token",
    ),
    pytest.param({}, (), id="anonymous"),
]


@pytest.mark.parametrize(("user", "withheld"), PLAIN_HTTP_USERS)
def test_no_user_credentials_for_a_plain_http_server(
    tmp_path: Path, user: dict[str, Any], withheld: tuple[str, ...]
) -> None:
    """As client-go (IsConfigTransportTLS): credentials only over TLS; impersonation always."""
    document = config(user={**user, "as": "viewer"})
    document["clusters"][0]["cluster"]["server"] = "http://127.0.0.1:8080"
    target = load(tmp_path, document)
    assert target.withheld == withheld
    assert (target.token, target.token_file, target.basic, target.exec_plugin) == (None,) * 4
    assert (target.cert_file, target.key_file, target.cert_data, target.key_data) == (None,) * 4
    assert target.impersonate == kubeconfig.Impersonation(user="viewer")


AUTH_PROVIDERS = [
    pytest.param(
        "gcp", "auth-provider gcp was removed from kubectl in 1.26: use gke-gcloud-auth-plugin"
    ),
    pytest.param("azure", "auth-provider azure was removed from kubectl in 1.26: use kubelogin"),
    pytest.param(
        "oidc",
        "auth-provider oidc is not supported by the sweeper (kubectl still supports it): use "
        "the exec plugin kubelogin (kubectl oidc-login get-token) instead",
    ),
    pytest.param("acme", "auth-provider acme is not supported: use an exec plugin"),
]


@pytest.mark.parametrize(("name", "message"), AUTH_PROVIDERS, ids=lambda v: str(v)[:5])
def test_an_auth_provider_is_refused_with_true_words(
    tmp_path: Path, name: str, message: str
) -> None:
    """kubectl dropped gcp and azure in 1.26, never oidc (client-go still registers it)."""
    user = {"auth-provider": {"name": name, "config": {"id-token": "SECRET"}}}
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, config(user=user))
    assert str(raised.value).endswith(f'user "u": {message}')
    assert "SECRET" not in str(raised.value)


def test_provide_cluster_info_sends_a_ca_file_as_data(tmp_path: Path) -> None:
    """client-go hands the plugin the CA file's contents as certificate-authority-data."""
    write(tmp_path / "kube" / "pki" / "ca.crt", "PEM FROM FILE")
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "p",
            "provideClusterInfo": True,
        }
    }
    target = load(tmp_path, config(cluster={"certificate-authority": "pki/ca.crt"}, user=user))
    assert target.exec_plugin is not None
    assert target.exec_plugin.cluster == {
        "server": SERVER,
        "certificate-authority-data": b64("PEM FROM FILE"),
    }


def test_provide_cluster_info_with_an_unreadable_ca_file_is_one_line(tmp_path: Path) -> None:
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "p",
            "provideClusterInfo": True,
        }
    }
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, config(cluster={"certificate-authority": "missing.crt"}, user=user))
    assert str(raised.value).endswith(
        f'cluster "c": certificate-authority {tmp_path}/kube/missing.crt: cannot read it '
        "for the exec plugin: No such file or directory"
    )


@pytest.mark.parametrize("loader", [yaml.SafeLoader, kubeconfig._Loader], ids=["python", "libyaml"])
def test_a_yaml_error_names_line_and_column_and_echoes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loader: type[Any]
) -> None:
    """PyYAML's pure-Python loader quotes the faulty line: a token, say."""
    monkeypatch.setattr(kubeconfig, "_Loader", loader)
    text = 'apiVersion: v1\nusers:\n- name: u\n  user: {token: "SECRET-TOKEN-123\n'
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, text)
    message = str(raised.value)
    assert "SECRET" not in message
    assert "line 5, column 1" in message
    assert "\n" not in message


def test_reprs_show_no_secret(tmp_path: Path) -> None:
    """A Target or ExecPlugin that reaches a log or a traceback shows no token, key or password."""
    target = Target(
        server=SERVER,
        context="c",
        token="SECRET-1",  # noqa: S106 - a sentinel the repr must not show
        cert_data=b"SECRET-2",
        key_data=b"SECRET-3",
        basic=("ada", "SECRET-4"),
        exec_plugin=ExecPlugin(
            "v1", "p", args=("--token", "SECRET-5"), env=(("PASSWORD", "SECRET-6"),)
        ),
    )
    assert "SECRET" not in repr(target)
