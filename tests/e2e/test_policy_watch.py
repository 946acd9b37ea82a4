"""``--watch --policy`` on the real kube-apiserver: a Namespace labelled into a rule meanwhile.

No operator runs: the job's status is written once, as the operator would, and the job never
changes again, so no event of its own can arm its timer. The resync that reads the new labels
must. Which part acted is read from ``deadline_sweeper_actions_total``, which only a timer's
fire counts (a resync pass reports in its output instead).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import ControlPlane
from tests.e2e import clusters
from tests.e2e import workloads as w
from tests.e2e.watchers import quick_watchers, wait_for

pytestmark = pytest.mark.e2e

TIER = "e2e.example.com/tier"
# The rule's default, from the job's start; the resyncs come about every RESYNC_S from the
# watcher's start, so the deadline falls between the second and third, far from both.
DEFAULT_S = 25
RESYNC_S = 10
FAILED_BY_A_TIMER = re.compile(
    r'^deadline_sweeper_actions_total\{(?=[^}]*action="fail")(?=[^}]*result="done")'
    r'(?=[^}]*rule="gpu")[^}]*\} 1\.0$',
    re.MULTILINE,
)


def failed(job: dict[str, Any]) -> bool:
    conditions = job.get("status", {}).get("conditions") or []
    return any(c["type"] == "Failed" and c["status"] == "True" for c in conditions)


@pytest.fixture
def unlabelled(control_plane: ControlPlane) -> Iterator[str]:
    """A namespace no rule selects, yet."""
    name = control_plane.create_namespace("relabel")
    yield name
    clusters.empty_namespace(control_plane, name)
    control_plane.request("DELETE", f"/api/v1/namespaces/{name}", expect=(200, 202, 404))


def test_a_namespace_labelled_into_a_rule_arms_its_jobs_timers_at_the_next_resync(
    control_plane: ControlPlane, unlabelled: str, sweeper_kubeconfig: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - name: gpu\n"
        f"    namespaceSelector: {{matchLabels: {{{TIER}: gpu}}}}\n"
        f"    defaultDeadline: {DEFAULT_S}\n"
    )
    w.create_job(control_plane, unlabelled, "idle", deadline=None, started_ago=0)
    with quick_watchers(sweeper_kubeconfig, tmp_path, unlabelled) as start:
        watcher = start("--policy", str(rules), "--resync", f"{RESYNC_S}s", "--clock", "local")
        watcher.wait_ready()
        control_plane.request(
            "PATCH",
            f"/api/v1/namespaces/{unlabelled}",
            {"metadata": {"labels": {TIER: "gpu"}}},
            content_type="application/merge-patch+json",
        )

        wait_for(
            lambda: failed(w.get_job(control_plane, unlabelled, "PyTorchJob", "idle")),
            "the rule's default enforced",
            watcher,
        )
        # The status write lands before the fire counts it: wait for the count too.
        wait_for(
            lambda: bool(FAILED_BY_A_TIMER.search(watcher.metrics())), "the timer's fail", watcher
        )
