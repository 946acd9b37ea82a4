"""The sweeper as a ServiceAccount with exactly the documented RBAC, and with one grant less.

The permissions are read from the RBAC table of ``chart/README.md`` (the documentation users
grant from), so these tests fail when the documentation and the sweeper's real requests part
ways. Each run uses a token from the TokenRequest API and a Role in the job's namespace.

With every documented permission the run succeeds. Without any single one of them it exits
with the documented code (3 when the jobs cannot be listed, else 1: some actions failed) and
names the missing permission: the verb and the resource that were forbidden.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devcluster import ControlPlane
from tests.e2e import clusters
from tests.e2e import workloads as w
from tests.e2e.watchers import Watcher

pytestmark = pytest.mark.e2e

CHART_README = Path(__file__).resolve().parents[2] / "chart" / "README.md"
PLURALS = clusters.KUBEFLOW_PLURALS
# The table's columns after the first, and the (API group, resources) each one grants on.
COLUMNS = {
    "jobs": ("kubeflow.org", list(PLURALS)),
    "status": ("kubeflow.org", [f"{p}/status" for p in PLURALS]),
    "pods": ("", ["pods"]),
    "services": ("", ["services"]),
    "events": ("", ["events"]),
}
# Table rows -> the (action, dry-run flag) runs they document.
ROWS: dict[str, list[tuple[str, str | None]]] = {
    "touch": [("touch", None)],
    "fail": [("fail", None)],
    "auto": [("auto", None)],
    "touch, `dryRun: true`": [("touch", "--dry-run")],
    "fail or auto, `dryRun: true`": [("fail", "--dry-run"), ("auto", "--dry-run")],
}
SA = "sweeper-sa"


@dataclass(frozen=True)
class Grant:
    """One verb on one column of the table."""

    column: str
    verb: str

    def __str__(self) -> str:
        return f"{self.verb}-{self.column}"


def documented_grants() -> dict[tuple[str, str | None], frozenset[Grant]]:
    """Parse the RBAC table of the chart's README into grants per (action, dry-run)."""
    text = CHART_README.read_text(encoding="utf-8")
    section = text.split("### RBAC", 1)[1].split("\n### ", 1)[0]
    # The section's first table: the Training Operator family's grants per action.
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))
    rows = table[2:]  # header, rule
    grants: dict[tuple[str, str | None], frozenset[Grant]] = {}
    for row in rows:
        action, jobs, status, core, events = (c.strip() for c in row.strip("|").split("|"))
        cells = {"jobs": jobs, "status": status, "pods": core, "services": core, "events": events}
        found = frozenset(
            Grant(column, verb.strip())
            for column, cell in cells.items()
            if cell != "-"
            for verb in cell.split(",")
        )
        for run in ROWS[action]:
            grants[run] = found
    return grants


GRANTS = documented_grants()


def role(grants: frozenset[Grant]) -> list[w.Obj]:
    rules = []
    for column, (group, resources) in COLUMNS.items():
        verbs = sorted(g.verb for g in grants if g.column == column)
        if verbs:
            rules.append({"apiGroups": [group], "resources": resources, "verbs": verbs})
    return rules


def as_service_account(cp: ControlPlane, namespace: str, grants: frozenset[Grant]) -> Path:
    """A kubeconfig with a TokenRequest token for a ServiceAccount bound to exactly ``grants``."""
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    cp.request(
        "POST",
        f"{rbac}/roles",
        {"metadata": {"name": "sweeper"}, "rules": role(grants)},
    )
    cp.request(
        "POST",
        f"{rbac}/rolebindings",
        {
            "metadata": {"name": "sweeper"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sweeper"},
            "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": namespace}],
        },
    )
    return cp.token_kubeconfig(cp.service_account_token(namespace, SA), f"{namespace}-{SA}")


@pytest.fixture
def overdue(control_plane, namespace):
    """A job 10 s overdue never touched, and one an hour overdue touched 30 min ago, with pods.

    ``auto`` touches the first and fails the second (more than ``--escalate-after`` past its
    deadline and its touch). A third, failed by its deadline with a Running pod left, is
    cleaned up by every action.
    """
    half_an_hour_ago = w.stamp(w.now() - dt.timedelta(minutes=30))
    for name, deadline, marks in [
        ("untouched", 3590, {}),
        ("touched", 60, {w.TOUCHED_AT: half_an_hour_ago}),
    ]:
        job = w.create_job(control_plane, namespace, name, deadline=deadline, annotations=marks)
        w.create_replicas(control_plane, job, {"Master": ["Running"], "Worker": ["Running"]})
    failed = w.failed_by_its_deadline(control_plane, namespace, "failed")
    w.create_replicas(control_plane, failed, {"Master": ["Running"]})
    return namespace


