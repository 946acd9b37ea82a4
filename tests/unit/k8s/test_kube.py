"""sweeper.k8s.kube and .client without a server: each method's requests, ClientSend's errors.

The same methods against the real kube-apiserver are the e2e tier's; here a scripted Send
shows the paths, queries, bodies and pages exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import urllib3

from sweeper.config import Config
from sweeper.core.errors import ConfigError
from sweeper.core.families.mpi_operator import MPI_OPERATOR_VERSION, MPIJOB
from sweeper.core.families.trainer import LEFTOVERS as TRAINJOB_LEFTOVERS
from sweeper.core.families.trainer import TRAINJOB
from sweeper.core.families.training_operator import PYTORCHJOB, TFJOB
from sweeper.core.jobs import parse_job
from sweeper.core.kinds import BATCH_JOBS, EVENTS, NAMESPACES, PODS, SERVICES
from sweeper.k8s import kube
from sweeper.k8s.cluster import ServedKind, list_all
from sweeper.k8s.connection import client
from sweeper.k8s.connection.credentials import Auth
from sweeper.k8s.connection.kubeconfig import Target
from sweeper.k8s.transport import NoResponse, Response, Transport
from tests.unit.k8s.test_transport import FakeSend, FakeStop
from tests.unit.objects import job

PYTORCH = ServedKind(PYTORCHJOB, "v1")
JOBSETS = TRAINJOB_LEFTOVERS.resource
DATE = "Wed, 01 May 2024 12:00:00 GMT"


def ok(document: Any = None, status: int = 200) -> Response:
    return Response(status, json.dumps(document or {}).encode(), DATE)


def cluster(*script: Response) -> tuple[kube.KubeCluster, FakeSend]:
    stop = FakeStop()
    send = FakeSend(stop, list(script))
    return kube.KubeCluster(Transport(send, stop, request_timeout=10.0)), send


# --- discovery ---------------------------------------------------------------------------------


def resources(*plurals: str) -> Response:
    return ok({"resources": [{"name": p} for p in plurals] + [{"name": "pytorchjobs/status"}]})


NO_TRAINER = ok(status=404)  # the second group asked: trainer.kubeflow.org

DISCOVERIES = [
    pytest.param([ok(status=404), NO_TRAINER], [], id="no-kubeflow-group"),
    pytest.param(
        [
            ok({"versions": [{"version": "v1"}]}),
            resources("tfjobs", "pytorchjobs", "mpijobs"),
            NO_TRAINER,
        ],
        [(TFJOB, "v1"), (PYTORCHJOB, "v1"), (MPIJOB, "v1")],
        id="v1-kinds-in-table-order",
    ),
    pytest.param(
        [ok({"versions": [{"version": "v2beta1"}]}), resources("mpijobs"), NO_TRAINER],
        [(MPIJOB, MPI_OPERATOR_VERSION)],
        id="mpi-operator-mpijob-only",
    ),
    pytest.param(
        [
            ok({"versions": [{"version": "v1"}, {"version": "v2beta1"}]}),
            resources("mpijobs"),
            resources("mpijobs"),
            NO_TRAINER,
        ],
        [(MPIJOB, "v1")],
        id="v1-mpijob-wins",
    ),
    pytest.param(
        [ok({"versions": [{"version": "v1"}]}), ok(status=404), NO_TRAINER],
        [],
        id="version-vanished",
    ),
    pytest.param(
        [
            ok(status=404),
            ok({"versions": [{"version": "v1alpha1"}]}),
            resources("trainjobs", "clustertrainingruntimes"),
        ],
        [(TRAINJOB, "v1alpha1")],
        id="trainer-v2-only",
    ),
]


@pytest.mark.parametrize(("script", "served"), DISCOVERIES)
def test_discovery_finds_the_served_kinds(
    script: list[Response], served: list[tuple[object, str]]
) -> None:
    sweeper_cluster, send = cluster(*script)

    discovery = sweeper_cluster.discover()

    assert [(s.kind, s.version) for s in discovery.served] == served
    assert discovery.server_date is not None
    assert send.sent[0].path == "/apis/kubeflow.org"


# --- lists -------------------------------------------------------------------------------------


def test_jobs_are_listed_page_by_page_with_the_continue_token() -> None:
    sweeper_cluster, send = cluster(
        ok({"items": [job(name="a")], "metadata": {"continue": "t/1"}}),
        ok({"items": [job(name="b")], "metadata": {"resourceVersion": "9"}}),
    )

    pages = list(sweeper_cluster.list_job_views(PYTORCH, "team a", "x=y", 1))

    assert [[view.name for view in page.jobs] for page in pages] == [["a"], ["b"]]
    assert [page.resource_version for page in pages] == ["", "9"]  # where a watch starts
    assert [s.path for s in send.sent] == [
        "/apis/kubeflow.org/v1/namespaces/team%20a/pytorchjobs?limit=1&labelSelector=x%3Dy",
        "/apis/kubeflow.org/v1/namespaces/team%20a/pytorchjobs?limit=1&labelSelector=x%3Dy"
        "&continue=t%2F1",
    ]


LIST_PAGES = [
    ({"items": [job(name="a"), job(name="b")], "metadata": {"continue": "t/1"}}),
    ({"items": [job(name="c", deadline="soon")], "metadata": {"resourceVersion": "9"}}),
]


@pytest.mark.parametrize(
    ("namespace", "selector", "first_path"),
    [
        pytest.param(
            "team a",
            "x=y",
            "/apis/kubeflow.org/v1/namespaces/team%20a/pytorchjobs?limit=2&labelSelector=x%3Dy",
            id="one-namespace-with-a-selector",
        ),
        pytest.param(None, None, "/apis/kubeflow.org/v1/pytorchjobs?limit=2", id="all-namespaces"),
    ],
)
def test_job_views_are_the_reference_views_of_each_page(
    namespace: str | None, selector: str | None, first_path: str
) -> None:
    views, sent = cluster(*(ok(page) for page in LIST_PAGES))

    got = list(views.list_job_views(PYTORCH, namespace, selector, 2))

    assert [page.jobs for page in got] == [
        [parse_job(item, PYTORCHJOB, "v1") for item in page["items"]] for page in LIST_PAGES
    ]
    assert [job.malformed for page in got for job in page.jobs] == [
        None,
        None,
        "spec.runPolicy.activeDeadlineSeconds",
    ]
    assert all(page.server_date is not None for page in got)
    assert [page.resource_version for page in got] == ["", "9"]
    assert [s.path for s in sent.sent] == [first_path, f"{first_path}&continue=t%2F1"]


def test_all_namespaces_and_core_lists_collect_every_page() -> None:
    sweeper_cluster, send = cluster(
        ok({"items": [{"metadata": {"name": "p1"}}], "metadata": {"continue": "c"}}),
        ok({"items": [{"metadata": {"name": "p2", "labels": {}}}]}),
        ok({"items": [{"s": 1}]}),
        ok({"items": []}),
    )

    # Pods are read for what their views and a pass read (sweeper.k8s.decode.decode_pods).
    assert list_all(sweeper_cluster, PODS, "a", "job=train") == [
        {"metadata": {"name": "p1"}},
        {"metadata": {"name": "p2", "labels": {}}},
    ]
    assert list_all(sweeper_cluster, SERVICES, "a", "job=train") == [{"s": 1}]
    assert next(sweeper_cluster.list_job_views(PYTORCH, None, None, 500)).jobs == []
    assert [s.path.split("?")[0] for s in send.sent] == [
        "/api/v1/namespaces/a/pods",
        "/api/v1/namespaces/a/pods",
        "/api/v1/namespaces/a/services",
        "/apis/kubeflow.org/v1/pytorchjobs",
    ]


# --- reads and writes --------------------------------------------------------------------------


def test_get_quotes_the_name_and_decodes_the_object() -> None:
    answer = {"kind": "PyTorchJob", "metadata": {"uid": "u"}}
    sweeper_cluster, send = cluster(ok(answer), ok(answer))
    assert sweeper_cluster.get(PYTORCH.resource, "a", "x/y") == answer
    assert sweeper_cluster.get(NAMESPACES, None, "team a") == answer
    assert [s.path for s in send.sent] == [
        "/apis/kubeflow.org/v1/namespaces/a/pytorchjobs/x%2Fy",
        "/api/v1/namespaces/team%20a",
    ]


WRITES = [
    pytest.param(
        lambda c: c.patch(PYTORCH.resource, "a", "j", {"metadata": {}}, dry_run=False),
        "PATCH",
        "/apis/kubeflow.org/v1/namespaces/a/pytorchjobs/j",
        {"metadata": {}},
        "application/merge-patch+json",
        id="touch-patch",
    ),
    pytest.param(
        lambda c: c.patch(
            PYTORCH.resource, "a", "j", {"status": {}}, subresource="status", dry_run=True
        ),
        "PATCH",
        "/apis/kubeflow.org/v1/namespaces/a/pytorchjobs/j/status?dryRun=All",
        {"status": {}},
        "application/merge-patch+json",
        id="status-patch-server-dry-run",
    ),
    pytest.param(
        lambda c: c.delete(PODS, "a", "p", "uid-1", dry_run=False),
        "DELETE",
        "/api/v1/namespaces/a/pods/p",
        {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "uid-1"}},
        "application/json",
        id="pod-delete-with-uid-precondition",
    ),
    pytest.param(
        lambda c: c.delete(SERVICES, "a", "s", "uid-2", dry_run=True),
        "DELETE",
        "/api/v1/namespaces/a/services/s?dryRun=All",
        {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": "uid-2"},
            "dryRun": ["All"],
        },
        "application/json",
        id="service-delete-server-dry-run",
    ),
    pytest.param(
        lambda c: c.delete(JOBSETS, "a", "train", "uid-3", propagation="Background", dry_run=False),
        "DELETE",
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/a/jobsets/train",
        {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": "uid-3"},
            "propagationPolicy": "Background",
        },
        "application/json",
        id="jobset-delete-with-uid-precondition-in-the-background",
    ),
    pytest.param(
        lambda c: c.patch(
            BATCH_JOBS, "a", "mpi-launcher", {"spec": {"activeDeadlineSeconds": 5}}, dry_run=True
        ),
        "PATCH",
        "/apis/batch/v1/namespaces/a/jobs/mpi-launcher?dryRun=All",
        {"spec": {"activeDeadlineSeconds": 5}},
        "application/merge-patch+json",
        id="launcher-deadline-patch-server-dry-run",
    ),
    pytest.param(
        lambda c: c.create(EVENTS, "a", {"kind": "Event"}, dry_run=False),
        "POST",
        "/api/v1/namespaces/a/events",
        {"kind": "Event"},
        "application/json",
        id="event",
    ),
]


@pytest.mark.parametrize(("write", "method", "path", "body", "content_type"), WRITES)
def test_each_write_is_one_request(
    write: Any, method: str, path: str, body: Any, content_type: str
) -> None:
    sweeper_cluster, send = cluster(ok())

    write(sweeper_cluster)

    [sent] = send.sent
    assert (sent.method, sent.path, sent.body) == (method, path, body)
    assert sent.headers["Content-Type"] == content_type


def test_close_closes_what_connect_opened() -> None:
    closed = []
    kube.KubeCluster(
        Transport(FakeSend(FakeStop(), []), FakeStop(), request_timeout=1.0),
        close=lambda: closed.append(True),
    ).close()
    assert closed == [True]


# --- ClientSend: what urllib3 raises ----------------------------------------------------------


class RaisingHttp(client.Http):
    """An ``Http`` whose every request raises ``error``."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(Target(server="http://127.0.0.1:1", context="c"), Auth())
        self.error = error

    def open(self, *_args: Any, **_kwargs: Any) -> Any:
        raise self.error


