"""RecordingCluster: --dry-run (client) reads the cluster and writes only to its own list."""

from __future__ import annotations

from typing import Any

from sweeper.core.families.training_operator import PYTORCHJOB
from sweeper.core.kinds import EVENTS, PODS, SERVICES
from sweeper.k8s.cluster import ServedKind, list_all
from sweeper.k8s.dryrun import RecordingCluster, Write
from tests.unit.fakes import FakeCluster
from tests.unit.objects import NOW, job, owned

PYTORCH = ServedKind(PYTORCHJOB, "v1")


def test_reads_pass_through_and_writes_are_kept_not_sent() -> None:
    raw = job()
    fake = FakeCluster(date=NOW)
    fake.add_job(raw)
    fake.add_pod(owned("w-0", raw, phase="Running"))
    fake.add_service(owned("w-0", raw, phase=None))
    recording = RecordingCluster(fake)
    patch: dict[str, Any] = {"metadata": {"annotations": {"a": "b"}}}
    event = {"involvedObject": {"name": "train"}, "reason": "DeadlineTouched"}

    assert recording.discover().server_date == NOW
    assert [p.jobs[0].name for p in recording.list_job_views(PYTORCH, None, None, 5)] == ["train"]
    job_resource = PYTORCH.resource
    assert recording.get(job_resource, "team-a", "train")["metadata"]["name"] == "train"
    assert len(list_all(recording, PODS, "team-a")) == len(list_all(recording, SERVICES, "team-a"))
    recording.patch(job_resource, "team-a", "train", patch, dry_run=False)
    recording.patch(
        job_resource, "team-a", "train", {"status": {}}, subresource="status", dry_run=False
    )
    recording.delete(PODS, "team-a", "w-0", "uid", dry_run=False)
    recording.delete(SERVICES, "team-a", "w-0", "uid", dry_run=False)
    recording.create(EVENTS, "team-a", event, dry_run=False)
    recording.close()

    assert fake.writes == []
    assert fake.methods() == ["discover", "list", "get", "list-pods", "list-services"]
    assert recording.writes == [
        Write("patch", "team-a", "train", patch, job_resource),
        Write("patch-status", "team-a", "train", {"status": {}}, job_resource),
        Write("delete", "team-a", "w-0", None, PODS),
        Write("delete", "team-a", "w-0", None, SERVICES),
        Write("create", "team-a", "train", event, EVENTS),
    ]
