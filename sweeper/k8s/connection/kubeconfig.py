"""Where the API server is and who the sweeper is to it: a kubeconfig, or the pod's service account.

``load`` reads a kubeconfig as kubectl does (client-go's loading rules), ``in_cluster`` what a
pod is given; both return a ``Target``. Nothing here opens a connection or runs a plugin. The
rules (merging, the order of credentials, plain ``http://``): docs/cli.md, "Connecting".
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sweeper.core.errors import ConfigError
from sweeper.k8s.connection import proxies
from sweeper.k8s.transport import one_line

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
_SECTIONS = ("clusters", "users", "contexts")
_EXEC_EXTENSION = "client.authentication.k8s.io/exec"
_YAML_NAMES = {"str": "a string", "list": "a list", "int": "a number", "float": "a number"}


@dataclass(frozen=True, slots=True)
class ExecPlugin:
    """A user's ``exec`` plugin, its command resolved against its file.

    ``args`` and ``env`` may hold secrets (not in the repr); ``cluster``: ``provideClusterInfo``'s.
    """

    api_version: str
    command: str
    args: tuple[str, ...] = field(default=(), repr=False)
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    interactive_mode: str = "IfAvailable"
    install_hint: str = ""
    cluster: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Impersonation:
    """Who the sweeper acts as (``as``, ``as-uid``, ``as-groups``, ``as-user-extra`` by key)."""

    user: str
    uid: str | None = None
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Target:
    """One API server and the credentials to present to it.

    ``context`` is the kubeconfig context's name, or ``in-cluster``; the PEM data fields hold
    what the kubeconfig embeds (base64-decoded), the file fields what it names. ``withheld``
    names the credentials a plain ``http://`` server is not sent.
    """

    server: str
    context: str
    namespace: str = "default"
    ca_file: str | None = None
    ca_data: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = None
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = field(default=None, repr=False)
    key_data: bytes | None = field(default=None, repr=False)
    basic: tuple[str, str] | None = field(default=None, repr=False)
    exec_plugin: ExecPlugin | None = None
    impersonate: Impersonation | None = None
    withheld: tuple[str, ...] = ()


@dataclass(slots=True)
class _Entry:
    """A named cluster, user or context, with the directory of the file that defined it."""

    body: dict[str, Any]
    base: Path


def load(source: str, context: str | None = None) -> Target:
    """Read the kubeconfig file or ``os.pathsep``-separated list ``source`` (``ConfigError``)."""
    paths = [p for p in source.split(os.pathsep) if p]
    if not any(Path(p).is_file() for p in paths):
        raise ConfigError(f"kubeconfig {source}: no such file")
    where = "" if len(paths) == 1 else "{path}: "
    try:
        return _resolve(_merge(paths, where), context)
    except _KubeconfigError as fault:
        raise ConfigError(f"kubeconfig {source}: {fault}") from None


def in_cluster(environ: dict[str, str] | None = None) -> Target:
    """The API server and service account a pod is given; ``ConfigError`` if they are missing."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
            "must both be set"
        )
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    token, ca = SERVICE_ACCOUNT / "token", SERVICE_ACCOUNT / "ca.crt"
    for path in (token, ca):
        if not path.is_file():
            raise ConfigError(f"in-cluster configuration: {path} does not exist")
    return Target(
        server=f"https://{host}:{port}",
        context="in-cluster",
        namespace=_pod_namespace(env),
        ca_file=str(ca),
        token_file=str(token),
    )


def _pod_namespace(env: Mapping[str, str]) -> str:
    """As client-go: ``POD_NAMESPACE`` (the downward API), else the service account's file."""
    if env.get("POD_NAMESPACE"):
        return env["POD_NAMESPACE"]
    try:
        return (SERVICE_ACCOUNT / "namespace").read_text().strip() or "default"
    except OSError:
        return "default"


class _KubeconfigError(Exception):
    """What is wrong with the kubeconfig, in one line (``ConfigError`` adds the source)."""


@dataclass(slots=True)
class _Merged:
    current: str | None = None
    sections: dict[str, dict[str, _Entry]] = field(
        default_factory=lambda: {name: {} for name in _SECTIONS}
    )


