"""Byte relays between the host's loopback and the node's network namespace, over Unix sockets.

The node (containerd, kubelet, kube-proxy, pods) lives in a network namespace with its own
addresses; the control plane listens on the host's loopback. Nothing may get a non-loopback
address in the host's namespace, so no route joins the two: a Unix socket does, since both
namespaces share the file system. ``devcluster.node`` runs three of these, each a process of its
own in the namespace it listens in (``python -m devcluster.relay MODE ...``):

    tcp-to-unix HOST PORT SOCKET   listen on HOST:PORT, forward each connection to SOCKET
    unix-to-tcp SOCKET HOST PORT   listen on SOCKET, forward each connection to HOST:PORT
    connect-proxy SOCKET           listen on SOCKET, speak HTTP CONNECT, dial the asked address

The first two carry the pods' and the kubelet's traffic to the API server (node address inside
the namespace -> socket -> host loopback); the third is kube-apiserver's egress proxy
(``--egress-selector-config-file``) to reach the kubelet for logs, exec and port-forward.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

_BUFFER = 65536
_MAX_HEADER = 8192


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    # One direction of a connection; a half-close is passed on so the other side sees EOF.
    try:
        while data := source.recv(_BUFFER):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def join(client: socket.socket, upstream: socket.socket) -> None:
    """Carry bytes both ways until both sides are done, then close both sockets."""
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener: socket.socket, handle: Callable[[socket.socket], None]) -> None:
    listener.listen(128)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=handle, args=(client,), daemon=True).start()


def _unix_listener(path: str) -> socket.socket:
    Path(path).unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    Path(path).chmod(0o600)  # root only: it leads to the API server and to the kubelet
    return listener


def _forward(connect: Callable[[], socket.socket]) -> Callable[[socket.socket], None]:
    def handle(client: socket.socket) -> None:
        try:
            upstream = connect()
        except OSError:
            client.close()
            return
        join(client, upstream)

    return handle


def _connect_proxy(client: socket.socket) -> None:
    # kube-apiserver's HTTPConnect egress: "CONNECT host:port HTTP/1.1", headers, blank line.
    header = b""
    while b"\r\n\r\n" not in header and len(header) < _MAX_HEADER:
        chunk = client.recv(1024)
        if not chunk:
            client.close()
            return
        header += chunk
    head, _, rest = header.partition(b"\r\n\r\n")
    parts = head.split(b"\r\n", 1)[0].split()
    if len(parts) != 3 or parts[0] != b"CONNECT":  # noqa: PLR2004 - method, target, version
        client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
        client.close()
        return
    host, _, port = parts[1].decode("ascii", "replace").rpartition(":")
    try:
        upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
        upstream.settimeout(None)
    except (OSError, ValueError) as e:
        client.sendall(f"HTTP/1.1 502 Bad Gateway\r\n\r\n{e}".encode())
        client.close()
        return
    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    if rest:
        upstream.sendall(rest)
    join(client, upstream)


def main(argv: Sequence[str]) -> int:
    """Entry point: ``python -m devcluster.relay MODE ARGS`` (see the module docstring)."""
    mode, *args = argv
    if mode == "tcp-to-unix":
        host, port, path = args
        listener = socket.create_server((host, int(port)))

        def to_unix() -> socket.socket:
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(path)
            return upstream

        _serve(listener, _forward(to_unix))
    elif mode == "unix-to-tcp":
        path, host, port = args
        _serve(_unix_listener(path), _forward(lambda: socket.create_connection((host, int(port)))))
    elif mode == "connect-proxy":
        (path,) = args
        _serve(_unix_listener(path), _connect_proxy)
    else:
        print(f"devcluster.relay: unknown mode {mode!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
