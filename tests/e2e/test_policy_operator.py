"""The platform's deadlines (``--policy``) on the real Training Operator v1.9.4, both modes.

Namespaces carry the labels the rules select; a deadline a job does not carry (the rule's
default, or its cap below the job's own) is one the operator never sees, so the sweeper fails
the job itself, whatever ``--action``, and deletes its running pods in the same pass. A job
within its rule, and a job in a namespace no rule selects, are left exactly as without a
policy. A deadline beyond Go's ``time.Duration`` (which the operator wraps to about 127 years)
is capped like any other. One operator for the module; each job runs a few seconds past its
deadline.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from devcluster.kubelet import staggered
from tests.e2e import workloads
from tests.e2e.clusters import RunSweeper
from tests.e2e.conftest_operator import RunningJob, entry_for, poll, sleep_until
from tests.e2e.watchers import Watcher, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.operator]

EXCLUDE = "kubeflow-deadline-sweeper.github.io/exclude"
DEADLINE_MESSAGE = "has failed because it was active longer than specified deadline"
STABLE = staggered(master_running=1, workers_running=[1, 2])
# A label of this module's own: another module's namespaces never match a rule.
TIER = "policy-e2e.example.com/tier"
RULES = f"""
rules:
  - name: capped
    namespaceSelector: {{matchLabels: {{{TIER}: capped}}}}
    maxDeadline: 6s
  - name: defaulted
    namespaceSelector:
      matchExpressions: [{{key: {TIER}, operator: In, values: [defaulted]}}]
    defaultDeadline: 5s
    maxDeadline: 1h
  - name: lab
    namespaceSelector: {{matchLabels: {{{TIER}: lab}}}}
    defaultDeadline: 5s
    allowExemption: true
