"""The CronJob: run bounds, restricted pod security, the token, flags and pass-throughs."""

from __future__ import annotations

import pytest

DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_runs_never_overlap_and_never_pile_up(render):
    rendered = render()
    spec = rendered.cronjob["spec"]

    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["successfulJobsHistoryLimit"] == 3
    assert spec["failedJobsHistoryLimit"] == 3
    assert spec["suspend"] is False
    assert rendered.job_spec["backoffLimit"] == 1
    assert rendered.job_spec["ttlSecondsAfterFinished"] == 86400
    assert rendered.pod_spec["restartPolicy"] == "Never"


def test_configuration_errors_timeouts_and_internal_errors_are_not_retried(render):
    rules = render().job_spec["podFailurePolicy"]["rules"]

    assert rules[0] == {
        "action": "FailJob",
        "onExitCodes": {"containerName": "sweeper", "operator": "In", "values": [2, 5, 70]},
    }
    assert rules[1] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}


@pytest.mark.parametrize("which", ["cronjob", "test-pod"])
def test_pod_meets_the_restricted_pod_security_standard(render, which):
    rendered = render()
    pod = rendered.pod_spec if which == "cronjob" else rendered.test_pod["spec"]
    (container,) = pod["containers"]

    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        assert host not in pod
    assert {v["name"] for v in pod["volumes"]} == {"kube-api-access", "tmp"}


def test_token_is_mounted_explicitly_into_the_sweeper_only(render):
    rendered = render()
    pod = rendered.pod_spec

    assert rendered.one("ServiceAccount")["automountServiceAccountToken"] is False
    assert pod["automountServiceAccountToken"] is False
    (mount,) = [m for m in rendered.container["volumeMounts"] if m["name"] == "kube-api-access"]
    assert mount == {
        "name": "kube-api-access",
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        "readOnly": True,
    }
    (volume,) = [v for v in pod["volumes"] if v["name"] == "kube-api-access"]
    sources = volume["projected"]["sources"]
    assert sources[0] == {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}
    assert sources[1]["configMap"]["name"] == "kube-root-ca.crt"
    assert sources[2]["downwardAPI"]["items"][0]["path"] == "namespace"


@pytest.mark.parametrize(
    ("values", "args"),
    [
        pytest.param(
            {},
            [
                "--action=touch",
                "--grace=0",
                "--escalate-after=120",
                "--terminate-pods=active",
                "--reclaim-grace=120",
                "--timeout=52",
                "--output=text",
                "--log-format=json",
                "--log-level=info",
            ],
            id="defaults",
        ),
        pytest.param(
            {"action": "fail", "dryRun": True, "terminatePods": "policy", "maxActions": 3},
            [
                "--action=fail",
                "--dry-run=client",
                "--grace=0",
                "--terminate-pods=policy",
                "--reclaim-grace=120",
                "--max-actions=3",
                "--timeout=52",
                "--output=text",
                "--log-format=json",
                "--log-level=info",
            ],
            id="fail-dry-run",
        ),
        pytest.param(
            {"action": "fail", "terminatePods": "policy", "operatorVersion": "v1.9.3"},
            [
                "--action=fail",
                "--grace=0",
                "--terminate-pods=policy",
                "--operator-version=v1.9.3",
                "--reclaim-grace=120",
                "--timeout=52",
                "--output=text",
                "--log-format=json",
                "--log-level=info",
            ],
            id="fail-policy-operator-version",
        ),
        pytest.param(
            {
                "action": "auto",
                "dryRun": "server",
                "escalateAfter": 300,
                "retouchAfter": 2,
                "retouchLimit": 0,
                "grace": 60,
                "selector": "team=ml,tier!=spot",
                "kinds": ["PyTorchJob", "TFJob"],
                "intervalSeconds": 20,
                "output": "json",
                "logFormat": "text",
                "logLevel": "debug",
                "extraArgs": ["--clock=local"],
            },
            [
                "--action=auto",
                "--dry-run=server",
                "--kind=TFJob",
                "--kind=PyTorchJob",
                "--selector=team=ml,tier!=spot",
                "--grace=60",
                "--escalate-after=300",
                "--retouch-after=2",
                "--retouch-limit=0",
                "--terminate-pods=active",
                "--reclaim-grace=120",
                "--every=20",
                "--for=50",
                "--timeout=52",
                "--output=json",
                "--log-format=text",
                "--log-level=debug",
                "--clock=local",
            ],
            id="everything",
        ),
    ],
)
def test_values_become_sweeper_flags(render, values, args):
    assert render(values).args == args


@pytest.mark.parametrize(
    ("dry_run", "test_flag"),
    [(False, "--dry-run=server"), ("server", "--dry-run=server"), (True, "--dry-run=client")],
)
def test_helm_test_pod_makes_one_pass_that_writes_nothing(render, dry_run, test_flag):
    rendered = render({"dryRun": dry_run, "intervalSeconds": 15})
    pod = rendered.test_pod
    args = pod["spec"]["containers"][0]["args"]

    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert test_flag in args
    assert not [a for a in args if a.startswith(("--every", "--for"))]


def test_test_pod_can_be_left_out(render):
    assert render({"tests": {"enabled": False}}).of_kind("Pod") == []


