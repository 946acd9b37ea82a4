"""The floor of a sweeper pass: the same requests, bodies read and thrown away.

    python -m benchmarks.floor --server URL --ca CA --cert CERT --key KEY \
        [--page-size 500] [--discover PATH]... [--pods SELECTOR] GROUP/VERSION/PLURAL...

First it sends the sweeper's discovery requests (each ``--discover`` path, e.g.
``/apis/trainer.kubeflow.org``; a 404 is an answer, as it is to the sweeper), then for each
resource in turn it lists every job the way the sweeper does
(``GET /apis/<group>/<version>/<plural>?limit=<page size>``, then ``&continue=<token>`` until
the token is empty), all over one kept-alive TLS connection, and reads each body into a fixed
buffer that is overwritten chunk after chunk: nothing is decoded, nothing is kept. The token is
the only thing it takes from a body, from its tail: the API server writes a custom resource
list's ``metadata`` after its ``items``, so the last ``"metadata":`` of a body is the list's.
``--pods SELECTOR`` then lists the pods as a pass does once per scope (``/api/v1/pods``, pages
of 500, the selector the sweeper sends): a core list writes its ``metadata`` before its
``items``, so the token comes from the body's head there.
Standard library only (``http.client``, ``ssl``), so its start-up is an interpreter's.

``benchmarks.scale`` runs it as a contender: no client of the same requests can do less work
in this process, so ``ratio_vs_floor`` says what the sweeper costs on top of the bytes it reads.
It prints ``requests`` and ``bytes`` (of the bodies, discovery's included).
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import sys
import urllib.parse
from collections.abc import Callable

_CHUNK = 256 * 1024
# The list's metadata ({"continue": ..., "remainingItemCount": ..., "resourceVersion": ...})
# fits many times over.
_TAIL = 8 * 1024
_METADATA_KEY = b'"metadata":'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.floor",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--server", required=True, help="https://host:port")
    parser.add_argument("--ca", required=True, help="CA certificate file (PEM)")
    parser.add_argument("--cert", required=True, help="client certificate file (PEM)")
    parser.add_argument("--key", required=True, help="client key file (PEM)")
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument(
        "--discover", action="append", default=[], metavar="PATH", help="GET before the lists"
    )
    parser.add_argument("--pods", metavar="SELECTOR", help="list the pods with it, last")
    parser.add_argument("resources", nargs="+", metavar="GROUP/VERSION/PLURAL")
    args = parser.parse_args(argv)
    server = urllib.parse.urlsplit(args.server)
    context = ssl.create_default_context(cafile=args.ca)
    context.load_cert_chain(args.cert, args.key)
    connection = http.client.HTTPSConnection(
        server.hostname or "127.0.0.1", server.port, context=context, timeout=600
    )
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    requests = 0
    total = 0

    def get(path: str, *, ok: tuple[int, ...] = (http.client.OK,), head: bool = False) -> bytes:
        """Send one GET, read its body through the buffer: its last bytes (or its first)."""
        nonlocal requests, total
        connection.request("GET", path, headers={"Accept": "application/json"})
        response = connection.getresponse()
        requests += 1
        if response.status not in ok:
            detail = response.read()[:300].decode("utf-8", "replace")
            raise SystemExit(f"GET {path}: {response.status} {detail}")
        tail = first = b""
        while True:
            n = response.readinto(view)
            if not n:
                break
            total += n
            if len(first) < _TAIL:
                first += bytes(view[: min(n, _TAIL - len(first))])
            # Only the last bytes matter: keep them, overwrite the rest.
            tail = (tail + bytes(view[max(0, n - _TAIL) : n]))[-_TAIL:]
        return first if head else tail

    for path in args.discover:
        get(path, ok=(http.client.OK, http.client.NOT_FOUND))
    for resource in args.resources:
        _list_all(get, f"/apis/{resource}", {"limit": str(args.page_size)}, head=False)
    if args.pods is not None:
        _list_all(get, "/api/v1/pods", {"limit": "500", "labelSelector": args.pods}, head=True)
    connection.close()
    print(f"requests: {requests}")
    print(f"bytes: {total}")
    return 0


def _list_all(get: Callable[..., bytes], path: str, query: dict[str, str], *, head: bool) -> None:
    """Read every page of a list (``limit``, then ``continue`` until the token is empty)."""
    token = ""
    while True:
        paged = {**query, "continue": token} if token else query
        token = _continue_token(
            get(f"{path}?{urllib.parse.urlencode(paged)}", head=head), first=head
        )
        if not token:
            return


def _continue_token(tail: bytes, *, first: bool = False) -> str:
    """The list's ``metadata.continue`` from the last bytes of its body ("" on the last page).

    ``first``: from its first bytes, where a core list writes its ``metadata``.
    """
    at = tail.find(_METADATA_KEY) if first else tail.rfind(_METADATA_KEY)
    if at < 0:
        raise SystemExit("no list metadata at the end of the body")
    meta, _end = json.JSONDecoder().raw_decode(tail[at + len(_METADATA_KEY) :].decode())
    return str(meta.get("continue") or "")


if __name__ == "__main__":
    sys.exit(main())
