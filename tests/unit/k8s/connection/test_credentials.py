"""sweeper.k8s.connection.credentials: token files on a stepped clock, exec plugins as real scripts.

The plugins are small Python scripts written to tmp_path and run as a kubeconfig would have
them run; tests/e2e/test_sweeper_credentials.py presents what they print to the API server.
"""

from __future__ import annotations

import json
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sweeper.core.errors import ConfigError
from sweeper.k8s.connection import credentials
from sweeper.k8s.connection.credentials import Credential, ExecAuth, auth_for
from sweeper.k8s.connection.kubeconfig import ExecPlugin, Target

V1 = "client.authentication.k8s.io/v1"
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def script(tmp_path: Path, body: str) -> str:
    """A plugin that logs each run's KUBERNETES_EXEC_INFO and environment, then runs ``body``."""
    path = tmp_path / "plugin"
    path.write_text(
        f"#!{sys.executable}\n"
        "import json, os, pathlib, sys\n"
        "log = pathlib.Path(__file__).with_name('runs.jsonl')\n"
        "with log.open('a') as f:\n"
        "    f.write(json.dumps({'info': json.loads(os.environ['KUBERNETES_EXEC_INFO']),"
        " 'env': os.environ.get('PLUGIN_ENV'), 'argv': sys.argv[1:]}) + '\\n')\n"
        "n = len(log.read_text().splitlines())\n" + textwrap.dedent(body)
    )
    path.chmod(0o755)
    return str(path)


def runs(tmp_path: Path) -> list[dict[str, Any]]:
    log = tmp_path / "runs.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def printing(status: dict[str, Any], version: str = V1) -> str:
    document = {"apiVersion": version, "kind": "ExecCredential", "status": status}
    return f"status = {json.dumps(document)!r}\nprint(status.replace('N', str(n)))\n"


def plugin(command: str, **fields: Any) -> ExecPlugin:
    return ExecPlugin(api_version=fields.pop("api_version", V1), command=command, **fields)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


# --- fixed sources -----------------------------------------------------------------------------


SOURCES = [
    pytest.param(Target(server="s", context="c", token="abc"), "Bearer abc", id="token"),  # noqa: S106
    pytest.param(
        Target(server="s", context="c", basic=("ada", "s3:cret")),
        "Basic YWRhOnMzOmNyZXQ=",
        id="basic",
    ),
    pytest.param(Target(server="s", context="c"), None, id="anonymous"),
]


@pytest.mark.parametrize(("target", "header"), SOURCES)
def test_fixed_sources(target: Target, header: str | None) -> None:
    auth = auth_for(target, lambda: 1.0)
    assert auth.current() == Credential(header)
    assert auth.renew(auth.current()) is False  # a 401 to a fixed credential is final


# --- token files -------------------------------------------------------------------------------


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_kubeconfig_token_file_is_read_again_every_minute(tmp_path: Path) -> None:
    """As client-go (``NewCachedFileTokenSource``): every token file, not only the pod's."""
    path = tmp_path / "token"
    path.write_text("one\n")
    ticks = Ticks()
    auth = auth_for(Target(server="s", context="c", token_file=str(path)), lambda: 1.0, ticks)
    path.write_text("two")
    ticks.now += credentials.TOKEN_FILE_PERIOD_S - 1
    assert auth.current() == Credential("Bearer one")
    ticks.now += 1
    assert auth.current() == Credential("Bearer two")
    path.unlink()  # a failed re-read keeps the token it has
    ticks.now += 3600
    assert auth.current() == Credential("Bearer two")


def test_a_token_file_wins_over_the_inline_token_once_read(tmp_path: Path) -> None:
    """client-go sends the file's token when it reads it, else the kubeconfig's ``token``."""
    path = tmp_path / "token"
    target = Target(server="s", context="c", token="inline", token_file=str(path))  # noqa: S106
    ticks = Ticks()
    auth = auth_for(target, lambda: 1.0, ticks)
    assert auth.current() == Credential("Bearer inline")  # no file yet: no error either
    path.write_text("rotated")
    ticks.now += credentials.TOKEN_FILE_PERIOD_S
    assert auth.current() == Credential("Bearer rotated")


def test_a_401_reads_the_token_file_again(tmp_path: Path) -> None:
    """A token rotated within the minute is picked up at once after a 401."""
    path = tmp_path / "token"
    path.write_text("old")
    auth = auth_for(Target(server="s", context="c", token_file=str(path)), lambda: 1.0, Ticks())
    refused = auth.current()
    assert auth.renew(refused) is False  # the same token: no point in another try
    path.write_text("new")
    assert auth.renew(refused) is True
    assert auth.current() == Credential("Bearer new")


def test_a_credential_prints_no_secret() -> None:
    assert "SECRET" not in repr(Credential("Bearer SECRET", (b"SECRET-CERT", b"SECRET-KEY")))


def test_an_unreadable_token_file_is_a_config_error(tmp_path: Path) -> None:
    target = Target(server="s", context="c", token_file=str(tmp_path / "nothing"))
    with pytest.raises(ConfigError, match=f"^token file {tmp_path / 'nothing'}: "):
        auth_for(target, lambda: 1.0)


