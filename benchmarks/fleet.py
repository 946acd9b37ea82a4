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

Beyond the first :data:`SEED` jobs, :class:`Cloner` loads the fleet straight into the control
plane's etcd, 20 to 40 times faster than the API (which validates every job against a 600 KB
CRD schema, twice with the status): job ``i`` is then the stored object of job
``i % SEED``, byte for byte as the API server wrote it (``managedFields``, ``creationTimestamp``,
``generation``, the status), under job ``i``'s name and a uid of its own. It has the kind, the
namespace and the overdue-ness of job ``i`` (:data:`SEED` is a multiple of the 2,000 jobs in
which every kind meets every namespace), and the API server serves it exactly as it would had
it been created through the API under that name: it reads it from etcd like any other.
"""

from __future__ import annotations

import base64
import concurrent.futures
import datetime as dt
import http.client
import json
import math
import random
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import urllib3

from devcluster import ApiError, ControlPlane
from devcluster.jobs import GROUP, KINDS, VERSION, manifest

JSON = dict[str, Any]
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
# Jobs created through the API before the rest are cloned: every (kind slot, namespace) pair
# occurs once in any 2,000 consecutive jobs, so job i % SEED shares job i's kind, namespace and
# overdue-ness (i % 100).
SEED = len(KIND_SLOTS) * NAMESPACES
# Puts per etcd transaction: etcd's default --max-txn-ops is 128, and 100 objects of ~7 KB
# (base64 included) stay well under its 1.5 MiB request limit.
_PUTS_PER_TXN = 100


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
    name = name_of(index)
    deadline = rng.choice(DEADLINES_S)
    overdue = is_overdue(index)
    phase = "Running" if overdue else _pick_phase(rng.random())
    if phase == _NO_DEADLINE:
        phase = "Running"
        deadline = 0
    # Four replicas, the master (or a JAXJob's extra worker) and three workers:
    # benchmarks.fleet_pods gives each job four pods, and a job with more replicas than pods
    # reads as stuck starting. The draw stays, so the rest of the plan is what it was.
    rng.randint(1, 7)
    workers = 3
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


def name_of(index: int) -> str:
    """The name of job ``index``."""
    return f"{kind_of(index).lower()}-{index:06d}"


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


class Cloner:
    """Loads fleet jobs beyond the seed straight into etcd, as copies of the seed's objects.

    The first :data:`SEED` jobs must exist (created through the API by :class:`Creator`). Each
    copy is the seed object's stored bytes with the name (and the ``run-`` argument built from
    the index) changed to job ``i``'s and a new uid; ``resourceVersion`` is not stored, etcd's
    revision is. Writes go through etcd's JSON gateway (``/v3/kv/txn``) on the loopback client
    URL the control plane started it on.

    Args:
        cp: The control plane.
    """

    def __init__(self, cp: ControlPlane) -> None:
        self._cp = cp
        etcd = next(p for p in cp.processes if p.name == "etcd")
        url = next(a for a in etcd.argv if a.startswith("--listen-client-urls="))
        parts = urllib.parse.urlsplit(url.partition("=")[2])
        self._connection = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port, timeout=60
        )
        self._seed: dict[int, bytes] = {}
        self._uids: dict[int, str] = {}  # of the copies; a seed job's is in its stored object
        self.requests = 0

    def clone(self, indices: Iterable[int]) -> None:
        """Write jobs ``indices`` (each at least :data:`SEED`) as copies of the seed's.

        Raises:
            RuntimeError: etcd refused a write, or a seed object is missing.
        """
        indices = list(indices)
        for index in indices:
            if index < SEED:
                raise RuntimeError(f"job {index} is a seed job: create it through the API")
        self.put(self._copy(index) for index in indices)

    def put(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Write (key, value) pairs into etcd, :data:`_PUTS_PER_TXN` a transaction.

        Raises:
            RuntimeError: etcd refused a write.
        """
        batch: list[JSON] = []
        for key, value in items:
            batch.append({"request_put": {"key": _b64(key), "value": _b64(value)}})
            if len(batch) == _PUTS_PER_TXN:
                self._txn(batch)
                batch = []
        if batch:
            self._txn(batch)

    def uid_of(self, index: int) -> str:
        """The uid of job ``index`` (a seed job's as the API server gave it, or a copy's).

        Raises:
            RuntimeError: The job was neither created nor copied.
        """
        if index < SEED:
            if index not in self._seed:
                self._read_seed()
            stored = self._seed.get(index)
            uid = None if stored is None else json.loads(stored)["metadata"]["uid"]
        else:
            uid = self._uids.get(index)
        if uid is None:
            raise RuntimeError(f"job {index} ({name_of(index)}) was not created")
        return str(uid)

    def wait_until_served(self, jobs: int, timeout: float = 600.0) -> None:
        """Wait until the API server lists the first ``jobs`` jobs of the fleet, kind by kind.

        The API server learns of the copies from its watch on etcd, and serves lists from that
        cache: after tens of thousands of writes it lags behind etcd for a while, and a list
        meanwhile fails (504, "Too large resource version"). A benchmark must not start then.
        A first page can be right while the cache still lags (it may be read from etcd); the
        second page is read from the cache at the first one's resourceVersion, so both must
        succeed.

        Raises:
            RuntimeError: Still not listed after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        for kind, expected in sorted(kind_counts(jobs).items()):
            path = f"/apis/{GROUP}/{VERSION}/{KINDS[kind].plural}?limit=1"
            while True:
                try:
                    listed = self._cp.request("GET", path)
                except ApiError:
                    listed = None  # the cache is behind: it answers 504 until it catches up
                if listed is not None:
                    meta = listed.get("metadata") or {}
                    count = len(listed.get("items") or ()) + (meta.get("remainingItemCount") or 0)
                    if count == expected and self._next_page_served(path, meta.get("continue")):
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the API server does not list {expected} {kind}s yet")
                time.sleep(0.5)

    def _next_page_served(self, path: str, token: str | None) -> bool:
        if not token:
            return True
        try:
            self._cp.request("GET", f"{path}&continue={urllib.parse.quote(token)}")
        except ApiError:
            return False
        return True

    def _copy(self, index: int) -> tuple[bytes, bytes]:
        origin = index % SEED
        if origin not in self._seed:
            self._read_seed()
        stored = self._seed.get(origin)
        if stored is None:
            raise RuntimeError(f"seed job {origin} ({name_of(origin)}) is not in etcd")
        value = stored.replace(name_of(origin).encode(), name_of(index).encode())
        value = value.replace(f"run-{origin:06d}".encode(), f"run-{index:06d}".encode())
        old_uid = json.loads(stored)["metadata"]["uid"]
        uid = self._uids[index] = str(uuid.uuid4())
        value = value.replace(f'"uid":"{old_uid}"'.encode(), f'"uid":"{uid}"'.encode())
        return _key(index), value

    def _read_seed(self) -> None:
        for index in range(SEED):
            key = _key(index)
            found = self._post("/v3/kv/range", {"key": _b64(key)}).get("kvs") or []
            if found:
                self._seed[index] = base64.b64decode(found[0]["value"])

    def _txn(self, puts: list[JSON]) -> None:
        self._post("/v3/kv/txn", {"success": puts})

    def _post(self, path: str, body: JSON) -> JSON:
        self._connection.request(
            "POST", path, json.dumps(body), headers={"Content-Type": "application/json"}
        )
        response = self._connection.getresponse()
        data = response.read()
        self.requests += 1
        if response.status != 200:  # noqa: PLR2004 - the gateway answers 200 or an error
            raise RuntimeError(f"etcd {path} -> {response.status}: {data[:400]!r}")
        answer: JSON = json.loads(data)
        return answer

    def close(self) -> None:
        """Close the connection to etcd."""
        self._connection.close()


def _key(index: int) -> bytes:
    plural = KINDS[kind_of(index)].plural
    return f"/registry/{GROUP}/{plural}/{namespace_of(index)}/{name_of(index)}".encode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
