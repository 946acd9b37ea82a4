"""policy.rules and policy.exemptionAdmission: the rules file the pods read, its RBAC, the schema.

The rules render into a ConfigMap mounted read-only into every sweeper pod (the CronJob's, the
Deployment's and the ``helm test`` pod) and passed with ``--policy`` only when there are rules;
values.schema.json refuses a malformed rule at render time, naming its field. The admission
policy's behaviour is proven on a real kube-apiserver by tests/e2e/test_policy_admission.py;
here, what it is rendered from.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from sweeper.core.kinds import (
    EXCLUDE_ANNOTATION,
    LEGACY_EXCLUDE_ANNOTATION,
    LEGACY_TOUCHED_AT_ANNOTATION,
    TOUCHED_AT_ANNOTATION,
)
from sweeper.flag import parse_duration

CHART = Path(__file__).resolve().parents[2] / "chart"
SCHEMA = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
PATH = "/etc/kubeflow-deadline-sweeper/policy/rules.yaml"
GPU: dict[str, Any] = {
    "name": "gpu-tenants",
    "namespaceSelector": {
        "matchLabels": {"platform.example.com/tier": "gpu"},
        "matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}],
    },
    "kinds": ["PyTorchJob", "TrainJob"],
    "defaultDeadline": "24h",
    "maxDeadline": "72h",
    "allowExemption": False,
    "warnBefore": "30m",
}
REST = {"name": "everyone-else", "maxDeadline": 604800}
RULES = {"policy": {"rules": [GPU, REST]}}


def pods(rendered: Any) -> list[dict[str, Any]]:
    """Every sweeper pod spec of a rendering: the CronJob's or the Deployment's, the test pod's."""
    specs = [rendered.test_pod["spec"]]
    specs += [d["spec"]["template"]["spec"] for d in rendered.of_kind("Deployment")]
    specs += [
        d["spec"]["jobTemplate"]["spec"]["template"]["spec"] for d in rendered.of_kind("CronJob")
    ]
    return specs


def policy_mounts(spec: dict[str, Any]) -> list[dict[str, Any]]:
    (container,) = spec["containers"]
    return [m for m in container["volumeMounts"] if m["name"] == "policy"]


@pytest.mark.parametrize("mode", ["cronjob", "watch"])
def test_the_rules_become_the_mounted_file_the_sweeper_reads(render, mode):
    rendered = render({**RULES, "mode": mode})
    (config_map,) = [
        c for c in rendered.of_kind("ConfigMap") if c["metadata"]["name"].endswith("-policy")
    ]

    assert config_map["metadata"]["name"] == "sw-kubeflow-deadline-sweeper-policy"
    assert yaml.safe_load(config_map["data"]["rules.yaml"]) == {"rules": [GPU, REST]}
    for spec in pods(rendered):
        assert policy_mounts(spec) == [
            {"name": "policy", "mountPath": str(Path(PATH).parent), "readOnly": True}
        ]
        assert {"name": "policy", "configMap": {"name": "sw-kubeflow-deadline-sweeper-policy"}} in (
            spec["volumes"]
        )
        (container,) = spec["containers"]
        assert f"--policy={PATH}" in container["args"]


def test_without_rules_nothing_changes(render):
    for rendered in (render(), render({"policy": {"rules": []}}), render({"mode": "watch"})):
        assert [c for c in rendered.of_kind("ConfigMap") if "policy" in c["metadata"]["name"]] == []
        for spec in pods(rendered):
            assert policy_mounts(spec) == []
            assert "policy" not in {v["name"] for v in spec["volumes"]}
            assert not [a for a in spec["containers"][0]["args"] if a.startswith("--policy")]


def test_changed_rules_roll_the_deployment(render):
    def annotations(values: dict[str, Any]) -> dict[str, str]:
        deployment = render({"mode": "watch", "podAnnotations": {"a": "b"}, **values}).one(
            "Deployment"
        )
        return dict(deployment["spec"]["template"]["metadata"]["annotations"])

    one = annotations(RULES)
    same = annotations(RULES)
    other = annotations({"policy": {"rules": [{**GPU, "maxDeadline": "48h"}]}})

    assert one == same
    assert one["a"] == "b"
    assert one["checksum/policy"] != other["checksum/policy"]
    assert annotations({}) == {"a": "b"}


