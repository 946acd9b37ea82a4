"""Every way a kubeconfig or a pod connects the sweeper, against the real kube-apiserver.

Each kubeconfig is written here field by field (``sweeper.k8s.connection.kubeconfig`` reads
it, never the official client); a run is a client dry run of one namespace, and the audit log
says which user the API server saw, so a credential that was not presented cannot pass. The
exec plugins are small Python scripts written by the test: they print an ``ExecCredential``
with a ServiceAccount token that the API server accepts, or a client certificate from the
devcluster's CA, and record each run.
"""

from __future__ import annotations

import base64
import io
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import ControlPlane
from sweeper.config import Config, DryRun
from sweeper.k8s.connection import client, kubeconfig
from sweeper.oneshot.run import run
from tests.e2e import clusters
from tests.e2e.conftest import SweepAs

pytestmark = pytest.mark.e2e

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"


@pytest.fixture
def account(control_plane: ControlPlane, namespace: str) -> tuple[str, str]:
    """A ServiceAccount bound to cluster-admin: its token and its audit user name."""
    name = "exec-robot"
    token = clusters.admin_account_token(control_plane, namespace, name)
    return token, f"system:serviceaccount:{namespace}:{name}"


def write_config(path: Path, cluster: dict[str, Any], user: dict[str, Any], **context: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "here",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "here", "context": {"cluster": "c", "user": "u", **context}}],
            }
        )
    )
    return path


def ca_data(cp: ControlPlane) -> str:
    return base64.b64encode(cp.ca_pem).decode()


def plugin(folder: Path, body: str) -> Path:
    """An executable Python script; it appends its KUBERNETES_EXEC_INFO to runs.jsonl."""
    script = folder / "bin" / "plugin"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            """\
            import json, os, pathlib, sys
            runs = pathlib.Path(__file__).with_name("runs.jsonl")
            with runs.open("a") as f:
                f.write(os.environ["KUBERNETES_EXEC_INFO"] + "\\n")
            n = len(runs.read_text().splitlines())
            """
        )
        + textwrap.dedent(body)
    )
    script.chmod(0o755)
    return script


def runs_of(script: Path) -> list[dict[str, Any]]:
    runs = script.with_name("runs.jsonl")
    if not runs.exists():
        return []
    return [json.loads(line) for line in runs.read_text().splitlines()]


def token_plugin(folder: Path, version: str, expiry: str | None = None, bad_first: bool = False):
    status = 'd = {"token": ("not-a-token" if BAD and n == 1 else os.environ["TOKEN"])}'
    return plugin(
        folder,
        f"""\
        BAD = {bad_first}
        EXPIRY = {expiry!r}
        {status}
        if EXPIRY:
            d["expirationTimestamp"] = EXPIRY
        print(json.dumps({{"apiVersion": "{version}", "kind": "ExecCredential", "status": d}}))
        """,
    )


def exec_user(token: str, version: str = V1, **extra: Any) -> dict[str, Any]:
    return {
        "exec": {
            "apiVersion": version,
            "command": "./bin/plugin",  # relative to the kubeconfig's folder, as kubectl reads it
            "env": [{"name": "TOKEN", "value": token}],
            "interactiveMode": "Never",
            **extra,
        }
    }


def passed(result: Any) -> bool:
    return result.result.returncode == 0 and bool(result.requests)


@pytest.mark.parametrize("version", [V1, V1BETA1])
def test_an_exec_plugin_token_is_presented(  # noqa: PLR0917 - fixtures and a parameter
    control_plane, namespace, account, sweep: SweepAs, tmp_path, version
):
    token, user = account
    script = token_plugin(tmp_path, version)
    config = write_config(
        tmp_path / "config",
        {"server": control_plane.server, "certificate-authority-data": ca_data(control_plane)},
        exec_user(token, version, args=["--flag"], provideClusterInfo=True),
    )
    done = sweep("--dry-run", "-n", namespace, kubeconfig=config, user=user)
    assert passed(done), done.explain()
    runs = runs_of(script)
    assert len(runs) == 1  # no expiry: kept for the whole run
    assert runs[0]["apiVersion"] == version
    assert runs[0]["spec"]["interactive"] is False
    assert runs[0]["spec"]["cluster"]["server"] == control_plane.server


