"""Watch-mode soak: ``sweeper --watch`` under churn for ``--minutes`` (30; 120 for the record).

    .venv/bin/python -m benchmarks.watch_soak [--minutes 30] [--rate 5] [--samples FILE]
        [--sweeper-log FILE] [--json FILE]

``--watch`` is meant to run for weeks, so a leak of a few KiB, a thread or a socket per job
would take it down in the end. This runs ``sweeper --watch --action fail`` (with leader
election, as the chart runs it) against the local control plane for ``--minutes`` while
PyTorchJobs come and go: about ``--rate`` created per second, with an operator-like
``status.startTime`` of their creation; ``--due-share`` of them (a third) have an
``activeDeadlineSeconds`` between ``--deadline-min`` and ``--deadline-max`` seconds, so they
come due during the run, the others a day; each job is deleted ``--lifetime`` seconds after it
was created, so the cluster holds a steady few hundred. No operator runs: the sweeper's
``fail`` writes the ``Failed`` status itself, one status PATCH per due job.

Every ``--sample-every`` seconds the watcher's resident memory (``VmRSS``), threads, open file
descriptors and sockets are read from ``/proc``. The first bucket (a sixth of the run: five
minutes of thirty) is warm-up: the population ramps up, the first resync runs and the worker
pool starts its threads. The verdict compares the largest value of each figure in the last
bucket with the largest in the first bucket after warm-up (maxima, because pools and the
garbage collector move the figures up and down within a bucket): ``ok`` if none grew more than
5 %. Maxima and medians of every bucket are printed too, and a ``curve_*`` line per
``--curve-every`` minutes (maxima, with the machine's 1-minute load average at its end): the curve
in numbers. ``--samples`` writes every sample as CSV while the run goes on (the 1-minute load
average in its last column), so a run that is killed keeps its curve; ``--sweeper-log`` keeps the
watcher's log, which otherwise goes with the control plane's directory.

The lateness of a due job is the audit log's ``requestReceivedTimestamp`` of the sweeper's
status PATCH minus ``startTime + activeDeadlineSeconds`` (both the API server's clock). A due
job counts as enforced when that PATCH was made; ``written_not_due`` counts writes to jobs that
were never due (it must be 0). Figures, not a timed test: nothing here fails on a number.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import dataclasses
import datetime as dt
import json
import os
import signal
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import urllib3

from benchmarks import measure
from devcluster import ControlPlane, jobs

SWEEPER_USER = "bench-soak"
GROWTH_LIMIT_PCT = 5.0
NOT_DUE_DEADLINE_S = 86400
_MERGE_PATCH = "application/merge-patch+json"
_PLURAL = "/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"
# The figures sampled, and how each is printed.
_FIGURES = ("rss_mb", "threads", "fds", "sockets")


@dataclasses.dataclass(frozen=True)
class Sample:
    """One reading of the watcher's process, ``at`` seconds after the churn began."""

    at: float
    rss_mb: float
    threads: int
    fds: int
    sockets: int
    cpu_s: float
    jobs_alive: int
    load1: float

    def csv(self) -> str:
        """The sample as a line of ``--samples``' CSV (see :data:`CSV_HEADER`)."""
        return (
            f"{self.at:.1f},{self.rss_mb:.1f},{self.threads},{self.fds},{self.sockets},"
            f"{self.cpu_s:.2f},{self.jobs_alive},{self.load1:.2f}"
        )


CSV_HEADER = "at_s,rss_mb,threads,fds,sockets,cpu_s,jobs_alive,load1"


@dataclasses.dataclass
class Planned:
    """A job the churn created: when it is due (``None`` when never during the run)."""

    name: str
    deadline: dt.datetime | None
    created: float  # monotonic


