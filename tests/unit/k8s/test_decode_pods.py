"""A pod list read for its views (``sweeper.k8s.decode.decode_pods``) against ``json.loads``.

A pass reads every pod of the cluster labelled by a training operator, and reads of each only
what ``parse_owned`` and ``parse_pod_load`` read; whatever the body, the views built from what
``decode_pods`` returns are those built from ``json.loads`` of it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sweeper.core.held import parse_pod_load
from sweeper.core.jobs import parse_owned
from sweeper.k8s import decode

PATTERNS = ("nvidia.com/gpu", "nvidia.com/mig-*")


def pod(**changes: Any) -> dict[str, Any]:
    """A placed pod as the kubelet leaves it, with what a view never reads around it."""
    raw: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-worker-0",
            "namespace": "team-a",
            "uid": "0f0e0d0c-0000-4000-8000-000000000001",
            "creationTimestamp": "2025-12-31T23:59:00Z",
            "labels": {"training.kubeflow.org/job-name": "train"},
            "ownerReferences": [
                {"kind": "Other", "uid": "not-the-controller"},
                {"kind": "PyTorchJob", "uid": "job-uid", "controller": True},
            ],
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}],
        },
        "spec": {
            "nodeName": "gpu-node-1",
            "initContainers": [{"name": "init", "resources": {"limits": {"nvidia.com/gpu": 4}}}],
            "containers": [
                {
                    "name": "trainer",
                    "env": [{"name": "A", "value": "1"}],
                    "resources": {
                        "requests": {"cpu": "8", "nvidia.com/gpu": "2"},
                        "limits": {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "1"},
                    },
                },
            ],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "containerStatuses": [{"name": "trainer", "ready": True}],
        },
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = raw
        for key in parents:
            node = node[key]
        if value is DROP:
            del node[last]
        else:
            node[last] = value
    return raw


DROP = object()

PODS = [
    pytest.param(pod(), id="placed"),
    pytest.param(pod(spec__nodeName=DROP, status__phase="Pending"), id="waiting"),
    pytest.param(pod(metadata__deletionTimestamp="2026-01-01T00:00:00Z"), id="deleting"),
    pytest.param(pod(metadata__ownerReferences="not a list"), id="owner-references-a-string"),
    pytest.param(pod(spec__containers=None), id="containers-null"),
    pytest.param(pod(spec__containers=["not an object"]), id="a-container-a-string"),
    pytest.param(pod(spec__containers=[{"resources": "none"}]), id="resources-a-string"),
    pytest.param(pod(spec__nodeName=7), id="node-name-a-number"),
    pytest.param(pod(status="Running"), id="status-a-string"),
    pytest.param(pod(metadata=[]), id="metadata-a-list"),
    pytest.param(pod(metadata__uid=DROP), id="no-uid"),
    pytest.param("a pod that is a string", id="item-a-string"),
]


def listed(items: list[Any]) -> bytes:
    """A core list as the API server writes it: metadata before the items."""
    return json.dumps(
        {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": "7", "continue": "next"},
            "items": items,
        }
    ).encode()


def views(document: Any) -> list[Any]:
    seen = []
    for raw in document["items"]:
        owned = parse_owned(raw)
        # A pass also finds a TrainJob's pods by namespace and label (oneshot.holding).
        meta = raw.get("metadata") if isinstance(raw, dict) else None
        named = (meta.get("namespace"), meta.get("labels")) if isinstance(meta, dict) else None
        seen.append((owned, owned and parse_pod_load(raw, owned, PATTERNS), named))
    return seen


@pytest.mark.parametrize("raw", PODS)
def test_a_pod_read_for_its_views_has_the_views_json_loads_gives(raw: Any) -> None:
    data = listed([pod(), raw])
    document = decode.decode_pods(data)
    assert views(document) == views(json.loads(data))
    assert document["metadata"] == {"resourceVersion": "7", "continue": "next"}


def test_what_no_view_reads_is_left_out() -> None:
    (item,) = decode.decode_pods(listed([pod()]))["items"]
    assert "managedFields" not in item["metadata"]
    assert "env" not in item["spec"]["containers"][0]
    assert "volumes" not in item["spec"]
    assert "containerStatuses" not in item["status"]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"<html>sign in</html>", id="not-json"),
        pytest.param(b'["a", "list"]', id="a-json-array"),
        pytest.param(b'{"items": "none"}', id="items-a-string"),
        pytest.param(b'{"kind": "Status"}', id="no-items"),
    ],
)
def test_a_body_that_is_not_a_pod_list_reads_as_json_loads_reads_it(data: bytes) -> None:
    try:
        expected: Any = json.loads(data)
    except ValueError as error:
        with pytest.raises(ValueError, match="Expecting value") as raised:
            decode.decode_pods(data)
        assert str(raised.value) == str(error)
        return
    assert decode.decode_pods(data) == expected