@pytest.mark.parametrize(
    ("expiry", "expired"),
    [("2000-01-01T00:00:00Z", True), ("2999-01-01T00:00:00Z", False)],
    ids=["expired-fetched-again", "valid-until-later-kept"],
)
def test_an_exec_credential_is_fetched_again_only_once_it_expired(  # noqa: PLR0917 - fixtures and a table
    control_plane, namespace, account, sweep: SweepAs, tmp_path, expiry, expired
):
    token, user = account
    script = token_plugin(tmp_path, V1, expiry=expiry)
    config = write_config(
        tmp_path / "config",
        {"server": control_plane.server, "certificate-authority-data": ca_data(control_plane)},
        exec_user(token),
    )
    done = sweep("--dry-run", "-n", namespace, kubeconfig=config, user=user)
    assert passed(done), done.explain()
    assert len(done.requests) > 1
    # Expired: a fetch to connect, then one before every request.
    assert len(runs_of(script)) == (len(done.requests) + 1 if expired else 1)


def test_a_refused_exec_token_is_fetched_again_once(
    control_plane, namespace, account, sweep: SweepAs, tmp_path
):
    token, user = account
    script = token_plugin(tmp_path, V1, bad_first=True)
    config = write_config(
        tmp_path / "config",
        {"server": control_plane.server, "certificate-authority-data": ca_data(control_plane)},
        exec_user(token),
    )
    done = sweep("--dry-run", "-n", namespace, kubeconfig=config, user=user)
    assert passed(done), done.explain()
    assert len(runs_of(script)) == 2


def test_an_exec_plugin_client_certificate_is_presented(
    control_plane, namespace, sweep: SweepAs, tmp_path
):
    issued = yaml.safe_load(
        control_plane.user_kubeconfig("exec-cert", ["system:masters"]).read_text()
    )["users"][0]["user"]
    cert, key = (
        base64.b64decode(issued[k]).decode() for k in ("client-certificate-data", "client-key-data")
    )
    plugin(
        tmp_path,
        f"""\
        status = {{"clientCertificateData": {cert!r}, "clientKeyData": {key!r}}}
        print(json.dumps({{"apiVersion": "{V1}", "kind": "ExecCredential", "status": status}}))
        """,
    )
    config = write_config(
        tmp_path / "config",
        {"server": control_plane.server, "certificate-authority-data": ca_data(control_plane)},
        exec_user("unused"),
    )
    done = sweep("--dry-run", "-n", namespace, kubeconfig=config, user="exec-cert")
    assert passed(done), done.explain()


FAILING_PLUGINS = [
    pytest.param(
        'sys.stderr.write("aws: token expired\\n"); sys.exit(1)\n',
        {},
        "exec plugin {dir}/bin/plugin: exit code 1: aws: token expired",
        id="exit-code",
    ),
    pytest.param(
        "print('{}')\n",
        {},
        "exec plugin {dir}/bin/plugin: its output is not an ExecCredential",
        id="not-a-credential",
    ),
    pytest.param(
        "",
        {"command": "no-such-plugin", "installHint": "install it\n with care"},
        "exec plugin no-such-plugin: not found (install it with care)",
        id="not-found-with-hint",
    ),
]


@pytest.mark.parametrize(("body", "spec", "message"), FAILING_PLUGINS)
def test_a_failing_exec_plugin_is_one_line_and_exit_two(  # noqa: PLR0917 - fixtures and a table
    control_plane, run_sweeper, tmp_path, body, spec, message
):
    plugin(tmp_path, body)
    config = write_config(
        tmp_path / "config",
        {"server": control_plane.server, "certificate-authority-data": ca_data(control_plane)},
        exec_user("unused", **spec),
    )
    result = run_sweeper("--dry-run", kubeconfig=config)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"sweeper: error: kubeconfig {config}: " + message.format(dir=tmp_path)
    )


def test_a_token_file_and_a_ca_file_are_read_relative_to_the_kubeconfig(
    control_plane, namespace, account, sweep: SweepAs, tmp_path
):
    token, user = account
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "token").write_text(token + "\n")
    (tmp_path / "secrets" / "ca.crt").write_bytes(control_plane.ca_pem)
    config = write_config(
        tmp_path / "config",
        {"server": control_plane.server, "certificate-authority": "secrets/ca.crt"},
        {"tokenFile": "secrets/token"},
    )
    done = sweep("--dry-run", "-n", namespace, kubeconfig=config, user=user)
    assert passed(done), done.explain()


def test_impersonation_is_who_the_api_server_sees(
    control_plane, namespace, account, sweep: SweepAs, tmp_path
):
    """kubectl's ``as``, ``as-groups``, ``as-user-extra``: the API server acts as that user."""
    token, user = account  # cluster-admin: may impersonate
    config = write_config(
        tmp_path / "config",
        {"server": control_plane.server, "certificate-authority-data": ca_data(control_plane)},
        {
            "token": token,
            "as": "impersonated-sweeper",
            "as-groups": ["system:masters"],
            "as-user-extra": {"example.com/reason": ["e2e"]},
        },
    )
    done = sweep("--dry-run", "-n", namespace, kubeconfig=config, user=user)
    assert passed(done), done.explain()
    seen = {
        (e["impersonatedUser"]["username"], tuple(e["impersonatedUser"].get("extra", {})))
        for e in done.requests
    }
    assert seen == {("impersonated-sweeper", ("example.com/reason",))}


