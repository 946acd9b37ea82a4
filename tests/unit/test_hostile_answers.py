"""Hostile answers at the ``Send`` boundary: whatever the server says, exit 3 or a per-job error.

An auth proxy's HTML sign-in page, a truncated body, JSON of another shape, arbitrary bytes or
a huge body, with any status, to any request the sweeper makes: the run never exits 70 and
never prints a traceback (issue 19, item 9 and "Hostile answers"). The real ``KubeCluster``
and ``Transport`` run behind the real CLI; only the wire is replaced, by :class:`Server`, a
kube-apiserver of two overdue jobs (one with a Running pod) that answers one chosen request
with the hostile answer Hypothesis built. Watch mode's own requests (the Lease, the watch
stream) are driven through ``KubeCluster`` directly: they may only answer or raise ApiError.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from sweeper.cli import Seams, command
from sweeper.config import Config
from sweeper.core.clock import SYSTEM_CLOCK
from sweeper.core.errors import ApiError
from sweeper.core.model import JSON
from sweeper.k8s import kube
from sweeper.k8s.cluster import ServedKind
from sweeper.k8s.transport import Response, RetryPolicy, Transport
from sweeper.stop import Stop
from tests.cli_runner import runner
from tests.unit.objects import NOW, job, owned

DATE = NOW.strftime("%a, %d %b %Y %H:%M:%S GMT")
ENDPOINT = 'server https://hostile.invalid, context "hostile"'
# No waiting between retries: a 503 is retried at once, so an example costs no sleep.
NO_WAIT = RetryPolicy(backoff_base_s=0.0, backoff_cap_s=0.0, retry_after_cap_s=0.0)
NAMESPACE = "team-a"
JOBS = ("train-a", "train-b")

# --- the server -----------------------------------------------------------------------------------

# What each request is, by method and path (the classes the sweeper sends).
ROUTES = [
    ("discover-group", "GET", r"^/apis/(trainer\.)?kubeflow\.org$"),
    ("discover-resources", "GET", r"^/apis/kubeflow\.org/v1$"),
    ("list-jobs", "GET", r"^/apis/kubeflow\.org/v1(/namespaces/[^/]+)?/pytorchjobs$"),
    ("get-job", "GET", r"/pytorchjobs/[^/]+$"),
    ("patch-job", "PATCH", r"/pytorchjobs/[^/]+$"),
    ("patch-status", "PATCH", r"/pytorchjobs/[^/]+/status$"),
    ("list-pods", "GET", r"^/api/v1/namespaces/[^/]+/pods$"),
    ("list-all-pods", "GET", r"^/api/v1/pods$"),
    ("list-services", "GET", r"^/api/v1/namespaces/[^/]+/services$"),
    ("delete-pod", "DELETE", r"^/api/v1/namespaces/[^/]+/pods/[^/]+$"),
    ("delete-service", "DELETE", r"^/api/v1/namespaces/[^/]+/services/[^/]+$"),
    ("create-event", "POST", r"^/api/v1/namespaces/[^/]+/events$"),
    ("get-lease", "GET", r"/leases/[^/]+$"),
    ("create-lease", "POST", r"/leases$"),
    ("update-lease", "PUT", r"/leases/[^/]+$"),
]
# Requests about one job: a hostile answer to one of them is that job's error alone.
PER_JOB = {
    "get-job",
    "patch-job",
    "patch-status",
    "list-pods",
    "list-services",
    "delete-pod",
    "delete-service",
    "create-event",
}


def route(method: str, path: str) -> str:
    for name, verb, pattern in ROUTES:
        if method == verb and re.search(pattern, path):
            return name
    raise AssertionError(f"unexpected request {method} {path}")


@dataclass(frozen=True)
class Hostile:
    """One answer in the API server's place: a status and a body made from the good one."""

    status: int
    body: bytes | None = None  # None: the good body, cut to ``cut`` bytes
    cut: float = 1.0
    retry_after: str | None = None

    def answer(self, good: bytes) -> Response:
        data = self.body if self.body is not None else good[: int(len(good) * self.cut)]
        return Response(self.status, data, DATE, self.retry_after)


