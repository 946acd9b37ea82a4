"""The probes' server of ``--watch`` (sweeper.watch.health), on a loopback port.

Binding is the one thing here that meets the operating system: a port someone else holds is a
configuration error (exit 2) naming the address and the option, never "internal error".
"""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator

import pytest

from sweeper.cli import Seams, command
from sweeper.config import Config
from sweeper.core.errors import EXIT_CONFIG, ConfigError
from sweeper.stop import StopFlag
from sweeper.watch.health import Health, serve
from tests.cli_runner import runner
from tests.unit.fakes import FakeWatchCluster


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


def test_a_port_in_use_is_a_configuration_error_naming_the_address_and_the_option(
    held_port: int,
) -> None:
    with pytest.raises(ConfigError) as raised:
        serve("127.0.0.1", held_port, Health(streams=1), Metrics())

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

    def connect(_config: Config, *, stop: StopFlag) -> FakeWatchCluster:
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
    server = serve("127.0.0.1", 0, Health(streams=0), Metrics())
    port = int(server.server_address[1])
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            assert answer.status == 200
    finally:
        server.shutdown()
        server.server_close()
    # A second sweeper (or a restarted one) may listen there at once.
    again = serve("127.0.0.1", port, Health(streams=0), Metrics())
    again.shutdown()
    again.server_close()
