"""Smoke runs of the benchmark scripts: each runs end to end on a tiny input and prints its keys.

The figures themselves are never asserted (the machine is shared; docs/benchmarks.md records
a real run). What is asserted does not depend on speed: the keys the scripts promise, and for
the scale script that the sweeper and the floor made exactly one list request per page.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.measure import parse_figures
from tests.e2e import clusters

REPO = Path(__file__).resolve().parents[2]

SCALE_KEYS = {
    "jobs",
    "sweeper_median_s",
    "kubectl_median_s",
    "ratio_vs_kubectl",
    "sweeper_peak_rss_mb",
    "floor_median_s",
    "ratio_vs_floor",
    "ratio_vs_floor_paired",
    "floor_list_requests",
    "discovery_requests",
    "floor_discovery_requests",
    "floor_mb_read",
    "list_requests",
    "list_requests_expected",
    "setup_s",
    "load_avg_before",
}
STARTUP_KEYS = {"version_median_s", "empty_pass_median_s", "load_avg_before"}
LATENESS_KEYS = {
    "lateness_p50_s",
    "lateness_p99_s",
    "lateness_max_s",
    "not_failed",
    "target_max_s",
    "operator_alone_lateness_p50_s",
    "operator_alone_lateness_p99_s",
    "operator_alone_lateness_max_s",
    "operator_alone_not_failed",
}


def run_benchmark(module: str, *args: str, timeout: float) -> dict[str, str]:
    result = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    return parse_figures(result.stdout)


@pytest.mark.e2e
def test_scale_prints_its_figures_and_lists_each_page_once() -> None:
    # The floor makes the same requests as the sweeper, so the two are comparable.
    clusters.require_binaries("etcd", "kube-apiserver", "kubectl")
    # A page size of 4 makes the 30 jobs span several pages of most kinds.
    figures = run_benchmark(
        "scale", "--jobs", "30", "--rounds", "1", "--page-size", "4", timeout=600
    )
    assert figures.keys() >= SCALE_KEYS, sorted(SCALE_KEYS - figures.keys())
    assert figures["list_requests"] == figures["list_requests_expected"]
    assert figures["floor_list_requests"] == figures["list_requests_expected"]
    assert figures["discovery_requests"] == figures["floor_discovery_requests"]


@pytest.mark.e2e
def test_startup_prints_its_figures() -> None:
    clusters.require_binaries("etcd", "kube-apiserver")
    figures = run_benchmark("startup", "--runs", "1", timeout=600)
    assert figures.keys() >= STARTUP_KEYS, sorted(STARTUP_KEYS - figures.keys())


@pytest.mark.e2e
@pytest.mark.operator
def test_lateness_prints_its_figures() -> None:
    clusters.require_binaries("etcd", "kube-apiserver", "training-operator")
    # The shortest window that still proves the claim: two deadlines 10 and 12 s after the
    # jobs start, a pass every 10 s (the chart's smallest interval), and 6 s past the last
    # deadline + interval for the last pass and the operator's Failed. Both swept jobs fail.
    figures = run_benchmark(
        "lateness",
        "--jobs",
        "2",
        "--spread",
        "2",
        "--first-deadline",
        "10",
        "--settle",
        "6",
        timeout=900,
    )
    assert figures.keys() >= LATENESS_KEYS, sorted(LATENESS_KEYS - figures.keys())
    assert figures["jobs"] == figures["operator_alone_jobs"] == "2"
    assert figures["not_failed"] == "0", figures


WATCH_TOUCH_KEYS = {
    "not_failed",
    "failed_by_operator",
    "touches",
    "failed_lateness_p50_s",
    "failed_lateness_p99_s",
    "touch_lateness_p99_s",
    "touch_to_failed_lateness_p99_s",
    "load_avg_before",
}


@pytest.mark.e2e
@pytest.mark.operator
def test_watch_touch_prints_its_figures_and_the_operator_fails_every_job() -> None:
    clusters.require_binaries("etcd", "kube-apiserver", "training-operator")
    # First deadline 15 s after the start: time enough for the operator to start three jobs
    # (the script refuses a run where it did not); 8 s past the last deadline for the touch
    # and the operator's Failed.
    figures = run_benchmark(
        "watch_touch",
        "--jobs",
        "3",
        "--spread",
        "2",
        "--first-deadline",
        "15",
        "--settle",
        "8",
        timeout=900,
    )
    assert figures.keys() >= WATCH_TOUCH_KEYS, sorted(WATCH_TOUCH_KEYS - figures.keys())
    assert (figures["not_failed"], figures["failed_by_operator"]) == ("0", "3")


WATCH_SOAK_KEYS = {
    "jobs_created",
    "due_jobs",
    "enforced",
    "not_enforced",
    "written_not_due",
    "lateness_p50_s",
    "lateness_p99_s",
    "growth_rss_mb_pct",
    "growth_threads_pct",
    "growth_fds_pct",
    "growth_sockets_pct",
    "verdict",
    "load1_min_median_max",
    "curve_0.1min",
    "samples",
}


@pytest.mark.e2e
def test_watch_soak_prints_its_figures_and_enforces_every_due_job(tmp_path: Path) -> None:
    # 12 s of churn instead of thirty minutes (six buckets of 2 s, sampled every 0.5 s, a curve
    # point every 6 s), jobs deleted 14 s after their creation (so deletions run while the last
    # ones come due): the keys, that every job that came due was failed and no other job was
    # written to, and the files the long run leaves behind.
    clusters.require_binaries("etcd", "kube-apiserver")
    figures = run_benchmark(
        "watch_soak",
        "--minutes",
        "0.2",
        "--rate",
        "4",
        "--deadline-min",
        "3",
        "--deadline-max",
        "6",
        "--lifetime",
        "14",
        "--settle",
        "5",
        "--sample-every",
        "0.5",
        "--curve-every",
        "0.1",
        "--samples",
        str(tmp_path / "samples.csv"),
        "--sweeper-log",
        str(tmp_path / "sweeper.log"),
        "--json",
        str(tmp_path / "figures.json"),
        timeout=300,
    )
    assert figures.keys() >= WATCH_SOAK_KEYS, sorted(WATCH_SOAK_KEYS - figures.keys())
    assert int(figures["due_jobs"]) > 0
    assert (figures["not_enforced"], figures["written_not_due"]) == ("0", "0")
    rows = (tmp_path / "samples.csv").read_text().splitlines()
    assert rows[0] == "at_s,rss_mb,threads,fds,sockets,cpu_s,jobs_alive,load1"
    assert len(rows) - 1 == int(figures["samples"])
    assert json.loads((tmp_path / "figures.json").read_text())["due_jobs"] == int(
        figures["due_jobs"]
    )
    assert "watching" in (tmp_path / "sweeper.log").read_text().lower()