SEND_FAILURES = [
    pytest.param(
        urllib3.exceptions.SSLError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate\n verify failed"),
        (False, "SSLError [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
        id="tls-is-not-retryable",
    ),
    pytest.param(
        urllib3.exceptions.ProtocolError("[Errno 111] Connection refused"),
        (True, "connection refused"),
        id="refused",
    ),
    pytest.param(
        urllib3.exceptions.TimeoutError("Read timed out."),
        (True, "timed out (--request-timeout)"),
        id="read-timeout",
    ),
    pytest.param(ConnectionResetError("peer\n reset"), (True, "peer reset"), id="reset"),
]


@pytest.mark.parametrize(("error", "no_response"), SEND_FAILURES)
def test_urllib3_errors_become_no_response(
    error: BaseException, no_response: tuple[bool, str]
) -> None:
    send = client.ClientSend(RaisingHttp(error))
    with pytest.raises(NoResponse) as raised:
        send("GET", "/x", {}, body=None, timeout=1.0)
    assert (raised.value.retryable, raised.value.detail) == no_response
    assert raised.value.__cause__ is error


# --- connect: where the configuration comes from -------------------------------------------


def test_connect_without_any_configuration_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match="no kubeconfig found"):
        client.connect(Config(), stop=FakeStop())


def test_a_missing_or_broken_kubeconfig_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        client.connect(Config(kubeconfig=str(tmp_path / "absent")), stop=FakeStop())
    broken = tmp_path / "config"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    with pytest.raises(ConfigError, match=f"kubeconfig {broken}"):
        client.connect(Config(kubeconfig=str(broken)), stop=FakeStop())


def test_a_context_without_a_kubeconfig_is_a_usage_error_in_a_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    with pytest.raises(ConfigError, match="--context needs a kubeconfig"):
        client.connect(Config(context="prod"), stop=FakeStop())
