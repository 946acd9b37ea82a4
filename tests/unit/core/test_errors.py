"""Error messages: one line naming the request, and the exit code of each class."""

from __future__ import annotations

from typing import Any

import pytest

from sweeper.core.errors import (
    ApiError,
    ClusterUnavailable,
    ConfigError,
    Conflict,
    Gone,
    Interrupted,
    NotFound,
    RequestRef,
    RunTimeout,
    SweeperError,
    api_error,
)

MESSAGES = [
    pytest.param(
        {"status": 403, "verb": "list", "resource": "pytorchjobs.kubeflow.org", "namespace": "a"},
        'cannot list pytorchjobs.kubeflow.org in namespace "a": forbidden (403)',
        id="namespaced-list",
    ),
    pytest.param(
        {"status": 401, "verb": "list", "resource": "tfjobs.kubeflow.org"},
        "cannot list tfjobs.kubeflow.org in all namespaces: unauthorized (401)",
        id="cluster-wide-list",
    ),
    pytest.param(
        {
            "status": 500,
            "verb": "patch",
            "resource": "pods",
            "namespace": "a",
            "name": "p",
            "detail": "etcd timeout",
        },
        "cannot patch pods 'p' in namespace \"a\": internal server error (500): etcd timeout",
        id="object",
    ),
    pytest.param(
        {
            "status": None,
            "verb": "discover",
            "resource": "API group kubeflow.org",
            "detail": "connection refused",
            "cluster_scoped": True,
        },
        "cannot discover API group kubeflow.org: connection refused",
        id="no-response",
    ),
    pytest.param(
        {"status": 418, "verb": "get", "resource": "pods", "namespace": "a"},
        'cannot get pods in namespace "a": error (418)',
        id="unknown-status",
    ),
]


RBAC = (
    'pytorchjobs.kubeflow.org "train" is forbidden: User "system:serviceaccount:ops:sweeper" '
    'cannot patch resource "pytorchjobs" in API group "kubeflow.org" in the namespace "a"'
)
WEBHOOK = (
    'admission webhook "validator.training-operator.kubeflow.org" denied the request: '
    "spec.runPolicy is immutable"
)
# The server's own words, kept as kubectl keeps them: which identity, which verb, RBAC or
# admission. They were dropped for 401, 403 and 404 (issue 19, item 12).
MESSAGES += [
    pytest.param(
        {
            "status": 403,
            "verb": "patch",
            "resource": "pytorchjobs.kubeflow.org",
            "namespace": "a",
            "name": "train",
            "detail": RBAC,
        },
        f"cannot patch pytorchjobs.kubeflow.org 'train' in namespace \"a\": forbidden (403): "
        f"{RBAC}",
        id="rbac-refusal-names-the-identity-and-the-verb",
    ),
    pytest.param(
        {
            "status": 403,
            "verb": "patch",
            "resource": "pytorchjobs.kubeflow.org",
            "namespace": "a",
            "name": "train",
            "detail": WEBHOOK,
        },
        f"cannot patch pytorchjobs.kubeflow.org 'train' in namespace \"a\": forbidden (403): "
        f"{WEBHOOK}",
        id="admission-refusal-says-so",
    ),
    pytest.param(
        {
            "status": 404,
            "verb": "get",
            "resource": "tfjobs.kubeflow.org",
            "namespace": "a",
            "name": "x",
            "detail": 'tfjobs.kubeflow.org "x" not found',
        },
        "cannot get tfjobs.kubeflow.org 'x' in namespace \"a\": not found (404): "
        'tfjobs.kubeflow.org "x" not found',
        id="not-found-names-the-object",
    ),
    pytest.param(
        {"status": 401, "verb": "list", "resource": "pods", "detail": "Unauthorized"},
        "cannot list pods in all namespaces: unauthorized (401)",
        id="a-message-repeating-the-status-is-left-out",
    ),
    pytest.param(
        {"status": 404, "verb": "list", "resource": "pods", "detail": "Not Found"},
        "cannot list pods in all namespaces: not found (404)",
        id="not-found-alone-is-left-out",
    ),
]


@pytest.mark.parametrize(("fields", "message"), MESSAGES)
def test_api_error_messages_name_verb_resource_and_namespace(
    fields: dict[str, Any], message: str
) -> None:
    answer = {key: fields.pop(key) for key in ("status", "detail") if key in fields}
    assert str(api_error(RequestRef(**fields), **answer)) == message


@pytest.mark.parametrize(
    ("status", "cls"),
    [(404, NotFound), (409, Conflict), (410, Gone), (500, ApiError)],
)
def test_api_error_picks_the_specific_class(status: int, cls: type) -> None:
    assert type(api_error(RequestRef("get", "pods"), status)) is cls


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (SweeperError, 1),
        (ConfigError, 2),
        (ClusterUnavailable, 3),
        (Interrupted, 4),
        (RunTimeout, 5),
    ],
)
def test_exit_codes(cls: type[SweeperError], code: int) -> None:
    assert cls.exit_code == code