@dataclass
class Server:
    """A kube-apiserver of two overdue PyTorchJobs, one answer of which is hostile.

    Attributes:
        target: The request class that gets the hostile answer.
        about: For a per-job request, the job it must be about (the other job's requests are
            answered well, so the test can see that job still handled).
        hostile: The answer.
        nth: Which matching request gets it (later ones are answered well again).
    """

    target: str
    hostile: Hostile
    about: str = JOBS[0]
    nth: int = 1
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    _matched: int = 0

    def __call__(
        self, method: str, path: str, headers: dict[str, str], *, body: JSON | None, timeout: float
    ) -> Response:
        bare = urllib.parse.urlsplit(path).path
        name = route(method, bare)
        self.seen.append((name, method, path))
        good = json.dumps(self.good(name, urllib.parse.unquote(path), body)).encode()
        if name == self.target and (name not in PER_JOB or self.about in path):
            self._matched += 1
            if self._matched == self.nth:
                return self.hostile.answer(good)
        return Response(201 if method == "POST" else 200, good, DATE)

    def good(self, name: str, path: str, body: JSON | None) -> Any:  # noqa: PLR0911 - a table
        jobs = {n: job(name=n, namespace=NAMESPACE, uid=f"uid-{n}") for n in JOBS}
        if name == "discover-group":
            return {"kind": "APIGroup", "versions": [{"version": "v1"}]}
        if name == "discover-resources":
            return {"kind": "APIResourceList", "resources": [{"name": "pytorchjobs"}]}
        if name == "list-jobs":
            return {"items": list(jobs.values()), "metadata": {"resourceVersion": "7"}}
        if name in ("get-job", "patch-job", "patch-status"):
            name_and_rest = path.split("/pytorchjobs/", maxsplit=1)[1]
            return jobs[re.split(r"[/?]", name_and_rest, maxsplit=1)[0]]
        if name == "list-pods":
            pods = [owned(f"{n}-worker-0", j) for n, j in jobs.items() if f"={n}" in path]
            return {"items": pods, "metadata": {}}
        if name == "list-all-pods":
            return {"items": [owned(f"{n}-worker-0", j) for n, j in jobs.items()], "metadata": {}}
        if name == "list-services":
            return {"items": [], "metadata": {}}
        if name in ("delete-pod", "delete-service"):
            return {"kind": "Status", "status": "Success"}
        if name == "create-event":
            return {**(body or {}), "metadata": {"name": "e", "uid": "uid-e"}}
        return {"kind": "Lease", "metadata": {"name": "l", "uid": "uid-l", "resourceVersion": "1"}}


# --- hostile answers ------------------------------------------------------------------------------

