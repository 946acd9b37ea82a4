"""checkov on the rendered chart and on the Dockerfile: no failed check, every skip explained.

The chart suppresses a check only with a `checkov.io/skipN: CKV_...=reason` annotation on the
object, so each suppression is visible, and reasoned, in the rendered output.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "chart"
DIGEST = "sha256:" + "0123456789abcdef" * 4

# check -> why the chart may suppress it (asserted below: nothing else is ever skipped)
ALLOWED_SKIPS = {
    "CKV_K8S_43": "image pinned by tag until image.digest is set",
    "CKV_K8S_15": "IfNotPresent by design while pinned by tag (a digest satisfies the check)",
    "CKV_K8S_8": "the helm test pod runs to completion: no liveness probe",
    "CKV_K8S_9": "the helm test pod runs to completion: no readiness probe",
}

VARIANTS = {
    "defaults": [],
    "fail-namespaced": ["--set", "action=fail", "--set", "namespaces={team-a,team-b}"],
    "auto-digest-sub-minute": [
        "--set",
        "action=auto",
        "--set",
        f"image.digest={DIGEST}",
        "--set",
        "intervalSeconds=20",
    ],
    "dry-run": ["--set", "dryRun=true"],
    "watch": ["--set", "mode=watch", "--set", f"image.digest={DIGEST}"],
    "watch-fail-namespaced-monitored": [
        "--set",
        "mode=watch",
        "--set",
        "action=fail",
        "--set",
        "namespaces={team-a}",
        "--set",
        "watch.serviceMonitor.enabled=true",
    ],
}


def _checkov(checkov: Path, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(checkov), *args, "--output", "json", "--skip-download", "--compact"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.strip(), f"checkov printed nothing: {done.stderr[-2000:]}"
    report = json.loads(done.stdout)
    return report if isinstance(report, list) else [report]


def _results(reports: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [c for r in reports for c in r.get("results", {}).get(key, [])]


def _describe(checks: list[dict[str, Any]]) -> str:
    return "\n".join(f"{c['check_id']} {c['resource']}: {c['check_name']}" for c in checks)


@pytest.fixture(scope="module")
def chart_reports(helm, checkov, tmp_path_factory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("rendered")
    for i, (name, args) in enumerate(VARIANTS.items()):
        rendered = subprocess.run(
            # One release name and namespace per variant: checkov sees them all at once.
            [str(helm), "template", f"r{i}", str(CHART), "--namespace", f"ns{i}", *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (out / f"{name}.yaml").write_text(rendered)
    return _checkov(checkov, "--directory", str(out), "--framework", "kubernetes")


def test_rendered_chart_passes_checkov(chart_reports):
    failed = _results(chart_reports, "failed_checks")

    assert _results(chart_reports, "passed_checks")
    assert failed == [], _describe(failed)


def test_chart_suppresses_only_known_checks_each_with_a_reason(chart_reports):
    skipped = _results(chart_reports, "skipped_checks")

    assert {c["check_id"] for c in skipped} <= ALLOWED_SKIPS.keys(), _describe(skipped)
    for check in skipped:
        assert check["check_result"]["suppress_comment"].strip(), check["check_id"]


def test_dockerfile_passes_checkov_without_suppressions(checkov):
    reports = _checkov(checkov, "--file", str(REPO / "Dockerfile"), "--framework", "dockerfile")

    assert _results(reports, "passed_checks")
    assert _results(reports, "failed_checks") == [], _describe(_results(reports, "failed_checks"))
    assert _results(reports, "skipped_checks") == []