def test_client_certificate_files_are_presented(control_plane, namespace, sweep: SweepAs, tmp_path):
    issued = yaml.safe_load(
        control_plane.user_kubeconfig("file-cert", ["system:masters"]).read_text()
    )["users"][0]["user"]
    (tmp_path / "tls.crt").write_bytes(base64.b64decode(issued["client-certificate-data"]))
    (tmp_path / "tls.key").write_bytes(base64.b64decode(issued["client-key-data"]))
    config = write_config(
        tmp_path / "config",
        {"server": control_plane.server, "certificate-authority-data": ca_data(control_plane)},
        {"client-certificate": "tls.crt", "client-key": "tls.key"},
    )
    done = sweep("--dry-run", "-n", namespace, kubeconfig=config, user="file-cert")
    assert passed(done), done.explain()


def test_a_kubeconfig_list_is_merged_as_kubectl_merges_it(
    control_plane, namespace, account, sweep: SweepAs, tmp_path
):
    """The first file to set current-context, or to name a user, wins; a missing one is skipped."""
    token, user = account
    first = tmp_path / "a" / "config"
    first.parent.mkdir()
    first.write_text(
        yaml.safe_dump(
            {
                "current-context": "merged",
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "merged", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    # The second file's current-context names a user the API server refuses: kubectl (and
    # the sweeper) keep the first file's.
    second = tmp_path / "b" / "config"
    second.parent.mkdir()
    second.write_text(
        yaml.safe_dump(
            {
                "current-context": "later",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": control_plane.server,
                            "certificate-authority-data": ca_data(control_plane),
                        },
                    }
                ],
                "users": [
                    {"name": "u", "user": {"token": "not-a-token"}},
                    {"name": "other", "user": {"token": "not-a-token"}},
                ],
                "contexts": [{"name": "later", "context": {"cluster": "c", "user": "other"}}],
            }
        )
    )
    listed = os.pathsep.join([str(tmp_path / "missing"), str(first), str(second)])
    done = sweep("--dry-run", "-n", namespace, kubeconfig=Path(listed), user=user)
    assert passed(done), done.explain()


def test_tls_server_name_is_the_name_checked(control_plane, namespace, account, sweep, tmp_path):
    token, user = account
    cluster = {
        "server": control_plane.server,
        "certificate-authority-data": ca_data(control_plane),
        "tls-server-name": "kubernetes.default.svc",
    }
    done = sweep(
        "--dry-run",
        "-n",
        namespace,
        kubeconfig=write_config(tmp_path / "good", cluster, {"token": token}),
        user=user,
    )
    assert passed(done), done.explain()
    cluster["tls-server-name"] = "elsewhere.invalid"
    refused = sweep(
        "--dry-run",
        "-n",
        namespace,
        kubeconfig=write_config(tmp_path / "bad", cluster, {"token": token}),
        user=user,
    )
    assert refused.result.returncode == 3
    assert "elsewhere.invalid" in refused.result.stderr.splitlines()[-1]


def test_insecure_skip_tls_verify_needs_no_ca(control_plane, namespace, account, sweep, tmp_path):
    token, user = account
    config = write_config(
        tmp_path / "config",
        {"server": control_plane.server, "insecure-skip-tls-verify": True},
        {"token": token},
    )
    done = sweep("--dry-run", "-n", namespace, kubeconfig=config, user=user)
    assert passed(done), done.explain()


def test_without_a_ca_the_private_ca_is_refused(control_plane, namespace, account, sweep, tmp_path):
    token, user = account
    config = write_config(tmp_path / "config", {"server": control_plane.server}, {"token": token})
    done = sweep("--dry-run", "-n", namespace, kubeconfig=config, user=user)
    assert done.result.returncode == 3
    assert "CERTIFICATE_VERIFY_FAILED" in done.result.stderr.splitlines()[-1]


def test_in_cluster_the_service_account_is_used(
    control_plane, namespace, account, tmp_path, monkeypatch
):
    token, _user = account
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text(token)
    (folder / "ca.crt").write_bytes(control_plane.ca_pem)
    (folder / "namespace").write_text(namespace)
    host, port = control_plane.server.removeprefix("https://").rsplit(":", 1)
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT", folder)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    since = control_plane.audit_offset()
    output = io.StringIO()
    code = run(Config(namespaces=(namespace,), dry_run=DryRun.CLIENT), client.connect, output)
    assert code == 0, output.getvalue()
    assert control_plane.audit_events(user=_user, since=since)
