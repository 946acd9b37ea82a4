"""The retry policy of sweeper.k8s.transport, through a fake Send and a fake stop (no HTTP).

What the real apiserver does with these requests is the e2e tier's (tests/e2e/test_faults_*):
here every answer, every lost connection and every second of the run is scripted.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from sweeper.config import Timing
from sweeper.core.errors import (
    ApiError,
    Conflict,
    Gone,
    Interrupted,
    NotFound,
    RequestRef,
    RunTimeout,
)
from sweeper.core.model import JSON
from sweeper.k8s.transport import NoResponse, Response, RetryPolicy, Transport
from sweeper.watch.elector import Elector, Lease, Record

REF = RequestRef("list", "pytorchjobs.kubeflow.org", "team-a")
OK = Response(200, b'{"items": []}', "Wed, 01 May 2024 12:00:00 GMT")
REFUSED = NoResponse("connection refused", retryable=True)
TLS = NoResponse("certificate verify failed", retryable=False)


def answer(status: int, retry_after: str | None = None, message: str = "") -> Response:
    body = json.dumps({"kind": "Status", "message": message}).encode() if message else b""
    return Response(status, body, None, retry_after)


@dataclass
class FakeStop:
    """The run's stop, on a clock that moves only when waited on (or by a slow send)."""

    left: float = 30.0
    signal_at_wait: int | None = None
    waits: list[float] = field(default_factory=list)
    window: float = math.inf  # no Lease fences the writes, as in a one-shot run

    def remaining(self) -> float:
        return self.left

    def write_window(self) -> float:
        return self.window

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        if self.signal_at_wait is not None and len(self.waits) >= self.signal_at_wait:
            return True
        self.left -= seconds
        return False


@dataclass
class Sent:
    method: str
    path: str
    headers: dict[str, str]
    body: JSON | None
    timeout: float


@dataclass
class FakeSend:
    """Answers in script order; each answer may take some of the run's time."""

    stop: FakeStop
    script: list[Response | NoResponse]
    takes: float = 0.0
    sent: list[Sent] = field(default_factory=list)

    def __call__(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        *,
        body: JSON | None,
        timeout: float,
    ) -> Response:
        self.sent.append(Sent(method, path, headers, body, timeout))
        self.stop.left -= self.takes
        outcome = self.script.pop(0)
        if isinstance(outcome, NoResponse):
            raise outcome
        return outcome


def transport(
    *script: Response | NoResponse,
    left: float = 30.0,
    takes: float = 0.0,
    signal_at_wait: int | None = None,
) -> tuple[Transport, FakeSend, FakeStop]:
    stop = FakeStop(left, signal_at_wait)
    send = FakeSend(stop, list(script), takes)
    # The largest jitter: each backoff is its full step (0.25, 0.5, 1.0...).
    return Transport(send, stop, request_timeout=10.0, jitter=lambda _low, high: high), send, stop


# --- what is retried, and how long it waits -----------------------------------------------------

RECOVERIES = [
    pytest.param([OK], [], id="a-success-is-returned-at-once"),
    pytest.param([answer(503), OK], [0.25], id="503-then-success-backs-off-once"),
    pytest.param(
        [answer(500), answer(502), answer(504), OK],
        [0.25, 0.5, 1.0],
        id="the-backoff-doubles-each-retry",
    ),
    pytest.param([answer(429, "3"), OK], [3.0], id="429-waits-its-retry-after"),
    pytest.param([answer(503, "60"), OK], [10.0], id="a-long-retry-after-is-capped"),
    pytest.param([answer(429, "0"), OK], [0.0], id="retry-after-zero-retries-at-once"),
    pytest.param(
        [answer(503, "Wed, 21 Oct 2015 07:28:00 GMT"), OK],
        [0.25],
        id="a-retry-after-date-backs-off-as-usual",
    ),
    pytest.param([REFUSED, REFUSED, OK], [0.25, 0.5], id="lost-connections-are-retried"),
]


@pytest.mark.parametrize(("script", "waits"), RECOVERIES)
def test_what_may_heal_is_retried_after_its_wait(
    script: list[Response | NoResponse], waits: list[float]
) -> None:
    sender, send, stop = transport(*script)

    assert sender.request("GET", "/apis/x", REF) is OK
    assert stop.waits == waits
    assert len(send.sent) == len(waits) + 1


FAILURES = [
    pytest.param([answer(503)] * 4, ApiError, 503, 4, id="four-503s-give-up"),
    pytest.param([REFUSED] * 4, ApiError, None, 4, id="four-lost-connections-give-up"),
    pytest.param([TLS], ApiError, None, 1, id="a-tls-failure-is-not-retried"),
    pytest.param([answer(403)], ApiError, 403, 1, id="403-is-not-retried"),
    pytest.param([answer(404)], NotFound, 404, 1, id="404-is-not-found"),
    pytest.param([answer(409)], Conflict, 409, 1, id="409-is-a-conflict"),
    pytest.param([answer(410)], Gone, 410, 1, id="410-is-gone"),
    pytest.param([answer(422)], ApiError, 422, 1, id="422-is-not-retried"),
]


