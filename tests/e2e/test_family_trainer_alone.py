"""What Trainer v2.3.0 does when its JobSet delete at a TrainJob's deadline is refused.

The premise the TrainJob family rests on (kubeflow/trainer#3833): at the deadline the trainer
marks the TrainJob Failed with reason ``DeadlineExceeded`` and deletes its JobSet once; when
the API server refuses that delete (here a ValidatingAdmissionPolicy, as a cluster admin's
policy or a webhook would), the TrainJob is Failed anyway, the JobSet stays, and nothing
deletes it later, even once the refusal is lifted and the trainer reconciles the TrainJob
again. On the real trainer, JobSet and Job controller; pods have no node, and the one pod is
made Running through ``pods/status``.
"""

from __future__ import annotations

import pytest

from devcluster import ControlPlane
from devcluster.admin import ADMIN_USER
from tests.e2e import families
from tests.e2e.conftest_families import TrainerCluster
from tests.e2e.conftest_operator import poll

pytestmark = [pytest.mark.e2e]

# Long enough for the trainer to make the JobSet and the policy to take effect before it.
ADS = 8


def _jobset_deletes(cp: ControlPlane, namespace: str, name: str, since: int) -> list[int]:
    """The status of each real (not dry-run) DELETE of the JobSet since an audit offset."""
    return [
        event.get("responseStatus", {}).get("code", 0)
        for event in cp.audit_events(user=ADMIN_USER, since=since)
        if event["verb"] == "delete"
        and event.get("objectRef", {}).get("resource") == "jobsets"
        and event["objectRef"].get("namespace") == namespace
        and event["objectRef"].get("name") == name
        and "dryRun" not in event["requestURI"]
    ]


def test_a_refused_jobset_delete_leaves_a_failed_trainjob_with_its_jobset_for_good(
    trainer_cluster: TrainerCluster, family_namespace: str
) -> None:
    cp, namespace, name = trainer_cluster.cp, family_namespace, "train"
    since = cp.audit_offset()

    with families.refusing_jobset_deletes(cp, namespace):
        families.create(cp, families.TRAINJOBS, namespace, families.trainjob(name, ads=ADS))
        poll(
            lambda: families.get(cp, families.JOBSETS, namespace, name),
            what="the trainer to create the JobSet",
        )
        poll(
            lambda: families.jobset_delete_refused(cp, namespace, name),
            what="the policy to refuse deleting the JobSet",
        )
        trainjob = families.get(cp, families.TRAINJOBS, namespace, name)
        assert families.condition(trainjob, "Failed") is None, (
            "premise: the refusal was in force before the deadline"
        )

        failed = poll(
            lambda: families.condition(
                families.get(cp, families.TRAINJOBS, namespace, name), "Failed"
            ),
            what="the trainer to fail the TrainJob at its deadline",
        )

        assert (failed["reason"], failed["message"]) == (
            "DeadlineExceeded",
            families.TRAINJOB_DEADLINE_MESSAGE,
        )
        assert _jobset_deletes(cp, namespace, name, since) == [403], (
            "the trainer tried the delete once and the API server refused it"
        )
        lifted = cp.audit_offset()

    # Lifted: a pod of the JobSet turns Running, so the Job, the JobSet and then the TrainJob's
    # status change, which is a reconcile of the TrainJob the trainer can be seen to finish.
    pod = poll(
        lambda: families.pods(cp, namespace, f"jobset.sigs.k8s.io/jobset-name={name}"),
        what="the JobSet's pod",
    )[0]
    families.make_running(cp, pod)
    poll(
        lambda: any(
            status.get("ready") == 1
            for status in (families.get(cp, families.TRAINJOBS, namespace, name) or {})
            .get("status", {})
            .get("jobsStatus", [])
        ),
        what="the trainer to reconcile the TrainJob after the refusal was lifted",
    )

    jobset = families.get(cp, families.JOBSETS, namespace, name)
    assert jobset is not None, "the JobSet was deleted after all"
    assert "deletionTimestamp" not in jobset["metadata"]
    assert _jobset_deletes(cp, namespace, name, lifted) == [], "the trainer retried the delete"
    still = families.condition(families.get(cp, families.TRAINJOBS, namespace, name), "Failed")
    assert (still or {}).get("reason") == "DeadlineExceeded", "the TrainJob stays Failed"