class Churn:
    """Creates and deletes the jobs, paced on the monotonic clock, over one connection pool.

    Args:
        cp: The control plane.
        namespace: Where the jobs live.
        args: The command line's settings.
    """

    def __init__(self, cp: ControlPlane, namespace: str, args: argparse.Namespace) -> None:
        configuration = cp.api().configuration
        self._server = cp.server
        self._collection = _PLURAL.format(namespace=namespace)
        self._args = args
        self._pool = urllib3.PoolManager(
            num_pools=1,
            maxsize=8,
            block=True,
            ca_certs=configuration.ssl_ca_cert,
            cert_file=configuration.cert_file,
            key_file=configuration.key_file,
            retries=False,
            timeout=urllib3.Timeout(total=60),
        )
        self.planned: list[Planned] = []
        self.alive = 0
        self.failures: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._to_delete: collections.deque[Planned] = collections.deque()
        self._stop = threading.Event()

    def run(self, seconds: float) -> float:
        """Create jobs for ``seconds`` (deleting each after its lifetime meanwhile).

        Returns:
            The creation rate achieved, jobs per second.
        """
        deleter = threading.Thread(target=self._delete_loop, name="deleter", daemon=True)
        deleter.start()
        began = time.monotonic()
        interval = 1.0 / self._args.rate
        span = self._args.deadline_max - self._args.deadline_min
        share = self._args.due_share
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            i = 0
            while True:
                at = began + i * interval
                if at - began >= seconds:
                    break
                time.sleep(max(0.0, at - time.monotonic()))
                # Deterministic: job i is due when the running share crosses a whole job,
                # with deadlines spread over the range by a stride coprime to most spans.
                due = int((i + 1) * share) > int(i * share)
                ads = self._args.deadline_min + (i * 7919) % (span + 1) if due else None
                pool.submit(self._create, i, ads)
                i += 1
        elapsed = time.monotonic() - began
        return len(self.planned) / elapsed if elapsed else 0.0

    def stop(self) -> None:
        """Stop deleting (the control plane goes with the rest)."""
        self._stop.set()

    def _create(self, i: int, ads: int | None) -> None:
        name = f"soak-{i:06d}"
        body = jobs.manifest(
            "PyTorchJob", name, active_deadline_seconds=ads or NOT_DUE_DEADLINE_S, workers=1
        )
        if not self._send("POST", self._collection, body, ok=(201,)):
            return
        started = dt.datetime.now(dt.UTC).replace(microsecond=0)
        stamp = started.strftime("%Y-%m-%dT%H:%M:%SZ")
        status = {
            "status": {
                "startTime": stamp,
                "conditions": [
                    {
                        "type": "Running",
                        "status": "True",
                        "reason": "PyTorchJobRunning",
                        "message": "running",
                        "lastUpdateTime": stamp,
                        "lastTransitionTime": stamp,
                    }
                ],
            }
        }
        planned = Planned(
            name, None if ads is None else started + dt.timedelta(seconds=ads), time.monotonic()
        )
        with self._lock:
            self._to_delete.append(planned)
            self.alive += 1
        if self._send(
            "PATCH", f"{self._collection}/{name}/status", status, ok=(200,), ctype=_MERGE_PATCH
        ):
            with self._lock:
                self.planned.append(planned)

    def _delete_loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                head = self._to_delete[0] if self._to_delete else None
            if head is None or time.monotonic() < head.created + self._args.lifetime:
                self._stop.wait(0.05)
                continue
            with self._lock:
                self._to_delete.popleft()
            self._send("DELETE", f"{self._collection}/{head.name}", None, ok=(200, 202, 404))
            with self._lock:
                self.alive -= 1

    def _send(
        self, method: str, path: str, body: Any, *, ok: tuple[int, ...], ctype: str = ""
    ) -> bool:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = ctype or "application/json"
        for attempt in range(1, 6):
            try:
                response = self._pool.request(
                    method, self._server + path, body=data, headers=headers
                )
            except urllib3.exceptions.HTTPError:
                status = 0
            else:
                status = response.status
            if status in ok:
                return True
            if attempt < 5 and status in (0, 429, 500, 503, 504):  # noqa: PLR2004 - attempts
                time.sleep(0.2 * attempt)
                continue
            with self._lock:
                self.failures[f"{method}={status}"] += 1
            return False
        return False


def read_process(pid: int) -> tuple[float, int, int, int, float]:
    """The process's (RSS MiB, threads, open fds, sockets, CPU seconds), from ``/proc``."""
    rss_kib = threads = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key == "VmRSS":
            rss_kib = int(rest.split()[0])
        elif key == "Threads":
            threads = int(rest.split()[0])
    fds = sockets = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue  # closed meanwhile
        fds += 1
        sockets += target.startswith("socket:")
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return rss_kib / 1024, threads, fds, sockets, cpu


class Sampler(threading.Thread):
    """Reads the watcher every ``every`` seconds, on a fixed monotonic grid."""

    def __init__(self, pid: int, every: float, churn: Churn, csv: Path | None = None) -> None:
        super().__init__(name="sampler", daemon=True)
        self.pid, self.every, self.churn, self.csv = pid, every, churn, csv
        self.samples: list[Sample] = []
        self.began = time.monotonic()
        self._finished = threading.Event()

    def run(self) -> None:
        """Sample until stopped (or the watcher is gone)."""
        n = 0
        out = None if self.csv is None else self.csv.open("w", buffering=1)
        try:
            if out is not None:
                out.write(CSV_HEADER + "\n")
            while not self._finished.wait(max(0.0, self.began + n * self.every - time.monotonic())):
                try:
                    rss, threads, fds, sockets, cpu = read_process(self.pid)
                except OSError:
                    return
                at = time.monotonic() - self.began
                load1 = os.getloadavg()[0]
                sample = Sample(at, rss, threads, fds, sockets, cpu, self.churn.alive, load1)
                self.samples.append(sample)
                if out is not None:
                    out.write(sample.csv() + "\n")
                n += 1
        finally:
            if out is not None:
                out.close()

    def stop(self) -> None:
        """Stop sampling."""
        self._finished.set()
        self.join()