def run_as(
    control_plane: ControlPlane,
    namespace: str,
    grants: frozenset[Grant],
    action: str,
    dry_run: str | None,
) -> clusters.Sweep:
    kubeconfig = as_service_account(control_plane, namespace, grants)
    args = ["-n", namespace, "--action", action, "-o", "json", *([dry_run] if dry_run else [])]
    return clusters.sweep(
        control_plane, kubeconfig, f"system:serviceaccount:{namespace}:{SA}", *args
    )


def test_the_readme_documents_every_action_and_dry_run():
    assert set(GRANTS) == {
        (action, dry) for action in ("touch", "fail", "auto") for dry in (None, "--dry-run")
    }


def label(action: str, dry_run: str | None) -> str:
    return f"{action}-dry-run" if dry_run else action


@pytest.mark.parametrize(
    ("action", "dry_run"), [pytest.param(*run, id=label(*run)) for run in sorted(GRANTS, key=str)]
)
def test_exactly_the_documented_permissions_are_enough(control_plane, overdue, action, dry_run):
    run = run_as(control_plane, overdue, GRANTS[(action, dry_run)], action, dry_run)

    assert run.result.returncode == 0, run.explain()
    assert [e for e in run.requests if e["responseStatus"]["code"] == 403] == [], run.explain()
    (report,) = w.passes(run.result.stdout)
    assert report["summary"]["errors"] == 0, run.explain()
    after = {
        name: w.get_job(control_plane, overdue, "PyTorchJob", name)
        for name in ("untouched", "touched")
    }
    failed = {n for n, j in after.items() if j["status"]["conditions"][-1]["type"] == "Failed"}
    expected_failed = {
        ("fail", None): {"untouched", "touched"},
        ("auto", None): {"touched"},
    }.get((action, dry_run), set())
    assert failed == expected_failed


def missing_one() -> Iterator[object]:
    for (action, dry_run), grants in sorted(GRANTS.items(), key=str):
        for grant in sorted(grants, key=str):
            yield pytest.param(
                action,
                dry_run,
                grant,
                id=f"{action}{'-dry-run' if dry_run else ''}-without-{grant}",
            )


def named(grant: Grant) -> str:
    """How the sweeper's message names the forbidden request (``cannot <verb> <resource>``)."""
    resource = {
        "jobs": r"\w+jobs\.kubeflow\.org",
        "status": r"\w+jobs\.kubeflow\.org/status",
    }.get(grant.column, grant.column)
    return rf"cannot {grant.verb} {resource}\b.*forbidden"


@pytest.mark.parametrize(("action", "dry_run", "grant"), list(missing_one()))
def test_without_one_documented_permission_it_fails_and_names_it(
    control_plane, overdue, action, dry_run, grant
):
    run = run_as(control_plane, overdue, GRANTS[(action, dry_run)] - {grant}, action, dry_run)

    refused_touch = action == "auto" and grant == Grant("jobs", "patch")
    # auto treats a touch the API server refuses (RBAC here; the operator's webhooks in real
    # life) as a reason to fail the job itself: the job is still stopped, the run succeeds, and
    # the refusal is a WARNING line naming the request.
    expected_code = 3 if grant == Grant("jobs", "list") else 0 if refused_touch else 1
    assert run.result.returncode == expected_code, run.explain()
    assert re.search(named(grant), run.output), run.explain()
    assert "Traceback" not in run.result.stderr
    if refused_touch:
        untouched = w.get_job(control_plane, overdue, "PyTorchJob", "untouched")
        assert untouched["status"]["conditions"][-1]["type"] == "Failed"
        assert re.search(r'"level": "WARNING".*touch-refused', run.result.stderr), run.explain()


def test_a_refusal_keeps_the_servers_reason_naming_the_identity_and_the_verb(
    control_plane, overdue
):
    # kubectl prints the apiserver's own message; the sweeper dropped it for 403 (issue 19,
    # item 12), so a shared cluster's operator could not tell which identity was refused, nor
    # RBAC from an admission policy.
    grants = GRANTS[("touch", None)] - {Grant("jobs", "patch")}

    run = run_as(control_plane, overdue, grants, "touch", None)

    assert run.result.returncode == 1, run.explain()
    reason = (
        f'pytorchjobs.kubeflow.org "untouched" is forbidden: User '
        f'"system:serviceaccount:{overdue}:{SA}" cannot patch resource "pytorchjobs" in API '
        f'group "kubeflow.org" in the namespace "{overdue}"'
    )
    line = (
        f"touch refused: cannot patch pytorchjobs.kubeflow.org 'untouched' in namespace "
        f'"{overdue}": forbidden (403): {reason}'
    )
    assert run.jobs_by_name()["untouched"]["errors"] == [line], run.explain()
    records = [json.loads(r) for r in run.result.stderr.splitlines() if r.startswith("{")]
    logged = [r for r in records if r.get("name") == "untouched" and r["level"] == "ERROR"]
    assert [r["errors"] for r in logged] == [[line]], run.explain()


