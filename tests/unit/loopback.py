"""What the unit tests listen on and reach over loopback (127.0.0.1 and ::1), and nothing else.

``needs_ipv6`` skips a test, with the reason, where the kernel has no IPv6 loopback (a
container started with IPv6 disabled, a Python built without it).
"""

from __future__ import annotations

import socket

import pytest


def _no_ipv6_loopback() -> str | None:
    if not socket.has_ipv6:
        return "this Python is built without IPv6"
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError as error:
        return f"no IPv6 loopback on this host: cannot bind ::1 ({error})"
    return None


NO_IPV6 = _no_ipv6_loopback()
needs_ipv6 = pytest.mark.skipif(NO_IPV6 is not None, reason=NO_IPV6 or "")