"""


@pytest.fixture
def rules(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES)
    return path


def namespace(cp: ControlPlane, tier: str | None) -> str:
    return cp.create_namespace(f"pol-{tier or 'none'}", {TIER: tier} if tier else None)


def relabel(cp: ControlPlane, name: str, tier: str) -> None:
    cp.request(
        "PATCH",
        f"/api/v1/namespaces/{name}",
        {"metadata": {"labels": {TIER: tier}}},
        content_type="application/merge-patch+json",
    )


def resource_version(job: RunningJob) -> str:
    return str(job.view().obj["metadata"]["resourceVersion"])


def assert_failed_by_rule(job: RunningJob, rule: str, source: str) -> None:
    failed = job.wait_failed(timeout=30)
    message = (failed.condition("Failed") or {}).get("message", "")
    assert DEADLINE_MESSAGE in message, failed.conditions
    assert f"the {source} of platform rule {rule}" in message, message
    poll(lambda: not job.active_pods() or None, what=f"the running pods of {job.name} to go")


def sweep_json(run_sweeper: RunSweeper, *args: str) -> dict[str, Any]:
    completed = run_sweeper(*args, "-o", "json")
    assert completed.returncode == 0, completed.stderr[-3000:]
    (report,) = workloads.passes(completed.stdout)
    return report


@pytest.mark.usefixtures("operator")
def test_one_shot_passes_enforce_the_rules_of_each_namespace(
    control_plane: ControlPlane,
    kubeflow_jobs: Callable[..., RunningJob],
    run_sweeper: RunSweeper,
    rules: Path,
) -> None:
    cp = control_plane

    def make(tier: str | None, ads: int | None, **kwargs: Any) -> RunningJob:
        return kubeflow_jobs(
            "PyTorchJob", ads=ads, timeline=STABLE, namespace=namespace(cp, tier), **kwargs
        )

    def excluded(body: dict[str, Any]) -> None:
        body["metadata"].setdefault("annotations", {})[EXCLUDE] = "true"

    defaulted = make("defaulted", None)
    capped = make("capped", 3600)
    # Beyond Go's time.Duration: the operator wraps it to about 127 years; the cap still holds.
    evader = make("capped", 22446744074)
    within = make("defaulted", 600)
    no_rule = make(None, None)
    refused = make("defaulted", None, shape=excluded)
    honoured = make("lab", None, shape=excluded)
    relabelled = make(None, None)
    everyone = [defaulted, capped, evader, within, no_rule, refused, honoured, relabelled]
    started = [job.started().start_time for job in everyone]
    sleep_until(max(s for s in started if s is not None) + dt.timedelta(seconds=7))
    versions = {job.name + job.namespace: resource_version(job) for job in everyone}
    scope = [arg for job in everyone for arg in ("-n", job.namespace)]

    # --action touch: the deadlines the jobs do not carry are failed all the same.
    report = sweep_json(run_sweeper, "--policy", str(rules), "--action", "touch", *scope)

    seen = {
        job.namespace: (e["decision"], e["reason"], e["deadline_source"], e["rule"])
        for job in everyone
        if (e := entry_for(report, job))
    }
    assert seen == {
        defaulted.namespace: ("fail", "platform-deadline", "default", "defaulted"),
        capped.namespace: ("fail", "platform-deadline", "cap", "capped"),
        evader.namespace: ("fail", "platform-deadline", "cap", "capped"),
        within.namespace: ("skip", "not-yet-due", "job", "defaulted"),
        no_rule.namespace: ("skip", "no-deadline", "job", None),
        refused.namespace: ("fail", "platform-deadline", "default", "defaulted"),
        honoured.namespace: ("skip", "opted-out", "default", "lab"),
        relabelled.namespace: ("skip", "no-deadline", "job", None),
    }
    assert entry_for(report, refused)["exemption_refused"] is True
    assert_failed_by_rule(defaulted, "defaulted", "default")
    assert_failed_by_rule(capped, "capped", "cap")
    assert_failed_by_rule(evader, "capped", "cap")
    assert_failed_by_rule(refused, "defaulted", "default")
    for untouched in (within, no_rule, honoured, relabelled):
        assert resource_version(untouched) == versions[untouched.name + untouched.namespace]

    # The platform relabels a namespace: the next pass judges its jobs under the new rule.
    relabel(cp, relabelled.namespace, "defaulted")
    again = sweep_json(run_sweeper, "--policy", str(rules), "-n", relabelled.namespace)
    assert entry_for(again, relabelled)["reason"] == "platform-deadline"
    assert_failed_by_rule(relabelled, "defaulted", "default")


@pytest.mark.usefixtures("operator")
def test_the_watcher_enforces_a_default_and_follows_a_relabelled_namespace(
    control_plane: ControlPlane,
    kubeflow_jobs: Callable[..., RunningJob],
    sweeper_kubeconfig: Path,
    rules: Path,
    tmp_path: Path,
) -> None:
    cp = control_plane
    defaulted = kubeflow_jobs(
        "PyTorchJob", ads=None, timeline=STABLE, namespace=namespace(cp, "defaulted")
    )
    relabelled = kubeflow_jobs(
        "PyTorchJob", ads=None, timeline=STABLE, namespace=namespace(cp, None)
    )
    watcher = Watcher(
        sweeper_kubeconfig,
        tmp_path,
        "--policy",
        str(rules),
        "-n",
        defaulted.namespace,
        "-n",
        relabelled.namespace,
        "--lease-namespace",
        defaulted.namespace,
        "--resync",
        "2s",
    )
    try:
        watcher.wait_ready()
        # Its timer fires at startTime + 5 s, the rule's default: no resync needed.
        assert_failed_by_rule(defaulted, "defaulted", "default")
        relabelled.started()
        assert not relabelled.view().failed
        relabel(cp, relabelled.namespace, "defaulted")
        # Read again at the next resync, whose pass fails it.
        assert_failed_by_rule(relabelled, "defaulted", "default")
        wait_for(
            lambda: 'rule="defaulted"' in watcher.metrics(),
            "the actions metric to name the rule",
            watcher,
        )
    finally:
        code = watcher.stop()
    assert code == 0, watcher.explain()
