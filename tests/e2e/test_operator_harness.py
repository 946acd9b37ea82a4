"""The harness runs the real operator as devcluster/operator.py describes, and it agrees.

What the other operator tests take for granted: the operator accepts the harness's webhook
material without rewriting it, no validating webhook stands between the sweeper and the jobs,
and the operator watches every namespace.
"""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from kubernetes import client

from devcluster import ControlPlane
from devcluster.kubelet import Transition
from devcluster.operator import SECRET_NAME, Operator
from tests.e2e.conftest_operator import RunningJob

pytestmark = [pytest.mark.e2e, pytest.mark.operator]


def test_the_operator_keeps_the_harness_certificates_as_they_are(
    operator: Operator, control_plane: ControlPlane
) -> None:
    secret = client.CoreV1Api(control_plane.api()).read_namespaced_secret(
        SECRET_NAME, operator.namespace
    )

    stored = {key: base64.b64decode(value) for key, value in (secret.data or {}).items()}
    assert stored == operator.certificates.secret_data()
    log = operator.log_since_start()
    assert "no cert refresh needed" in log
    assert "refreshing" not in log


def test_no_validating_webhook_can_reject_a_touch(
    operator: Operator, control_plane: ControlPlane
) -> None:
    webhooks = client.AdmissionregistrationV1Api(
        control_plane.api()
    ).list_validating_webhook_configuration()

    names = [w.metadata.name for w in webhooks.items if w.metadata]
    assert "validator.training-operator.kubeflow.org" not in names


def test_the_operator_runs_jobs_in_any_namespace(
    operator: Operator, kubeflow_jobs: Callable[..., RunningJob]
) -> None:
    job = kubeflow_jobs("PyTorchJob", ads=None, timeline=[Transition(0, "Running")])

    running = job.wait(lambda v: v.is_true("Running"), "the job to be Running")

    assert running.start_time is not None
    assert [p.metadata.name for p in job.pods()] == [
        f"{job.name}-master-0",
        f"{job.name}-worker-0",
        f"{job.name}-worker-1",
        f"{job.name}-worker-2",
    ]
    assert job.services() == [p.metadata.name for p in job.pods()]
