"""The one request path to the API server: bounded retries, ``Retry-After``, backoff, errors.

No HTTP library here: a ``Send`` puts one request on the wire (``sweeper.k8s.connection.client``
over urllib3, unit tests a fake). ``Transport`` decides everything around it: the retries
(docs/decisions.md, "Failures and limits"), each attempt bounded by ``--request-timeout`` and
the run's one stop, a write's by the stop's write window (under leader election, never once
this replica no longer leads), and the most specific ``ApiError`` for an answer that failed.
"""

from __future__ import annotations

import json
import logging
import random
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Protocol

from sweeper.core.errors import Interrupted, RequestRef, RunTimeout, api_error
from sweeper.core.model import JSON

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Response:
    """An HTTP answer, whatever its status; ``date`` is the API server's clock, if it sent one."""

    status: int
    data: bytes
    date: str | None = None
    retry_after: str | None = None


class NoResponse(Exception):  # noqa: N818 - a state: no HTTP answer came back
    """No answer came back (connection refused, reset, timed out, TLS: not ``retryable``)."""

    def __init__(self, detail: str, *, retryable: bool) -> None:
        super().__init__(detail)
        self.detail = detail
        self.retryable = retryable


class Send(Protocol):
    """Sends one request; raises ``NoResponse`` when no answer comes back."""

    def __call__(
        self, method: str, path: str, headers: dict[str, str], *, body: JSON | None, timeout: float
    ) -> Response:
        """Send it: ``path`` carries the encoded query; ``timeout`` bounds connect and read."""


class StopSignal(Protocol):
    """What the transport asks of the run's one stop (``sweeper.stop.Stop``)."""

    def remaining(self) -> float:
        """Seconds left before ``--timeout``, on the run's clock (negative once past)."""

    def wait(self, seconds: float) -> bool:
        """Sleep, unless a signal asks the run to stop; ``True`` when one did."""

    def write_window(self) -> float:
        """Seconds a write sent now may stay in flight; 0 or less: send none (not the leader)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Which answers are retried, how often (``attempts`` counts the first), how long apart."""

    attempts: int = 4
    retryable: frozenset[int] = frozenset({429, 500, 502, 503, 504})
    backoff_base_s: float = 0.25
    backoff_cap_s: float = 4.0
    retry_after_cap_s: float = 10.0

    def backoff(self, attempt: int, jitter: Callable[[float, float], float]) -> float:
        """The wait after failed attempt ``attempt`` (from 1): "equal jitter", never under half."""
        ceiling = min(self.backoff_cap_s, self.backoff_base_s * 2 ** (attempt - 1))
        return float(ceiling / 2 + jitter(0, ceiling / 2))

    def delay(
        self, response: Response, attempt: int, jitter: Callable[[float, float], float]
    ) -> float:
        """The wait after an answer to retry: its ``Retry-After`` in seconds, else backoff."""
        if response.retry_after:
            try:
                asked = float(response.retry_after)
            except ValueError:
                asked = -1.0  # an HTTP date: rare from kube-apiserver; back off as usual
            if asked >= 0:
                return min(asked, self.retry_after_cap_s)
        return self.backoff(attempt, jitter)


class Transport:
    """Sends requests through a ``Send`` under the retry policy and the run's stop.

    ``fenced``: writes within the stop's write window (not the Lease's: how one leads).
    """

    def __init__(
        self,
        send: Send,
        stop: StopSignal,
        *,
        request_timeout: float,
        policy: RetryPolicy | None = None,
        jitter: Callable[[float, float], float] = random.uniform,
        fenced: bool = True,
    ) -> None:
        self._send = send
        self._fenced = fenced
        self._stop = stop
        self._request_timeout = request_timeout
        self._policy = policy or RetryPolicy()
        self._jitter = jitter

    def request(
        self,
        method: str,
        path: str,
        ref: RequestRef,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: JSON | None = None,
        content_type: str | None = None,
        dry_run: bool = False,
        missing_ok: bool = False,
    ) -> Response:
        """Send one request, retrying what may heal; with ``missing_ok`` a 404 is an answer.

        ``ApiError`` (failed for good), ``RunTimeout``, ``Interrupted`` (a signal, no window).
        """
        pairs = [*query, ("dryRun", "All")] if dry_run else list(query)
        encoded = urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)
        resource_path = f"{path}?{encoded}" if encoded else path
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        fenced = self._fenced and method != "GET"
        attempt = 0
        while True:
            attempt += 1
            remaining = self._stop.remaining()
            if remaining <= 0:
                raise RunTimeout(_timeout_message(ref))
            budget = min(self._request_timeout, remaining)
            if fenced:
                # Asked before every attempt, not once per request: a retry must not be sent
                # after the renew deadline, when another replica may soon lead.
                window = self._stop.write_window()
                if window <= 0:
                    raise Interrupted(f"no longer the leader: {ref.describe()} not sent")
                budget = min(budget, window)
            try:
                response = self._send(
                    method, resource_path, dict(headers), body=body, timeout=budget
                )
            except NoResponse as failure:
                if self._stop.remaining() <= 0:
                    raise RunTimeout(_timeout_message(ref)) from failure
                if failure.retryable and attempt < self._policy.attempts:
                    delay = self._policy.backoff(attempt, self._jitter)
                    # A server that accepts and never answers would otherwise be silent for
                    # attempts x --request-timeout: each silent attempt says so as it ends.
                    log.warning(
                        "no answer to %s: %s; trying again (attempt %d of %d)",
                        ref.describe(),
                        failure.detail,
                        attempt + 1,
                        self._policy.attempts,
                        extra={"attempt": attempt, "request": ref.describe()},
                    )
                    self._wait(delay, ref)
                    continue
                raise api_error(ref, None, failure.detail) from failure
            if succeeded(response.status) or (
                missing_ok and response.status == HTTPStatus.NOT_FOUND
            ):
                return response
            if response.status in self._policy.retryable and attempt < self._policy.attempts:
                self._wait(self._policy.delay(response, attempt, self._jitter), ref)
                continue
            raise api_error(ref, response.status, status_message(response.data))

    def _wait(self, delay: float, ref: RequestRef) -> None:
        delay = min(delay, max(self._stop.remaining(), 0.0))
        log.debug("retrying %s %s in %.2fs", ref.verb, ref.resource, delay)
        if self._stop.wait(delay):
            raise Interrupted(f"interrupted while retrying to {ref.verb} {ref.resource}")


def succeeded(status: int) -> bool:
    """Whether a status is a 2xx."""
    return HTTPStatus.OK <= status < HTTPStatus.MULTIPLE_CHOICES


def status_message(data: bytes) -> str:
    """The ``message`` of a Kubernetes ``Status`` body, else the start of the body, one line."""
    try:
        document = json.loads(data) if data else {}
    except (ValueError, RecursionError):  # not a Status: an HTML error page, or deeply nested
        return one_line(data.decode("utf-8", "replace"))[:200]
    message = document.get("message") if isinstance(document, dict) else None
    return one_line(str(message)) if message else ""


def one_line(value: object) -> str:
    """Any text on one line, its runs of white space folded."""
    return " ".join(str(value).split())


def _timeout_message(ref: RequestRef) -> str:
    return f"--timeout reached before {ref.verb} {ref.resource} could complete"
