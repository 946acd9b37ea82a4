"""What a kind and a resource are, and every label and annotation key: each spelt once here.

The kinds themselves are their families' (``sweeper.core.families``).
"""

from __future__ import annotations

from dataclasses import dataclass

# A kind's default group and version: Kubeflow's, as its Training Operator v1 serves them.
GROUP = "kubeflow.org"
VERSION = "v1"

COMPONENT = "kubeflow-deadline-sweeper"
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

# The label that makes a job Kueue's: admitted, suspended and requeued by Kueue.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
# The reason both the batch/v1 Job controller (copied by mpi-operator into the MPIJob) and
# Trainer v2 give a deadline failure.
DEADLINE_EXCEEDED = "DeadlineExceeded"
# The operator's failure message, which the sweeper's own message extends (docs/operator.md).
DEADLINE_MESSAGE = "has failed because it was active longer than specified deadline"
# What --gpu-resources names by default: NVIDIA's and AMD's device plugins, and NVIDIA's MIG
# profiles under the mixed strategy (nvidia.com/mig-1g.5gb...); a trailing * matches the rest.
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "nvidia.com/mig-*")


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource of the API server, as data (``group`` empty for the core group)."""

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

    The objects of ``resource`` that ``selector`` lists (one job's: ``selector=<its name>``;
    without one, all) whose controller ``ownerReference`` is the job; each with its
    ``companion`` of the same name and owner (a pod's service); deleted with ``propagation``
    (empty: the server's default).
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


@dataclass(frozen=True, slots=True)
class Reading:
    """How one controller keeps its jobs, as ``parse_job`` reads them (the defaults: v1's)."""

    run_policy: bool = True  # its own fields sit in spec.runPolicy, else in spec
    succeeded: str = "Succeeded"  # the condition a success sets
    # Its clock starts at creation or the last resume (Suspended=False), else at startTime.
    created_clock: bool = False
    failure_reason: bool = False  # its deadline failure is a reason, else the message
    clean_pod_policy: bool = True
    legacy_clean_pod_policy: bool = True  # it honours an MPIJob's spec.cleanPodPolicy
    completion: bool = False  # its end is complete only with status.completionTime
    failed_at: bool = False  # the Failed condition's time is read (a reclaim waits from it)
    # spec.launcherCreationPolicy is read; its launcher, a batch Job's pod, is no replica.
    launcher_policy: bool = False


_V1 = Reading()


@dataclass(frozen=True, slots=True, eq=False)
class Kind:
    """One job kind, as the family that serves it declares it.

    Two rows of one group and plural are the same kind (one CRD; each family declares the
    version it serves, and ``families.KINDS`` merges them).
    """

    name: str
    plural: str
    replica_specs: str  # the spec field of its replica specs
    checks_managed_by: bool = True  # its controller honours managedBy (JAXJob's does not)
    legacy_clean_pod_policy: bool = False  # spec.cleanPodPolicy, a losing fallback (MPIJob)
    group: str = GROUP
    # Each version served, in discovery's order of preference, and how it is kept there.
    readings: tuple[tuple[str, Reading], ...] = ((VERSION, _V1),)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Kind) and (self.group, self.plural) == (other.group, other.plural)

    def __hash__(self) -> int:
        return hash((self.group, self.plural))

    @property
    def versions(self) -> tuple[str, ...]:
        """The versions it is served at."""
        return tuple(version for version, _ in self.readings)

    def reading(self, version: str) -> Reading:
        """How the controller serving it at ``version`` keeps it."""
        return dict(self.readings).get(version, _V1)

    @property
    def resource(self) -> str:
        """The group-qualified resource, as RBAC and kubectl spell it (``tfjobs.kubeflow.org``)."""
        return f"{self.plural}.{self.group}"

    def at(self, version: str) -> Resource:
        """Its resource at ``version``."""
        return Resource(self.group, version, self.plural)
