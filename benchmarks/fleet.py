"""A fleet of realistic Kubeflow jobs for the scale benchmark, and creating it quickly.

Job ``i`` of the fleet is fully determined by ``i`` (and the fleet's reference time), so a
fleet can grow from 1,000 to 10,000 jobs in one run and the figures at each size describe the
same population. The mix follows a training cluster: mostly PyTorchJobs, then TFJobs, a few of
every other kind; every kind in every one of 100 namespaces; jobs running within their
deadline, succeeded, failed, not started yet, without a deadline, and about 1% running past
their deadline. Specs carry what real jobs carry (resources, environment, volumes, labels), and
statuses are written through ``/status`` the way the Training Operator writes them.

Creation goes straight through one urllib3 connection pool shared by a thread pool: the
benchmark measures the sweeper, and the generated client's serialisation would only slow the
set-up down on a two-core machine.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import json
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import urllib3

from devcluster import ControlPlane
from devcluster.jobs import GROUP, KINDS, VERSION, manifest

NAMESPACES = 100
# One slot per 5% of the fleet: PyTorchJob 50%, TFJob 20%, MPIJob and XGBoostJob 10% each,
# PaddleJob and JAXJob 5% each; interleaved so that any 20 consecutive jobs hold every kind.
KIND_SLOTS = (
    "PyTorchJob",
    "TFJob",
    "PyTorchJob",
    "MPIJob",
    "PyTorchJob",
    "XGBoostJob",
    "PyTorchJob",
    "TFJob",
    "PyTorchJob",
    "PaddleJob",
    "PyTorchJob",
    "TFJob",
    "PyTorchJob",
    "MPIJob",
    "PyTorchJob",
    "XGBoostJob",
    "PyTorchJob",
    "TFJob",
    "PyTorchJob",
    "JAXJob",
)
OVERDUE_EVERY = 100  # job i is overdue when i % OVERDUE_EVERY == OVERDUE_OFFSET: 1%
OVERDUE_OFFSET = 37
DEADLINES_S = (3600, 7200, 14400, 28800, 86400, 172800)
# The mix of phases, as cumulative shares: (upper bound of the roll, phase).
_PHASES = (
    (0.68, "Running"),
    (0.83, "Succeeded"),
    (0.88, "Failed"),
    (0.93, "New"),
    (1.0, "no-deadline"),
)
_NO_DEADLINE = "no-deadline"  # running, with no activeDeadlineSeconds at all
_MERGE_PATCH = "application/merge-patch+json"
_ATTEMPTS = 5


@dataclass(frozen=True)
class Planned:
    """One job of the fleet.

    Attributes:
        index: Its index in the fleet.
        kind: Its kind.
        namespace: Its namespace.
        body: The manifest to create.
        status: The status to write afterwards; None for a job not started yet.
        overdue: Whether it is running past its deadline.
    """

    index: int
    kind: str
    namespace: str
    body: dict[str, Any]
    status: dict[str, Any] | None
    overdue: bool


def namespace_of(index: int) -> str:
    """The namespace of job ``index``: blocks of 20 jobs (every kind) per namespace in turn."""
    return f"bench-{(index // len(KIND_SLOTS)) % NAMESPACES:03d}"


def kind_of(index: int) -> str:
    """The kind of job ``index``."""
    return KIND_SLOTS[index % len(KIND_SLOTS)]


def is_overdue(index: int) -> bool:
    """Whether job ``index`` runs past its deadline."""
    return index % OVERDUE_EVERY == OVERDUE_OFFSET


def kind_counts(jobs: int) -> Counter[str]:
    """How many jobs of each kind the first ``jobs`` jobs of the fleet hold."""
    return Counter(kind_of(i) for i in range(jobs))


def expected_list_requests(jobs: int, page_size: int) -> int:
    """List requests a full pass needs: per kind, ceil(jobs of that kind / page size).

    A kind with no job still costs one (empty) list request.
    """
    counts = kind_counts(jobs)
    return sum(max(1, math.ceil(counts[kind] / page_size)) for kind in KINDS)


def plan(index: int, reference: dt.datetime) -> Planned:
    """Job ``index`` of the fleet whose clock reads ``reference`` (pure).

    Args:
        index: The job's index.
        reference: "Now" for the fleet: start times and deadlines are relative to it.
    """
    rng = random.Random(index)  # noqa: S311 - reproducible variety, not security
    kind = kind_of(index)
    namespace = namespace_of(index)
    name = f"{kind.lower()}-{index:06d}"
    deadline = rng.choice(DEADLINES_S)
    overdue = is_overdue(index)
    phase = "Running" if overdue else _pick_phase(rng.random())
    if phase == _NO_DEADLINE:
        phase = "Running"
        deadline = 0
    workers = rng.randint(1, 7)
    body = manifest(
        kind,
        name,
        active_deadline_seconds=deadline or None,
        workers=workers,
        clean_pod_policy=rng.choice((None, None, "Running", "All", "None")),
    )
    _dress(body, index, rng)
    body["metadata"]["namespace"] = namespace
    if overdue:
        age = deadline + rng.randint(60, 3600)
    elif deadline:
        # Stays within the deadline for the length of any benchmark run: at least 45 minutes
        # to spare (a three-quarter margin), as creating 10,000 jobs on a loaded machine has
        # taken more than the 12 minutes a fifth of the shortest deadline left.
        age = rng.randint(30, int(deadline * 0.25))
    else:
        age = rng.randint(30, 7 * 86400)
    started = reference - dt.timedelta(seconds=age)
    status = (
        None
        if phase == "New"
        else _status(kind, namespace, name, phase=phase, started=started, workers=workers)
    )
    return Planned(index, kind, namespace, body, status, overdue)


def _pick_phase(roll: float) -> str:
    return next(phase for bound, phase in _PHASES if roll < bound)


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dress(body: dict[str, Any], index: int, rng: random.Random) -> None:
    """Give a bare manifest what production jobs carry: labels, resources, env, volumes."""
    team = rng.choice(("vision", "speech", "ranking", "nlp", "research"))
    body["metadata"]["labels"] = {
        "app.kubernetes.io/name": "training",
        "app.kubernetes.io/part-of": f"{team}-platform",
        "team": team,
        "experiment": f"exp-{index % 997:04d}",
    }
    body["metadata"]["annotations"] = {
        "training.example.com/owner": f"user{index % 131}@example.com",
        "training.example.com/description": "nightly fine-tuning run with the default recipe",
    }
    gpus = rng.choice((1, 2, 4, 8))
    for replica in body["spec"][_replica_field(body["kind"])].values():
        pod = replica["template"]["spec"]
        container = pod["containers"][0]
        container["image"] = f"registry.example.com/{team}/trainer:2024.{index % 12 + 1:02d}.1"
        container["command"] = ["python", "-m", "trainer.main"]
        container["args"] = [
            "--config=/etc/trainer/config.yaml",
            f"--run-id=run-{index:06d}",
            "--checkpoint-dir=/checkpoints",
            "--epochs=90",
            "--batch-size=256",
        ]
        container["env"] = [
            {"name": "NCCL_DEBUG", "value": "WARN"},
            {"name": "OMP_NUM_THREADS", "value": "8"},
            {"name": "WANDB_PROJECT", "value": f"{team}-experiments"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ]
        container["resources"] = {
            "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)},
            "limits": {"memory": "64Gi", "nvidia.com/gpu": str(gpus)},
        }
        container["volumeMounts"] = [
            {"name": "dshm", "mountPath": "/dev/shm"},  # noqa: S108 - a pod's mount, not ours
            {"name": "checkpoints", "mountPath": "/checkpoints"},
        ]
        pod["volumes"] = [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            {"name": "checkpoints", "persistentVolumeClaim": {"claimName": f"{team}-ckpt"}},
        ]
        pod["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
        pod["tolerations"] = [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]


def _replica_field(kind: str) -> str:
    return KINDS[kind].replica_specs


def _status(
    kind: str, namespace: str, name: str, *, phase: str, started: dt.datetime, workers: int
) -> dict[str, Any]:
    """The status the Training Operator would have written for a job in ``phase``."""
    info = KINDS[kind]
    created = started - dt.timedelta(seconds=2)
    running_at = started + dt.timedelta(seconds=20)

    def condition(
        ctype: str, status: str, reason: str, message: str, at: dt.datetime
    ) -> dict[str, str]:
        stamp = _stamp(at)
        return {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            "lastUpdateTime": stamp,
            "lastTransitionTime": stamp,
        }

    conditions = [
        condition("Created", "True", f"{kind}Created", f"{kind} {name} is created.", created),
        condition(
            "Running",
            "True",
            f"{kind}Running",
            f"{kind} {namespace}/{name} is running.",
            running_at,
        ),
    ]
    replicas = (
        {info.worker: workers} if info.master is None else {info.master: 1, info.worker: workers}
    )
    selector = (
        f"training.kubeflow.org/job-name={name},training.kubeflow.org/operator-name="
        f"{kind.lower().removesuffix('job')}job-controller"
    )
    status: dict[str, Any] = {"startTime": _stamp(started)}
    if phase == "Running":
        count_key = "active"
    else:
        finished = running_at + dt.timedelta(minutes=47)
        conditions[-1]["status"] = "False"
        if phase == "Succeeded":
            conditions.append(
                condition(
                    "Succeeded",
                    "True",
                    f"{kind}Succeeded",
                    f"{kind} {namespace}/{name} successfully completed.",
                    finished,
                )
            )
            count_key = "succeeded"
        else:
            conditions.append(
                condition(
                    "Failed",
                    "True",
                    f"{kind}Failed",
                    f"{kind} {namespace}/{name} has failed because "
                    f"1 {info.worker} replica(s) failed.",
                    finished,
                )
            )
            count_key = "failed"
        status["completionTime"] = _stamp(finished)
    status["conditions"] = conditions
    status["replicaStatuses"] = {
        rtype: {
            count_key: n,
            "selector": f"{selector},training.kubeflow.org/replica-type={rtype.lower()}",
        }
        for rtype, n in replicas.items()
    }
    status["lastReconcileTime"] = _stamp(running_at)
    return status


class Creator:
    """Creates fleet jobs in parallel over one connection pool, as the admin.

    Args:
        cp: The control plane.
        threads: Requests in flight at once.
    """

    def __init__(self, cp: ControlPlane, threads: int = 16) -> None:
        configuration = cp.api().configuration
        self._server = cp.server
        self._threads = threads
        self._pool = urllib3.PoolManager(
            num_pools=1,
            maxsize=threads,
            block=True,
            ca_certs=configuration.ssl_ca_cert,
            cert_file=configuration.cert_file,
            key_file=configuration.key_file,
            retries=False,
            timeout=urllib3.Timeout(total=60),
        )
        self._lock = threading.Lock()
        self.requests = 0

    def namespaces(self) -> None:
        """Create the fleet's namespaces (an existing one is fine)."""
        list(self._map(self._namespace, (f"bench-{n:03d}" for n in range(NAMESPACES))))

    def create(self, jobs: Iterable[Planned]) -> None:
        """Create jobs and write their statuses.

        Raises:
            RuntimeError: A request failed for good.
        """
        list(self._map(self._create_job, jobs))

    def _map(self, function: Any, items: Iterable[Any]) -> Iterable[Any]:
        # Bounded submission (Executor.map would build every job up front): this process
        # stays small, and so does the memory it lends the children it spawns.
        with concurrent.futures.ThreadPoolExecutor(max_workers=self._threads) as pool:
            pending: set[concurrent.futures.Future[Any]] = set()
            for item in items:
                if len(pending) >= self._threads * 4:
                    done, pending = concurrent.futures.wait(
                        pending, return_when=concurrent.futures.FIRST_COMPLETED
                    )
                    yield from (future.result() for future in done)
                pending.add(pool.submit(function, item))
            yield from (future.result() for future in concurrent.futures.as_completed(pending))

    def _namespace(self, name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        self._send("POST", "/api/v1/namespaces", body, ok=(201, 409))

    def _create_job(self, job: Planned) -> None:
        plural = KINDS[job.kind].plural
        collection = f"/apis/{GROUP}/{VERSION}/namespaces/{job.namespace}/{plural}"
        self._send("POST", collection, job.body, ok=(201,))
        if job.status is not None:
            name = job.body["metadata"]["name"]
            self._send(
                "PATCH",
                f"{collection}/{name}/status",
                {"status": job.status},
                ok=(200,),
                content_type=_MERGE_PATCH,
            )

    def _send(
        self,
        method: str,
        path: str,
        body: Any,
        *,
        ok: tuple[int, ...],
        content_type: str = "application/json",
    ) -> None:
        data = json.dumps(body).encode()
        for attempt in range(1, _ATTEMPTS + 1):
            response = self._pool.request(
                method,
                self._server + path,
                body=data,
                headers={"Content-Type": content_type, "Accept": "application/json"},
            )
            with self._lock:
                self.requests += 1
            if response.status in ok:
                return
            # The apiserver sheds load with 429 (priority and fairness); anything else is a bug.
            if response.status in (429, 500, 503, 504) and attempt < _ATTEMPTS:
                time.sleep(0.2 * attempt)
                continue
            text = response.data.decode("utf-8", "replace")[:400]
            raise RuntimeError(f"{method} {path} -> {response.status}: {text}")

    def close(self) -> None:
        """Close the connection pool."""
        self._pool.clear()
