"""kubectl habits on a real apiserver: --explain, --exclude-namespace, errors naming the server."""

from __future__ import annotations

import json

import pytest

from devcluster.kubeconfig import CONTEXT
from tests.e2e import pushgateway
from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e


def test_explain_reads_the_job_and_the_apiserver_matches_the_selector(
    control_plane, namespace, sweep
):
    w.create_job(control_plane, namespace, "late", labels={"team": "vision"})

    matched = sweep("--explain", f"{namespace}/late", "-l", "team in (vision,nlp)")
    missed = sweep("--explain", f"{namespace}/late", "-l", "team=nlp", "-o", "json")

    assert matched.result.returncode == 0, matched.explain()
    assert "scope: selector" in matched.result.stdout
    # The last line: the --max-actions caveat is printed only when that flag is set.
    assert matched.result.stdout.splitlines()[-1].startswith("Decision: touch (overdue): ")
    assert missed.result.returncode == 0, missed.explain()
    (document,) = json.loads(missed.result.stdout)
    assert document["scope"] == [
        {"filter": "selector", "seen": "-l team=nlp: no match", "passes": False}
    ]
    assert document["decision"] is None
    assert w.writes(matched.requests + missed.requests) == []
    # The job was read, not listed cluster-wide: one GET per kind at most, one list for -l.
    verbs = sorted({e["verb"] for e in matched.requests if e.get("objectRef", {}).get("resource")})
    assert verbs == ["get", "list"], matched.explain()


def test_an_unknown_job_is_one_line_and_exit_2(control_plane, namespace, sweep):
    run = sweep("--explain", f"{namespace}/nothing")
    assert run.result.returncode == 2, run.explain()
    assert run.result.stderr.startswith(f'sweeper: error: no Kubeflow job "{namespace}/nothing"')


def test_excluded_namespaces_are_not_touched(control_plane, sweep, request):
    kept = control_plane.create_namespace("kept")
    left = control_plane.create_namespace("left")
    try:
        w.create_job(control_plane, kept, "late")
        w.create_job(control_plane, left, "late")

        run = sweep("-A", "--exclude-namespace", left, "-o", "json")

        assert run.result.returncode == 0, run.explain()
        job_writes = {
            w.request_summary(e)[2]
            for e in w.writes(run.requests)
            if e["objectRef"]["resource"] != "events"
        }
        assert kept in job_writes
        assert left not in job_writes
        assert {j["namespace"] for j in w.report_jobs(run.result.stdout)} & {kept, left} == {kept}
    finally:
        from tests.e2e import clusters  # noqa: PLC0415 - the teardown helper

        for ns in (kept, left):
            clusters.empty_namespace(control_plane, ns)


def test_a_refused_connection_names_the_server_and_the_context(tmp_path, run_sweeper):
    port = pushgateway.free_port()
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: far-away\n"
        f"clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
        "contexts: [{name: far-away, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: x}}]\n"
    )
    done = run_sweeper("--timeout", "5", kubeconfig=config)
    assert done.returncode == 3, done.stderr
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert line.startswith("sweeper: error: cannot discover")
    assert line.endswith(f'(server https://127.0.0.1:{port}, context "far-away")')


def test_a_forbidden_list_names_the_server_and_the_context(control_plane, run_sweeper):
    nobody = control_plane.user_kubeconfig("nobody", [])
    done = run_sweeper("--kind", "TFJob", kubeconfig=nobody)
    assert done.returncode == 3, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.endswith(f'(server {control_plane.server}, context "{CONTEXT}")'), line
    # The server's reason is kept, as kubectl keeps it: which identity, which verb, RBAC.
    assert "forbidden (403): " in line, line
    assert 'User "nobody" cannot list resource "tfjobs"' in line, line
