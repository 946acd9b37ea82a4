"""devcluster.relay: the byte relays that join the host's loopback and the node's namespace.

Run as the node runs them (``python -m devcluster.relay``), here all in the host's namespace,
against an echo server on loopback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster import binaries
from devcluster.node import NODE_BINARIES

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def echo_port() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    port: int = server.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data.upper())

    threading.Thread(target=serve, daemon=True).start()
    yield port
    server.close()


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def _start(started: list[subprocess.Popen[bytes]], *args: str, wait_for: Path | int) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    started.append(subprocess.Popen([sys.executable, "-m", "devcluster.relay", *args], env=env))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if isinstance(wait_for, Path) and wait_for.exists():
            return
        if isinstance(wait_for, int):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", wait_for)) == 0:
                    return
        time.sleep(0.05)
    pytest.fail(f"relay {args} did not listen")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_tcp_to_unix_to_tcp_carries_bytes_both_ways(
    tmp_path: Path, echo_port: int, relay: list[subprocess.Popen[bytes]]
) -> None:
    sock_path = tmp_path / "api.sock"
    front = _free_port()
    _start(relay, "unix-to-tcp", str(sock_path), "127.0.0.1", str(echo_port), wait_for=sock_path)
    _start(relay, "tcp-to-unix", "127.0.0.1", str(front), str(sock_path), wait_for=front)

    with socket.create_connection(("127.0.0.1", front), timeout=10) as client:
        client.sendall(b"hello")
        client.shutdown(socket.SHUT_WR)
        answer = b"".join(iter(lambda: client.recv(4096), b""))

    assert answer == b"HELLO"
    assert oct(sock_path.stat().st_mode & 0o777) == oct(0o600)


@pytest.mark.parametrize(
    ("request_line", "status"),
    [
        pytest.param("CONNECT 127.0.0.1:{port} HTTP/1.1", b"200", id="connect"),
        pytest.param("GET / HTTP/1.1", b"405", id="not-connect"),
        pytest.param("CONNECT 127.0.0.1:1 HTTP/1.1", b"502", id="refused"),
    ],
)
def test_connect_proxy_answers_like_an_http_connect_proxy(
    tmp_path: Path,
    echo_port: int,
    relay: list[subprocess.Popen[bytes]],
    request_line: str,
    status: bytes,
) -> None:
    sock_path = tmp_path / "egress.sock"
    _start(relay, "connect-proxy", str(sock_path), wait_for=sock_path)

    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)
        client.connect(str(sock_path))
        line = request_line.format(port=echo_port)
        # Bytes after the header go through as well (a TLS hello sent without waiting).
        client.sendall(f"{line}\r\nHost: x\r\n\r\nearly".encode())
        head = client.recv(4096)
        assert head.split()[1] == status
        if status == b"200":
            body = head.partition(b"\r\n\r\n")[2]
            while len(body) < len(b"EARLY"):
                body += client.recv(4096)
            assert body == b"EARLY"


def test_the_node_binaries_are_all_in_the_build_table() -> None:
    # devcluster.node checks these before starting; build-binaries --node must build each.
    script = binaries.BUILD_SCRIPT.read_text(encoding="utf-8")
    node_targets = script.split('node_targets="', 1)[1].split('"', 1)[0].split()

    assert set(NODE_BINARIES) <= set(binaries.targets())
    assert sorted(node_targets) == sorted(NODE_BINARIES)
