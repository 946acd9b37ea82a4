"""The probes' server of ``--watch`` (sweeper.watch.health), on a loopback port.

Binding is the one thing here that meets the operating system: a port someone else holds is a
configuration error (exit 2) naming the address and the option, never "internal error".
"""

from __future__ import annotations

import contextlib
import socket
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from sweeper.cli import Seams, command
from sweeper.config import Config
from sweeper.core.clock import SYSTEM_CLOCK
from sweeper.core.errors import EXIT_CONFIG, ConfigError
from sweeper.stop import Stop
from sweeper.watch.health import Health, serve
from tests.cli_runner import runner
from tests.unit.fakes import FakeWatchCluster
from tests.unit.loopback import needs_ipv6


class Metrics:
    content_type = "text/plain; version=0.0.4"

    def render(self) -> bytes:
        return b"deadline_sweeper_up 1\n"


@pytest.fixture
def held_port() -> Iterator[int]:
    """A loopback port another process (here: a plain socket) is listening on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


@pytest.fixture
def held_ipv6_port() -> Iterator[int]:
    """A port another process listens on at the IPv6 loopback, ``::1``."""
    with socket.socket(socket.AF_INET6) as holder:
        holder.bind(("::1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


@contextlib.contextmanager
def listening(address: str) -> Iterator[ThreadingHTTPServer]:
    """``serve`` on a free port of ``address`` for the block; the port is freed after it."""
    server = serve(address, 0, Health(streams=0, clock=SYSTEM_CLOCK), Metrics())
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def status(where: str, path: str) -> int:
    with urllib.request.urlopen(f"http://{where}{path}", timeout=2) as answer:
        return int(answer.status)


def test_a_port_in_use_is_a_configuration_error_naming_the_address_and_the_option(
    held_port: int,
) -> None:
    with pytest.raises(ConfigError) as raised:
        serve("127.0.0.1", held_port, Health(streams=1, clock=SYSTEM_CLOCK), Metrics())

    message = str(raised.value)
    assert raised.value.exit_code == EXIT_CONFIG
    assert f"127.0.0.1:{held_port}" in message
    assert "--health-port" in message
    assert "SWEEPER_HEALTH_PORT" in message
    assert "\n" not in message


def test_a_second_watch_on_the_same_port_exits_2_with_one_line_not_as_a_bug(
    held_port: int,
) -> None:
    fake = FakeWatchCluster()

    def connect(_config: Config, *, stop: Stop) -> FakeWatchCluster:
        return fake

    result = runner().invoke(
        command,
        ["--watch", "--health-address", "127.0.0.1", "--health-port", str(held_port)],
        obj=Seams(connect=connect),
        env={"SWEEPER_LOG_FORMAT": "json"},
        catch_exceptions=False,
    )

    assert result.exit_code == EXIT_CONFIG, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("sweeper: error: cannot serve /healthz, /readyz and /metrics on ")
    assert f"127.0.0.1:{held_port}" in last
    assert "--health-port" in last
    assert "Traceback" not in result.stderr
    assert fake.closed == 1


def test_the_probes_answer_and_closing_frees_the_port() -> None:
    server = serve("127.0.0.1", 0, Health(streams=0, clock=SYSTEM_CLOCK), Metrics())
    port = int(server.server_address[1])
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            assert answer.status == 200
    finally:
        server.shutdown()
        server.server_close()
    # A second sweeper (or a restarted one) may listen there at once.
    again = serve("127.0.0.1", port, Health(streams=0, clock=SYSTEM_CLOCK), Metrics())
    again.shutdown()
    again.server_close()


@needs_ipv6
def test_an_ipv6_address_listens_on_ipv6() -> None:
    with listening("::1") as server:
        host, port = server.server_address[:2]
        assert host == "::1"
        assert status(f"[::1]:{port}", "/readyz") == 200
        assert status(f"[::1]:{port}", "/metrics") == 200


@needs_ipv6
def test_an_ipv6_listener_takes_ipv4_clients_too_so_the_unspecified_address_is_dual_stack() -> None:
    # "::" itself listens on every interface, which a unit test does not: the IPv4-mapped
    # loopback binds only with IPV6_V6ONLY off (EINVAL otherwise), the setting that makes "::"
    # take IPv4 clients as Go's listeners (kubelet's, kube-proxy's) do.
    with listening("::ffff:127.0.0.1") as server:
        host, port = server.server_address[:2]
        assert host == "::ffff:127.0.0.1"  # an IPv6 socket (an IPv4 one would say 127.0.0.1)
        assert server.socket.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 0
        assert status(f"127.0.0.1:{port}", "/healthz") == 200


@needs_ipv6
def test_an_ipv6_port_in_use_is_named_in_brackets_as_a_port_in_use(held_ipv6_port: int) -> None:
    with pytest.raises(ConfigError) as raised:
        serve("::1", held_ipv6_port, Health(streams=1, clock=SYSTEM_CLOCK), Metrics())

    message = str(raised.value)
    assert message.startswith(
        f"cannot serve /healthz, /readyz and /metrics on [::1]:{held_ipv6_port}: "
    )
    assert "(another process listens there)" in message


@needs_ipv6
@pytest.mark.parametrize(
    ("args", "env"),
    [
        pytest.param(["--health-address", "[::1]"], {}, id="bracketed-flag"),
        pytest.param(["--health-address", "::1"], {}, id="bare-flag"),
        pytest.param([], {"SWEEPER_HEALTH_ADDRESS": "[::1]"}, id="bracketed-twin"),
    ],
)
def test_a_watch_on_the_ipv6_loopback_binds_there(
    held_ipv6_port: int, args: list[str], env: dict[str, str]
) -> None:
    # The bind is reached (and fails on the held port): the address was read as IPv6.
    result = runner().invoke(
        command,
        ["--watch", *args, "--health-port", str(held_ipv6_port)],
        obj=Seams(connect=lambda _config, *, stop: FakeWatchCluster()),
        env={"SWEEPER_LOG_FORMAT": "json", **env},
        catch_exceptions=False,
    )

    assert result.exit_code == EXIT_CONFIG, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    where = f"[::1]:{held_ipv6_port}"
    assert last.startswith(
        f"sweeper: error: cannot serve /healthz, /readyz and /metrics on {where}: "
    )
    assert "(another process listens there)" in last
