"""Enforcement lateness: from each job's deadline to its Failed condition, with the real operator.

    .venv/bin/python -m benchmarks.lateness [--jobs 50] [--spread 120] [--interval 10]

The real Training Operator v1.9.4 runs against the local control plane. Two identical sets of
``--jobs`` PyTorchJobs (a master and a worker each) are created at the same moment in two
namespaces, with deadlines (``activeDeadlineSeconds``) spread evenly over ``--spread`` seconds
starting ``--first-deadline`` seconds after creation. A stand-in kubelet moves every pod to
Running once and then leaves it alone: stable pods, the situation in which the operator never
wakes up for a deadline. In the first namespace the sweeper runs as the Helm chart runs it
with ``intervalSeconds`` = ``--interval`` and ``namespaces`` = that namespace: a run every
minute (concurrency forbidden, like the CronJob), each making a pass every ``--interval``
seconds, with exactly the arguments ``helm template`` renders for the CronJob (action touch).
The second namespace is the operator alone over the same window.

The lateness of a job is ``lastTransitionTime`` of its ``Failed=True`` condition minus
``status.startTime + activeDeadlineSeconds``: both are the API's whole-second timestamps, so
each lateness is a whole number of seconds. The window ends ``--interval`` + ``--settle``
seconds after the last deadline. It prints ``lateness_p50_s``, ``lateness_p99_s``,
``lateness_max_s`` and ``not_failed`` for the swept jobs, the same for the operator alone
(``never`` when none of its jobs failed, with the count not failed), and the target
(``--interval`` + 2 s). Not modelled: a real CronJob's pod start-up (scheduling, image pull),
which delays the first pass of each run.

With ``--node`` (root; ``devcluster.node``) nothing is played: the chart is installed with
``helm`` on a real node (image from ``scripts/build-image``, ``intervalSeconds`` =
``--interval``, ``namespaces`` = the swept namespace, action touch), the real CronJob
controller starts its runs and the kubelet their pods; the operator creates the training pods
and the kubelet runs their containers (the workload image). Lateness is measured the same way;
the sweeper pods' start-up (pod created to container started) is printed beside it
(``pod_startup_*``), and the target becomes ``--interval`` + the slowest start-up + 2 s. The
jobs are TFJobs (a chief and a worker), and there is no operator-alone namespace (the figures
above show it); ``--jobs`` defaults to 10 there, each job being two real containers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml
from kubernetes import client

from benchmarks import measure
from devcluster import ControlPlane, binaries, fields, jobs
from devcluster.jobs import JOB_NAME_LABEL, JobView
from devcluster.kubelet import pod_status
from devcluster.operator import Operator

SWEEPER_USER = "bench-sweeper"
CHART = Path(__file__).resolve().parent.parent / "chart"
CRON_PERIOD_S = 60
# The chart's sub-minute intervals (chart/templates/_helpers.tpl, "sweeper.timing").
CHART_INTERVALS = (10, 12, 15, 20, 30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.lateness",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--jobs", type=int, help="jobs per namespace (default 50; --node: 10)")
    parser.add_argument(
        "--spread",
        type=int,
        default=120,
        help="seconds between the first and the last deadline (default 120)",
    )
    parser.add_argument(
        "--first-deadline",
        type=int,
        default=45,
        help="activeDeadlineSeconds of the first job (default 45)",
    )
    parser.add_argument(
        "--interval",
        type=int,
        default=10,
        choices=CHART_INTERVALS,
        help="the chart's intervalSeconds (default 10)",
    )
    parser.add_argument(
        "--settle",
        type=int,
        default=20,
        help="seconds the window runs past the last deadline + interval",
    )
    parser.add_argument(
        "--node", action="store_true", help="through the chart's real CronJob on a real node (root)"
    )
    parser.add_argument(
        "--override-for",
        type=int,
        metavar="SECONDS",
        help="replace the chart's --for (a workaround while the chart renders "
        "one the sweeper rejects; the figures then say so)",
    )
    args = parser.parse_args(argv)
    if args.node:
        args.jobs = args.jobs or 10
        return _node_main(args)
    args.jobs = args.jobs or 50

    with ControlPlane.start() as cp, Operator.start(cp) as operator:
        api = cp.api()
        swept = cp.create_namespace("late-swept")
        alone = cp.create_namespace("late-alone")
        deadlines = [
            args.first_deadline + round(i * args.spread / max(args.jobs - 1, 1))
            for i in range(args.jobs)
        ]
        for i, seconds in enumerate(deadlines):
            for namespace in (swept, alone):
                body = jobs.manifest(
                    "PyTorchJob", f"late-{i:03d}", active_deadline_seconds=seconds, workers=1
                )
                jobs.create(api, namespace, body)
        runner = PodRunner(api, (swept, alone)).start()
        sweeper_args = chart_args(args.interval, swept, override_for=args.override_for)
        cron = Cron(cp, sweeper_args, cp.workdir / "sweeper-runs").start()
        try:
            started = _wait_for_start_times(api, (swept, alone), args.jobs)
            last_deadline = max(v.deadline for v in started if v.deadline is not None)
            window_end = last_deadline + dt.timedelta(seconds=args.interval + args.settle)
            load_before = measure.load_average()
            while dt.datetime.now(dt.UTC) < window_end:
                cron.check()
                time.sleep(1)
        finally:
            cron.stop()
            runner.stop()
        if not operator.running:
            raise RuntimeError(f"the operator stopped:\n{operator.log_tail()}")
        swept_jobs = _read(api, swept)
        alone_jobs = _read(api, alone)
        figures: dict[str, measure.Figure] = {
            "jobs": args.jobs,
            "interval_s": args.interval,
            "target_max_s": args.interval + 2,
            **_lateness("", swept_jobs),
            **_lateness("operator_alone_", alone_jobs),
            "sweeper_args": " ".join(sweeper_args),
            "sweeper_runs": cron.runs,
            "sweeper_exit_codes": " ".join(str(c) for c in cron.exit_codes),
            "sweeper_passes": cron.passes(),
            "pods_moved_to_running": runner.moved,
            "runner_errors": len(runner.errors),
            "load_avg_before": load_before,
            "load_avg_after": measure.load_average(),
        }
        measure.print_figures(figures)
    return 0


def _node_main(args: argparse.Namespace) -> int:
    from devcluster.node import Node  # noqa: PLC0415 - the node mode's own harness

    with Node.start() as node, Operator.start(node.control_plane) as operator:
        cp = node.control_plane
        api = cp.api()
        swept = node.ensure_namespace("late-node", labels={})
        sweeper_ns = node.ensure_namespace("late-node-sweeper")
        deadlines = [
            args.first_deadline + round(i * args.spread / max(args.jobs - 1, 1))
            for i in range(args.jobs)
        ]
        for i, seconds in enumerate(deadlines):
            # TFJobs (a chief and a worker): v1.9.4 gives PyTorchJob workers an init container
            # whose public image cannot be pulled on this node.
            body = node.training_manifest("TFJob", f"late-{i:03d}", deadline=seconds)
            jobs.create(api, swept, body)
        sweeper = node.images["sweeper"]
        values = {
            "image": {"repository": sweeper.repository, "tag": sweeper.tag, "pullPolicy": "Never"},
            "intervalSeconds": args.interval,
            "namespaces": [swept],
            "action": "touch",
            "output": "json",
            "successfulJobsHistoryLimit": 100,
        }
        values_file = node.workdir / "lateness-values.yaml"
        values_file.write_text(yaml.safe_dump(values), encoding="utf-8")
        subprocess.run(
            [
                str(binaries.find("helm")),
                "install",
                "late",
                str(CHART),
                "-n",
                sweeper_ns,
                "-f",
                str(values_file),
                "--kubeconfig",
                str(cp.kubeconfig),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        startups: dict[str, float] = {}
        started = _wait_for_start_times(api, (swept,), args.jobs, timeout=600, plural="tfjobs")
        last_deadline = max(v.deadline for v in started if v.deadline is not None)
        window_end = last_deadline + dt.timedelta(seconds=args.interval + args.settle)
        load_before = measure.load_average()
        while dt.datetime.now(dt.UTC) < window_end:
            _record_startups(cp, sweeper_ns, startups)
            time.sleep(1)
        _record_startups(cp, sweeper_ns, startups)
        if not operator.running:
            raise RuntimeError(f"the operator stopped:\n{operator.log_tail()}")
        runs = cp.request("GET", f"/apis/batch/v1/namespaces/{sweeper_ns}/jobs")["items"]
        outcomes = [
            c["type"]
            for r in runs
            for c in r.get("status", {}).get("conditions", [])
            if c["type"] in ("Complete", "Failed") and c["status"] == "True"
        ]
        slowest = max(startups.values()) if startups else None
        figures: dict[str, measure.Figure] = {
            "mode": "node (chart's CronJob, real kubelet)",
            "jobs": args.jobs,
            "interval_s": args.interval,
            **_lateness("", _read(api, swept, "tfjobs")),
            "pod_startup_p50_s": measure.percentile(list(startups.values()), 0.5)
            if startups
            else None,
            "pod_startup_max_s": slowest,
            "target_max_s": None if slowest is None else round(args.interval + slowest + 2, 1),
            "cronjob_runs": len(runs),
            "runs_complete": outcomes.count("Complete"),
            "runs_failed": outcomes.count("Failed"),
            "load_avg_before": load_before,
            "load_avg_after": measure.load_average(),
        }
        measure.print_figures(figures)
    return 0


def _record_startups(cp: ControlPlane, namespace: str, startups: dict[str, float]) -> None:
    """Seconds from each sweeper pod's creation to its container's start, by pod name."""
    pods = cp.request("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    for pod in pods:
        name = pod["metadata"]["name"]
        if name in startups:
            continue
        for status in pod.get("status", {}).get("containerStatuses", []):
            state = status.get("state", {})
            begun = (state.get("running") or state.get("terminated") or {}).get("startedAt")
            if begun:
                created = pod["metadata"]["creationTimestamp"]
                startups[name] = (_instant(begun) - _instant(created)).total_seconds()


def _instant(stamp: str) -> dt.datetime:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)


def _lateness(prefix: str, views: list[JobView]) -> dict[str, measure.Figure]:
    late = [v.late_by for v in views if v.late_by is not None]
    figures: dict[str, measure.Figure] = {f"{prefix}jobs": len(views)}
    if late:
        figures |= measure.lateness(prefix, late)
    else:
        for key in ("p50", "p99", "max"):
            figures[f"{prefix}lateness_{key}_s"] = "never"
    figures[f"{prefix}not_failed"] = sum(1 for v in views if not v.failed)
    if prefix:
        # Which of the operator's own jobs it did fail, and how late: worth a look each time.
        figures[f"{prefix}failed"] = (
            " ".join(
                f"{v.name}({v.late_by:+.0f}s)"
                for v in sorted(views, key=lambda v: v.name)
                if v.failed and v.late_by is not None
            )
            or None
        )
    return figures


def _read(api: client.ApiClient, namespace: str, plural: str = "pytorchjobs") -> list[JobView]:
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(
        jobs.GROUP, jobs.VERSION, namespace, plural
    )
    return [JobView(item) for item in jobs.json_object(listed, "listing pytorchjobs")["items"]]


def _wait_for_start_times(
    api: client.ApiClient,
    namespaces: tuple[str, ...],
    per_namespace: int,
    timeout: float = 180,
    plural: str = "pytorchjobs",
) -> list[JobView]:
    """Every job's view once the operator has given each a ``startTime`` (its deadline's origin)."""
    limit = time.monotonic() + timeout
    while True:
        views = [v for ns in namespaces for v in _read(api, ns, plural)]
        if len(views) == per_namespace * len(namespaces) and all(v.start_time for v in views):
            return views
        if time.monotonic() > limit:
            raise RuntimeError("the operator did not start every job in time")
        time.sleep(1)


def chart_args(interval: int, namespace: str, *, override_for: int | None) -> list[str]:
    """The sweeper's arguments as the chart's CronJob passes them, rendered by ``helm template``.

    Args:
        interval: ``intervalSeconds``.
        namespace: The one namespace swept (``namespaces[0]``).
        override_for: A ``--for`` to use instead of the chart's, if any.
    """
    rendered = subprocess.run(
        [
            str(binaries.find("helm")),
            "template",
            "bench",
            str(CHART),
            "--set",
            f"intervalSeconds={interval}",
            "--set",
            f"namespaces[0]={namespace}",
            "--set",
            "output=json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cronjob = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "CronJob")
    if cronjob["spec"]["schedule"] != "* * * * *":
        raise ValueError(f"expected a run every minute for intervalSeconds={interval}")
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    args = [str(a) for a in pod["containers"][0]["args"]]
    if override_for is not None:
        args = [a for a in args if not a.startswith("--for=")] + [f"--for={override_for}"]
    return args


class PodRunner:
    """The stand-in kubelet: moves each pod of the jobs to Running once, then leaves it alone.

    One thread for every namespace (a ``devcluster.kubelet.Kubelet`` per job would make a
    hundred threads poll). A pod already Running is never written again, so after start-up
    nothing updates a pod and nothing wakes the operator: the bug's situation.
    """

    def __init__(self, api: client.ApiClient, namespaces: tuple[str, ...]) -> None:
        self._core = client.CoreV1Api(api)
        self._namespaces = namespaces
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pod-runner", daemon=True)
        self.moved = 0
        self.errors: list[str] = []

    def start(self) -> PodRunner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            for namespace in self._namespaces:
                try:
                    self._tick(namespace)
                except client.ApiException as error:
                    self.errors.append(f"{namespace}: {error.status} {error.reason}")
            self._stop.wait(0.5)

    def _tick(self, namespace: str) -> None:
        pods = self._core.list_namespaced_pod(namespace, label_selector=JOB_NAME_LABEL).items
        for pod in pods:
            if (
                fields.metadata(pod).deletion_timestamp is not None
                or fields.status(pod).phase != "Pending"
            ):
                continue
            body = {"status": pod_status(pod, "Running", dt.datetime.now(dt.UTC))}
            self._core.patch_namespaced_pod_status(
                fields.name(pod), namespace, body, _content_type="application/merge-patch+json"
            )
            self.moved += 1


class Cron:
    """The chart's CronJob for a sub-minute interval: a run every minute, concurrency forbidden.

    Args:
        cp: The control plane.
        args: The container's arguments, as the chart renders them (see :func:`chart_args`).
        directory: Where each run's report (``-o json``) and log go.
    """

    def __init__(self, cp: ControlPlane, args: list[str], directory: Path) -> None:
        kubeconfig = cp.user_kubeconfig(SWEEPER_USER, ["system:masters"])
        self.argv = [str(measure.sweeper_executable()), f"--kubeconfig={kubeconfig}", *args]
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.runs = 0
        self.exit_codes: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cron", daemon=True)
        self._current: subprocess.Popen[bytes] | None = None

    def start(self) -> Cron:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop scheduling and end the current run (SIGTERM: it exits 4 after its write)."""
        self._stop.set()
        if self._current is not None and self._current.poll() is None:
            self._current.terminate()
        self._thread.join(30)

    def check(self) -> None:
        """Stop the benchmark if a run failed in a way that would make every run fail.

        Raises:
            RuntimeError: A run exited 2 (configuration) or 3 (cluster unavailable); the
                message has its log tail.
        """
        current = self._current
        if current is not None and current.poll() in (2, 3):
            log = self.directory / f"run-{self.runs:03d}.log"
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-5:]
            raise RuntimeError(
                f"sweeper run {self.runs} exited {current.returncode}: " + "\n".join(tail)
            )

    def passes(self) -> int:
        """Passes made so far: one report line each."""
        return sum(
            len(path.read_text(encoding="utf-8").splitlines())
            for path in self.directory.glob("run-*.json")
        )

    def _run(self) -> None:
        tick = time.monotonic()
        while not self._stop.is_set():
            if self._current is None or self._current.poll() is not None:
                if self._current is not None:
                    self.exit_codes.append(self._current.returncode)
                self.runs += 1
                report = self.directory / f"run-{self.runs:03d}.json"
                log = self.directory / f"run-{self.runs:03d}.log"
                with report.open("wb") as out, log.open("wb") as err:
                    self._current = subprocess.Popen(
                        self.argv, stdout=out, stderr=err, env=measure.clean_env()
                    )
            tick += CRON_PERIOD_S
            self._stop.wait(max(0.0, tick - time.monotonic()))
        if self._current is not None:
            self.exit_codes.append(self._current.wait(30))


if __name__ == "__main__":
    sys.exit(main())