@pytest.mark.parametrize(("script", "error", "status", "attempts"), FAILURES)
def test_what_fails_for_good_raises_the_most_specific_error(
    script: list[Response | NoResponse],
    error: type[ApiError],
    status: int | None,
    attempts: int,
) -> None:
    sender, send, _stop = transport(*script)

    with pytest.raises(error) as raised:
        sender.request("GET", "/apis/x", REF)

    assert type(raised.value) is error
    assert (raised.value.request, raised.value.status) == (REF, status)
    assert len(send.sent) == attempts


def test_the_error_carries_the_servers_message_or_the_connection_failure() -> None:
    sender, _send, _stop = transport(*[answer(500, message="etcd:\n  leader changed")] * 4)
    with pytest.raises(ApiError, match=r"internal server error \(500\): etcd: leader changed"):
        sender.request("GET", "/apis/x", REF)

    sender, _send, _stop = transport(TLS)
    with pytest.raises(ApiError, match="certificate verify failed") as raised:
        sender.request("GET", "/apis/x", REF)
    assert raised.value.__cause__ is TLS


def test_a_404_is_an_answer_when_missing_is_fine() -> None:
    sender, _send, _stop = transport(answer(404))
    assert sender.request("GET", "/apis/kubeflow.org", REF, missing_ok=True).status == 404


def test_a_body_that_is_not_json_is_quoted_on_one_line() -> None:
    sender, _send, _stop = transport(Response(400, b"<html>\n bad  gateway\n</html>"))
    with pytest.raises(ApiError, match="<html> bad gateway </html>"):
        sender.request("GET", "/apis/x", REF)


# --- the run's --timeout and signals --------------------------------------------------------


def test_no_request_starts_once_the_timeout_has_passed() -> None:
    sender, send, _stop = transport(OK, left=0.0)
    with pytest.raises(RunTimeout, match="--timeout reached before list pytorchjobs"):
        sender.request("GET", "/apis/x", REF)
    assert send.sent == []


def test_each_attempt_is_bounded_by_the_time_left() -> None:
    sender, send, _stop = transport(answer(503, "1"), OK, left=4.0)
    sender.request("GET", "/apis/x", REF)
    assert [s.timeout for s in send.sent] == [4.0, 3.0]


def test_a_wait_never_outlasts_the_timeout_and_then_the_run_times_out() -> None:
    sender, send, stop = transport(answer(429, "8"), OK, left=2.0)
    with pytest.raises(RunTimeout):
        sender.request("GET", "/apis/x", REF)
    assert (stop.waits, len(send.sent)) == ([2.0], 1)


def test_a_connection_lost_after_the_timeout_is_a_timeout_not_an_api_error() -> None:
    sender, _send, _stop = transport(REFUSED, left=5.0, takes=5.0)
    with pytest.raises(RunTimeout) as raised:
        sender.request("GET", "/apis/x", REF)
    assert raised.value.__cause__ is REFUSED


def test_a_signal_during_a_wait_interrupts_the_request() -> None:
    sender, send, _stop = transport(answer(503), OK, signal_at_wait=1)
    with pytest.raises(Interrupted, match="interrupted while retrying to list pytorchjobs"):
        sender.request("GET", "/apis/x", REF)
    assert len(send.sent) == 1


def test_the_policy_is_a_value() -> None:
    policy = RetryPolicy(attempts=2, retryable=frozenset({503}))
    sender = Transport(
        FakeSend(FakeStop(), [answer(503), answer(503), OK]),
        FakeStop(),
        request_timeout=1.0,
        policy=policy,
    )
    with pytest.raises(ApiError):
        sender.request("GET", "/apis/x", REF)


def test_the_jitter_keeps_at_least_half_the_step() -> None:
    policy = RetryPolicy()
    assert [policy.backoff(n, lambda _low, _high: 0.0) for n in (1, 2, 3, 4, 5, 6, 7)] == [
        0.125,
        0.25,
        0.5,
        1.0,
        2.0,
        2.0,
        2.0,
    ]


# --- the request itself ---------------------------------------------------------------------


def test_the_query_is_encoded_once_with_dry_run_last_and_headers_set() -> None:
    sender, send, _stop = transport(OK)
    sender.request(
        "PATCH",
        "/apis/kubeflow.org/v1/namespaces/a/pytorchjobs/b",
        REF,
        query=[("limit", "5"), ("labelSelector", "team=a,tier in (gpu)")],
        body={"metadata": {}},
        content_type="application/merge-patch+json",
        dry_run=True,
    )
    [sent] = send.sent
    assert sent.path == (
        "/apis/kubeflow.org/v1/namespaces/a/pytorchjobs/b"
        "?limit=5&labelSelector=team%3Da%2Ctier%20in%20%28gpu%29&dryRun=All"
    )
    assert sent.headers == {
        "Accept": "application/json",
        "Content-Type": "application/merge-patch+json",
    }
    assert (sent.method, sent.body) == ("PATCH", {"metadata": {}})


