"""Paginated lists against a real apiserver: ``--page-size`` with more jobs than one page."""

from __future__ import annotations

import collections
import math
import urllib.parse

import pytest

from tests.e2e import clusters
from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e

JOBS = {"PyTorchJob": 7, "TFJob": 3, "JAXJob": 2}
PAGE_SIZE = 2


@pytest.fixture
def many_jobs(control_plane, namespace):
    for kind, count in JOBS.items():
        for index in range(count):
            w.create_job(control_plane, namespace, f"{kind.lower()}-{index}", kind=kind)
    return namespace


def lists_of(run: clusters.Sweep, plural: str) -> list[dict[str, list[str]]]:
    return [
        urllib.parse.parse_qs(urllib.parse.urlsplit(e["requestURI"]).query)
        for e in run.requests
        if e["verb"] == "list" and e["objectRef"]["resource"] == plural
    ]


def test_every_job_is_reported_exactly_once(many_jobs, sweep):
    run = sweep("-n", many_jobs, "--page-size", str(PAGE_SIZE), "--dry-run", "-o", "json")

    assert run.result.returncode == 0, run.explain()
    seen = collections.Counter((j["kind"], j["name"]) for j in w.report_jobs(run.result.stdout))
    expected = {(kind, f"{kind.lower()}-{i}") for kind, count in JOBS.items() for i in range(count)}
    assert set(seen) == expected
    assert set(seen.values()) == {1}


@pytest.mark.parametrize("kind", list(JOBS), ids=str)
def test_each_kind_takes_one_list_request_per_page_following_continue_tokens(
    many_jobs, sweep, kind
):
    run = sweep("-n", many_jobs, "--page-size", str(PAGE_SIZE), "--dry-run", "-o", "json")

    assert run.result.returncode == 0, run.explain()
    lists = lists_of(run, w.plural(kind))
    # etcd tells the apiserver whether more items follow, so a full last page ends the list.
    assert len(lists) == math.ceil(JOBS[kind] / PAGE_SIZE), run.explain()
    assert all(q["limit"] == [str(PAGE_SIZE)] for q in lists)
    assert "continue" not in lists[0]
    assert all("continue" in q for q in lists[1:])


def test_a_kind_without_jobs_takes_a_single_list_request(many_jobs, sweep):
    run = sweep("-n", many_jobs, "--page-size", str(PAGE_SIZE), "--dry-run")

    assert run.result.returncode == 0, run.explain()
    assert len(lists_of(run, "xgboostjobs")) == 1


def test_every_job_is_touched_exactly_once_across_pages(many_jobs, sweep):
    run = sweep("-n", many_jobs, "--page-size", str(PAGE_SIZE), "--action", "touch")

    assert run.result.returncode == 0, run.explain()
    patches = collections.Counter(
        (e["objectRef"]["resource"], e["objectRef"]["name"])
        for e in run.requests
        if e["verb"] == "patch"
    )
    expected = {
        (w.plural(kind), f"{kind.lower()}-{i}")
        for kind, count in JOBS.items()
        for i in range(count)
    }
    assert set(patches) == expected
    assert set(patches.values()) == {1}