def _merge(paths: list[str], where: str) -> _Merged:
    merged = _Merged()
    for path in paths:
        prefix = where.format(path=path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            continue  # kubectl skips the files of a list that do not exist
        except (OSError, ValueError) as error:
            raise _KubeconfigError(f"{prefix}cannot read it: {one_line(error)}") from None
        try:
            document = yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
        except yaml.YAMLError as error:
            raise _KubeconfigError(f"{prefix}not valid YAML: {_yaml_problem(error)}") from None
        if document is None:
            continue
        if not isinstance(document, dict):
            found = _YAML_NAMES.get(type(document).__name__, "something else")
            raise _KubeconfigError(
                f"{prefix}not a kubeconfig (a YAML mapping with clusters, contexts and users; "
                f"found {found})"
            )
        base = Path(path).resolve().parent
        for section in _SECTIONS:
            items = document.get(section) or []
            if not isinstance(items, list):
                raise _KubeconfigError(f"{prefix}{section}: not a list")
            for item in items:
                name = item.get("name") if isinstance(item, dict) else None
                body = item.get(section[:-1]) if isinstance(item, dict) else None
                if not isinstance(name, str) or not isinstance(body, dict | None):
                    raise _KubeconfigError(
                        f"{prefix}{section}: each entry needs a name and a mapping"
                    )
                merged.sections[section].setdefault(name, _Entry(body or {}, base))
        current = document.get("current-context")
        if merged.current is None and isinstance(current, str) and current:
            merged.current = current
    return merged


def _resolve(merged: _Merged, wanted: str | None) -> Target:
    name = wanted or merged.current
    if not name:
        raise _KubeconfigError("no current-context is set (and no --context given)")
    context = merged.sections["contexts"].get(name)
    if context is None:
        raise _KubeconfigError(f'context "{name}" not found')
    cluster_name = _text(context.body, "cluster", f'context "{name}"')
    cluster = merged.sections["clusters"].get(cluster_name or "")
    if cluster is None:
        raise _KubeconfigError(f'context "{name}": cluster "{cluster_name or ""}" not found')
    user_name = _text(context.body, "user", f'context "{name}"')
    user = merged.sections["users"].get(user_name) if user_name else _Entry({}, cluster.base)
    if user is None:
        raise _KubeconfigError(f'context "{name}": user "{user_name}" not found')
    at = f'cluster "{cluster_name}"'
    server = (_text(cluster.body, "server", at) or "").rstrip("/")
    if not server:
        raise _KubeconfigError(f"{at} has no server")
    insecure = cluster.body.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise _KubeconfigError(f"{at}: insecure-skip-tls-verify: not true or false")
    namespace = _text(context.body, "namespace", f'context "{name}"') or "default"
    ca_file = _path(cluster, "certificate-authority", at)
    exec_info = _ExecInfo(cluster.body, server, ca_file, at)
    credentials = _credentials(user, f'user "{user_name}"', exec_info)
    if not server.startswith("https:"):
        credentials = _withheld(credentials)
    return Target(
        server=server,
        context=name,
        namespace=namespace,
        ca_file=ca_file,
        ca_data=_text_of(_pem(cluster.body, "certificate-authority-data", at)),
        insecure=insecure,
        tls_server_name=_text(cluster.body, "tls-server-name", at),
        proxy_url=_proxy(cluster.body, at),
        impersonate=_impersonation(user.body, f'user "{user_name}"'),
        **credentials,
    )


# What a plain-http server is not sent, named as the kubeconfig names it.
_WITHHELD = (
    ("token", "token"),
    ("token_file", "tokenFile"),
    ("basic", "username and password"),
    ("exec_plugin", "exec"),
    ("cert_file", "client certificate"),
    ("cert_data", "client certificate"),
)


def _withheld(credentials: dict[str, Any]) -> dict[str, Any]:
    """client-go reads a user's credentials only for a TLS server (``IsConfigTransportTLS``)."""
    named = [word for key, word in _WITHHELD if credentials.get(key)]
    return {"withheld": tuple(dict.fromkeys(named))}


@dataclass(frozen=True, slots=True)
class _ExecInfo:
    """What ``provideClusterInfo`` needs of the cluster: its fields, the CA file it names."""

    body: dict[str, Any]
    server: str
    ca_file: str | None
    at: str


# What replaces each auth-provider. kubectl removed gcp and azure in 1.26 (client-go keeps
# stubs that fail); it still ships oidc, which the sweeper does not implement (docs/decisions.md).
_AUTH_PROVIDERS = {
    "gcp": "was removed from kubectl in 1.26: use gke-gcloud-auth-plugin",
    "azure": "was removed from kubectl in 1.26: use kubelogin",
    "oidc": (
        "is not supported by the sweeper (kubectl still supports it): use the exec plugin "
        "kubelogin (kubectl oidc-login get-token) instead"
    ),
}


def _credentials(user: _Entry, at: str, exec_info: _ExecInfo) -> dict[str, Any]:
    body = user.body
    if body.get("auth-provider") is not None:
        provider = body["auth-provider"]
        kind = provider.get("name") if isinstance(provider, dict) else None
        said = _AUTH_PROVIDERS.get(str(kind), "is not supported: use an exec plugin")
        raise _KubeconfigError(f"{at}: auth-provider {one_line(kind or '?')} {said}")
    found: dict[str, Any] = {
        "cert_file": _path(user, "client-certificate", at),
        "key_file": _path(user, "client-key", at),
        "cert_data": _pem(body, "client-certificate-data", at),
        "key_data": _pem(body, "client-key-data", at),
    }
    token = _text(body, "token", at)
    token_file = _path(user, "tokenFile", at)
    if token or token_file:
        found["token"] = token
        found["token_file"] = token_file
    elif body.get("exec") is not None:
        found["exec_plugin"] = _exec(user, at, exec_info)
    else:
        username, password = _text(body, "username", at), _text(body, "password", at)
        if username is not None and password is not None:
            found["basic"] = (username, password)
    if (found["cert_file"] or found["cert_data"]) and not (found["key_file"] or found["key_data"]):
        raise _KubeconfigError(f"{at}: client-certificate without client-key")
    return found


def _impersonation(body: dict[str, Any], at: str) -> Impersonation | None:
    user, uid = _text(body, "as", at), _text(body, "as-uid", at)
    groups = body.get("as-groups") or []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise _KubeconfigError(f"{at}: as-groups: not a list of strings")
    extra = body.get("as-user-extra") or {}
    if not isinstance(extra, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(i, str) for i in v)
        for k, v in extra.items()
    ):
        raise _KubeconfigError(f"{at}: as-user-extra: not a mapping of lists of strings")
    if not user:
        if uid or groups or extra:  # as client-go's validation
            raise _KubeconfigError(
                f"{at}: as-groups, as-uid or as-user-extra without as (the user to impersonate)"
            )
        return None
    return Impersonation(
        user=user,
        uid=uid or None,
        groups=tuple(groups),
        extra=tuple((key, tuple(extra[key])) for key in sorted(extra)),
    )