SIGN_IN = (
    b"<!DOCTYPE html><html><head><title>Sign in</title></head>"
    b'<body><form action="/oauth2/start">Sign in with your identity provider</form></body></html>'
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
bodies = st.one_of(
    st.just(SIGN_IN),
    st.binary(max_size=64),
    st.just(b""),
    json_values.map(lambda v: json.dumps(v).encode()),
    # Shapes near the real ones: a List whose fields hold anything.
    st.builds(
        lambda items, meta: json.dumps({"items": items, "metadata": meta}).encode(),
        json_values,
        json_values,
    ),
    # Huge: deeply nested (past json's recursion limit), or megabytes of a page.
    st.just(b"[" * 100_000),
    st.just(b'{"items": [' + b'{"a": 1},' * 200_000 + b"{}]}"),
    st.just(b"<html>" + b"x" * 3_000_000),
)
statuses = st.one_of(
    st.sampled_from([200, 201, 203, 204, 206, 301, 302, 400, 401, 403, 404, 409, 410, 422]),
    st.sampled_from([429, 500, 502, 503, 504]),
    st.integers(100, 599),
)
hostile_answers = st.one_of(
    st.builds(Hostile, statuses, bodies),
    # Truncated: the good answer cut anywhere, with a success status.
    st.builds(Hostile, st.just(200), st.none(), st.floats(0.0, 0.999)),
    st.builds(
        Hostile,
        statuses,
        bodies,
        retry_after=st.one_of(st.text(max_size=6), st.sampled_from(["1", "-1", "nan", "1e999"])),
    ),
)
PASS_TARGETS = [name for name, _, _ in ROUTES if "lease" not in name]
MODES = {
    "touch": ["--action", "touch"],
    "fail": ["--action", "fail", "--terminate-pods", "all"],
    "auto": ["--action", "auto", "--escalate-after", "0"],
    "server-dry-run": ["--action", "fail", "--dry-run=server"],
}


def run(server: Server, *args: str) -> Any:
    def connect(config: Config, *, stop: Stop) -> kube.KubeCluster:
        return kube.KubeCluster(
            Transport(server, stop, request_timeout=config.request_timeout, policy=NO_WAIT),
            endpoint=ENDPOINT,
        )

    return runner().invoke(
        command,
        ["-o", "json", "--log-format", "json", *args],
        obj=Seams(connect=connect),
        env={"KUBECONFIG": None},
        catch_exceptions=False,
    )


def passes(stdout: str) -> Iterator[dict[str, Any]]:
    decoder = json.JSONDecoder()
    text = stdout.strip()
    while text:
        document, end = decoder.raw_decode(text)
        yield document
        text = text[end:].strip()


HOSTILE = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


@HOSTILE
@given(
    target=st.sampled_from(PASS_TARGETS),
    hostile=hostile_answers,
    nth=st.integers(1, 2),
    mode=st.sampled_from(sorted(MODES)),
)
def test_a_pass_ends_in_exit_3_or_a_per_job_error_whatever_one_answer_holds(
    target: str, hostile: Hostile, nth: int, mode: str
) -> None:
    server = Server(target, hostile, nth=nth)

    result = run(server, *MODES[mode])

    note(f"exit {result.exit_code}; stderr: {result.stderr[-600:]}")
    assert result.exit_code in (0, 1, 3)
    assert "Traceback" not in result.stderr
    assert "internal error" not in result.stderr
    (report,) = passes(result.stdout)  # the pass is reported, whatever stopped it
    if result.exit_code == 3:
        assert target not in PER_JOB, "a job's own request stopped the pass"
        assert result.stderr.splitlines()[-1].endswith(f"({ENDPOINT})")
    if target in PER_JOB:
        # The other job is handled as if nothing happened.
        other = next(j for j in report["jobs"] if j["name"] == JOBS[1])
        assert other["result"] in ("done", "dry-run"), other


@HOSTILE
@given(
    target=st.sampled_from(["discover-group", "discover-resources", "get-job", "list-jobs"]),
    hostile=hostile_answers,
    selector=st.booleans(),
)
def test_explain_ends_in_exit_3_or_a_usage_error_whatever_one_answer_holds(
    target: str, hostile: Hostile, selector: bool
) -> None:
    server = Server(target, hostile)

    result = run(
        server, "--explain", f"{NAMESPACE}/{JOBS[0]}", *(["-l", "a=b"] if selector else [])
    )

    note(f"exit {result.exit_code}; stderr: {result.stderr[-600:]}")
    assert "Traceback" not in result.stderr
    # 2: a 404 (or an empty discovery) means "no such job", as for a job that is not there.
    assert result.exit_code in (0, 2, 3)
    if result.exit_code == 3:
        assert result.stderr.splitlines()[-1].endswith(f"({ENDPOINT})")


@pytest.mark.parametrize("target", ["discover-group", "discover-resources"])
def test_watch_mode_exits_3_naming_the_server_when_discovery_is_garbled(target: str) -> None:
    result = run(
        Server(target, Hostile(200, SIGN_IN)),
        "--watch",
        "--dry-run",
        "--no-leader-elect",
        "--health-port",
        "0",
    )

    assert result.exit_code == 3, result.stderr
    last = result.stderr.splitlines()[-1]
    assert "undecodable answer" in last
    assert last.endswith(f"({ENDPOINT})")


# --- watch mode's requests: the Lease and the streams ---------------------------------------------


def lone_cluster(server: Server) -> kube.KubeCluster:
    stop = Stop(SYSTEM_CLOCK)
    transport = Transport(server, stop, request_timeout=10.0, policy=NO_WAIT)
    stream: Any = FakeStream(server)  # ClientStream's open(), over scripted bytes
    return kube.KubeCluster(transport, once=transport, stream=stream)


@HOSTILE
@given(
    target=st.sampled_from(["get-lease", "create-lease", "update-lease"]), hostile=hostile_answers
)
def test_a_lease_request_answers_or_raises_an_api_error(target: str, hostile: Hostile) -> None:
    cluster = lone_cluster(Server(target, hostile))
    body = {"metadata": {"name": "l"}, "spec": {}}
    calls = {
        "get-lease": lambda: cluster.get_lease("ops", "l"),
        "create-lease": lambda: cluster.create_lease("ops", body),
        "update-lease": lambda: cluster.update_lease("ops", "l", body),
    }
    try:
        answer = calls[target]()
    except ApiError:
        return
    assert isinstance(answer.object, dict)


@dataclass
class FakeRaw:
    """urllib3's streaming response, as much of it as a watch reads."""

    status: int
    data: bytes
    chunks: list[bytes]
    headers: dict[str, str] = field(default_factory=lambda: {"Date": DATE})

    def stream(self, amt: Any = None, decode_content: bool = True) -> Iterator[bytes]:
        yield from self.chunks

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass
class FakeStream:
    server: Server
    raw: FakeRaw | None = None

    def open(self, resource_path: str, ref: Any, read_timeout_s: float) -> FakeRaw:
        assert self.raw is not None
        return self.raw


EVENT = json.dumps({"type": "ADDED", "object": job(name="w", namespace=NAMESPACE)}).encode()


@HOSTILE
@given(
    status=statuses,
    chunks=st.lists(
        st.one_of(
            bodies.map(lambda b: b[:4096]),
            st.just(EVENT + b"\n"),
            st.just(EVENT[:40]),
            json_values.map(lambda v: json.dumps(v).encode() + b"\n"),
        ),
        max_size=4,
    ),
)
def test_a_watch_stream_yields_events_or_raises_an_api_error(
    status: int, chunks: list[bytes]
) -> None:
    cluster = lone_cluster(Server("discover-group", Hostile(200, None)))
    served = ServedKind(*_pytorch())
    stream = cluster._stream
    assert isinstance(stream, FakeStream)
    stream.raw = FakeRaw(status, b"".join(chunks)[:4096], chunks)
    try:
        with cluster.watch_jobs(
            served, NAMESPACE, None, "7", timeout_s=60, read_timeout_s=90.0
        ) as events:
            for event in events:
                assert isinstance(event.type, str)
                assert isinstance(event.object, dict)
    except ApiError:
        pass


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}, 410),
        ({"kind": "Status", "reason": "Expired", "message": "too old"}, 410),
        ({"kind": "Status", "code": "410", "reason": "Gone"}, 410),
        ({"kind": "Status", "message": "something broke"}, 500),
        ({"kind": "Status", "code": True, "reason": "Unknown"}, 500),
    ],
    ids=["code", "expired-without-code", "gone-code-not-a-number", "no-code-no-reason", "bool"],
)
def test_a_watch_error_event_is_an_answer_even_without_its_code(
    status: dict[str, Any], expected: int
) -> None:
    # Without a code it was read as "no answer" (status None): retried within a second, and an
    # expired resourceVersion never relisted.
    cluster = lone_cluster(Server("discover-group", Hostile(200, None)))
    stream = cluster._stream
    assert isinstance(stream, FakeStream)
    line = json.dumps({"type": "ERROR", "object": status}).encode() + b"\n"
    stream.raw = FakeRaw(200, line, [line])
    with (
        pytest.raises(ApiError) as raised,
        cluster.watch_jobs(
            ServedKind(*_pytorch()), NAMESPACE, None, "7", timeout_s=60, read_timeout_s=90.0
        ) as events,
    ):
        list(events)
    assert raised.value.status == expected