# --- exec plugins ------------------------------------------------------------------------------


def test_an_exec_plugin_gets_its_env_args_and_exec_info(tmp_path: Path) -> None:
    command = script(tmp_path, printing({"token": "t-N"}))
    cluster = {"server": "https://127.0.0.1:6443"}
    spec = plugin(
        command,
        args=("a", "b"),
        env=(("PLUGIN_ENV", "yes"),),
        interactive_mode="Never",
        cluster=cluster,
    )
    auth = auth_for(Target(server="s", context="c", exec_plugin=spec), lambda: 60.0)
    assert runs(tmp_path) == []  # nothing runs before the first request
    assert auth.current() == Credential("Bearer t-1")
    [run] = runs(tmp_path)
    assert run["argv"] == ["a", "b"]
    assert run["env"] == "yes"
    assert run["info"] == {
        "apiVersion": V1,
        "kind": "ExecCredential",
        "spec": {"interactive": False, "cluster": cluster},
    }


def test_an_exec_credential_is_kept_until_it_expires(tmp_path: Path) -> None:
    expiry = (NOW + timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    command = script(tmp_path, printing({"token": "t-N", "expirationTimestamp": expiry}))
    clock = Clock()
    auth = ExecAuth(plugin(command), lambda: 60.0, now=clock)
    assert auth.current() == Credential("Bearer t-1")
    clock.now = NOW + timedelta(minutes=4, seconds=59)
    assert auth.current() == Credential("Bearer t-1")
    clock.now = NOW + timedelta(minutes=5)
    assert auth.current() == Credential("Bearer t-2")
    assert len(runs(tmp_path)) == 2


def test_a_refused_exec_credential_is_fetched_again(tmp_path: Path) -> None:
    command = script(tmp_path, printing({"token": "t-N"}))
    auth = ExecAuth(plugin(command), lambda: 60.0)
    first = auth.current()
    assert auth.renew(Credential("Bearer someone-else's")) is True
    assert auth.current() == first  # another thread renewed it already: no second run
    assert auth.renew(first) is True
    assert auth.current() == Credential("Bearer t-2")


def test_an_exec_plugin_may_answer_with_a_client_certificate(tmp_path: Path) -> None:
    command = script(tmp_path, printing({"clientCertificateData": "C", "clientKeyData": "K"}))
    assert ExecAuth(plugin(command), lambda: 60.0).current() == Credential(None, (b"C", b"K"))


FAILURES = [
    pytest.param(
        "sys.stderr.write('one\\n\\ntwo  words\\n'); sys.exit(3)",
        "exit code 3: two words",
        id="exit-code-and-last-line",
    ),
    pytest.param("sys.exit(1)", "exit code 1", id="exit-silently"),
    pytest.param("print('nope')", "its output is not an ExecCredential (not JSON)", id="not-json"),
    pytest.param(
        printing({"token": "t"}, version="client.authentication.k8s.io/v1beta1"),
        f"asked for {V1}, got 'client.authentication.k8s.io/v1beta1'",
        id="other-version",
    ),
    pytest.param(
        f"print(json.dumps({{'apiVersion': '{V1}', 'kind': 'ExecCredential'}}))",
        "its ExecCredential has no status",
        id="no-status",
    ),
    pytest.param(
        printing({"clientCertificateData": "C"}),
        "its ExecCredential has neither a token nor clientCertificateData and clientKeyData",
        id="cert-without-key",
    ),
    pytest.param(
        printing({"token": "t", "expirationTimestamp": "soon"}),
        "expirationTimestamp 'soon' is not RFC 3339",
        id="bad-expiry",
    ),
    pytest.param(
        printing({"token": "t", "expirationTimestamp": "2026-12-03T12:00:00"}),
        "expirationTimestamp '2026-12-03T12:00:00' has no time zone",
        id="naive-expiry",
    ),
    pytest.param("import time; time.sleep(5)", "no answer within 0.2s", id="timeout"),
]


@pytest.mark.parametrize(("body", "message"), FAILURES)
def test_a_failing_exec_plugin_is_one_config_error_line(
    tmp_path: Path, body: str, message: str
) -> None:
    command = script(tmp_path, body)
    timeout = 0.2 if "sleep" in body else 60.0  # an interpreter's start can take a second here
    with pytest.raises(ConfigError) as raised:
        ExecAuth(plugin(command), lambda: timeout).current()
    assert str(raised.value) == f"exec plugin {command}: {message}"


def test_a_missing_exec_plugin_names_its_install_hint() -> None:
    spec = plugin("no-such-plugin-anywhere", install_hint="brew install it")
    with pytest.raises(ConfigError) as raised:
        ExecAuth(spec, lambda: 60.0).current()
    assert str(raised.value) == "exec plugin no-such-plugin-anywhere: not found (brew install it)"


def test_an_always_interactive_plugin_without_a_terminal_is_refused(tmp_path: Path) -> None:
    command = script(tmp_path, printing({"token": "t"}))
    with pytest.raises(ConfigError, match="interactiveMode is Always and there is no terminal"):
        ExecAuth(plugin(command, interactive_mode="Always"), lambda: 60.0).current()
    assert runs(tmp_path) == []
