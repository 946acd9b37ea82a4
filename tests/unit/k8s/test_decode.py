"""The fast page decoder (sweeper.k8s.decode) against the reference: json.loads, then parse_job."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from sweeper.core.kinds import (
    EXCLUDE_ANNOTATION,
    LEGACY_EXCLUDE_ANNOTATION,
    LEGACY_TOUCHED_AT_ANNOTATION,
    TOUCHED_AT_ANNOTATION,
    Kind,
)
from sweeper.k8s import decode
from tests.unit.objects import KIND, ago, condition, deadline_failed, job

Decoder = Callable[[bytes, Kind, str], decode.DecodedPage]

# What the API server adds to every object and the views never read; the bulk of the bytes.
MANAGED_FIELDS = [
    {
        "manager": "training-operator",
        "operation": "Update",
        "apiVersion": "kubeflow.org/v1",
        "time": ago(60),
        "fieldsType": "FieldsV1",
        "subresource": "status",
        "fieldsV1": {"f:status": {".": {}, "f:conditions": {}, "f:startTime": {}}},
    },
]


def dressed(raw: dict[str, Any]) -> dict[str, Any]:
    raw["metadata"]["managedFields"] = MANAGED_FIELDS
    raw["metadata"]["labels"] = {"team": "vision"}
    return raw


def body(items: list[Any], token: str | None = None, *, meta_first: bool = False) -> bytes:
    """A list as the API server writes it for custom resources: metadata after the items."""
    meta: dict[str, Any] = {"resourceVersion": "42"}
    if token is not None:
        meta["continue"] = token
    document: dict[str, Any] = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJobList"}
    if meta_first:
        document["metadata"] = meta
    document["items"] = items
    if not meta_first:
        document["metadata"] = meta
    return json.dumps(document).encode()


WELL_FORMED = [
    pytest.param(job(), id="running-overdue"),
    pytest.param(job(deadline=None), id="no-deadline"),
    pytest.param(job(deadline=0), id="deadline-zero"),
    pytest.param(job(deadline=-1), id="deadline-negative"),
    pytest.param(job(conditions=[condition("Suspended")]), id="suspended-condition"),
    pytest.param(job(conditions=[condition("Suspended", "False")]), id="resumed-condition"),
    pytest.param(job(started_ago=None), id="not-started"),
    pytest.param(job(conditions=deadline_failed()), id="failed-by-deadline"),
    pytest.param(job(conditions=deadline_failed(by_sweeper=True)), id="failed-by-the-sweeper"),
    pytest.param(job(conditions=[condition("Succeeded"), *deadline_failed()]), id="both-finished"),
    pytest.param(job(conditions=[condition("Succeeded")]), id="succeeded"),
    pytest.param(
        job(conditions=[condition("Failed"), condition("Succeeded")]), id="failed-then-succeeded"
    ),
    pytest.param(
        job() | {"metadata": {**job()["metadata"], "labels": {"kueue.x-k8s.io/queue-name": "q"}}},
        id="kueue-queued",
    ),
    pytest.param(job(conditions=[condition("Failed", "False")]), id="failed-false"),
    pytest.param(job(suspend=True, managed_by="kueue.x-k8s.io/multikueue"), id="suspended-foreign"),
    pytest.param(job(suspend=False), id="suspend-false"),
    pytest.param(job(deleting=True), id="deleting"),
    pytest.param(job(annotations={EXCLUDE_ANNOTATION: " TRUE "}), id="excluded"),
    pytest.param(job(annotations={EXCLUDE_ANNOTATION: "no"}), id="not-excluded"),
    pytest.param(job(annotations={TOUCHED_AT_ANNOTATION: ago(30)}), id="touched"),
    pytest.param(job(annotations={TOUCHED_AT_ANNOTATION: "garbled"}), id="touched-garbled"),
    pytest.param(job(annotations={LEGACY_EXCLUDE_ANNOTATION: "true"}), id="excluded-old-key"),
    pytest.param(job(annotations={LEGACY_TOUCHED_AT_ANNOTATION: ago(30)}), id="touched-old-key"),
    pytest.param(
        job(annotations={TOUCHED_AT_ANNOTATION: ago(300), LEGACY_TOUCHED_AT_ANNOTATION: ago(30)}),
        id="touched-old-key-newer",
    ),
    pytest.param(
        job(annotations={TOUCHED_AT_ANNOTATION: ago(30), LEGACY_TOUCHED_AT_ANNOTATION: ago(300)}),
        id="touched-new-key-newer",
    ),
    pytest.param(
        job("TFJob")
        | {"spec": {"tfReplicaSpecs": {"Chief": {"replicas": 1}, "Worker": {"replicas": 3}}}},
        id="replicas-of-every-role",
    ),
    pytest.param(job() | {"spec": {"pytorchReplicaSpecs": {"Worker": {}}}}, id="replicas-unset"),
    pytest.param(job("MPIJob", legacy_clean_pod_policy="All"), id="mpi-legacy-policy"),
    pytest.param(
        job("MPIJob", clean_pod_policy="None", legacy_clean_pod_policy="All"),
        id="mpi-run-policy-wins",
    ),
    pytest.param(job("TFJob", legacy_clean_pod_policy="All"), id="tf-ignores-legacy"),
    pytest.param(job(status=None), id="no-status"),
    pytest.param({**job(), "status": None}, id="status-null"),
    pytest.param(job(conditions=None), id="conditions-absent"),
]

MALFORMED = [
    pytest.param("a job", "object", id="not-an-object"),
    pytest.param({"spec": {}}, "metadata", id="no-metadata"),
    pytest.param(job(name=""), "metadata.name", id="empty-name"),
    pytest.param(job(uid=7), "metadata.uid", id="uid-number"),  # type: ignore[arg-type]
    pytest.param({**job(), "spec": None}, "spec", id="spec-null"),
    pytest.param(job(deadline="soon"), "spec.runPolicy.activeDeadlineSeconds", id="deadline-text"),
    pytest.param(job(deadline=True), "spec.runPolicy.activeDeadlineSeconds", id="deadline-bool"),
    pytest.param(job(deadline=60.5), "spec.runPolicy.activeDeadlineSeconds", id="deadline-float"),
    pytest.param(job(suspend="true"), "spec.runPolicy.suspend", id="suspend-text"),
    pytest.param(job(managed_by=1), "spec.runPolicy.managedBy", id="managed-by-number"),
    pytest.param(
        job("MPIJob", legacy_clean_pod_policy=3),
        "spec.cleanPodPolicy",
        id="mpi-legacy-policy-number",
    ),
    pytest.param(job(status={"startTime": "yesterday"}), "status.startTime", id="start-text"),
    pytest.param(
        job(status={"startTime": "2024-05-01T10:00:00"}), "status.startTime", id="start-no-zone"
    ),
    pytest.param(
        job(status={"startTime": "9999-12-31T23:30:00Z"}),
        "status.startTime",
        id="deadline-after-year-9999",
    ),
    pytest.param(
        job(status={"conditions": {"type": "Failed"}}), "status.conditions", id="conditions-object"
    ),
    pytest.param(
        job(conditions=[{"type": "Failed"}]), "status.conditions[0]", id="condition-without-status"
    ),
    pytest.param(
        job(annotations={"a": "b"})
        | {"metadata": {"name": "x", "namespace": "n", "uid": "u", "annotations": []}},
        "metadata.annotations",
        id="annotations-list",
    ),
]


@pytest.mark.parametrize("raw", WELL_FORMED)
def test_a_well_formed_job_is_read_without_the_reference(
    raw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = body([dressed(raw)], "next")
    expected = decode.reference_decode_jobs(data, KIND[raw["kind"]], "v1")

    def no_reference(*_args: object) -> decode.DecodedPage:
        raise AssertionError("the fast path fell back to the reference")

    monkeypatch.setattr(decode, "reference_decode_jobs", no_reference)
    page = decode.decode_jobs(data, KIND[raw["kind"]], "v1")
    assert page == expected
    assert page.jobs[0].malformed is None
    assert page.continue_token == "next"  # noqa: S105 - a continue token, not a secret


@pytest.mark.parametrize(("raw", "field"), MALFORMED)
def test_a_malformed_job_is_named_as_the_reference_names_it(raw: Any, field: str) -> None:
    # Between two well-formed jobs: the whole page is read the reference way.
    data = body([dressed(job(name="before")), raw, dressed(job(name="after"))])
    page = decode.decode_jobs(
        data, KIND["PyTorchJob"] if field != "spec.cleanPodPolicy" else KIND["MPIJob"], "v1"
    )
    assert page == decode.reference_decode_jobs(
        data, KIND["PyTorchJob"] if field != "spec.cleanPodPolicy" else KIND["MPIJob"], "v1"
    )
    before, broken, after = (j.malformed for j in page.jobs)
    assert (before, after) == (None, None)
    assert broken is not None
    assert broken.startswith(field)


@pytest.mark.parametrize("deadline", [10**12, -(10**12), 2**64, 2**70])
def test_a_deadline_beyond_go_duration_is_read_as_the_reference_reads_it(deadline: int) -> None:
    # Never malformed (a platform cap still applies to it): the reference builds its view.
    data = body([dressed(job(name="before")), dressed(job(deadline=deadline))])
    page = decode.decode_jobs(data, KIND["PyTorchJob"], "v1")
    assert page == decode.reference_decode_jobs(data, KIND["PyTorchJob"], "v1")
    assert [(j.malformed, j.declared_seconds) for j in page.jobs] == [
        (None, 3600),
        (None, deadline),
    ]


@pytest.mark.parametrize(
    ("data", "token"),
    [
        pytest.param(body([job()], "abc"), "abc", id="after-the-items"),
        pytest.param(body([job()], "abc", meta_first=True), "abc", id="before-the-items"),
        pytest.param(body([job()]), None, id="last-page"),
        pytest.param(body([job()], ""), None, id="empty-token"),
        pytest.param(body([job(annotations={"continue": "decoy"})]), None, id="decoy-in-an-item"),
        pytest.param(b'{"items": []}', None, id="no-metadata"),
        pytest.param(b'{"items": [], "metadata": null}', None, id="metadata-null"),
    ],
)
def test_the_continue_token_is_read_as_the_reference_reads_it(data: bytes, token: Any) -> None:
    assert decode.decode_jobs(data, KIND["TFJob"], "v1").continue_token == token
    assert decode.reference_decode_jobs(data, KIND["TFJob"], "v1").continue_token == token


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"<html>", id="html"),
        pytest.param(b'{"items": [', id="truncated"),
        pytest.param(b"", id="empty-body"),
    ],
)
def test_a_body_that_is_not_json_raises_as_the_reference_does(data: bytes) -> None:
    with pytest.raises(ValueError, match="Expecting"):
        decode.reference_decode_jobs(data, KIND["TFJob"], "v1")
    with pytest.raises(ValueError, match="Expecting"):
        decode.decode_jobs(data, KIND["TFJob"], "v1")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        pytest.param(b"[]", "a JSON list, not a List", id="an-array"),
        pytest.param(b'"<html>"', "a JSON str, not a List", id="a-string"),
        pytest.param(b"{}", "no 'items'", id="an-object-without-items"),
        pytest.param(b'{"metadata": {"continue": "t"}}', "no 'items'", id="only-metadata"),
        pytest.param(b'{"items": "abc"}', "'items' is not a list", id="items-a-string"),
        pytest.param(b'{"items": {}}', "'items' is not a list", id="items-an-object"),
        pytest.param(b'{"items": [], "metadata": []}', "'metadata'", id="metadata-a-list"),
        pytest.param(b'{"items": [], "metadata": {"continue": 5}}', "'metadata'", id="token-int"),
        pytest.param(
            b'{"items": [], "metadata": {"resourceVersion": {}}}', "'metadata'", id="version-obj"
        ),
    ],
)
def test_a_json_body_that_is_not_a_list_is_never_read_as_no_jobs(data: bytes, why: str) -> None:
    # Read as an empty page, an auth proxy's answer would make a pass that enforces nothing.
    with pytest.raises(decode.NotAList, match=why):
        decode.reference_decode_jobs(data, KIND["TFJob"], "v1")
    with pytest.raises(decode.NotAList, match=why):
        decode.decode_jobs(data, KIND["TFJob"], "v1")


def test_items_null_is_an_empty_page() -> None:
    page = decode.decode_jobs(b'{"items": null, "metadata": {}}', KIND["TFJob"], "v1")
    assert page == decode.DecodedPage([], None)


def test_views_keep_the_kind_and_version_listed() -> None:
    page = decode.decode_jobs(body([job("MPIJob")]), KIND["MPIJob"], "v2beta1")
    assert (page.jobs[0].kind, page.jobs[0].version) == (KIND["MPIJob"], "v2beta1")


@pytest.mark.parametrize(
    "decoder", [decode.decode_jobs, decode.reference_decode_jobs], ids=["fast", "reference"]
)
def test_a_page_interns_the_namespace_never_a_name_or_uid(decoder: Decoder) -> None:
    # An interned string lives in the interpreter's table, for ever on CPython 3.12.0 to
    # 3.12.6: a --watch that interned each job's name and uid kept every one it ever saw.
    # Equal copies interned first: a view that holds them was interned by the decoder.
    unique = uuid.uuid4().hex
    namespace = sys.intern(f"ns-{unique}")
    name = sys.intern(f"job-{unique}")
    uid = sys.intern(f"uid-{unique}")
    data = body([dressed(job(name=f"job-{unique}", namespace=f"ns-{unique}", uid=f"uid-{unique}"))])
    (view,) = decoder(data, KIND["PyTorchJob"], "v1").jobs
    assert (view.namespace, view.name, view.uid) == (namespace, name, uid)
    assert view.namespace is namespace
    assert view.name is not name
    assert view.uid is not uid


@pytest.mark.parametrize("kind", [k for k in KIND.values() if k.group == "kubeflow.org"])
def test_every_v1_kinds_replicas_are_read_without_the_reference(
    kind: Kind, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = job(kind)
    raw["spec"][kind.replica_specs] = {"Launcher": {"replicas": 1}, "Worker": {"replicas": 4}}

    def no_reference(*_args: object) -> decode.DecodedPage:
        raise AssertionError("the fast path fell back to the reference")

    monkeypatch.setattr(decode, "reference_decode_jobs", no_reference)
    (view,) = decode.decode_jobs(body([raw]), kind, "v1").jobs
    assert view.replicas == 5
