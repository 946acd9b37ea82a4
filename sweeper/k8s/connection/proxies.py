"""Which proxy carries the requests to a server: Go's rules, as kubectl follows them.

A kubeconfig's ``proxy-url`` wins, else the environment's as client-go reads it
(``http.ProxyFromEnvironment``, golang.org/x/net/http/httpproxy; docs/cli.md, "Connecting").
Only http and https proxies; ``user:password@`` goes as ``Proxy-Authorization``, never into a
message.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from sweeper.core.errors import ConfigError

_DEFAULT_PORTS = {"http": "80", "https": "443"}
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Proxy:
    """A proxy's URL without its credentials, and its ``user:password`` (decoded) if any."""

    url: str
    basic_auth: str | None = None


def from_environment(server: str, environ: Mapping[str, str]) -> str | None:
    """The proxy URL the environment gives for ``server``, ``None`` to go direct; http(s) only."""
    scheme = urlsplit(server).scheme
    names = ("HTTPS_PROXY", "https_proxy") if scheme == "https" else ("HTTP_PROXY", "http_proxy")
    name = next((n for n in names if environ.get(n)), None)
    if name is None:
        return None
    if not _use_proxy(server, environ.get("NO_PROXY") or environ.get("no_proxy") or ""):
        return None
    url = environ[name].strip()
    if "://" not in url:
        url = f"http://{url}"  # as Go: "proxy:3128" is an http proxy
    if unsupported(url):
        raise ConfigError(
            f"{name} {redacted(url)}: only http:// and https:// proxies are supported"
        )
    return url


def unsupported(url: str) -> bool:
    """Whether ``url`` is a proxy the sweeper cannot speak to (not http or https)."""
    return urlsplit(url).scheme not in _DEFAULT_PORTS


def parse(url: str) -> Proxy:
    """``url`` split into the address urllib3 is given and the credentials it is not."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return Proxy(url)
    basic = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    return Proxy(parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl(), basic)


def redacted(url: str) -> str:
    """``url`` without its credentials, for a message."""
    return parse(url).url


def _use_proxy(server: str, no_proxy: str) -> bool:
    parts = urlsplit(server)
    host = (parts.hostname or "").lower()
    try:
        port = str(parts.port or _DEFAULT_PORTS.get(parts.scheme, ""))
    except ValueError:
        port = ""
    ip = _ip(host)
    if host == "localhost" or (ip is not None and ip.is_loopback):
        return False
    return not any(_matches(entry, host, port, ip) for entry in _entries(no_proxy))


def _entries(no_proxy: str) -> list[str]:
    return [e.strip().lower() for e in no_proxy.split(",") if e.strip()]


def _matches(entry: str, host: str, port: str, ip: _Address | None) -> bool:
    """One ``NO_PROXY`` entry against the server's host, port and address (Go's matchers)."""
    if entry == "*":
        return True
    if "/" in entry:
        try:
            return ip is not None and ip in ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False
    name, wanted_port = _split_port(entry)
    if not name or (wanted_port and wanted_port != port):
        return False
    entry_ip = _ip(name)
    if entry_ip is not None:
        return ip == entry_ip
    name = name.removeprefix("*")
    # "domain" matches itself and its subdomains; ".domain" (and "*.domain") the subdomains.
    return host.endswith(name if name.startswith(".") else f".{name}") or host == name


def _split_port(entry: str) -> tuple[str, str]:
    if entry.startswith("["):  # [IPv6]:port or [IPv6]
        address, _, rest = entry[1:].partition("]")
        return address, rest.removeprefix(":")
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        return name, port
    return entry, ""  # a name, an IPv4 address, or a bare IPv6 address


def _ip(host: str) -> _Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
