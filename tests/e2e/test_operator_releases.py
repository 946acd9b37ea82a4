"""What differs by Training Operator release, on that release's real binary.

The release is the one the session runs (``SWEEPER_TEST_OPERATOR_VERSION``, or its older name
``SWEEPER_OPERATOR_VERSION``; v1.9.4 by default), e.g. ``SWEEPER_TEST_OPERATOR_VERSION=v1.8.1
pytest -m "e2e or operator" tests/e2e/test_operator_releases.py``.
The sweeper is told the same release with ``--operator-version`` (docs/operator.md, "Per
release"):

- a sweeper ``fail`` writes the status that release writes at its deadline, and the release
  keeps it on its next reconcile: the same conditions, no pod recreated;
- ``--terminate-pods policy`` deletes what the release deletes: v1.7.0 to v1.9.3 every pod,
  whatever ``cleanPodPolicy`` says; v1.9.4 follows ``cleanPodPolicy`` (unset: ``None``, keep);
- the operator's own deadline failure (woken by a touch) deletes the same pods;
- MXJob is swept where the release serves it (up to v1.8.x).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devcluster import ApiError, binaries, jobs
from devcluster.kubelet import Transition
from devcluster.operator import Operator
from tests.e2e.clusters import RunSweeper
from tests.e2e.conftest_operator import (
    OPERATOR_DEADLINE_MESSAGE,
    SWEEPER_DEADLINE_MESSAGE,
    RunningJob,
    entry_for,
    poll,
    sleep_until,
    sweeper_passes,
)

pytestmark = [pytest.mark.e2e, pytest.mark.operator]

ADMISSION = "/apis/admissionregistration.k8s.io/v1"
EVERY_POD_RUNNING_AT_1S = [Transition(1, "Running")]
ADS = 6


def release() -> str:
    """The operator release of this session, e.g. ``v1.9.3``."""
    return binaries.version("training-operator")


def deletes_every_pod() -> bool:
    """v1.7.0 to v1.9.3 delete every pod at a deadline failure (job.go before #3420)."""
    version = tuple(int(part) for part in release().lstrip("v").split("."))
    return version < (1, 9, 4)


def kinds_here() -> list[str]:
    """PyTorchJob, and MXJob where this release serves it (the kinds the tests below run)."""
    served = jobs.served_kinds(release())
    return [kind for kind in ("PyTorchJob", "MXJob") if kind in served]


def overdue_with_stable_pods(kubeflow_jobs: Callable[..., RunningJob], kind: str) -> RunningJob:
    """A job of ``kind`` past its deadline, every pod Running, not failed by the operator."""
    job = kubeflow_jobs(kind, ads=ADS, timeline=EVERY_POD_RUNNING_AT_1S)
    deadline = job.started().deadline
    assert deadline is not None
    job.wait(lambda v: v.is_true("Running"), f"{kind} to be Running")
    sleep_until(deadline + dt.timedelta(seconds=2))
    assert not job.view().failed, "premise: with stable pods the operator missed the deadline"
    return job


def reconciled_again(operator: Operator, job: RunningJob, api_patch: Callable[..., Any]) -> None:
    """Make the operator reconcile the job once more, and wait until that reconcile ended."""
    scheme = job.kind.lower()
    poll(lambda: operator.idle(scheme), what=f"the {scheme} controller to be idle")
    before = operator.reconciles(scheme)
    api_patch(job, {"metadata": {"annotations": {"e2e.example/poke": "1"}}})
    poll(lambda: operator.reconciles(scheme) > before, what="the operator to reconcile the job")
    poll(lambda: operator.idle(scheme), what="that reconcile to end")


@pytest.fixture
def patch_job(control_plane: Any) -> Callable[..., Any]:
    """Merge-patch a job as the admin (an update event, as a touch is)."""

    def patch(job: RunningJob, body: dict[str, Any]) -> Any:
        plural = jobs.kind_info(job.kind).plural
        return control_plane.request(
            "PATCH",
            f"/apis/kubeflow.org/v1/namespaces/{job.namespace}/{plural}/{job.name}",
            body,
            content_type="application/merge-patch+json",
        )

    return patch


def pod_names(job: RunningJob) -> list[str]:
    return sorted(p.metadata.name for p in job.pods())


@pytest.mark.parametrize("kind", kinds_here())
def test_a_sweeper_fail_is_kept_by_this_release_with_its_pods_handled_as_it_handles_them(
    operator: Operator,
    kubeflow_jobs: Callable[..., RunningJob],
    run_sweeper: RunSweeper,
    patch_job: Callable[..., Any],
    kind: str,
) -> None:
    job = overdue_with_stable_pods(kubeflow_jobs, kind)
    pods = pod_names(job)
    assert len(pods) == 4  # one master and three workers

    completed = run_sweeper(
        "--action", "fail", "--terminate-pods", "policy", "--operator-version", release(),
        "-n", job.namespace, "-o", "json",
    )  # fmt: skip

    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "--operator-version" not in completed.stderr, "no warning: the release is known"
    entry = entry_for(sweeper_passes(completed.stdout)[0], job)
    assert (entry["decision"], entry["reason"], entry["result"]) == ("fail", "overdue", "done")
    failed = job.view()
    condition = failed.condition("Failed") or {}
    assert (condition.get("status"), condition.get("reason"), condition.get("message")) == (
        "True",
        f"{kind}Failed",
        SWEEPER_DEADLINE_MESSAGE.format(name=job.name),
    )
    assert (failed.condition("Running") or {}).get("status") == "False"
    assert failed.obj["status"].get("completionTime")
    # What this release deletes at its own deadline failure: every pod, or per cleanPodPolicy
    # (unset here, so None: keep them all).
    expected_deleted = pods if deletes_every_pod() else []
    assert sorted(entry["deleted"]["pods"]) == expected_deleted
    poll(lambda: pod_names(job) == sorted(set(pods) - set(expected_deleted)), what="the pods")

    reconciled_again(operator, job, patch_job)

    after = job.view()
    assert after.conditions == failed.conditions, f"{release()} rewrote the conditions"
    assert after.obj["status"].get("completionTime") == failed.obj["status"]["completionTime"]
    assert pod_names(job) == sorted(set(pods) - set(expected_deleted)), (
        f"{release()} recreated or deleted pods of a job the sweeper failed"
    )


def test_the_operators_own_deadline_failure_deletes_what_the_policy_flag_says(
    operator: Operator,
    kubeflow_jobs: Callable[..., RunningJob],
    run_sweeper: RunSweeper,
) -> None:
    job = overdue_with_stable_pods(kubeflow_jobs, "PyTorchJob")
    pods = pod_names(job)

    touched = run_sweeper("--action", "touch", "-n", job.namespace, "-o", "json")
    assert touched.returncode == 0, touched.stderr[-2000:]
    failed = job.wait_failed(timeout=30)
    condition = failed.condition("Failed") or {}
    assert (condition.get("reason"), condition.get("message")) == (
        "PyTorchJobFailed",
        OPERATOR_DEADLINE_MESSAGE.format(name=job.name),
    )
    kept = [] if deletes_every_pod() else pods
    poll(lambda: pod_names(job) == kept, what=f"{release()} to leave pods {kept}")

    # policy with this release: nothing left to do, whichever release it is.
    known = run_sweeper(
        "--action", "fail", "--terminate-pods", "policy", "--operator-version", release(),
        "-n", job.namespace, "-o", "json",
    )  # fmt: skip
    entry = entry_for(sweeper_passes(known.stdout)[0], job)
    assert (entry["decision"], entry["reason"]) == ("skip", "finished"), entry
    assert pod_names(job) == kept

    # Unknown release: cleanPodPolicy (None) keeps the pods, and the log says what older
    # releases delete.
    unknown = run_sweeper(
        "--action", "fail", "--terminate-pods", "policy", "-n", job.namespace, "-o", "json"
    )
    assert unknown.returncode == 0, unknown.stderr[-2000:]
    assert "releases v1.7.0 to v1.9.3 delete every pod" in unknown.stderr
    assert pod_names(job) == kept


@pytest.fixture
def real_webhook(operator: Operator, control_plane: Any) -> Iterator[Callable[[str], None]]:
    """Register this release's own PyTorchJob webhook (failurePolicy Fail) for one namespace.

    The harness registers none (nothing in a real cluster's shape could reach it); here the
    apiserver calls the operator's webhook server on loopback, with the harness's CA.
    """
    names: list[str] = []

    def register(namespace: str) -> None:
        name = f"e2e-{namespace}"
        control_plane.request(
            "POST",
            f"{ADMISSION}/validatingwebhookconfigurations",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": name},
                "webhooks": [
                    {
                        "name": "validator.pytorchjob.training-operator.kubeflow.org",
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{operator.webhook_port}"
                            "/validate-kubeflow-org-v1-pytorchjob",
                            "caBundle": base64.b64encode(operator.certificates.ca_crt).decode(),
                        },
                        "rules": [
                            {
                                "apiGroups": ["kubeflow.org"],
                                "apiVersions": ["v1"],
                                "operations": ["CREATE", "UPDATE"],
                                "resources": ["pytorchjobs"],
                            }
                        ],
                        "failurePolicy": "Fail",
                        "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": namespace}
                        },
                    }
                ],
            },
        )
        names.append(name)

    yield register
    for name in names:
        control_plane.request(
            "DELETE", f"{ADMISSION}/validatingwebhookconfigurations/{name}", expect=(200, 404)
        )


