"""devcluster's families: what JobSet and the trainer start with, their webhooks, the choices.

Everything a family's controller listens on must be loopback or off (``"0"``): their defaults
(``:8443``, ``:8081``, ``:9443``) are every interface. JobSet's pod webhooks match every pod
of the cluster unless they carry the objectSelector of its own kustomize patch.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from devcluster import webhooks
from devcluster.families import Wanted
from devcluster.mpi_operator import MPIOperatorError
from devcluster.operator import MachineLock
from devcluster.trainer import JobSet, Trainer

# The shape of JobSet's config/components/webhook/manifests.yaml.
MANIFESTS = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- clientConfig:
    service: {name: webhook-service, path: /mutate-jobset-x-k8s-io-v1alpha2-jobset}
  failurePolicy: Fail
  name: mjobset.kb.io
  rules: [{apiGroups: [jobset.x-k8s.io], resources: [jobsets], operations: [CREATE]}]
- clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  failurePolicy: Fail
  name: mpod.kb.io
  rules: [{apiGroups: [""], resources: [pods], operations: [CREATE]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validating-webhook-configuration}
webhooks:
- clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate--v1-pod}
  failurePolicy: Fail
  name: vpod.kb.io
  rules: [{apiGroups: [""], resources: [pods], operations: [CREATE]}]
"""


def _configuration(cls: type[JobSet | Trainer], tmp_path: Path) -> dict[str, Any]:
    controller = cls.__new__(cls)  # no binary needed: the configuration is pure
    controller.workdir = tmp_path
    return controller.configuration(webhook_port=1, probe_port=2)


def test_jobset_s_pod_webhooks_match_the_pods_of_a_jobset_only_and_point_at_loopback() -> None:
    registered = webhooks.on_loopback(
        MANIFESTS,
        port=9443,
        ca_pem=b"PEM",
        names={
            "MutatingWebhookConfiguration": "m",
            "ValidatingWebhookConfiguration": "v",
        },
        object_selectors=JobSet.object_selectors,
    )

    assert [(plural, body["metadata"]["name"]) for plural, body in registered] == [
        ("mutatingwebhookconfigurations", "m"),
        ("validatingwebhookconfigurations", "v"),
    ]
    hooks = {h["name"]: h for _, body in registered for h in body["webhooks"]}
    bundle = base64.b64encode(b"PEM").decode()
    assert hooks["mpod.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate--v1-pod",
        "caBundle": bundle,
    }
    selector = {
        "matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]
    }
    assert hooks["mpod.kb.io"]["objectSelector"] == selector
    assert hooks["vpod.kb.io"]["objectSelector"] == selector
    assert "objectSelector" not in hooks["mjobset.kb.io"]


@pytest.mark.parametrize(
    ("cls", "webhook", "probes"),
    [
        pytest.param(
            JobSet,
            {"host": "127.0.0.1", "port": 1, "certDir": "/w/certs"},
            "127.0.0.1:2",
            id="jobset",
        ),
        pytest.param(Trainer, {"host": "127.0.0.1", "port": 1}, "127.0.0.1:2", id="trainer"),
    ],
)
def test_each_listens_on_loopback_or_not_at_all(
    cls: type[JobSet | Trainer], webhook: dict[str, Any], probes: str
) -> None:
    config = _configuration(cls, Path("/w"))

    assert config["webhook"] == webhook
    assert config["health"]["healthProbeBindAddress"] == probes
    assert config["metrics"]["bindAddress"] == "0"
    assert config["leaderElection"] == {"leaderElect": False}


def test_the_trainer_reads_its_certificates_under_its_own_tmpdir() -> None:
    trainer = Trainer.__new__(Trainer)
    trainer.workdir = Path("/w")

    assert trainer.cert_dir == Path("/w/tmp/k8s-webhook-server/serving-certs")


@pytest.mark.parametrize(
    ("wanted", "binaries", "flags"),
    [
        pytest.param(Wanted(), [], [], id="nothing"),
        pytest.param(Wanted(operator=True), ["training-operator"], ["--operator"], id="operator"),
        pytest.param(
            Wanted(mpi_operator=True),
            ["kube-controller-manager", "mpi-operator"],
            ["--mpi-operator"],
            id="mpi-operator",
        ),
        pytest.param(
            Wanted(operator=True, trainer=True),
            ["training-operator", "kube-controller-manager", "jobset", "trainer"],
            ["--operator", "--trainer"],
            id="operator-and-trainer",
        ),
    ],
)
def test_what_each_choice_needs_and_how_it_is_asked_for(
    wanted: Wanted, binaries: list[str], flags: list[str]
) -> None:
    assert wanted.binaries() == binaries
    assert wanted.flags() == flags
    assert Wanted.from_state(wanted.state()) == wanted


def test_a_second_mpi_operator_waits_for_the_machine_lock_and_says_who_holds_it(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "mpi-operator.lock"
    why = "its health port :8080 is hard-coded"
    holder = MachineLock(lock, what="an mpi-operator", why=why, error=MPIOperatorError)
    holder.acquire(timeout=1)
    try:
        with pytest.raises(MPIOperatorError, match=rf"an mpi-operator .*pid \d+.*{why}"):
            MachineLock(lock, what="an mpi-operator", why=why, error=MPIOperatorError).acquire(
                timeout=0
            )
    finally:
        holder.release()

    again = MachineLock(lock, what="an mpi-operator", why=why, error=MPIOperatorError)
    again.acquire(timeout=1)
    assert again.held
    again.release()
