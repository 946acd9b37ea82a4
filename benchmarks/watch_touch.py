"""Watch-mode touch path: from each job's deadline to the real operator's ``Failed``.

    .venv/bin/python -m benchmarks.watch_touch [--jobs 100] [--spread 60] [--first-deadline 90]

The real Training Operator v1.9.4 runs against the local control plane, and ``sweeper --watch
--action touch`` (leader election on, as the chart runs it) watches one namespace holding
``--jobs`` PyTorchJobs (a master and a worker each) with deadlines spread evenly over
``--spread`` seconds from ``--first-deadline`` seconds after creation. A stand-in kubelet
(``benchmarks.lateness.PodRunner``) moves every pod to Running once and leaves it alone: stable
pods, the situation in which the operator never wakes up for a deadline by itself.

A job's deadline is ``status.startTime + activeDeadlineSeconds`` (the operator wrote the start
time). The benchmark watches the jobs itself and notes when each first shows ``Failed=True``;
the machine's clock is the apiserver's and the operator's, so ``failed_*`` is the lateness of
the whole touch path, watch delivery to this process included. ``touch_*`` is the lateness of
the sweeper's PATCH (the audit log's ``requestReceivedTimestamp``), ``touch_to_failed_*`` the
operator's part. ``failed_by_operator`` counts the Failed conditions with the operator's own
reason and message (the touch path never writes status); ``touches`` counts the sweeper's
PATCHes (more than the jobs: quick re-touches).
"""

from __future__ import annotations

import argparse
import datetime as dt
import signal
import threading
import time

from kubernetes import client, watch

from benchmarks import measure
from benchmarks.lateness import PodRunner, _read, _wait_for_start_times
from devcluster import ControlPlane, jobs
from devcluster.jobs import JobView
from devcluster.operator import Operator

SWEEPER_USER = "bench-watch-touch"
OPERATOR_MESSAGE = "has failed because it was active longer than specified deadline"


class FailedSeen:
    """A watch of the namespace's PyTorchJobs noting when each first shows ``Failed=True``."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self._api = client.CustomObjectsApi(api)
        self._namespace = namespace
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="failed-seen", daemon=True)
        self.seen: dict[str, dt.datetime] = {}
        self.errors: list[str] = []

    def start(self) -> FailedSeen:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                # The client's watch helper has no type hints.
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    self._api.list_namespaced_custom_object,
                    jobs.GROUP,
                    jobs.VERSION,
                    self._namespace,
                    "pytorchjobs",
                    timeout_seconds=10,
                )
                for event in stream:
                    at = dt.datetime.now(dt.UTC)
                    view = JobView(event["object"])
                    if view.failed:
                        self.seen.setdefault(view.name, at)
                    if self._stop.is_set():
                        break
            except Exception as error:  # noqa: BLE001 - a figure source: note it, go on
                self.errors.append(f"{type(error).__name__}: {error}")
                time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 - one scenario, top to bottom
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.watch_touch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument(
        "--spread", type=int, default=60, help="seconds between the first and the last deadline"
    )
    parser.add_argument(
        "--first-deadline",
        type=int,
        default=90,
        help="activeDeadlineSeconds of the first job (time for the operator to start them all)",
    )
    parser.add_argument("--clock", choices=("server", "local"), default="server")
    parser.add_argument("--settle", type=int, default=15)
    args = parser.parse_args(argv)

    with ControlPlane.start() as cp, Operator.start(cp) as operator:
        api = cp.api()
        namespace = cp.create_namespace("watch-touch")
        kubeconfig = cp.user_kubeconfig(SWEEPER_USER, ["system:masters"])
        for i in range(args.jobs):
            seconds = args.first_deadline + round(i * args.spread / max(args.jobs - 1, 1))
            body = jobs.manifest(
                "PyTorchJob", f"t-{i:03d}", active_deadline_seconds=seconds, workers=1
            )
            jobs.create(api, namespace, body)
        runner = PodRunner(api, (namespace,)).start()
        seen = FailedSeen(api, namespace).start()
        since = cp.audit_offset()
        log_path = cp.workdir / "watch-touch-sweeper.log"
        sweeper = measure.start_watcher(
            kubeconfig,
            log_path,
            "--action",
            "touch",
            "-n",
            namespace,
            "--lease-namespace",
            namespace,
            "--clock",
            args.clock,
        )
        try:
            started = _wait_for_start_times(api, (namespace,), args.jobs)
            deadlines = {v.name: v.deadline for v in started if v.deadline is not None}
            first = min(deadlines.values())
            if dt.datetime.now(dt.UTC) > first:
                raise RuntimeError("the operator started the jobs after the first deadline")
            load_before = measure.load_average()
            end = max(deadlines.values()) + dt.timedelta(seconds=args.settle)
            measure.watch_until(sweeper, log_path, end)
            load_after = measure.load_average()
        finally:
            sweeper.send_signal(signal.SIGTERM)
            sweeper.wait(timeout=60)
            seen.stop()
            runner.stop()
        if not operator.running:
            raise RuntimeError(f"the operator stopped:\n{operator.log_tail()}")
        touched: dict[str, dt.datetime] = {}
        touches = 0
        for event in cp.audit_events(user=SWEEPER_USER, since=since):
            ref = event.get("objectRef") or {}
            if (
                ref.get("resource") != "pytorchjobs"
                or ref.get("subresource")
                or event.get("verb") != "patch"
            ):
                continue
            touches += 1
            at = dt.datetime.fromisoformat(event["requestReceivedTimestamp"])
            touched.setdefault(ref.get("name", ""), at)
        views = {v.name: v for v in _read(api, namespace)}
        by_operator = sum(
            1
            for v in views.values()
            if v.failed
            and (v.condition("Failed") or {}).get("message", "").endswith(OPERATOR_MESSAGE)
        )
        failed = [
            (seen.seen[n] - d).total_seconds() for n, d in deadlines.items() if n in seen.seen
        ]
        touch = [(touched[n] - d).total_seconds() for n, d in deadlines.items() if n in touched]
        operator_part = [
            (seen.seen[n] - touched[n]).total_seconds()
            for n in deadlines
            if n in seen.seen and n in touched
        ]
        figures: dict[str, measure.Figure] = {
            "jobs": args.jobs,
            "clock": args.clock,
            "spread_s": args.spread,
            "target_p99_s": 2.0,
            "not_failed": sum(1 for n in deadlines if n not in seen.seen),
            "failed_by_operator": by_operator,
            "touches": touches,
            "early_touches": sum(1 for x in touch if x < 0),
            "watch_errors": len(seen.errors),
            "runner_errors": len(runner.errors),
            "load_avg_before": load_before,
            "load_avg_after": load_after,
        }
        for prefix, values in (
            ("failed", failed),
            ("touch", touch),
            ("touch_to_failed", operator_part),
        ):
            figures |= measure.lateness(f"{prefix}_", values)
        measure.print_figures(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