@pytest.mark.skipif(
    tuple(int(p) for p in release().lstrip("v").split(".")) < (1, 8, 0),
    reason="v1.7.0 serves no validating webhook",
)
def test_this_releases_own_webhook_lets_the_touch_through(
    operator: Operator,
    kubeflow_jobs: Callable[..., RunningJob],
    run_sweeper: RunSweeper,
    patch_job: Callable[..., Any],
    real_webhook: Callable[[str], None],
) -> None:
    job = overdue_with_stable_pods(kubeflow_jobs, "PyTorchJob")
    real_webhook(job.namespace)

    def refuses_a_second_master() -> bool:
        bad = {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 2}}}}
        try:
            patch_job(job, bad)
        except ApiError as error:
            return "denied the request" in str(error)
        return False

    poll(refuses_a_second_master, what="the operator's webhook to judge updates")

    touched = run_sweeper("--action", "touch", "-n", job.namespace, "-o", "json")

    assert touched.returncode == 0, touched.stderr[-2000:]
    entry = entry_for(sweeper_passes(touched.stdout)[0], job)
    assert (entry["decision"], entry["result"]) == ("touch", "done")
    failed = job.wait_failed(timeout=30)
    assert (failed.condition("Failed") or {}).get("reason") == "PyTorchJobFailed"
