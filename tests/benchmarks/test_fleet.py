"""The fleet's bulk loader: jobs copied into etcd are served as if created through the API.

``benchmarks.fleet.Cloner`` writes job ``i`` beyond the seed as the stored object of job
``i % SEED`` under job ``i``'s name and a new uid. Against a real control plane: the API server
serves each copy as its original (the same object once names, uid and resourceVersion are set
aside: managedFields, timestamps and status as the API server wrote them), and a sweeper pass
sees every copy and decides about each as about its original. ``benchmarks.fleet_pods`` gives
each of them four pods the same way, owned by the job's uid, and the pass reports the GPUs held
for nothing the fleet's pods hold.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from typing import Any

import pytest

from benchmarks import fleet, fleet_pods
from devcluster import ControlPlane
from devcluster.jobs import GROUP, KINDS, VERSION
from tests.e2e import clusters

# Enough originals for every kind, an overdue one (index 37) and every phase of the mix.
ORIGINALS = range(60)


def served(cp: ControlPlane, index: int) -> dict[str, Any]:
    plural = KINDS[fleet.kind_of(index)].plural
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{fleet.namespace_of(index)}/{plural}"
    return dict(cp.request("GET", f"{path}/{fleet.name_of(index)}"))


def renamed(obj: dict[str, Any], index: int, origin: int) -> dict[str, Any]:
    meta = obj["metadata"]
    uid, version = meta.pop("uid"), meta.pop("resourceVersion")
    assert uid and version
    text = json.dumps(obj)
    text = text.replace(fleet.name_of(index), fleet.name_of(origin))
    return dict(json.loads(text.replace(f"run-{index:06d}", f"run-{origin:06d}")))


@pytest.mark.e2e
def test_copies_in_etcd_are_served_and_swept_as_their_originals() -> None:
    clusters.require_binaries("etcd", "kube-apiserver")
    with clusters.start_control_plane() as cp:
        creator = fleet.Creator(cp, threads=8)
        creator.namespaces()
        reference = dt.datetime.now(dt.UTC)
        creator.create(fleet.plan(i, reference) for i in ORIGINALS)
        creator.close()
        cloner = fleet.Cloner(cp)
        copies = [fleet.SEED + i for i in ORIGINALS]
        cloner.clone(copies)
        jobs = [*ORIGINALS, *copies]
        fleet_pods.load(cp, cloner, jobs, reference, jobs=len(jobs))
        cloner.close()

        for origin, index in zip(ORIGINALS, copies, strict=True):
            original, copy = served(cp, origin), served(cp, index)
            uid = copy["metadata"]["uid"]
            assert uid != original["metadata"]["uid"]
            assert renamed(copy, index, origin) == renamed(original, origin, origin)
            pods = cp.request(
                "GET",
                f"/api/v1/namespaces/{fleet.namespace_of(index)}/pods?labelSelector="
                f"{fleet_pods.JOB_NAME_LABEL}={fleet.name_of(index)}",
            )["items"]
            owners = {p["metadata"]["ownerReferences"][0]["uid"] for p in pods}
            assert (len(pods), owners) == (fleet_pods.PER_JOB, {uid})

        kubeconfig = cp.user_kubeconfig("fleet-check", ["system:masters"])
        sweeper = str(clusters.sweeper_executable())
        result = subprocess.run(
            [sweeper, "--kubeconfig", str(kubeconfig), "--dry-run", "-o", "json"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        summary = document["summary"]
        assert summary["jobs"] == 2 * len(ORIGINALS)
        assert summary["touch"] == 2 * sum(fleet.is_overdue(i) for i in ORIGINALS)
        held = fleet_pods.expected_held((fleet_pods.stored(i, reference) for i in jobs), reference)
        assert fleet_pods.reported_held(document) == held
        assert all(state["jobs"] for state in held.values()), held