def test_a_request_without_query_or_body_sends_the_bare_path() -> None:
    sender, send, _stop = transport(OK)
    sender.request("GET", "/apis", REF)
    assert (send.sent[0].path, send.sent[0].headers) == ("/apis", {"Accept": "application/json"})


# --- writes under the Lease (--watch with leader election) ----------------------------------

PATCH = RequestRef("patch", "pytorchjobs.kubeflow.org/status", "team-a", "train")
TIMING = Timing(lease_duration=15, renew_deadline=10, retry_period=2)


@dataclass
class LeaderClock:
    """The watch's stop on a monotonic clock the test drives; the real Elector answers.

    No ``--timeout`` (watch mode); a wait moves the clock by its length.
    """

    elector: Elector
    now: float = 0.0
    waits: list[float] = field(default_factory=list)

    def remaining(self) -> float:
        return math.inf

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return False

    def write_window(self) -> float:
        return self.elector.write_window(self.now)


@dataclass
class HangingSend:
    """Every attempt hangs until its timeout (the clock moves by it), then fails retryably."""

    clock: LeaderClock
    attempts: list[tuple[float, float, bool]] = field(default_factory=list)  # (at, timeout, led)

    def __call__(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        *,
        body: JSON | None,
        timeout: float,
    ) -> Response:
        clock = self.clock
        self.attempts.append((clock.now, timeout, clock.elector.leading(clock.now)))
        clock.now += timeout
        raise NoResponse("read timed out", retryable=True)


def renewed_at(sent: float) -> Elector:
    elector = Elector("a", TIMING)
    wall = datetime(2031, 1, 1, tzinfo=UTC)
    elector.succeeded(Lease(Record("a", 15, wall, wall, 0), "1"), sent=sent, now=sent + 0.1)
    return elector


def test_a_write_is_never_retried_after_the_renew_deadline_nor_in_flight_past_the_lease() -> None:
    # The review's C7: renewed at t=0 (lease 15 s, renew deadline 10 s), a status write checked
    # at t=9 whose attempts time out. A follower may take the Lease from t=15.
    clock = LeaderClock(renewed_at(0.0), now=9.0)
    send = HangingSend(clock)
    sender = Transport(send, clock, request_timeout=10.0, jitter=lambda _low, high: high)

    with pytest.raises(Interrupted, match="no longer the leader: patch pytorchjobs"):
        sender.request("PATCH", "/apis/x", PATCH, body={})

    # One attempt, sent while leading, cut to end at t=15; no retry once the deadline passed.
    assert send.attempts == [(9.0, 6.0, True)]


def test_each_write_attempt_asks_again_and_may_go_on_while_the_leader_renews() -> None:
    clock = LeaderClock(renewed_at(0.0), now=1.0)
    send = HangingSend(clock)
    sender = Transport(send, clock, request_timeout=4.0, jitter=lambda _low, high: high)

    with pytest.raises(Interrupted):
        sender.request("PATCH", "/apis/x", PATCH, body={})

    # 1 -> 5, wait 0.25, 5.25 -> 9.25, wait 0.5, 9.75 -> 13.75 (cut at 15 - 9.75 = 5.25 > 4):
    # three attempts, each sent before the renew deadline (t=10), the fourth never.
    assert [(at, timeout) for at, timeout, _led in send.attempts] == [
        (1.0, 4.0),
        (5.25, 4.0),
        (9.75, 4.0),
    ]
    assert all(led for _at, _timeout, led in send.attempts)


def test_no_write_is_sent_by_a_replica_that_does_not_lead() -> None:
    sender, send, stop = transport(OK)
    stop.window = 0.0
    with pytest.raises(Interrupted, match="not sent"):
        sender.request("DELETE", "/api/v1/namespaces/a/pods/p", PATCH)
    assert send.sent == []


def test_reads_and_the_leases_own_writes_are_not_fenced() -> None:
    # A follower reads (its view stays warm) and writes the Lease (to take it).
    sender, send, stop = transport(OK)
    stop.window = 0.0
    assert sender.request("GET", "/apis/x", REF) is OK

    stop = FakeStop(window=0.0)
    send = FakeSend(stop, [OK])
    lease = Transport(send, stop, request_timeout=10.0, fenced=False)
    assert lease.request("PUT", "/apis/coordination.k8s.io/v1/x", REF, body={}) is OK
    assert [s.timeout for s in send.sent] == [10.0]
