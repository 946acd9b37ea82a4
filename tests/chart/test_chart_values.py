"""The pass-through values Helm users expect, in both modes: env, volumes, spread, token, args.

Each value is rendered in mode cronjob (the CronJob's pod, and the ``helm test`` pod, which
shares its spec) and in mode watch (the Deployment's pod), and is in the strict schema.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.chart.conftest import Doc, Rendered

SELECTOR = {
    "app.kubernetes.io/name": "kubeflow-deadline-sweeper",
    "app.kubernetes.io/instance": "sw",
}
MODES = [pytest.param("cronjob", id="cronjob"), pytest.param("watch", id="watch")]


def pods(rendered: Rendered, mode: str) -> list[Doc]:
    """The sweeper pod specs of one mode: the workload's, and the helm test pod's."""
    workload = (
        rendered.pod_spec
        if mode == "cronjob"
        else rendered.one("Deployment")["spec"]["template"]["spec"]
    )
    return [workload, rendered.test_pod["spec"]]


def sweeper(pod: Doc) -> Doc:
    container: Doc
    (container,) = pod["containers"]
    return container


def render_mode(render: Callable[..., Rendered], mode: str, values: dict[str, Any]) -> Rendered:
    return render({"mode": mode, **values})


PROXY = [
    {"name": "HTTPS_PROXY", "value": "http://proxy.internal:3128"},
    {"name": "SWEEPER_PAGE_SIZE", "value": "200"},
    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
]


@pytest.mark.parametrize("mode", MODES)
def test_extra_env_comes_after_the_charts_own(render, mode):
    for pod in pods(render_mode(render, mode, {"extraEnv": PROXY}), mode):
        env = sweeper(pod)["env"]
        assert env[0] == {"name": "PYTHONUNBUFFERED", "value": "1"}
        assert env[-3:] == PROXY


@pytest.mark.parametrize("mode", MODES)
def test_env_from_is_passed_through(render, mode):
    sources = [{"secretRef": {"name": "proxy"}}, {"configMapRef": {"name": "sweeper-env"}}]
    for pod in pods(render_mode(render, mode, {"envFrom": sources}), mode):
        assert sweeper(pod)["envFrom"] == sources
    for pod in pods(render_mode(render, mode, {}), mode):
        assert "envFrom" not in sweeper(pod)


CA_VOLUME = {"name": "ca-bundle", "configMap": {"name": "corporate-ca"}}
CA_MOUNT = {"name": "ca-bundle", "mountPath": "/etc/ssl/corporate", "readOnly": True}


@pytest.mark.parametrize("mode", MODES)
def test_extra_volumes_and_mounts_come_after_the_charts_own(render, mode):
    values = {"extraVolumes": [CA_VOLUME], "extraVolumeMounts": [CA_MOUNT]}
    for pod in pods(render_mode(render, mode, values), mode):
        assert [v["name"] for v in pod["volumes"]] == ["kube-api-access", "tmp", "ca-bundle"]
        assert pod["volumes"][-1] == CA_VOLUME
        mounts = sweeper(pod)["volumeMounts"]
        assert [m["name"] for m in mounts] == ["kube-api-access", "tmp", "ca-bundle"]
        assert mounts[-1] == CA_MOUNT


@pytest.mark.parametrize("mode", MODES)
def test_the_chart_mounts_the_token_itself_unless_automount_is_on(render, mode):
    rendered = render_mode(render, mode, {})
    assert rendered.one("ServiceAccount")["automountServiceAccountToken"] is False
    for pod in pods(rendered, mode):
        assert pod["automountServiceAccountToken"] is False
        assert "kube-api-access" in {v["name"] for v in pod["volumes"]}

    rendered = render_mode(render, mode, {"serviceAccount": {"automount": True}})
    assert rendered.one("ServiceAccount")["automountServiceAccountToken"] is True
    for pod in pods(rendered, mode):
        # The kubelet mounts it into every container; a second mount at its path would clash.
        assert pod["automountServiceAccountToken"] is True
        assert [v["name"] for v in pod["volumes"]] == ["tmp"]
        assert [m["name"] for m in sweeper(pod)["volumeMounts"]] == ["tmp"]


def test_automount_applies_to_the_pod_when_the_account_is_not_the_charts(render):
    rendered = render({"serviceAccount": {"create": False, "name": "mine", "automount": True}})
    assert rendered.of_kind("ServiceAccount") == []
    assert rendered.pod_spec["automountServiceAccountToken"] is True
    assert rendered.pod_spec["serviceAccountName"] == "mine"


ZONES = {
    "maxSkew": 1,
    "topologyKey": "topology.kubernetes.io/zone",
    "whenUnsatisfiable": "DoNotSchedule",
}


@pytest.mark.parametrize("mode", MODES)
def test_spread_constraints_get_the_charts_selector_unless_they_have_one(render, mode):
    own = {
        **ZONES,
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": {"a": "b"}},
    }
    rendered = render_mode(render, mode, {"topologySpreadConstraints": [ZONES, own]})
    for pod in pods(rendered, mode):
        assert pod["topologySpreadConstraints"] == [
            {**ZONES, "labelSelector": {"matchLabels": SELECTOR}},
            own,
        ]


def test_watch_replicas_are_spread_over_nodes_by_default(render):
    pod = render({"mode": "watch"}).one("Deployment")["spec"]["template"]["spec"]
    assert pod["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": SELECTOR},
            "matchLabelKeys": ["pod-template-hash"],
        }
    ]


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({}, id="cronjob-one-pod-per-run"),
        pytest.param({"mode": "watch", "watch": {"replicas": 1}}, id="watch-one-replica"),
    ],
)
def test_a_single_pod_gets_no_default_spread(render, values):
    rendered = render(values)
    spec = (
        rendered.pod_spec if not values else rendered.one("Deployment")["spec"]["template"]["spec"]
    )
    assert "topologySpreadConstraints" not in spec


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(["--clock=local", "--page-size=100"], id="flag-equals-value"),
        pytest.param(["--clock", "local", "--page-size", "100"], id="flag-then-value"),
        pytest.param(["--clock", "local", "--page-size=100"], id="mixed"),
    ],
)
@pytest.mark.parametrize("mode", MODES)
def test_extra_args_in_both_spellings_are_appended_last_as_strings(render, mode, extra):
    rendered = render_mode(render, mode, {"extraArgs": extra})
    workload = pods(rendered, mode)[0]
    args = sweeper(workload)["args"]
    assert args[-len(extra) :] == extra
    assert all(isinstance(a, str) for a in args)  # "100" is not the number 100


def test_extra_args_that_yaml_would_retype_stay_strings(render):
    args = render({"extraArgs": ["--selector", "on", "--max-actions", "1"]}).args
    assert args[-4:] == ["--selector", "on", "--max-actions", "1"]


@pytest.mark.parametrize(
    ("extra", "stray"),
    [
        pytest.param(["local"], 'extraArgs[0] "local"', id="value-first"),
        pytest.param(["--clock=local", "server"], 'extraArgs[1] "server"', id="after-equals"),
        pytest.param(["--clock", "local", "server"], 'extraArgs[2] "server"', id="two-values"),
    ],
)
def test_a_value_without_its_flag_is_refused(render_error, extra, stray):
    error = render_error({"extraArgs": extra})
    assert stray in error
    assert "neither a flag" in error


@pytest.mark.parametrize("mode", MODES)
def test_the_priority_class_is_system_cluster_critical_by_default(render, mode):
    for pod in pods(render_mode(render, mode, {}), mode):
        assert pod["priorityClassName"] == "system-cluster-critical"
    for pod in pods(render_mode(render, mode, {"priorityClassName": ""}), mode):
        assert "priorityClassName" not in pod
    for pod in pods(render_mode(render, mode, {"priorityClassName": "ml-platform"}), mode):
        assert pod["priorityClassName"] == "ml-platform"


@pytest.mark.parametrize(
    ("values", "path"),
    [
        pytest.param({"extraEnv": [{"value": "x"}]}, "/extraEnv/0", id="env-without-name"),
        pytest.param({"extraEnv": {"A": "b"}}, "/extraEnv", id="env-as-a-map"),
        pytest.param({"envFrom": [{}]}, "/envFrom/0", id="env-from-empty"),
        pytest.param({"extraVolumes": [{"emptyDir": {}}]}, "/extraVolumes/0", id="volume-no-name"),
        pytest.param(
            {"extraVolumes": [{"name": "CA"}]}, "/extraVolumes/0/name", id="volume-bad-name"
        ),
        pytest.param(
            {"extraVolumeMounts": [{"name": "ca"}]}, "/extraVolumeMounts/0", id="mount-no-path"
        ),
        pytest.param(
            {"extraVolumeMounts": [{"name": "ca", "mountPath": "etc"}]},
            "/extraVolumeMounts/0/mountPath",
            id="mount-relative",
        ),
        pytest.param(
            {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}]},
            "/topologySpreadConstraints/0",
            id="spread-incomplete",
        ),
        pytest.param(
            {"topologySpreadConstraints": [{**ZONES, "whenUnsatisfiable": "Never"}]},
            "/topologySpreadConstraints/0/whenUnsatisfiable",
            id="spread-bad-policy",
        ),
        pytest.param(
            {"serviceAccount": {"automount": "yes"}}, "/serviceAccount/automount", id="automount"
        ),
        pytest.param({"extraArgs": [""]}, "/extraArgs/0", id="empty-arg"),
        pytest.param({"extraArgs": [7]}, "/extraArgs/0", id="arg-number"),
    ],
)
def test_the_schema_refuses_malformed_pass_throughs(render_error, values, path):
    error = render_error(values)
    assert "values don't meet the specifications of the schema" in error
    assert f"at '{path}'" in error