def _exec(user: _Entry, at: str, exec_info: _ExecInfo) -> ExecPlugin:
    spec = user.body["exec"]
    at = f"{at}: exec"
    if not isinstance(spec, dict):
        raise _KubeconfigError(f"{at}: not a mapping")
    version = _text(spec, "apiVersion", at)
    if version not in EXEC_API_VERSIONS:
        raise _KubeconfigError(
            f"{at}: apiVersion {version!r} is not one of {', '.join(EXEC_API_VERSIONS)}"
        )
    command = _text(spec, "command", at)
    if not command:
        raise _KubeconfigError(f"{at}: no command")
    if Path(command).name != command and not Path(command).is_absolute():
        command = str(user.base / command)  # as client-go: a path, not a name on PATH
    args = spec.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise _KubeconfigError(f"{at}: args: not a list of strings")
    env: list[tuple[str, str]] = []
    for pair in spec.get("env") or []:
        if not isinstance(pair, dict) or not all(
            isinstance(pair.get(k), str) for k in ("name", "value")
        ):
            raise _KubeconfigError(f"{at}: env: each entry needs a name and a value")
        env.append((pair["name"], pair["value"]))
    mode = _text(spec, "interactiveMode", at) or "IfAvailable"
    if mode not in INTERACTIVE_MODES:
        raise _KubeconfigError(
            f"{at}: interactiveMode {mode!r} is not one of {', '.join(INTERACTIVE_MODES)}"
        )
    return ExecPlugin(
        api_version=str(version),
        command=command,
        args=tuple(args),
        env=tuple(env),
        interactive_mode=mode,
        install_hint=one_line(spec.get("installHint") or ""),
        cluster=_cluster_info(exec_info) if spec.get("provideClusterInfo") is True else None,
    )


def _cluster_info(exec_info: _ExecInfo) -> dict[str, Any]:
    # ExecCredential's spec.cluster, as client-go's ConfigToExecCluster: a CA file's contents.
    cluster = exec_info.body
    info: dict[str, Any] = {"server": exec_info.server}
    for key in (
        "tls-server-name",
        "insecure-skip-tls-verify",
        "certificate-authority-data",
        "proxy-url",
    ):
        if cluster.get(key) is not None:
            info[key] = cluster[key]
    if exec_info.ca_file and "certificate-authority-data" not in info:
        try:
            pem = Path(exec_info.ca_file).read_bytes()
        except OSError as error:
            raise _KubeconfigError(
                f"{exec_info.at}: certificate-authority {exec_info.ca_file}: cannot read it for "
                f"the exec plugin: {error.strerror or one_line(error)}"
            ) from None
        info["certificate-authority-data"] = base64.b64encode(pem).decode("ascii")
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == _EXEC_EXTENSION:
            info["config"] = extension.get("extension")
    return info


def _text(body: dict[str, Any], key: str, at: str) -> str | None:
    value = body.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _KubeconfigError(f"{at}: {key}: not a string")


def _path(entry: _Entry, key: str, at: str) -> str | None:
    value = _text(entry.body, key, at)
    return str(entry.base / value) if value else None


def _pem(body: dict[str, Any], key: str, at: str) -> bytes | None:
    value = _text(body, key, at)
    if not value:
        return None
    try:
        data = base64.b64decode(value, validate=False)
    except (binascii.Error, ValueError):
        raise _KubeconfigError(f"{at}: {key}: not base64") from None
    return data


def _text_of(pem: bytes | None) -> str | None:
    return None if pem is None else pem.decode("ascii", "replace")


def _proxy(body: dict[str, Any], at: str) -> str | None:
    url = _text(body, "proxy-url", at)
    if url and proxies.unsupported(url):
        raise _KubeconfigError(
            f"{at}: proxy-url {proxies.redacted(url)}: only http:// and https:// proxies are "
            "supported"
        )
    return url or None


def _yaml_problem(error: yaml.YAMLError) -> str:
    """The problem and where: never the snippet, which quotes the file (a token, say)."""
    problem = getattr(error, "problem", None) or type(error).__name__
    mark = getattr(error, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return one_line(f"{problem}{where}")


_Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
