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
class Resource:
    """A resource of the API server, as data: the verbs of ``Cluster`` take one.

    Attributes:
        group: The API group, ``""`` for the core group.
        namespaced: Whether its objects live in a namespace.
    """

    group: str
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api(self) -> str:
        """The path its group and version are served under."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def name(self) -> str:
        """The group-qualified resource, as RBAC and kubectl spell it (``jobs.batch``)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = Resource("", "v1", "pods")
SERVICES = Resource("", "v1", "services")
EVENTS = Resource("", "v1", "events")
NAMESPACES = Resource("", "v1", "namespaces", namespaced=False)
DEPLOYMENTS = Resource("apps", "v1", "deployments")
BATCH_JOBS = Resource("batch", "v1", "jobs")


@dataclass(frozen=True, slots=True)
class Leftovers:
    """What a family's controller may leave of a job its deadline failed, and how it is found.

    The objects of ``resource`` that ``selector`` lists (every one without it; one job's with
    ``selector=<its name>``) and whose controller ``ownerReference`` is the job.

    Attributes:
        companion: A resource whose object of the same name and owner goes with each (a pod's
            service).
        propagation: The delete's ``propagationPolicy`` (``Background``: the request returns
            at once, the garbage collector removes what the object owns); the server's
            default when empty.
    """

    resource: Resource
    selector: str | None = None
    companion: Resource | None = None
    propagation: str = ""

    def of(self, name: str) -> str | None:
        """The selector of one job's leftovers, the job named ``name``."""
        return None if self.selector is None else f"{self.selector}={name}"


# The pods the Training Operator and mpi-operator label with their job's name, and the
# same-named services the operators create for them.
OPERATOR_PODS = Leftovers(PODS, JOB_NAME_LABEL, companion=SERVICES)
# The pods of a JobSet's Jobs, labelled with its name (jobset v0.12, ``labelAndAnnotateObject``).
JOBSET_PODS = Leftovers(PODS, "jobset.sigs.k8s.io/jobset-name")


@dataclass(frozen=True, slots=True)
class Reading:
    """How one controller keeps its jobs: what ``sweeper.core.jobs.parse_job`` reads where.

    The defaults are the Training Operator v1's.

    Attributes:
        run_policy: Its own fields (``activeDeadlineSeconds``, ``suspend``, ``managedBy``,
            ``cleanPodPolicy``) sit in ``spec.runPolicy``; else in ``spec``.
        succeeded: The condition a success sets.
        created_clock: Its deadline clock starts at creation or the last resume (the
            ``Suspended=False`` transition); else at ``status.startTime``.
        failure_reason: Its deadline failure is read from the ``Failed`` reason
            (``DeadlineExceeded``); else from the operator's message.
        clean_pod_policy: It has a ``cleanPodPolicy``.
        legacy_clean_pod_policy: It honours a kind's ``spec.cleanPodPolicy`` fallback.
        completion: Its end is complete only with ``status.completionTime``.
        failed_at: The ``Failed`` condition's time is read (a reclaim waits from it).
        launcher_policy: ``spec.launcherCreationPolicy`` is read; its launcher is a batch Job's
            pod, not one of the job's own (``Job.replicas`` leaves it out).
    """

    run_policy: bool = True
    succeeded: str = "Succeeded"
    created_clock: bool = False
    failure_reason: bool = False
    clean_pod_policy: bool = True
    legacy_clean_pod_policy: bool = True
    completion: bool = False
    failed_at: bool = False
    launcher_policy: bool = False


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
    readings: tuple[tuple[str, Reading], ...] = ()

    def reading(self, version: str) -> Reading:
        """How the controller serving it at ``version`` keeps it."""
        for served, reading in self.readings:
            if served == version:
                return reading
        return _V1

    @property
    def resource(self) -> str:
        """The group-qualified resource, as RBAC and kubectl spell it (``tfjobs.kubeflow.org``)."""
        return f"{self.plural}.{self.group}"

    def at(self, version: str) -> Resource:
        """Its resource at ``version``."""
        return Resource(self.group, version, self.plural)


TFJOB = Kind("TFJob", "tfjobs", "tfReplicaSpecs")
PYTORCHJOB = Kind("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs")
XGBOOSTJOB = Kind("XGBoostJob", "xgboostjobs", "xgbReplicaSpecs")
MPIJOB = Kind(
    "MPIJob",
    "mpijobs",
    "mpiReplicaSpecs",
    legacy_clean_pod_policy=True,
    versions=(VERSION, MPI_OPERATOR_VERSION),
    # mpi-operator copies its launcher's failure (its reason) and cleans up and stops
    # re-creating workers only with a completionTime.
    readings=(
        (
            MPI_OPERATOR_VERSION,
            Reading(
                failure_reason=True,
                legacy_clean_pod_policy=False,
                completion=True,
                launcher_policy=True,
            ),
        ),
    ),
)
PADDLEJOB = Kind("PaddleJob", "paddlejobs", "paddleReplicaSpecs")
JAXJOB = Kind("JAXJob", "jaxjobs", "jaxReplicaSpecs", checks_managed_by=False)
# Served up to v1.8.x only (v1.9.0 removed it, kubeflow/trainer#2150); discovery finds it where
# it is served. Its RunPolicy has no managedBy (added in v1.9.0, after MXJob was gone), so no
# release ever skipped an MXJob for it: like JAXJob, it is judged whatever managedBy says.
MXJOB = Kind("MXJob", "mxjobs", "mxReplicaSpecs", checks_managed_by=False)

# Trainer v2's clock is creation or the last resume (trainjob_controller.go, reconcileDeadline);
# its own fields sit on spec, it ends Complete (copied from JobSet's Completed), and its
# deadline failure is a reason.
TRAINJOB = Kind(
    "TrainJob",
    "trainjobs",
    "",
    group=TRAINER_GROUP,
    versions=(TRAINER_VERSION,),
    readings=(
        (
            TRAINER_VERSION,
            Reading(
                run_policy=False,
                succeeded="Complete",
                created_clock=True,
                failure_reason=True,
                clean_pod_policy=False,
                failed_at=True,
            ),
        ),
    ),
)

_V1 = Reading()

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
