"""Where the API server decides: the operator's semantics against real admission and the real CRDs.

- A touch the API server refuses (a ValidatingAdmissionPolicy denies every update of the jobs,
  as the operator's webhooks with ``failurePolicy: Fail`` do while it is down; ``/status`` is a
  subresource they do not cover) never leaves ``auto`` touching forever: it fails the job at
  once and reports the refusal; ``touch`` reports it as an error.
- The real CRDs accept what the operator accepts, and the sweeper reads it as the operator
  does: a negative ``activeDeadlineSeconds`` (due at ``startTime``), any ``cleanPodPolicy``
  string (only ``None`` and ``Running`` are special), a resumed job whose status still says
  ``Suspended=True`` (not overdue: the operator resets ``startTime`` on resume).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.controlplane import ApiError
from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
DENIAL = "updates of Kubeflow jobs are refused (stand-in for the operator's webhooks)"


@pytest.fixture
def updates_refused(control_plane: ControlPlane, namespace: str) -> Iterator[str]:
    """Deny every UPDATE (patches included) of pytorchjobs in ``namespace``, not ``/status``."""
    name = f"deny-{namespace}"[:63]
    control_plane.request(
        "POST",
        f"{ADMISSION}/validatingadmissionpolicies",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["kubeflow.org"],
                            "apiVersions": ["*"],
                            "operations": ["UPDATE"],
                            "resources": ["pytorchjobs"],
                        }
                    ]
                },
                "validations": [{"expression": "false", "message": DENIAL}],
            },
        },
    )
    control_plane.request(
        "POST",
        f"{ADMISSION}/validatingadmissionpolicybindings",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    )
    try:
        _wait_until_denied(control_plane, namespace)
        yield namespace
    finally:
        for plural in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            control_plane.request("DELETE", f"{ADMISSION}/{plural}/{name}", expect=(200, 404))


def _wait_until_denied(cp: ControlPlane, namespace: str) -> None:
    """The apiserver loads policies asynchronously: wait until a probe update is refused."""
    w.create_job(cp, namespace, "probe", started_ago=None)
    patch = {"metadata": {"labels": {"probe": str(time.time_ns())}}}
    for _ in range(100):
        try:
            cp.request(
                "PATCH",
                w.job_path(namespace, "PyTorchJob", "probe"),
                patch,
                content_type="application/merge-patch+json",
            )
        except ApiError as refused:
            assert DENIAL in str(refused.body), refused
            cp.request("DELETE", w.job_path(namespace, "PyTorchJob", "probe"))
            return
        time.sleep(0.1)
    pytest.fail("the ValidatingAdmissionPolicy never took effect")


def conditions(cp: ControlPlane, namespace: str, name: str) -> dict[str, str]:
    job = w.get_job(cp, namespace, "PyTorchJob", name)
    return {c["type"]: c["status"] for c in job.get("status", {}).get("conditions", [])}


def test_auto_fails_at_once_a_job_whose_touch_is_refused(control_plane, updates_refused, sweep):
    namespace = updates_refused
    # 30 s past its deadline: auto would only touch it (escalation is 120 s away).
    late = w.create_job(control_plane, namespace, "late", deadline=60, started_ago=90)
    w.create_replicas(control_plane, late, {"Master": ["Running"]})

    run = sweep("-n", namespace, "--action", "auto", "-o", "json")

    assert run.result.returncode == 0, run.explain()
    [record] = w.report_jobs(run.result.stdout)
    assert (record["decision"], record["reason"], record["result"]) == (
        "fail",
        "touch-refused",
        "done",
    ), record
    assert DENIAL in record["touch_refused"]
    assert "touch refused" in record["detail"]
    assert conditions(control_plane, namespace, "late")["Failed"] == "True"
    assert w.names(control_plane, namespace, "pods") == set()
    refused = [e for e in run.requests if e["verb"] == "patch" and "/status" not in e["requestURI"]]
    assert [e["responseStatus"]["code"] for e in refused] == [422], run.explain()
    warnings = [line for line in run.result.stderr.splitlines() if '"WARNING"' in line]
    assert any(DENIAL in line for line in warnings), run.result.stderr


def test_touch_reports_a_refused_touch_as_an_error(control_plane, updates_refused, sweep):
    namespace = updates_refused
    w.create_job(control_plane, namespace, "late", deadline=60, started_ago=90)

    run = sweep("-n", namespace, "--action", "touch", "-o", "json")

    assert run.result.returncode == 1, run.explain()
    [record] = w.report_jobs(run.result.stdout)
    assert record["result"] == "error"
    assert record["errors"][0].startswith("touch refused: cannot patch pytorchjobs.kubeflow.org")
    assert DENIAL in record["errors"][0]
    assert "Failed" not in conditions(control_plane, namespace, "late")


def test_a_negative_deadline_is_past_at_start(control_plane, namespace, sweep):
    w.create_job(control_plane, namespace, "negative", deadline=-30, started_ago=5)

    run = sweep("-n", namespace, "--action", "fail", "-o", "json")

    assert run.result.returncode == 0, run.explain()
    [record] = w.report_jobs(run.result.stdout)
    assert (record["decision"], record["result"]) == ("fail", "done"), record
    assert record["deadline"] == record["started"]
    assert conditions(control_plane, namespace, "negative")["Failed"] == "True"


def test_a_resumed_job_not_yet_reconciled_is_not_overdue(control_plane, namespace, sweep):
    job = w.create_job(control_plane, namespace, "resumed", deadline=60, started_ago=3600)
    status: dict[str, Any] = job["status"]
    status["conditions"].append(
        {
            "type": "Suspended",
            "status": "True",
            "reason": "PyTorchJobSuspended",
            "message": "PyTorchJob resumed is suspended.",
            "lastUpdateTime": status["startTime"],
            "lastTransitionTime": status["startTime"],
        }
    )
    w.set_status(control_plane, namespace, "PyTorchJob", "resumed", status)

    runs = [
        sweep("-n", namespace, "--action", action, "-o", "json")
        for action in ("touch", "fail", "auto")
    ]

    for run in runs:
        assert run.result.returncode == 0, run.explain()
        [record] = w.report_jobs(run.result.stdout)
        assert (record["decision"], record["reason"]) == ("skip", "resuming"), record
        assert w.writes(run.requests) == [], run.explain()


@pytest.mark.parametrize(
    ("policy", "deleted"),
    [
        pytest.param("None", set(), id="None-keeps-all"),
        pytest.param("Running", {"late-master-0", "late-worker-0"}, id="Running-and-Pending"),
        pytest.param("", {"late-master-0", "late-worker-0", "late-worker-1"}, id="empty-all"),
        pytest.param(
            "all", {"late-master-0", "late-worker-0", "late-worker-1"}, id="lowercase-all"
        ),
    ],
)
def test_terminate_pods_policy_reads_clean_pod_policy_as_the_operator(
    control_plane, namespace, sweep, policy, deleted
):
    late = w.create_job(control_plane, namespace, "late", workers=2)
    control_plane.request(
        "PATCH",
        w.job_path(namespace, "PyTorchJob", "late"),
        {"spec": {"runPolicy": {"cleanPodPolicy": policy}}},
        content_type="application/merge-patch+json",
    )
    stored = w.get_job(control_plane, namespace, "PyTorchJob", "late")
    assert stored["spec"]["runPolicy"]["cleanPodPolicy"] == policy  # the CRD keeps any string
    pods = w.create_replicas(
        control_plane, late, {"Master": ["Running"], "Worker": ["Pending", "Succeeded"]}
    )

    run = sweep("-n", namespace, "--action", "fail", "--terminate-pods", "policy")

    assert run.result.returncode == 0, run.explain()
    assert w.names(control_plane, namespace, "pods") == set(pods) - deleted


def test_active_pods_go_despite_an_explicit_clean_pod_policy_none(control_plane, namespace, sweep):
    # The deliberate difference (README, decisions): the deadline wins over cleanPodPolicy None.
    late = w.create_job(control_plane, namespace, "late", workers=1)
    control_plane.request(
        "PATCH",
        w.job_path(namespace, "PyTorchJob", "late"),
        {"spec": {"runPolicy": {"cleanPodPolicy": "None"}}},
        content_type="application/merge-patch+json",
    )
    pods = w.create_replicas(control_plane, late, {"Master": ["Running"], "Worker": ["Succeeded"]})

    run = sweep("-n", namespace, "--action", "fail")

    assert run.result.returncode == 0, run.explain()
    assert w.names(control_plane, namespace, "pods") == set(pods) - {"late-master-0"}


# --- a validating webhook that cannot be called (failurePolicy Fail) ---------------------------


@pytest.fixture
def webhook_unreachable(control_plane: ControlPlane, namespace: str) -> Iterator[str]:
    """A validating webhook on every UPDATE of pytorchjobs in ``namespace``, on a closed port.

    What the operator's own webhooks look like while its pod is down: kube-apiserver cannot
    call it and, with ``failurePolicy: Fail``, answers 500 "failed calling webhook".
    """
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    name = f"unreachable-{namespace}"[:63]
    control_plane.request(
        "POST",
        f"{ADMISSION}/validatingwebhookconfigurations",
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": "validator.pytorchjob.e2e.kubeflow.org",
                    "clientConfig": {"url": f"https://127.0.0.1:{port}/validate"},
                    "rules": [
                        {
                            "apiGroups": ["kubeflow.org"],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["pytorchjobs"],
                        }
                    ],
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": 2,
                }
            ],
        },
    )
    try:
        _wait_until_refused(control_plane, namespace, "failed calling webhook")
        yield namespace
    finally:
        control_plane.request(
            "DELETE", f"{ADMISSION}/validatingwebhookconfigurations/{name}", expect=(200, 404)
        )


def _wait_until_refused(cp: ControlPlane, namespace: str, says: str) -> None:
    w.create_job(cp, namespace, "probe", started_ago=None)
    patch = {"metadata": {"labels": {"probe": str(time.time_ns())}}}
    for _ in range(100):
        try:
            cp.request(
                "PATCH",
                w.job_path(namespace, "PyTorchJob", "probe"),
                patch,
                content_type="application/merge-patch+json",
            )
        except ApiError as refused:
            assert says in str(refused.body), refused
            cp.request("DELETE", w.job_path(namespace, "PyTorchJob", "probe"))
            return
        time.sleep(0.1)
    pytest.fail("the webhook configuration never took effect")


def test_auto_fails_at_once_a_job_whose_touch_a_failing_webhook_refuses(
    control_plane, webhook_unreachable, sweep
):
    namespace = webhook_unreachable
    late = w.create_job(control_plane, namespace, "late", deadline=60, started_ago=90)
    w.create_replicas(control_plane, late, {"Master": ["Running"]})

    run = sweep("-n", namespace, "--action", "auto", "-o", "json")

    assert run.result.returncode == 0, run.explain()
    [record] = w.report_jobs(run.result.stdout)
    assert (record["decision"], record["reason"], record["result"]) == (
        "fail",
        "touch-refused",
        "done",
    ), record
    assert "failed calling webhook" in record["touch_refused"]
    refused = [e for e in run.requests if e["verb"] == "patch" and "/status" not in e["requestURI"]]
    # The real answer to a webhook that cannot be called: 500, retried by the transport.
    assert {e["responseStatus"]["code"] for e in refused} == {500}, run.explain()
    assert conditions(control_plane, namespace, "late")["Failed"] == "True"