def test_a_refused_list_exits_3_with_the_servers_reason(control_plane, overdue):
    grants = GRANTS[("touch", None)] - {Grant("jobs", "list")}

    run = run_as(control_plane, overdue, grants, "touch", None)

    assert run.result.returncode == 3, run.explain()
    last = run.result.stderr.splitlines()[-1]
    # The first kind listed is refused (every kind's list is).
    assert re.fullmatch(
        rf'sweeper: error: cannot list (\w+jobs)\.kubeflow\.org in namespace "{overdue}": '
        rf'forbidden \(403\): \1\.kubeflow\.org is forbidden: User "system:serviceaccount:'
        rf'{overdue}:{SA}" cannot list resource "\1" in API group "kubeflow\.org" in the '
        rf'namespace "{overdue}" \(server https://\S+, context "\S+"\)'
        r"( \(and \d+ more lists refused, each logged\))?",
        last,
    ), last


def test_a_namespace_whose_role_is_gone_is_named_and_the_others_are_still_swept(
    control_plane, overdue
):
    # The chart's namespaces: [team-a, team-b] makes a Role in each; team-b deleted takes its
    # Role along, and every list there is 403. That list alone stopped every pass (exit 3,
    # nothing touched in team-a either, issue 31 B3). A namespace never created stands in for
    # the deleted one: without kube-controller-manager a namespace never finishes deleting.
    gone = f"{overdue}-gone"
    kubeconfig = as_service_account(control_plane, overdue, GRANTS[("touch", None)])
    user = f"system:serviceaccount:{overdue}:{SA}"
    args = ["-n", overdue, "-n", gone, "--kind", "PyTorchJob", "--action", "touch", "-o", "json"]

    run = clusters.sweep(control_plane, kubeconfig, user, *args)

    assert run.result.returncode == 3, run.explain()
    refused = [
        (e["verb"], e["objectRef"].get("namespace"))
        for e in run.requests
        if e["responseStatus"]["code"] == 403
    ]
    assert refused == [("list", gone)], run.explain()
    error = (
        f'cannot list pytorchjobs.kubeflow.org in namespace "{gone}": forbidden (403): '
        f'pytorchjobs.kubeflow.org is forbidden: User "{user}" cannot list resource '
        f'"pytorchjobs" in API group "kubeflow.org" in the namespace "{gone}"'
    )
    last = run.result.stderr.splitlines()[-1]
    assert re.fullmatch(
        rf'sweeper: error: {re.escape(error)} \(server https://\S+, context "\S+"\)', last
    ), run.explain()
    records = [json.loads(r) for r in run.result.stderr.splitlines() if r.startswith("{")]
    errors = [r for r in records if r["level"] == "ERROR"]
    assert [(r["namespace"], r["message"].startswith(error)) for r in errors] == [(gone, True)]
    (report,) = w.passes(run.result.stdout)
    assert [u.startswith(error) for u in report["summary"]["unlisted"]] == [True]
    for name in ("untouched", "touched"):
        annotations = w.get_job(control_plane, overdue, "PyTorchJob", name)["metadata"]
        assert w.TOUCHED_AT in annotations["annotations"], run.explain()
    assert {j["name"]: j["result"] for j in report["jobs"]} == {
        "untouched": "done",
        "touched": "done",
        "failed": "done",  # its pods, left by the operator's deadline failure
    }


def test_a_watching_replica_is_ready_without_the_stream_of_a_namespace_whose_role_is_gone(
    control_plane, overdue, tmp_path
):
    # /readyz waited for every stream's first list, so with one namespace refused a replica
    # that restarted (a rollout) never became Ready (issue 31, B3). A dry run: no Lease RBAC.
    gone = f"{overdue}-gone"
    grants = GRANTS[("touch", "--dry-run")] | {Grant("jobs", "watch")}
    kubeconfig = as_service_account(control_plane, overdue, grants)
    watcher = Watcher(
        kubeconfig, tmp_path, "-n", overdue, "-n", gone, "--kind", "PyTorchJob", "--dry-run"
    )
    try:
        watcher.wait_ready()
        refused = [
            line["message"]
            for line in watcher.logs()
            if f'in namespace "{gone}": forbidden (403)' in line.get("message", "")
        ]
        assert refused, watcher.explain()
    finally:
        watcher.stop()