@pytest.mark.parametrize(
    ("image", "reference", "policy"),
    [
        pytest.param(
            {},
            "ghcr.io/kubeflow-deadline-sweeper/kubeflow-deadline-sweeper:0.1.0",
            "IfNotPresent",
            id="tag-pulls-if-not-present",
        ),
        pytest.param(
            {"digest": DIGEST},
            f"ghcr.io/kubeflow-deadline-sweeper/kubeflow-deadline-sweeper:0.1.0@{DIGEST}",
            "IfNotPresent",
            id="digest-pulls-if-not-present",
        ),
        pytest.param(
            {"repository": "r.example/sweeper", "tag": "dev", "pullPolicy": "Never"},
            "r.example/sweeper:dev",
            "Never",
            id="explicit",
        ),
    ],
)
def test_image_reference_and_pull_policy(render, image, reference, policy):
    container = render({"image": image}).container

    assert container["image"] == reference
    assert container["imagePullPolicy"] == policy


def test_digest_check_is_suppressed_only_while_there_is_no_digest(render):
    by_tag = render().cronjob["metadata"].get("annotations", {})
    by_digest = render({"image": {"digest": DIGEST}}).cronjob["metadata"].get("annotations", {})

    pull_always = render({"image": {"pullPolicy": "Always"}}).cronjob["metadata"]["annotations"]

    assert by_tag["checkov.io/skip1"].startswith("CKV_K8S_43=")
    assert by_tag["checkov.io/skip4"].startswith("CKV_K8S_15=IfNotPresent by design")
    assert "checkov.io/skip4" not in pull_always
    assert by_digest == {}


def test_scheduling_values_pass_through(render):
    values = {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "pool", "operator": "In", "values": ["system"]}
                            ]
                        }
                    ]
                }
            }
        },
        "priorityClassName": "system-cluster-critical",
        "podAnnotations": {"team": "platform"},
        "podLabels": {"cost-center": "ml"},
        "imagePullSecrets": [{"name": "registry"}],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
    }
    rendered = render(values)
    pod = rendered.pod_spec
    meta = rendered.job_spec["template"]["metadata"]

    assert pod["nodeSelector"] == values["nodeSelector"]
    assert pod["tolerations"] == values["tolerations"]
    assert pod["affinity"] == values["affinity"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert meta["annotations"] == {"team": "platform"}
    assert meta["labels"]["cost-center"] == "ml"
    # Helm merges maps: the default limits stay unless set to null.
    assert rendered.container["resources"] == {
        "requests": {"cpu": "10m", "memory": "64Mi"},
        "limits": {"cpu": "500m", "memory": "256Mi"},
    }


def test_every_object_carries_the_standard_labels(render):
    rendered = render({"commonLabels": {"owner": "platform"}})

    for doc in rendered.docs:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "kubeflow-deadline-sweeper"
        assert labels["app.kubernetes.io/instance"] == "sw"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/version"] == "0.1.0"
        assert labels["owner"] == "platform"


def test_network_policy_admits_no_ingress_to_the_sweeper_pods(render):
    rendered = render()
    policy = rendered.one("NetworkPolicy")["spec"]
    pod_labels = rendered.job_spec["template"]["metadata"]["labels"]

    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == []
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert render({"networkPolicy": {"enabled": False}}).of_kind("NetworkPolicy") == []


def test_names_fit_the_job_name_limit(render):
    rendered = render({"nameOverride": "n" * 63})

    # The CronJob controller appends an 11-character suffix; a Job name must fit in 63.
    assert len(rendered.cronjob["metadata"]["name"]) <= 52


@pytest.mark.parametrize("which", ["cronjob", "test-pod"])
def test_a_null_uid_is_left_to_the_platform_and_never_rendered_as_root(render, which):
    rendered = render({"runAsUser": None, "runAsGroup": None})
    pod = rendered.pod_spec if which == "cronjob" else rendered.test_pod["spec"]
    (container,) = pod["containers"]

    for context in (pod["securityContext"], container["securityContext"]):
        assert "runAsUser" not in context
        assert "runAsGroup" not in context
        assert context["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_security_contexts_take_overrides_over_the_restricted_defaults(render):
    rendered = render(
        {
            "podSecurityContext": {
                "fsGroup": 2000,
                "seccompProfile": {"type": "Localhost", "localhostProfile": "p"},
            },
            "containerSecurityContext": {"seLinuxOptions": {"level": "s0:c1,c2"}},
        }
    )

    assert rendered.pod_spec["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 2000,
        "seccompProfile": {"type": "Localhost", "localhostProfile": "p"},
    }
    container = rendered.container["securityContext"]
    assert container["seLinuxOptions"] == {"level": "s0:c1,c2"}
    assert container["capabilities"] == {"drop": ["ALL"]}
    assert container["readOnlyRootFilesystem"] is True


@pytest.mark.parametrize(
    ("kube_version", "accepted"),
    [
        pytest.param("1.26.15", False, id="1.26-refused"),
        pytest.param("1.27.0", True, id="1.27-accepted"),
        pytest.param("1.36.3", True, id="1.36-accepted"),
    ],
)
def test_the_chart_states_the_kubernetes_versions_it_needs(
    render, render_error, kube_version, accepted
):
    if accepted:
        assert render({}, "--kube-version", kube_version).cronjob
    else:
        assert "kubeVersion" in render_error({}, "--kube-version", kube_version)
