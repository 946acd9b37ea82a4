"""devcluster.kueue: the Configuration Kueue starts with and the webhooks registered for it.

The webhooks of integrations that are off must be left out: their paths are not served, and
with ``failurePolicy: Fail`` the API server would refuse every Pod, Job or Deployment.
"""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from devcluster.kueue import PYTORCHJOB, configuration, webhook_configurations

# The shape of Kueue's config/components/webhook/manifests.yaml, three webhooks a kind.
MANIFESTS = """
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  name: mpod.kb.io
  rules: [{apiGroups: [""], resources: [pods], operations: [CREATE]}]
- clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-kubeflow-org-v1-pytorchjob}
  name: mpytorchjob.kb.io
  rules: [{apiGroups: [kubeflow.org], resources: [pytorchjobs], operations: [CREATE]}]
- clientConfig:
    service: {name: webhook-service, path: /mutate-kueue-x-k8s-io-v1beta2-workload}
  name: mworkload.kb.io
  rules: [{apiGroups: [kueue.x-k8s.io], resources: [workloads], operations: [CREATE]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-kubeflow-org-v1-tfjob}
  name: vtfjob.kb.io
  rules: [{apiGroups: [kubeflow.org], resources: [tfjobs], operations: [CREATE, UPDATE]}]
- clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-kubeflow-org-v1-pytorchjob}
  name: vpytorchjob.kb.io
  rules: [{apiGroups: [kubeflow.org], resources: [pytorchjobs], operations: [CREATE, UPDATE]}]
"""


def test_only_kueue_s_own_and_the_pytorchjob_webhooks_are_registered_on_loopback() -> None:
    registered = webhook_configurations(MANIFESTS, port=9443, ca_pem=b"PEM")

    assert [(plural, body["metadata"]["name"]) for plural, body in registered] == [
        ("mutatingwebhookconfigurations", "devcluster-kueue-mutating"),
        ("validatingwebhookconfigurations", "devcluster-kueue-validating"),
    ]
    hooks = {h["name"]: h["clientConfig"] for _, body in registered for h in body["webhooks"]}
    bundle = base64.b64encode(b"PEM").decode()
    assert hooks == {
        "mpytorchjob.kb.io": {
            "url": "https://127.0.0.1:9443/mutate-kubeflow-org-v1-pytorchjob",
            "caBundle": bundle,
        },
        "mworkload.kb.io": {
            "url": "https://127.0.0.1:9443/mutate-kueue-x-k8s-io-v1beta2-workload",
            "caBundle": bundle,
        },
        "vpytorchjob.kb.io": {
            "url": "https://127.0.0.1:9443/validate-kubeflow-org-v1-pytorchjob",
            "caBundle": bundle,
        },
    }


def test_the_configuration_listens_on_loopback_with_its_own_certificates() -> None:
    config = yaml.safe_load(
        configuration(webhook_port=1, metrics_port=2, probe_port=3, cert_dir=Path("/c"))
    )

    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["integrations"] == {"frameworks": [PYTORCHJOB]}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["webhook"] == {"host": "127.0.0.1", "port": 1, "certDir": "/c"}
    assert config["metrics"]["bindAddress"] == "127.0.0.1:2"
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:3"
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["featureGates"] == {"VisibilityOnDemand": False}