def namespace_rules(roles: list[dict[str, Any]]) -> list[list[str]]:
    return [r["verbs"] for role in roles for r in role["rules"] if "namespaces" in r["resources"]]


@pytest.mark.parametrize(
    ("values", "verbs"),
    [
        pytest.param({}, [], id="no-rules"),
        pytest.param({"mode": "watch"}, [], id="no-rules-watch"),
        pytest.param(RULES, [["list"]], id="rules"),
        pytest.param({**RULES, "dryRun": True}, [["list"]], id="rules-dry-run"),
        # The labels are re-read at each resync, not watched.
        pytest.param({**RULES, "mode": "watch"}, [["list"]], id="rules-watch"),
    ],
)
def test_the_cluster_role_reads_namespaces_only_with_rules(render, values, verbs):
    rendered = render(values)

    assert namespace_rules(rendered.of_kind("ClusterRole")) == verbs
    for rule in rendered.one("ClusterRole")["rules"]:
        if "namespaces" in rule["resources"]:
            assert rule["apiGroups"] == [""]
            assert rule["resources"] == ["namespaces"]


def test_with_rules_action_touch_may_fail_a_job_too(render):
    # A default or a cap the job does not carry cannot be enforced by a touch: the sweeper
    # fails the job, so it needs to re-read it and to write its status.
    v1 = {"families": ["training-operator"], "kinds": ["PyTorchJob"]}
    without = render({**v1, "action": "touch"}).one("ClusterRole")["rules"]
    with_rules = render({**v1, **RULES, "action": "touch"}).one("ClusterRole")["rules"]
    dry_run = render({**v1, **RULES, "action": "touch", "dryRun": True}).one("ClusterRole")["rules"]

    assert without[0]["verbs"] == ["list", "patch"]
    assert with_rules[0]["verbs"] == ["get", "list", "patch"]
    assert with_rules[1] == {
        "apiGroups": ["kubeflow.org"],
        "resources": ["pytorchjobs/status"],
        "verbs": ["patch"],
    }
    assert [r for r in dry_run if "pytorchjobs/status" in r["resources"]] == []


def test_a_namespaced_install_gets_each_listed_namespace_and_nothing_cluster_wide(render):
    rendered = render({**RULES, "namespaces": ["team-a", "team-b"]})

    assert rendered.of_kind("ClusterRole") == []
    assert [r["metadata"]["namespace"] for r in rendered.of_kind("Role")] == ["team-a", "team-b"]
    # A request for Namespace X is authorized in namespace X, so a Role there grants it.
    assert namespace_rules(rendered.of_kind("Role")) == [["get"], ["get"]]
    assert namespace_rules(render({"namespaces": ["team-a"]}).of_kind("Role")) == []


