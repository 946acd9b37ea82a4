"""The credential each request presents, kept fresh: a fixed token, a token file, an exec plugin.

``auth_for`` picks the source a ``sweeper.k8s.connection.kubeconfig.Target`` names. Every
source is safe to call from the reader and watch threads at once. A token file is read again
every minute, as client-go's ``NewCachedFileTokenSource`` (the kubelet rotates bound tokens);
an exec plugin runs as client-go runs it; both renew after a 401 (docs/cli.md, "Connecting").
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sweeper.core.errors import ConfigError
from sweeper.k8s.connection.kubeconfig import ExecPlugin, Target
from sweeper.k8s.transport import one_line

TOKEN_FILE_PERIOD_S = 60.0


@dataclass(frozen=True, slots=True)
class Credential:
    """An ``Authorization`` header value and, from an exec plugin, a client certificate (PEM)."""

    authorization: str | None = field(default=None, repr=False)
    cert: tuple[bytes, bytes] | None = field(default=None, repr=False)


class Auth:
    """A fixed credential; the base of those that change."""

    def __init__(self, credential: Credential | None = None) -> None:
        self._credential = credential or Credential()

    def current(self) -> Credential:
        """The credential to send now; ``ConfigError`` if fetching it again failed (exec)."""
        return self._credential

    def renew(self, used: Credential) -> bool:
        """After a 401 to ``used``: whether a fresh credential is worth one more try."""
        del used
        return False


class TokenFile(Auth):
    """A bearer token read from a file, read again every ``TOKEN_FILE_PERIOD_S`` seconds.

    ``fallback`` (a kubeconfig's inline ``token``) is sent while the file cannot be read.
    """

    def __init__(
        self, path: str, fallback: str | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._path = path
        self._clock = clock
        self._read_at = clock()
        self._lock = threading.Lock()
        try:
            token = self._read(path)
        except ConfigError:
            if fallback is None:
                raise
            token = fallback
        super().__init__(Credential(f"Bearer {token}"))

    @staticmethod
    def _read(path: str) -> str:
        try:
            with open(path, encoding="utf-8") as file:  # noqa: PTH123 - one read, named here
                return file.read().strip()
        except (OSError, ValueError) as error:
            raise ConfigError(f"token file {path}: {one_line(error)}") from error

    def current(self) -> Credential:
        """The token, read again if the period has passed (the old one if that read fails)."""
        with self._lock:
            if self._clock() - self._read_at >= TOKEN_FILE_PERIOD_S:
                self._reread()
            return self._credential

    def renew(self, used: Credential) -> bool:
        """Read the file now: worth another try if it holds another token than ``used``."""
        with self._lock:
            self._reread()
            return self._credential != used

    def _reread(self) -> None:
        self._read_at = self._clock()
        # As client-go: a failed re-read keeps the token, which may still be valid.
        with contextlib.suppress(ConfigError):
            self._credential = Credential(f"Bearer {self._read(self._path)}")


class ExecAuth(Auth):
    """The credential an exec plugin prints, kept until it expires or is refused."""

    def __init__(
        self,
        plugin: ExecPlugin,
        timeout: Callable[[], float],
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__()
        self._plugin = plugin
        self._timeout = timeout
        self._now = now
        self._expires: datetime | None = None
        self._fresh = False
        self._lock = threading.Lock()

    def current(self) -> Credential:
        """The kept credential, or the plugin's new one when none is kept or it expired."""
        with self._lock:
            if not self._fresh or (self._expires is not None and self._now() >= self._expires):
                self._credential, self._expires = run_plugin(self._plugin, self._timeout())
                self._fresh = True
            return self._credential

    def renew(self, used: Credential) -> bool:
        """Drop the kept credential if it is the one refused (another thread may have renewed)."""
        with self._lock:
            if self._credential == used:
                self._fresh = False
        return True


def auth_for(
    target: Target, timeout: Callable[[], float], clock: Callable[[], float] = time.monotonic
) -> Auth:
    """The credential source ``target`` names; ``timeout`` bounds each run of an exec plugin.

    A plugin first runs at the first ``current()``; ``ConfigError``: a token file unread, no token.
    """
    if target.token_file:
        return TokenFile(target.token_file, target.token, clock)
    if target.token:
        return Auth(Credential(f"Bearer {target.token}"))
    if target.exec_plugin:
        return ExecAuth(target.exec_plugin, timeout)
    if target.basic:
        pair = ":".join(target.basic).encode("utf-8")
        return Auth(Credential(f"Basic {base64.b64encode(pair).decode('ascii')}"))
    return Auth()


def run_plugin(plugin: ExecPlugin, timeout: float) -> tuple[Credential, datetime | None]:
    """Run the plugin once: its credential and expiry (``None``: never); else ``ConfigError``."""
    name = f"exec plugin {plugin.command}"
    interactive = (
        plugin.interactive_mode != "Never" and sys.stdin is not None and sys.stdin.isatty()
    )
    if plugin.interactive_mode == "Always" and not interactive:
        raise ConfigError(f"{name}: its interactiveMode is Always and there is no terminal")
    request: dict[str, Any] = {"interactive": interactive}
    if plugin.cluster is not None:
        request["cluster"] = plugin.cluster
    env = dict(os.environ)
    env.update(plugin.env)
    env["KUBERNETES_EXEC_INFO"] = json.dumps(
        {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": request}
    )
    try:
        done = subprocess.run(  # noqa: S603 - the command the user's kubeconfig names
            [plugin.command, *plugin.args],
            env=env,
            stdin=None if interactive else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None if interactive else subprocess.PIPE,
            timeout=None if math.isinf(timeout) else max(timeout, 0.001),
            check=False,
        )
    except FileNotFoundError:
        hint = f" ({plugin.install_hint})" if plugin.install_hint else ""
        raise ConfigError(f"{name}: not found{hint}") from None
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{name}: no answer within {timeout:g}s") from None
    except OSError as error:
        raise ConfigError(f"{name}: cannot run it: {one_line(error)}") from None
    if done.returncode != 0:
        said = _last_line(done.stderr)
        raise ConfigError(f"{name}: exit code {done.returncode}{': ' + said if said else ''}")
    return _parse(name, plugin.api_version, done.stdout)


def _parse(name: str, api_version: str, stdout: bytes) -> tuple[Credential, datetime | None]:
    try:
        document = json.loads(stdout)
    except ValueError:
        raise ConfigError(f"{name}: its output is not an ExecCredential (not JSON)") from None
    if not isinstance(document, dict) or document.get("kind") != "ExecCredential":
        raise ConfigError(f"{name}: its output is not an ExecCredential")
    if document.get("apiVersion") != api_version:
        raise ConfigError(f"{name}: asked for {api_version}, got {document.get('apiVersion')!r}")
    status = document.get("status")
    if not isinstance(status, dict):
        raise ConfigError(f"{name}: its ExecCredential has no status")
    token = status.get("token")
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if isinstance(token, str) and token:
        credential = Credential(f"Bearer {token}")
    elif isinstance(cert, str) and isinstance(key, str) and cert and key:
        credential = Credential(None, (cert.encode("utf-8"), key.encode("utf-8")))
    else:
        raise ConfigError(
            f"{name}: its ExecCredential has neither a token nor clientCertificateData and "
            "clientKeyData"
        )
    expiry = status.get("expirationTimestamp")
    if expiry is None:
        return credential, None
    try:
        expires = datetime.fromisoformat(str(expiry).replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{name}: expirationTimestamp {expiry!r} is not RFC 3339") from None
    if expires.tzinfo is None:
        raise ConfigError(f"{name}: expirationTimestamp {expiry!r} has no time zone")
    return credential, expires


def _last_line(stderr: bytes | None) -> str:
    lines = [
        line for line in (stderr or b"").decode("utf-8", "replace").splitlines() if line.strip()
    ]
    return one_line(lines[-1])[:300] if lines else ""
