"""The probes of a running watcher, over loopback: /healthz, /readyz and /metrics.

/readyz waits until every stream completed its first list (its view of the jobs is whole);
/healthz says the main loop turns. The Health state itself runs on an injected clock.
"""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from sweeper.core.errors import ApiError, ConfigError, RequestRef
from sweeper.core.families import KINDS
from sweeper.watch.health import STALE_LOOP_S, Health, serve
from tests.unit.fakes import Request
from tests.unit.loopback import needs_ipv6
from tests.unit.objects import job
from tests.unit.watch.conftest import Start
from tests.unit.watch.harness import PYTORCH, Clock, fake_cluster, wait_for

TFJOB = next(kind for kind in KINDS if kind.name == "TFJob")


def test_readyz_waits_for_every_streams_first_list_healthz_does_not(start: Start) -> None:
    release = threading.Event()

    def slow_tfjob_list(request: Request) -> None:
        if request.method == "list" and request.name == "tfjobs":
            release.wait(5)

    fake = fake_cluster(job(name="train"))
    run = start(fake, kinds=(PYTORCH, TFJOB), hook=slow_tfjob_list)
    wait_for(lambda: run.requests("watch", "pytorchjobs") != [], "the first stream")

    assert run.get("/readyz") == (503, "not ready\n")
    assert run.get("/healthz") == (200, "ok\n")
    release.set()
    wait_for(lambda: run.get("/readyz")[0] == 200, "readiness")
    assert run.get("/readyz?verbose=1") == (200, "ok\n")  # a probe's query string is ignored
    run.stop()


def test_a_stream_rbac_refuses_does_not_keep_the_replica_unready(start: Start) -> None:
    # A namespace deleted with its Role, a kind outside the grant: every list of that scope is
    # 403. /readyz stayed 503 for good, so a restarted replica (a rollout) never took over
    # (issue 31, B3); the other streams' jobs are watched all the same.
    def refuse_tfjobs(request: Request) -> None:
        if request.method == "list" and request.name == "tfjobs":
            raise ApiError(RequestRef("list", "tfjobs.kubeflow.org"), 403, "forbidden by RBAC")

    run = start(fake_cluster(job(name="train")), kinds=(PYTORCH, TFJOB), hook=refuse_tfjobs)

    wait_for(lambda: run.get("/readyz")[0] == 200, "readiness without the refused stream")
    assert run.requests("list", "tfjobs") != []
    run.stop()


def test_metrics_are_served_in_the_text_format_and_unknown_paths_are_404(start: Start) -> None:
    run = start(fake_cluster(job(name="a", started_ago=0))).listed()
    names = (
        "deadline_sweeper_tracked_jobs",
        "deadline_sweeper_overdue_jobs",
        "deadline_sweeper_leader",
        "deadline_sweeper_watch_relists_total",
        "deadline_sweeper_clock_offset_seconds",
    )

    def unexposed() -> list[str]:
        status, body = run.get("/metrics")
        assert status == 200
        return [name for name in names if not (f"\n{name}" in body or body.startswith(name))]

    # The per-kind gauges get their samples on the loop's first turn after the lists, which
    # can come a moment after the streams are open.
    wait_for(lambda: not unexposed(), "a sample of every watch metric")
    wait_for(lambda: run.metric("deadline_sweeper_tracked_jobs") == 1, "the timer")
    # The server clock was seen (list and watch answers): the offset has both bounds.
    assert run.metric("deadline_sweeper_clock_offset_seconds", bound="low") < 0
    assert run.get("/nope") == (404, "not found\n")
    run.stop()


def test_the_probes_stop_listening_when_the_watcher_stops(start: Start) -> None:
    run = start(fake_cluster()).listed()
    run.stop()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", run.port), timeout=1):
        pass


@needs_ipv6
def test_a_watcher_on_the_ipv6_loopback_serves_there_and_logs_the_address_in_brackets(
    start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sweeper.watch.engine")
    run = start(fake_cluster(job(name="a", started_ago=0)), health_address="::1").listed()

    assert run.get("/readyz") == (200, "ok\n")
    assert f"serving /healthz, /readyz and /metrics on [::1]:{run.port}" in caplog.messages
    run.stop()


def test_liveness_fails_once_the_loop_has_not_turned_for_the_stale_limit() -> None:
    clock = Clock(0.0)
    health = Health(streams=0, clock=clock)
    assert health.alive
    clock.at = STALE_LOOP_S - 0.001
    assert health.alive
    clock.at = STALE_LOOP_S
    assert not health.alive
    health.beat()
    assert health.alive


def test_readiness_counts_distinct_streams_against_the_expected_number() -> None:
    health = Health(streams=1, clock=Clock())
    health.expect(2)
    health.listed("a")
    health.listed("a")  # a relist of the same stream counts once
    assert not health.ready
    health.listed("b")
    assert health.ready


def test_an_address_not_on_this_host_is_a_configuration_error_naming_both_options() -> None:
    # TEST-NET-3: never assigned to a local interface, so the bind fails (no packet is sent).
    with pytest.raises(ConfigError) as raised:
        serve("203.0.113.7", 0, Health(streams=0, clock=Clock()), _Metrics())
    message = str(raised.value)
    assert message.startswith("cannot serve /healthz, /readyz and /metrics on 203.0.113.7:0: ")
    assert "--health-address/SWEEPER_HEALTH_ADDRESS" in message
    assert "another process" not in message


class _Metrics:
    content_type = "text/plain; version=0.0.4"

    def render(self) -> bytes:
        return b""