def buckets(samples: Sequence[Sample], width: float, end: float) -> list[list[Sample]]:
    """The samples taken before ``end``, in consecutive buckets of ``width`` seconds."""
    count = max(1, round(end / width))
    grouped: list[list[Sample]] = [[] for _ in range(count)]
    for sample in samples:
        if sample.at < end:
            grouped[min(int(sample.at // width), count - 1)].append(sample)
    return grouped


def growth(grouped: Sequence[Sequence[Sample]]) -> dict[str, float]:
    """Per figure, the last bucket's maximum against the first post-warm-up bucket's, in %."""
    baseline, final = grouped[1], grouped[-1]
    result = {}
    for figure in _FIGURES:
        before = max(float(getattr(s, figure)) for s in baseline)
        after = max(float(getattr(s, figure)) for s in final)
        result[figure] = 100.0 * (after - before) / before if before else 0.0
    return result


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 - one run, in order
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.watch_soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="of churn (default 30)")
    parser.add_argument("--rate", type=float, default=5.0, help="jobs created per second")
    parser.add_argument("--due-share", type=float, default=1 / 3)
    parser.add_argument("--deadline-min", type=int, default=20)
    parser.add_argument("--deadline-max", type=int, default=60)
    parser.add_argument(
        "--lifetime", type=float, default=120.0, help="seconds from creation to deletion"
    )
    parser.add_argument("--sample-every", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=15.0, help="after the last deadline")
    parser.add_argument(
        "--samples", type=Path, help="write every sample here (CSV), as they are taken"
    )
    parser.add_argument(
        "--curve-every", type=float, default=10.0, help="minutes per curve_* line (default 10)"
    )
    parser.add_argument("--sweeper-log", type=Path, help="keep the watcher's log here")
    parser.add_argument("--json", type=Path, help="write the figures here too (JSON)")
    parser.add_argument(
        "--tracemalloc",
        type=Path,
        metavar="DIR",
        help="run the watcher under tracemalloc, snapshots in DIR (benchmarks.traced_watch)",
    )
    parser.add_argument(
        "--tracemalloc-every", type=float, default=180.0, help="seconds between snapshots"
    )
    parser.add_argument(
        "--crds",
        type=Path,
        help="a directory of the Training Operator's CRD manifests to install instead of the "
        "binary cache's (before scripts/build-binaries has copied them)",
    )
    args = parser.parse_args(argv)
    if args.lifetime <= args.deadline_max + args.settle:
        parser.error("--lifetime must exceed --deadline-max + --settle (due jobs live to be due)")
    seconds = args.minutes * 60
    width = seconds / 6

    with ControlPlane.start(crds=args.crds is None) as cp:
        if args.crds is not None:
            cp.install_crds(sorted(args.crds.glob("kubeflow.org_*.yaml")))
        kubeconfig = cp.user_kubeconfig(SWEEPER_USER, ["system:masters"])
        namespace = cp.create_namespace("watch-soak")
        log_path = args.sweeper_log or cp.workdir / "soak-sweeper.log"
        since = cp.audit_offset()
        sweeper = measure.start_watcher(
            kubeconfig,
            log_path,
            "-n",
            namespace,
            "--lease-namespace",
            namespace,
            "--action",
            "fail",
            identity="soak",
            command=traced_command(args.tracemalloc, args.tracemalloc_every),
        )
        churn = Churn(cp, namespace, args)
        sampler = Sampler(sweeper.pid, args.sample_every, churn, args.samples)
        try:
            sampler.start()
            rate = churn.run(seconds)
            churn_s = time.monotonic() - sampler.began
            last = max((p.deadline for p in churn.planned if p.deadline), default=None)
            end = (last or dt.datetime.now(dt.UTC)) + dt.timedelta(seconds=args.settle)
            measure.watch_until(sweeper, log_path, end)
            sampler.stop()
            churn.stop()
        finally:
            sweeper.send_signal(signal.SIGTERM)
            exit_code = sweeper.wait(timeout=60)
        events = cp.audit_events(user=SWEEPER_USER, since=since)
        log_text = log_path.read_text(errors="replace")

    written: dict[str, dt.datetime] = {}
    requests: collections.Counter[str] = collections.Counter()
    for event in events:
        ref = event.get("objectRef") or {}
        requests[f"{event.get('verb')}_{ref.get('resource')}"] += 1
        is_status = ref.get("resource") == "pytorchjobs" and ref.get("subresource") == "status"
        if is_status and event.get("verb") == "patch":
            at = dt.datetime.fromisoformat(event["requestReceivedTimestamp"])
            written.setdefault(ref.get("name", ""), at)
    due = {p.name: p.deadline for p in churn.planned if p.deadline is not None}
    late = [(written[n] - d).total_seconds() for n, d in due.items() if n in written]
    grouped = buckets(sampler.samples, width, churn_s)
    figures: dict[str, measure.Figure] = {
        "minutes": args.minutes,
        "jobs_created": len(churn.planned),
        "create_rate_per_s": round(rate, 2),
        "due_jobs": len(due),
        "enforced": len(late),
        "not_enforced": len(due) - len(late),
        "written_not_due": sum(1 for n in written if n not in due),
        "early_writes": sum(1 for x in late if x < 0),
        "churn_request_failures": " ".join(f"{k}:{v}" for k, v in churn.failures.items()) or 0,
        "sweeper_exit_code": exit_code,
        "sweeper_log_errors": sum(1 for line in log_text.splitlines() if '"ERROR"' in line),
        "sweeper_requests": " ".join(f"{k}={v}" for k, v in sorted(requests.items())),
        "samples": len(sampler.samples),
        "load_avg": measure.load_average(),
    }
    if sampler.samples:
        loads = [s.load1 for s in sampler.samples]
        figures["load1_min_median_max"] = (
            f"{min(loads):.2f} {statistics.median(loads):.2f} {max(loads):.2f}"
        )
    figures |= measure.lateness("", late)
    if len(grouped) > 1 and all(grouped):
        grew = growth(grouped)
        for figure, pct in grew.items():
            figures[f"growth_{figure}_pct"] = round(pct, 2)
        over = [f for f, pct in grew.items() if pct > GROWTH_LIMIT_PCT]
        figures["verdict"] = f"grew: {' '.join(over)}" if over else "ok"
    else:
        figures["verdict"] = "too few samples"
    figures |= curve_figures(grouped, width, sampler.samples, args.curve_every * 60, churn_s)
    measure.print_figures(figures)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


def traced_command(directory: Path | None, every: float) -> list[str]:
    """The watcher's command under ``tracemalloc`` (none: the installed ``sweeper``)."""
    if directory is None:
        return []
    return [
        sys.executable,
        "-m",
        "benchmarks.traced_watch",
        "run",
        str(directory.resolve()),
        str(every),
        "--",
    ]


def curve_figures(
    grouped: Sequence[Sequence[Sample]],
    width: float,
    samples: Sequence[Sample],
    curve_width: float,
    end: float,
) -> dict[str, measure.Figure]:
    """The ``bucket_*`` lines of the verdict's buckets, then a ``curve_*`` line per curve window."""
    figures: dict[str, measure.Figure] = {}
    for index, bucket in enumerate(grouped):
        label = f"bucket_{index * width / 60:.4g}-{(index + 1) * width / 60:.4g}min"
        parts = []
        for figure in _FIGURES:
            values = [float(getattr(s, figure)) for s in bucket] or [0.0]
            parts.append(f"{figure}={statistics.median(values):.1f}/{max(values):.1f}")
        cpu = (bucket[-1].cpu_s - bucket[0].cpu_s) if len(bucket) > 1 else 0.0
        alive = max((s.jobs_alive for s in bucket), default=0)
        parts.append(f"cpu_s={cpu:.1f} jobs_alive={alive}")
        figures[label] = " ".join(parts) + " (median/max)"
    for index, bucket in enumerate(buckets(samples, curve_width, end)):
        if bucket:
            figures[f"curve_{(index + 1) * curve_width / 60:.4g}min"] = curve_line(bucket)
    return figures


def curve_line(bucket: Sequence[Sample]) -> str:
    """One point of the curve: each figure's maximum over ``bucket``, and the load at its end."""
    parts = [f"{f}={max(float(getattr(s, f)) for s in bucket):.4g}" for f in _FIGURES]
    parts.append(f"jobs_alive={max(s.jobs_alive for s in bucket)}")
    parts.append(f"load1={bucket[-1].load1:.2f}")
    return " ".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
