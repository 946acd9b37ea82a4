"""``mode: cronjob|watch``: the CronJob renders exactly as before; watch is a Deployment.

The snapshots under ``snapshots/`` are ``helm template sw chart --namespace sweeper`` of the
chart before the watch mode existed, for the value sets in ``snapshots/cases.json``. A change
that is *meant* to alter the CronJob's rendering regenerates them with that command (and says
so in its commit); any other difference is a regression of the default mode.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.chart.conftest import _run_template

SNAPSHOTS = Path(__file__).parent / "snapshots"
CASES = json.loads((SNAPSHOTS / "cases.json").read_text(encoding="utf-8"))
# Only the chart's own version may move without touching the CronJob's behaviour.
VERSION_LINES = re.compile(r"^\s*(helm\.sh/chart|app\.kubernetes\.io/version): .*$", re.MULTILINE)
WATCH_VALUES = {
    "watch": {
        "replicas": 3,
        "resyncSeconds": 60,
        "metricsPort": 9100,
        "serviceMonitor": {"enabled": True},
        "metricsFrom": [{"podSelector": {}}],
    }
}


def normalised(text: str) -> str:
    return VERSION_LINES.sub("", text)


@pytest.mark.parametrize("case", sorted(CASES), ids=str)
@pytest.mark.parametrize(
    "extra",
    [{}, {"mode": "cronjob", **WATCH_VALUES}],
    ids=["mode-unset", "mode-cronjob-with-watch-values"],
)
def test_the_cronjob_mode_renders_exactly_as_before(helm, tmp_path, case, extra):
    done = _run_template(helm, tmp_path, {**CASES[case], **extra}, [])
    assert done.returncode == 0, done.stderr
    expected = (SNAPSHOTS / f"cronjob-{case}.yaml").read_text(encoding="utf-8")
    assert normalised(done.stdout) == normalised(expected)


def test_watch_mode_is_a_deployment_of_two_with_a_pdb_and_probes(render):
    rendered = render({"mode": "watch"})

    assert rendered.of_kind("CronJob") == []
    deployment = rendered.one("Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert rendered.one("PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["restartPolicy"] == "Always"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    args = container["args"]
    assert "--watch" in args
    assert "--identity=$(POD_NAME)" in args
    assert not any(a.startswith(("--every", "--for", "--timeout")) for a in args)
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in (
        container["env"]
    )


def test_watch_mode_serves_metrics_instead_of_pushing_them(render):
    # The sweeper refuses --watch with --pushgateway: the Deployment must not pass it.
    rendered = render({"mode": "watch", "metrics": {"pushgateway": {"url": "http://pg:9091"}}})

    (container,) = rendered.one("Deployment")["spec"]["template"]["spec"]["containers"]
    assert "--watch" in container["args"]
    assert not any(a.startswith("--pushgateway") for a in container["args"])


def test_watch_mode_keeps_the_cronjobs_restricted_security_context(render):
    cron_pod = render().pod_spec
    watch_pod = render({"mode": "watch"}).one("Deployment")["spec"]["template"]["spec"]
    assert watch_pod["securityContext"] == cron_pod["securityContext"]
    assert (
        watch_pod["containers"][0]["securityContext"]
        == (cron_pod["containers"][0]["securityContext"])
    )
    assert watch_pod["volumes"] == cron_pod["volumes"]
    assert watch_pod["automountServiceAccountToken"] is False


@pytest.mark.parametrize(
    ("action", "verbs"),
    [
        pytest.param("touch", ["get", "list", "watch", "patch"], id="touch"),
        pytest.param("fail", ["get", "list", "watch"], id="fail"),
        pytest.param("auto", ["get", "list", "watch", "patch"], id="auto"),
    ],
)
def test_watch_mode_adds_watch_and_get_on_the_jobs_and_one_lease(render, action, verbs):
    rendered = render({"mode": "watch", "action": action})

    rules = rendered.one("ClusterRole")["rules"]
    assert rules[0]["verbs"] == verbs
    lease = next(r for r in rendered.of_kind("Role") if r["metadata"]["name"].endswith("-lease"))
    assert lease["metadata"]["namespace"] == "sweeper"
    assert lease["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["sw-kubeflow-deadline-sweeper"],
            "verbs": ["get", "update"],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]
    binding = next(
        b for b in rendered.of_kind("RoleBinding") if b["metadata"]["name"].endswith("-lease")
    )
    assert binding["roleRef"]["name"] == lease["metadata"]["name"]


@pytest.mark.parametrize("dry_run", [True, "client", "server"], ids=str)
def test_a_dry_run_watch_elects_no_leader_so_gets_no_lease_permission(render, dry_run):
    # A dry run writes nothing, the Lease included: each replica reports on its own.
    rendered = render({"mode": "watch", "dryRun": dry_run})

    granted = [
        rule
        for role in rendered.of_kind("Role") + rendered.of_kind("ClusterRole")
        for rule in role["rules"]
        if "coordination.k8s.io" in rule["apiGroups"]
    ]
    assert granted == []
    assert [
        b for b in rendered.of_kind("RoleBinding") if b["metadata"]["name"].endswith("-lease")
    ] == []


def test_the_network_policy_admits_the_metrics_scrape_only(render):
    policy = render({"mode": "watch"}).one("NetworkPolicy")
    assert policy["spec"]["ingress"] == [{"ports": [{"port": "metrics", "protocol": "TCP"}]}]

    scrapers = [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
    policy = render({"mode": "watch", "watch": {"metricsFrom": scrapers}}).one("NetworkPolicy")
    assert policy["spec"]["ingress"] == [
        {"ports": [{"port": "metrics", "protocol": "TCP"}], "from": scrapers}
    ]


def test_the_service_monitor_is_optional(render):
    assert render({"mode": "watch"}).of_kind("ServiceMonitor") == []
    monitor = render(
        {"mode": "watch", "watch": {"serviceMonitor": {"enabled": True, "labels": {"r": "p"}}}}
    ).one("ServiceMonitor")
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s"}
    ]
    assert monitor["metadata"]["labels"]["r"] == "p"
    service = render({"mode": "watch"}).one("Service")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_one_replica_gets_no_disruption_budget(render):
    assert render({"mode": "watch", "watch": {"replicas": 1}}).of_kind("PodDisruptionBudget") == []


@pytest.mark.parametrize(
    ("values", "message"),
    [
        pytest.param({"mode": "daemon"}, "mode", id="unknown-mode"),
        pytest.param({"watch": {"replica": 2}}, "replica", id="unknown-watch-key"),
        pytest.param({"watch": {"replicas": 0}}, "replicas", id="no-replicas"),
        pytest.param(
            {"watch": {"serviceMonitor": {"interval": "soon"}}},
            "interval",
            id="bad-scrape-interval",
        ),
    ],
)
def test_the_schema_refuses_bad_watch_values(render_error, values, message):
    assert message in render_error(values)


def test_watch_mode_refuses_max_actions_at_render_time(render_error):
    # sweeper --watch exits 2 on --max-actions: the chart says so before a pod crash-loops.
    message = render_error({"mode": "watch", "maxActions": 5})
    assert "maxActions caps a pass of mode cronjob" in message


def test_cronjob_mode_still_takes_max_actions(render):
    cronjob = render({"maxActions": 5}).one("CronJob")
    args = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--max-actions=5" in args


@pytest.mark.parametrize(
    ("timing", "message"),
    [
        pytest.param(
            {"leaseDurationSeconds": 10},
            "watch.leaseDurationSeconds (10) must be longer than watch.renewDeadlineSeconds (10)",
            id="lease-not-above-renew-deadline",
        ),
        pytest.param(
            {"renewDeadlineSeconds": 6, "retryPeriodSeconds": 5},
            "watch.renewDeadlineSeconds (6) must be longer than 1.2 x watch.retryPeriodSeconds (5)",
            id="renew-deadline-at-jittered-retry",
        ),
    ],
)
def test_watch_mode_refuses_lease_timings_the_sweeper_refuses(render_error, timing, message):
    # Each value passes the schema alone; the sweeper would exit 2 on every start.
    assert message in render_error({"mode": "watch", "watch": timing})


def test_lease_timings_at_the_edge_of_the_ordering_render(render):
    # renewDeadline 6 with retryPeriod 4: 6 > 4.8, so the sweeper's Timing accepts it too.
    values = {
        "mode": "watch",
        "watch": {"leaseDurationSeconds": 7, "renewDeadlineSeconds": 6, "retryPeriodSeconds": 4},
    }
    args = render(values).one("Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {"--lease-duration=7", "--renew-deadline=6", "--retry-period=4"} <= set(args)


def test_touch_refuses_an_escalate_after_below_a_second(render_error):
    message = render_error({"action": "touch", "escalateAfter": 0})
    assert "escalateAfter spaces the re-touches of action touch and must be at least 1" in message


def test_auto_takes_an_escalate_after_of_zero(render):
    cronjob = render({"action": "auto", "escalateAfter": 0}).one("CronJob")
    args = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--escalate-after=0" in args
