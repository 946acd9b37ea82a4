"""The table of Kubeflow job kinds, and every label and annotation key the sweeper uses.

Constants live here and nowhere else, so a key is never spelt twice. The kind table mirrors
the "Job kinds" section of docs/operator.md for the Training Operator v1.
"""

from __future__ import annotations

from dataclasses import dataclass

GROUP = "kubeflow.org"
VERSION = "v1"
# mpi-operator's MPIJob: the same group, kind and plural as the Training Operator's, at this
# version. Only one mpijobs.kubeflow.org CRD can exist, so a cluster serves one or the other.
MPI_OPERATOR_VERSION = "v2beta1"
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_VERSION = "v1alpha1"
JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"

# The project's own domain (its GitHub organisation's Pages site), not kubeflow.org: a key under
# kubeflow.org reads as if Kubeflow shipped it. 35 characters, within a DNS subdomain's 253 and
# each label's 63; the names after the slash are within the 63 a key's name may have.
ANNOTATION_PREFIX = "kubeflow-deadline-sweeper.github.io/"
TOUCHED_AT_ANNOTATION = ANNOTATION_PREFIX + "touched-at"
EXCLUDE_ANNOTATION = ANNOTATION_PREFIX + "exclude"
# The keys of 0.1.0, still read for at least one release (docs/annotations.md): an exclude under
# either key is honoured, the later of the two touch stamps counts, and a touch removes the old
# stamp in the same patch, so a job touched once by this release carries the new key only.
LEGACY_ANNOTATION_PREFIX = "deadline-sweeper.kubeflow.org/"
LEGACY_TOUCHED_AT_ANNOTATION = LEGACY_ANNOTATION_PREFIX + "touched-at"
LEGACY_EXCLUDE_ANNOTATION = LEGACY_ANNOTATION_PREFIX + "exclude"

JOB_NAME_LABEL = "training.kubeflow.org/job-name"

# spec.runPolicy.managedBy values that mean "the Training Operator v1 manages this job".
TRAINING_OPERATOR = "kubeflow.org/training-operator"
# The same for mpi-operator (v2beta1 types.go, KubeflowJobController) and for Trainer v2's
# TrainJob (spec.managedBy; MultiKueue's value is the only other one its CRD allows).
MPI_OPERATOR = "kubeflow.org/mpi-operator"
TRAINER = "trainer.kubeflow.org/trainjob-controller"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
# What --gpu-resources names by default: NVIDIA's and AMD's device plugins, and NVIDIA's MIG
# profiles under the mixed strategy (nvidia.com/mig-1g.5gb...); a trailing * matches the rest.
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "nvidia.com/mig-*")
# The label that makes a job Kueue's: admitted, suspended and requeued by Kueue.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
# The reason both the batch/v1 Job controller (copied by mpi-operator into the MPIJob) and
# Trainer v2 give a deadline failure.
DEADLINE_EXCEEDED = "DeadlineExceeded"

COMPONENT = "kubeflow-deadline-sweeper"

# The operator's failure message, which the sweeper's own message extends (docs/operator.md).
DEADLINE_MESSAGE = "has failed because it was active longer than specified deadline"


@dataclass(frozen=True, slots=True)
class Kind:
    """One Kubeflow job kind.

    Attributes:
        replica_specs: The spec field holding the replica specs (empty for TrainJob).
        checks_managed_by: Whether the operator honours ``spec.runPolicy.managedBy`` for this
            kind (JAXJob's controller does not check it).
        legacy_clean_pod_policy: Whether ``spec.cleanPodPolicy`` is a (losing) fallback for
            ``spec.runPolicy.cleanPodPolicy`` (MPIJob only).
    """

    name: str
    plural: str
    replica_specs: str
    checks_managed_by: bool = True
    legacy_clean_pod_policy: bool = False
    group: str = GROUP
    versions: tuple[str, ...] = (VERSION,)

    @property
    def resource(self) -> str:
        """The group-qualified resource, as RBAC and kubectl spell it (``tfjobs.kubeflow.org``)."""
        return f"{self.plural}.{self.group}"


TFJOB = Kind("TFJob", "tfjobs", "tfReplicaSpecs")
PYTORCHJOB = Kind("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs")
XGBOOSTJOB = Kind("XGBoostJob", "xgboostjobs", "xgbReplicaSpecs")
MPIJOB = Kind(
    "MPIJob",
    "mpijobs",
    "mpiReplicaSpecs",
    legacy_clean_pod_policy=True,
    versions=(VERSION, MPI_OPERATOR_VERSION),
)
PADDLEJOB = Kind("PaddleJob", "paddlejobs", "paddleReplicaSpecs")
JAXJOB = Kind("JAXJob", "jaxjobs", "jaxReplicaSpecs", checks_managed_by=False)
# Served up to v1.8.x only (v1.9.0 removed it, kubeflow/trainer#2150); discovery finds it where
# it is served. Its RunPolicy has no managedBy (added in v1.9.0, after MXJob was gone), so no
# release ever skipped an MXJob for it: like JAXJob, it is judged whatever managedBy says.
MXJOB = Kind("MXJob", "mxjobs", "mxReplicaSpecs", checks_managed_by=False)

TRAINJOB = Kind("TrainJob", "trainjobs", "", group=TRAINER_GROUP, versions=(TRAINER_VERSION,))

KINDS: tuple[Kind, ...] = (
    TFJOB,
    PYTORCHJOB,
    XGBOOSTJOB,
    MPIJOB,
    PADDLEJOB,
    JAXJOB,
    MXJOB,
    TRAINJOB,
)


def lookup(text: str) -> Kind:
    """Find a kind by its name or plural, ignoring case (``PyTorchJob``, ``pytorchjobs``).

    Raises:
        KeyError: No known kind has that name; the message lists the valid ones.
    """
    wanted = text.strip().lower()
    for kind in KINDS:
        if wanted in (kind.name.lower(), kind.plural, kind.resource):
            return kind
    valid = ", ".join(kind.name for kind in KINDS)
    raise KeyError(f"unknown kind {text!r} (expected one of {valid}, or their plurals)")
