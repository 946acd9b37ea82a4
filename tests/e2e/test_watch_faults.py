"""``sweeper --watch`` when its streams fail: a silent stall and a 410 Gone, through the proxy.

The fault proxy relays watch streams line by line; here it first holds one open and silent
(the read timeout must notice), then answers the resumed watch with 410 Gone (the watcher must
list again and drop the timer of a job deleted while it was not looking), then lets streams
through: a deadline passing afterwards is still enforced.
"""

from __future__ import annotations

import re

import pytest

from tests.e2e import workloads as w
from tests.e2e.faultproxy import FaultProxy, Respond, Rule, Stall
from tests.e2e.test_watch import touched_at
from tests.e2e.watchers import Watcher, wait_for

pytestmark = pytest.mark.e2e

WATCH = r"/pytorchjobs\?.*watch=1"
LIST = r"/pytorchjobs\?(?!.*watch=1)"


def metric(watcher: Watcher, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", watcher.metrics(), re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_a_stalled_stream_is_reopened_and_a_410_relists_dropping_vanished_jobs(
    control_plane, namespace, tmp_path
):
    w.create_job(control_plane, namespace, "vanishes", deadline=3600, started_ago=0)
    rules = [
        Rule(Stall(events=0, seconds=120), "GET", WATCH, times=1),
        Rule(Respond(410), "GET", WATCH, times=1),
    ]
    with FaultProxy.for_control_plane(control_plane, rules=rules) as proxy:
        watcher = Watcher(
            proxy.kubeconfig,
            tmp_path,
            "-n",
            namespace,
            "--kind",
            "PyTorchJob",
            "--no-leader-elect",
            "--watch-timeout",
            "3",
        )
        try:
            watcher.wait_ready()
            # Deleted while the stream is stalled: the DELETED event never arrives.
            control_plane.request("DELETE", w.job_path(namespace, "PyTorchJob", "vanishes"))
            wait_for(
                lambda: metric(watcher, "deadline_sweeper_watch_relists_total") >= 1,
                "relist",
                watcher,
            )
            w.create_job(control_plane, namespace, "after", deadline=2, started_ago=0)
            wait_for(
                lambda: touched_at(control_plane, namespace, "after") is not None,
                "touch after recovery",
                watcher,
            )
            assert (
                metric(watcher, 'deadline_sweeper_watch_restarts_total{reason="stalled"}') >= 1
            ), watcher.explain()
            messages = [e.get("message", "") for e in watcher.logs()]
            assert any("1 vanished job(s) dropped" in m for m in messages), watcher.explain()
            assert proxy.count("GET", LIST) == 2, proxy.describe()
        finally:
            watcher.stop()
