"""What the unit tests listen on and reach over loopback (127.0.0.1 and ::1), and nothing else.

``serving`` runs a test's own HTTP handler (a Pushgateway, an API server's answers) on a free
127.0.0.1 port for the length of a ``with`` block. ``needs_ipv6`` skips a test, with the
reason, where the kernel has no IPv6 loopback (a container started with IPv6 disabled, a
Python built without it).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@contextlib.contextmanager
def serving(
    handler: type[BaseHTTPRequestHandler],
    *,
    server: type[ThreadingHTTPServer] = ThreadingHTTPServer,
    poll: float = 0.05,
) -> Iterator[str]:
    """Serve ``handler`` on a free loopback port, on a daemon thread, for the block.

    Args:
        handler: The request handler class (a subclass bound to the test's state).
        server: The server class (one that keeps resets quiet, say).
        poll: ``serve_forever``'s poll interval: how soon ``shutdown`` returns.

    Yields:
        The server's base URL, ``http://127.0.0.1:PORT``.
    """
    httpd = server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(poll,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


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
