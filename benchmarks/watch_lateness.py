"""Watch-mode lateness: from each job's deadline to the sweeper's write, on the real apiserver.

    .venv/bin/python -m benchmarks.watch_lateness [--jobs 200] [--spread 60] [--clock server]
    .venv/bin/python -m benchmarks.watch_lateness --baseline DIR [--candidate DIR] [--rounds 3]

``sweeper --watch`` runs against the local control plane (as the chart runs it, with leader
election) while ``--jobs`` PyTorchJobs with an operator-like ``status.startTime`` of now and
deadlines (``activeDeadlineSeconds``) spread evenly over ``--spread`` seconds come due. The
lateness of a job is the audit log's ``requestReceivedTimestamp`` of the sweeper's PATCH to it
minus ``startTime + activeDeadlineSeconds``: both come from the apiserver's clock, so the
figure holds whatever the sweeper's clock says; a negative value would be an early write.
Prints p50, p99, max and min lateness, jobs not touched, and the same for the re-read (the
GET when the timer fired: the timer's own part of the lateness).
No operator here: the touch path's ``Failed`` is the e2e tests' business.

``--baseline DIR`` pairs two checkouts in one run, on one control plane: the sweeper package
in DIR (e.g. ``git worktree add --detach ../base <commit>``) and the candidate (``--candidate
DIR``, by default this checkout), each started as ``python -m sweeper`` from its tree. Each of
``--rounds`` rounds measures both, one after the other on a fresh namespace of jobs, the order
alternating from round to round (a load that rises or falls weighs on both alike). It prints
each contender's figures over all its rounds (``baseline_*``, ``candidate_*``: p50, p99, max,
min, early writes, not touched), each round's p50 and p99 and the load average around it, and
the paired figures: per round, the candidate's p50 and p99 minus the baseline's in the same
round, then the median of those (``paired_p50_diff_s``, ``paired_p99_diff_s``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import signal
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import measure
from devcluster import ControlPlane, jobs

SWEEPER_USER = "bench-watch"
REPO = Path(__file__).resolve().parents[1]


@dataclass
class Contender:
    """One sweeper to measure: the installed one (``tree`` None) or a checkout's package."""

    name: str
    tree: Path | None
    late: list[float] = field(default_factory=list)
    fired: list[float] = field(default_factory=list)
    not_touched: int = 0
    rounds: list[tuple[float, float, str]] = field(default_factory=list)  # p50, p99, load


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
    parser.add_argument(
        "--baseline", type=Path, help="DIR: a checkout to pair with (baseline_* figures)"
    )
    parser.add_argument(
        "--candidate",
        type=Path,
        default=REPO,
        help="DIR: the checkout paired with --baseline (default: this one)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="with --baseline (default 3)")
    args = parser.parse_args(argv)
    for tree in (args.baseline, args.candidate):
        if tree is not None and not (tree / "sweeper" / "__init__.py").is_file():
            parser.error(f"{tree}: no sweeper package in it")

    if args.baseline is None:
        contenders = [Contender("sweeper", None)]
        rounds = 1
    else:
        contenders = [
            Contender("baseline", args.baseline.resolve()),
            Contender("candidate", args.candidate.resolve()),
        ]
        rounds = args.rounds
    with ControlPlane.start() as cp:
        kubeconfig = cp.user_kubeconfig(SWEEPER_USER, ["system:masters"])
        for number in range(rounds):
            # Alternating: each contender goes first in every other round.
            order = contenders if number % 2 == 0 else contenders[::-1]
            for contender in order:
                _measure(cp, kubeconfig, contender, args, number)
    if args.baseline is None:
        _print_one(contenders[0], args)
    else:
        _print_paired(contenders, args)
    return 0


def _measure(
    cp: ControlPlane, kubeconfig: Path, contender: Contender, args: argparse.Namespace, number: int
) -> None:
    """One round of one contender: its own namespace of jobs, its own watcher, start to end."""
    namespace = cp.create_namespace(f"watch-late-{contender.name}-{number}")
    api = cp.api()
    log_path = cp.workdir / f"watch-sweeper-{contender.name}-{number}.log"
    load_before = measure.load_average()
    sweeper = measure.start_watcher(
        kubeconfig,
        log_path,
        "-n",
        namespace,
        "--lease-namespace",
        namespace,
        "--clock",
        args.clock,
        tree=contender.tree,
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
        end = max(deadlines.values()) + dt.timedelta(seconds=args.settle)
        measure.watch_until(sweeper, log_path, end)
    finally:
        sweeper.send_signal(signal.SIGTERM)
        sweeper.wait(timeout=60)
    first: dict[str, dt.datetime] = {}
    read: dict[str, dt.datetime] = {}
    for event in cp.audit_events(user=SWEEPER_USER, since=since):
        ref = event.get("objectRef") or {}
        if ref.get("resource") != "pytorchjobs" or ref.get("subresource"):
            continue
        if ref.get("namespace") != namespace:
            continue
        at = dt.datetime.fromisoformat(event["requestReceivedTimestamp"])
        if event.get("verb") == "patch":
            first.setdefault(ref.get("name", ""), at)
        elif event.get("verb") == "get":
            # The re-read when the timer fires: the part of the lateness that is the timer.
            read.setdefault(ref.get("name", ""), at)
    late = [(first[n] - d).total_seconds() for n, d in deadlines.items() if n in first]
    contender.late += late
    contender.fired += [(read[n] - d).total_seconds() for n, d in deadlines.items() if n in read]
    contender.not_touched += args.jobs - len(late)
    p50 = measure.percentile(late, 0.50) if late else float("nan")
    p99 = measure.percentile(late, 0.99) if late else float("nan")
    contender.rounds.append((p50, p99, f"{load_before} / {measure.load_average()}"))


def _figures(contender: Contender, prefix: str) -> dict[str, measure.Figure]:
    late, fired = contender.late, contender.fired
    figures: dict[str, measure.Figure] = {
        f"{prefix}touched": len(late),
        f"{prefix}not_touched": contender.not_touched,
        f"{prefix}early_writes": sum(1 for x in late if x < 0),
    }
    figures |= measure.lateness(prefix, late)
    figures |= measure.lateness(f"{prefix}reread_", fired)
    return figures


def _print_one(contender: Contender, args: argparse.Namespace) -> None:
    figures: dict[str, measure.Figure] = {
        "jobs": args.jobs,
        "clock": args.clock,
        "spread_s": args.spread,
        "target_p99_s": 0.25,
        "load_avg": contender.rounds[0][2],
    }
    measure.print_figures(figures | _figures(contender, ""))


def _print_paired(contenders: list[Contender], args: argparse.Namespace) -> None:
    baseline, candidate = contenders
    figures: dict[str, measure.Figure] = {
        "jobs": args.jobs,
        "clock": args.clock,
        "spread_s": args.spread,
        "rounds": len(baseline.rounds),
        "baseline": str(baseline.tree),
        "candidate": str(candidate.tree),
        "target_p99_s": 0.25,
    }
    for contender in contenders:
        figures |= _figures(contender, f"{contender.name}_")
        rounds = contender.rounds
        figures[f"{contender.name}_rounds_p50_s"] = " ".join(f"{r[0]:.3f}" for r in rounds)
        figures[f"{contender.name}_rounds_p99_s"] = " ".join(f"{r[1]:.3f}" for r in rounds)
        figures[f"{contender.name}_rounds_load_avg"] = " | ".join(r[2] for r in rounds)
    pairs = list(zip(candidate.rounds, baseline.rounds, strict=True))
    figures["paired_p50_diff_s"] = round(measure.median([c[0] - b[0] for c, b in pairs]), 3)
    figures["paired_p99_diff_s"] = round(measure.median([c[1] - b[1] for c, b in pairs]), 3)
    measure.print_figures(figures)


if __name__ == "__main__":
    raise SystemExit(main())