def _pytorch() -> tuple[Any, str]:
    discovery = lone_cluster(Server("none", Hostile(200))).discover()
    (served,) = discovery.served
    return served.kind, served.version


# --- the regressions, one by one ------------------------------------------------------------------


@pytest.mark.parametrize(
    "target", ["discover-group", "discover-resources", "list-jobs"], ids=lambda t: t
)
def test_a_sign_in_page_instead_of_the_listing_exits_3_naming_the_server(target: str) -> None:
    result = run(Server(target, Hostile(200, SIGN_IN)))

    assert result.exit_code == 3, result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("sweeper: error: cannot ")
    assert "undecodable answer (HTTP 200, " in last
    assert (
        "not JSON (starts '<!DOCTYPE html><html><head><title>Sign i'...; "
        "a proxy answering for the API server?)"
    ) in last
    assert last.endswith(f"({ENDPOINT})")
    (report,) = passes(result.stdout)
    assert "undecodable answer" in report["summary"]["stopped_by"]


@pytest.mark.parametrize(
    ("target", "body"),
    [
        pytest.param("list-jobs", b"{}", id="list-without-items"),
        pytest.param("list-jobs", b"", id="list-empty-body"),
        pytest.param("discover-group", b"{}", id="group-without-versions"),
        pytest.param("discover-resources", b'{"resources": 5}', id="resources-not-a-list"),
    ],
)
def test_an_answer_without_the_listing_is_never_read_as_no_jobs(target: str, body: bytes) -> None:
    # Read as "no jobs here", it made a pass that enforced nothing and exited 0.
    result = run(Server(target, Hostile(200, body)))

    assert result.exit_code == 3, result.stderr
    assert "undecodable answer" in result.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    ("target", "body"),
    [
        pytest.param("get-job", SIGN_IN, id="re-read-sign-in-page"),
        pytest.param("get-job", b'{"kind": "Status"}', id="re-read-not-an-object"),
        pytest.param("patch-status", b'{"items": [', id="status-answer-truncated"),
        pytest.param("list-pods", b"<html>", id="pods-sign-in-page"),
        pytest.param("delete-pod", b"\x00\xff", id="delete-answer-bytes"),
    ],
)
def test_during_fail_a_garbled_answer_is_that_jobs_error_and_the_other_job_is_failed(
    target: str, body: bytes
) -> None:
    server = Server(target, Hostile(200, body))

    result = run(server, "--action", "fail", "--terminate-pods", "all")

    assert result.exit_code == 1, result.stderr
    (report,) = passes(result.stdout)
    by_name = {j["name"]: j for j in report["jobs"]}
    assert by_name[JOBS[1]]["result"] == "done"
    assert by_name[JOBS[0]]["result"] in ("error", "done")  # done: its status was written
    assert any("undecodable answer" in e for e in by_name[JOBS[0]]["errors"])
    assert ("patch-status", "PATCH") in {(n, m) for n, m, p in server.seen if JOBS[1] in p}
    assert "Traceback" not in result.stderr


def test_a_refusal_keeps_the_servers_reason_in_the_report_and_the_log_fields() -> None:
    reason = (
        'pytorchjobs.kubeflow.org "train-a" is forbidden: User '
        '"system:serviceaccount:ops:sweeper" cannot patch resource "pytorchjobs" in API group '
        '"kubeflow.org" in the namespace "team-a"'
    )
    status = {"kind": "Status", "status": "Failure", "reason": "Forbidden", "code": 403}
    forbidden = Hostile(403, json.dumps({**status, "message": reason}).encode())

    result = run(Server("patch-job", forbidden))

    assert result.exit_code == 1, result.stderr
    (report,) = passes(result.stdout)
    (refused,) = [j for j in report["jobs"] if j["name"] == JOBS[0]]
    line = (
        "touch refused: cannot patch pytorchjobs.kubeflow.org 'train-a' in namespace "
        f'"team-a": forbidden (403): {reason}'
    )
    assert refused["errors"] == [line]
    logged = [json.loads(r) for r in result.stderr.splitlines() if r.startswith("{")]
    (error,) = [r for r in logged if r.get("name") == JOBS[0] and r["level"] == "ERROR"]
    assert error["errors"] == [line]
