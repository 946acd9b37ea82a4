"""Watch-mode lateness: from each job's deadline to the sweeper's write, on the real apiserver.

    .venv/bin/python -m benchmarks.watch_lateness [--jobs 200] [--spread 60] [--clock server]

``sweeper --watch`` runs against the local control plane (as the chart runs it, with leader
election) while ``--jobs`` PyTorchJobs with an operator-like ``status.startTime`` of now and
deadlines (``activeDeadlineSeconds``) spread evenly over ``--spread`` seconds come due. The
lateness of a job is the audit log's ``requestReceivedTimestamp`` of the sweeper's PATCH to it
minus ``startTime + activeDeadlineSeconds``: both come from the apiserver's clock, so the
figure holds whatever the sweeper's clock says; a negative value would be an early write.
Prints p50, p99, max and min lateness, jobs not touched, and the same for the re-read (the
GET when the timer fired: the timer's own part of the lateness).
No operator here: the touch path's ``Failed`` is the e2e tests' business.
"""

from __future__ import annotations

import argparse
import datetime as dt
import signal

from benchmarks import measure
from devcluster import ControlPlane, jobs

SWEEPER_USER = "bench-watch"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.watch_lateness",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument(
        "--spread",
        type=int,
        default=60,
        help="seconds between the first and the last deadline (default 60)",
    )
    parser.add_argument(
        "--first-deadline",
        type=int,
        default=45,
        help="activeDeadlineSeconds of the first job (default 45)",
    )
    parser.add_argument("--clock", choices=("server", "local"), default="server")
    parser.add_argument("--settle", type=int, default=10)
    args = parser.parse_args(argv)

    with ControlPlane.start() as cp:
        kubeconfig = cp.user_kubeconfig(SWEEPER_USER, ["system:masters"])
        namespace = cp.create_namespace("watch-late")
        api = cp.api()
        log_path = cp.workdir / "watch-sweeper.log"
        sweeper = measure.start_watcher(
            kubeconfig,
            log_path,
            "-n",
            namespace,
            "--lease-namespace",
            namespace,
            "--clock",
            args.clock,
        )
        try:
            since = cp.audit_offset()
            started = dt.datetime.now(dt.UTC).replace(microsecond=0)
            stamp = started.strftime("%Y-%m-%dT%H:%M:%SZ")
            deadlines: dict[str, dt.datetime] = {}
            for i in range(args.jobs):
                seconds = args.first_deadline + round(i * args.spread / max(args.jobs - 1, 1))
                name = f"due-{i:03d}"
                body = jobs.manifest("PyTorchJob", name, active_deadline_seconds=seconds)
                jobs.create(api, namespace, body)
                cp.request(
                    "PATCH",
                    f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/{name}/status",
                    {
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
                    },
                    content_type="application/merge-patch+json",
                )
                deadlines[name] = started + dt.timedelta(seconds=seconds)
            created_by = dt.datetime.now(dt.UTC)
            end = max(deadlines.values()) + dt.timedelta(seconds=args.settle)
            measure.watch_until(sweeper, log_path, end)
        finally:
            sweeper.send_signal(signal.SIGTERM)
            sweeper.wait(timeout=60)
        events = cp.audit_events(user=SWEEPER_USER, since=since)
        first: dict[str, dt.datetime] = {}
        read: dict[str, dt.datetime] = {}
        for event in events:
            ref = event.get("objectRef") or {}
            if ref.get("resource") != "pytorchjobs" or ref.get("subresource"):
                continue
            at = dt.datetime.fromisoformat(event["requestReceivedTimestamp"])
            if event.get("verb") == "patch":
                first.setdefault(ref.get("name", ""), at)
            elif event.get("verb") == "get":
                # The re-read when the timer fires: the part of the lateness that is the timer.
                read.setdefault(ref.get("name", ""), at)
        late = [(first[n] - d).total_seconds() for n, d in deadlines.items() if n in first]
        fired = [(read[n] - d).total_seconds() for n, d in deadlines.items() if n in read]
        figures: dict[str, measure.Figure] = {
            "jobs": args.jobs,
            "clock": args.clock,
            "spread_s": args.spread,
            "jobs_created_s_after_first_start": round((created_by - started).total_seconds(), 1),
            "touched": len(late),
            "not_touched": args.jobs - len(late),
            "early_writes": sum(1 for x in late if x < 0),
            "target_p99_s": 0.25,
            "load_avg": measure.load_average(),
        }
        if late:
            figures |= {
                "lateness_p50_s": round(measure.percentile(late, 0.50), 3),
                "lateness_p99_s": round(measure.percentile(late, 0.99), 3),
                "lateness_max_s": round(max(late), 3),
                "lateness_min_s": round(min(late), 3),
            }
        if fired:
            figures |= {
                "reread_lateness_p50_s": round(measure.percentile(fired, 0.50), 3),
                "reread_lateness_p99_s": round(measure.percentile(fired, 0.99), 3),
                "reread_lateness_min_s": round(min(fired), 3),
            }
        measure.print_figures(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