def rule_error(render_error: Any, rule: dict[str, Any]) -> str:
    error: str = render_error({"policy": {"rules": [REST, rule]}})
    return error


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        pytest.param(
            {"maxDeadline": "72h"}, "at '/policy/rules/1': missing property 'name'", id="no-name"
        ),
        pytest.param({"name": "GPU_Tenants"}, "/policy/rules/1/name", id="name-not-a-dns-label"),
        pytest.param({"name": "x", "maxDeadlne": "72h"}, "'maxDeadlne' not allowed", id="typo"),
        pytest.param({"name": "x", "maxDeadline": "3x"}, "/policy/rules/1/maxDeadline", id="3x"),
        pytest.param({"name": "x", "maxDeadline": "72H"}, "/policy/rules/1/maxDeadline", id="72H"),
        pytest.param({"name": "x", "maxDeadline": "0s"}, "/policy/rules/1/maxDeadline", id="zero"),
        pytest.param(
            {"name": "x", "maxDeadline": 0}, "/policy/rules/1/maxDeadline", id="zero-number"
        ),
        pytest.param(
            {"name": "x", "defaultDeadline": "-1h"}, "/policy/rules/1/defaultDeadline", id="neg"
        ),
        pytest.param({"name": "x", "warnBefore": True}, "/policy/rules/1/warnBefore", id="bool"),
        pytest.param(
            {"name": "x", "maxDeadline": 1e300}, "/policy/rules/1/maxDeadline", id="huge-number"
        ),
        pytest.param(
            {"name": "x", "maxDeadline": 31536001}, "/policy/rules/1/maxDeadline", id="over-a-year"
        ),
        pytest.param(
            {"name": "x", "warnBefore": "1" + "0" * 340 + "h"},
            "/policy/rules/1/warnBefore",
            id="huge-text",
        ),
        pytest.param(
            {"name": "x", "allowExemption": "yes"}, "/policy/rules/1/allowExemption", id="yes"
        ),
        pytest.param(
            {"name": "x", "kinds": "PyTorchJob"}, "/policy/rules/1/kinds", id="kinds-string"
        ),
        pytest.param({"name": "x", "kinds": ["Pod"]}, "/policy/rules/1/kinds/0", id="kind-unknown"),
        pytest.param({"name": "x", "kinds": []}, "/policy/rules/1/kinds", id="kinds-empty"),
        pytest.param(
            {"name": "x", "namespaceSelector": {"matchLabel": {"a": "b"}}},
            "'matchLabel' not allowed",
            id="selector-typo",
        ),
        pytest.param(
            {"name": "x", "namespaceSelector": {"matchLabels": {"gpu": True}}},
            "/policy/rules/1/namespaceSelector/matchLabels/gpu",
            id="label-value-not-a-string",
        ),
        pytest.param(
            {
                "name": "x",
                "namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Equals"}]},
            },
            "/policy/rules/1/namespaceSelector/matchExpressions/0/operator",
            id="operator-unknown",
        ),
        pytest.param(
            {
                "name": "x",
                "namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]},
            },
            "at '/policy/rules/1/namespaceSelector/matchExpressions/0': missing property 'values'",
            id="in-without-values",
        ),
        pytest.param(
            {
                "name": "x",
                "namespaceSelector": {
                    "matchExpressions": [{"key": "a", "operator": "Exists", "values": ["b"]}]
                },
            },
            "/policy/rules/1/namespaceSelector/matchExpressions/0/values",
            id="exists-with-values",
        ),
    ],
)
def test_the_schema_refuses_a_bad_rule_naming_its_field(render_error, rule, field):
    error = rule_error(render_error, rule)

    assert "values don't meet the specifications of the schema" in error
    assert field in error


def test_two_rules_of_one_name_are_refused(render_error):
    error = render_error({"policy": {"rules": [REST, GPU, {**REST, "maxDeadline": "1h"}]}})

    assert 'policy.rules[2]: name "everyone-else" is used by an earlier rule' in error


@pytest.mark.parametrize(
    "rule",
    [
        pytest.param({"name": "catch-all"}, id="name-only"),
        pytest.param({"name": "all", "namespaceSelector": {}}, id="empty-selector"),
        pytest.param(GPU, id="every-field"),
        pytest.param(
            {
                "name": "exprs",
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": "a", "operator": "NotIn", "values": ["x"]},
                        {"key": "b", "operator": "DoesNotExist"},
                        {"key": "c", "operator": "Exists", "values": []},
                    ]
                },
            },
            id="every-operator",
        ),
        pytest.param(
            {"name": "d", "defaultDeadline": 90, "maxDeadline": "1h30m", "warnBefore": "250ms"},
            id="durations",
        ),
        pytest.param(
            {"name": "y", "defaultDeadline": 31536000, "maxDeadline": "8760h"}, id="a-year"
        ),
    ],
)
def test_the_schema_accepts_a_good_rule(render, rule):
    assert render({"policy": {"rules": [rule]}}).cronjob


# Durations as the sweeper's parser reads them (sweeper.flag.parse_duration, positive).
DURATIONS = [
    "90", "90.5", ".5", "1e3", "+90", "90s", "15m", "24h", "1h30m", "1.5h", "250ms", "2d",
    "1w", "500us", "1h0m30s", "+1h",
    "0", "0s", "0h0m", "-1h", "-90", "1H", "h", "", "3x", "1 h", "ten", "1h-", "s1",
]  # fmt: skip


@pytest.mark.parametrize("text", DURATIONS)
def test_the_duration_pattern_takes_what_the_sweeper_takes(text):
    duration = SCHEMA["definitions"]["duration"]
    patterns = [p["pattern"] for p in duration["anyOf"][1]["allOf"]]
    try:
        expected = parse_duration(text, positive=True) > 0
    except ValueError:
        expected = False

    assert all(re.search(p, text) for p in patterns) == expected


def admission(rendered: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The exemptions policy and its binding (<fullname>-launchers may render beside them)."""
    name = "sw-kubeflow-deadline-sweeper-exemptions"
    (policy,) = [
        p for p in rendered.of_kind("ValidatingAdmissionPolicy") if p["metadata"]["name"] == name
    ]
    (binding,) = [
        b
        for b in rendered.of_kind("ValidatingAdmissionPolicyBinding")
        if b["metadata"]["name"] == name
    ]
    return policy, binding


def test_no_admission_policy_unless_enabled(render):
    rendered = render()

    assert rendered.of_kind("ValidatingAdmissionPolicy") == []
    assert rendered.of_kind("ValidatingAdmissionPolicyBinding") == []


def test_the_admission_policy_guards_the_sweepers_own_annotation_keys(render):
    policy, binding = admission(
        render({"policy": {"exemptionAdmission": {"enabled": True, "allowedGroups": ["ops"]}}})
    )
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}

    assert json.loads(variables["keys"]) == [EXCLUDE_ANNOTATION, LEGACY_EXCLUDE_ANNOTATION]
    assert '["ops"]' in variables["allowed"]
    validation = policy["spec"]["validations"][0]
    assert EXCLUDE_ANNOTATION in validation["message"]
    assert "the groups ops" in validation["message"]
    assert binding["spec"] == {
        "policyName": policy["metadata"]["name"],
        "validationActions": ["Deny"],
    }
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"


def test_the_admission_policy_covers_the_swept_kinds_on_create_and_update(render):
    def resources(values: dict[str, Any]) -> dict[str, list[str]]:
        enabled = {"policy": {"exemptionAdmission": {"enabled": True}}, **values}
        policy, _ = admission(render(enabled))
        rules = policy["spec"]["matchConstraints"]["resourceRules"]
        assert all(r["operations"] == ["CREATE", "UPDATE"] for r in rules)
        return {r["apiGroups"][0]: r["resources"] for r in rules}

    assert resources({}) == {
        "kubeflow.org": [
            "tfjobs", "pytorchjobs", "xgboostjobs", "mpijobs", "paddlejobs", "jaxjobs", "mxjobs",
        ],
        "trainer.kubeflow.org": ["trainjobs"],
    }  # fmt: skip
    assert resources({"kinds": ["PyTorchJob"]}) == {"kubeflow.org": ["pytorchjobs"]}
    assert resources({"families": ["trainer"]}) == {"trainer.kubeflow.org": ["trainjobs"]}


@pytest.mark.parametrize(
    "admission_values",
    [
        pytest.param({"enabled": True}, id="default"),
        # An emptied key in a values file (`allowedGroups:`) or --set ...allowedGroups=null.
        pytest.param({"enabled": True, "allowedGroups": None}, id="null"),
    ],
)
def test_without_allowed_groups_nobody_may_exempt(render, admission_values):
    policy, _ = admission(render({"policy": {"exemptionAdmission": admission_values}}))
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}

    assert "only by a member of no group" in policy["spec"]["validations"][0]["message"]
    # `g in null` has no CEL overload: the API server would refuse the policy.
    assert variables["allowed"] == "request.userInfo.?groups.orValue([]).exists(g, g in [])"


@pytest.mark.parametrize(
    ("values", "account"),
    [
        pytest.param({}, "system:serviceaccount:sweeper:sw-kubeflow-deadline-sweeper", id="chart"),
        pytest.param(
            {"serviceAccount": {"create": False, "name": "platform-sweeper"}},
            "system:serviceaccount:sweeper:platform-sweeper",
            id="existing",
        ),
    ],
)
def test_only_the_sweepers_service_account_may_stamp_a_touch(render, values, account):
    # A tenant's stamp in the future would hold back every touch of the job.
    enabled = {"policy": {"exemptionAdmission": {"enabled": True, "allowedGroups": ["ops"]}}}
    policy, _ = admission(render({**values, **enabled}))
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}

    assert json.loads(variables["touchKeys"]) == [
        TOUCHED_AT_ANNOTATION,
        LEGACY_TOUCHED_AT_ANNOTATION,
    ]
    assert variables["sweeper"] == f"request.userInfo.username == {json.dumps(account)}"
    exclude, touch = policy["spec"]["validations"]
    assert "variables.allowed" in exclude["expression"]
    assert "variables.keys" in exclude["expression"]
    assert "variables.sweeper" in touch["expression"]
    assert "variables.touchKeys" in touch["expression"]
    assert TOUCHED_AT_ANNOTATION in touch["message"]
    assert account in touch["message"]


def test_the_admission_policy_needs_kubernetes_1_30(render, render_error):
    enabled = {"policy": {"exemptionAdmission": {"enabled": True}}}

    error = render_error(enabled, "--kube-version", "v1.29.9")

    assert "policy.exemptionAdmission needs Kubernetes 1.30 or later" in error
    assert "v1.29.9" in error
    assert admission(render(enabled, "--kube-version", "v1.30.0"))
    assert render({}, "--kube-version", "v1.29.9").cronjob


def test_the_binding_follows_the_swept_namespaces(render):
    _, binding = admission(
        render(
            {
                "namespaces": ["team-a"],
                "excludeNamespaces": ["sandbox"],
                "policy": {"exemptionAdmission": {"enabled": True}},
            }
        )
    )

    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a"]},
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["sandbox"]},
    ]


@pytest.mark.parametrize(
    ("values", "guarded"),
    [
        pytest.param({"policy": {"rules": [REST]}}, True, id="a-rule-selects-mpijobs"),
        pytest.param({}, True, id="no-rules"),
        pytest.param({"policy": {"rules": [{"name": "t", "kinds": ["TrainJob"]}]}}, True, id="tj"),
        pytest.param({"dryRun": "server"}, True, id="server-dry-run"),
        pytest.param({"dryRun": True, "policy": {"rules": [REST]}}, False, id="dry-run"),
        pytest.param({"kinds": ["TFJob", "TrainJob"]}, False, id="no-mpijob-among-the-kinds"),
        pytest.param(
            {"families": ["training-operator"], "policy": {"rules": [REST]}},
            False,
            id="no-mpi-operator",
        ),
    ],
)
def test_the_sweepers_job_writes_are_held_to_launcher_deadlines(render, values, guarded):
    # patch on jobs.batch is cluster-wide: the policy narrows it to what the sweeper writes.
    enabled = {"exemptionAdmission": {"enabled": True}}
    rendered = render({**values, "policy": {**values.get("policy", {}), **enabled}})
    rules = rendered.one("ClusterRole")["rules"]
    patches_jobs = any(r["apiGroups"] == ["batch"] and "patch" in r["verbs"] for r in rules)
    policies = {p["metadata"]["name"]: p for p in rendered.of_kind("ValidatingAdmissionPolicy")}
    bindings = [
        b["spec"]["policyName"] for b in rendered.of_kind("ValidatingAdmissionPolicyBinding")
    ]

    assert patches_jobs is guarded
    assert ("sw-kubeflow-deadline-sweeper-launchers" in policies) is guarded
    assert ("sw-kubeflow-deadline-sweeper-launchers" in bindings) is guarded
    if guarded:
        spec = policies["sw-kubeflow-deadline-sweeper-launchers"]["spec"]
        assert spec["matchConstraints"]["resourceRules"] == [
            {
                "apiGroups": ["batch"],
                "apiVersions": ["*"],
                "operations": ["UPDATE"],
                "resources": ["jobs"],
            }
        ]
        (condition,) = spec["matchConditions"]
        account = "system:serviceaccount:sweeper:sw-kubeflow-deadline-sweeper"
        assert condition["expression"] == f'request.userInfo.username == "{account}"'
        (validation,) = spec["validations"]
        for guarded_field in ("suspend", "template", "labels", "ownerReferences"):
            assert guarded_field in validation["expression"]
