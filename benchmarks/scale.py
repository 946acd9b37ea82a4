"""Sweep cost at scale: a full dry-run pass over N jobs, against kubectl reading the same jobs.

    .venv/bin/python -m benchmarks.scale --jobs 1000 --jobs 10000 [--rounds 5] [--profile DIR]

For each N (ascending; the fleet grows in place, so every size is measured in the same run on
the same control plane), it creates the jobs of ``benchmarks.fleet`` up to N, then runs
interleaved rounds, A B A B...: (A) ``sweeper --dry-run -o json``, a whole pass as the
sweeper's own client-certificate user, so the audit log attributes its requests; (B) the
cheapest equivalent read with the peer tool, ``kubectl get <plural> -A -o json
--chunk-size=500`` for each of the six kinds in turn, timed as the sum of the six. One unmeasured
warm-up round comes first (page cache, kubectl's discovery cache). Both write their output to a
file. It prints, per N, one ``key: value`` per line: ``jobs``, ``sweeper_median_s``,
``kubectl_median_s``, ``ratio_vs_kubectl``, ``sweeper_peak_rss_mb`` (the largest of the
sweeper's runs, each its own high-water mark: see ``benchmarks.measure``), ``list_requests``
(the sweeper's list requests in one pass, from the audit log) and ``list_requests_expected``,
then CPU seconds, extremes, the set-up time and the load average; with several sizes,
``rss_growth_pct`` last. Wall times depend on what else the machine runs: compare the ratio
within one run, and read the CPU seconds beside it.

``--candidate DIR`` adds a third contender to every round: the sweeper package in DIR (a copy
of ``sweeper/`` with a change to try), run as ``python -m sweeper`` from DIR; its figures are
prefixed ``candidate_``.

``--profile DIR`` runs one more pass of the largest size under pyinstrument (wall-clock
sampling, so time spent waiting for the API server shows as such) and writes ``DIR/scale.txt``
and ``DIR/scale.html``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

from benchmarks import fleet, measure
from devcluster import ControlPlane, binaries
from devcluster.jobs import GROUP, KINDS

SWEEPER_USER = "bench-sweeper"
KUBECTL_USER = "bench-kubectl"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, action="append", required=True, metavar="N",
                        help="fleet size to measure (repeatable; measured in ascending order)")
    parser.add_argument("--rounds", type=int, default=5, help="A B rounds per size (default 5)")
    parser.add_argument("--page-size", type=int, default=500,
                        help="the sweeper's --page-size (kubectl's --chunk-size stays 500)")
    parser.add_argument("--threads", type=int, default=16,
                        help="requests in flight while creating the fleet")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="profile one more pass of the largest size with pyinstrument")
    parser.add_argument("--candidate", type=Path, metavar="DIR",
                        help="also measure, in the same rounds, the sweeper package found in "
                             "DIR (a changed copy of sweeper/): candidate_* figures")
    args = parser.parse_args(argv)
    if args.candidate and not (args.candidate / "sweeper" / "__init__.py").is_file():
        parser.error(f"--candidate {args.candidate}: no sweeper package in it")
    sizes = sorted(set(args.jobs))
    kubectl = binaries.find("kubectl")
    pyinstrument = None
    if args.profile:
        pyinstrument = Path(sys.executable).parent / "pyinstrument"
        if not pyinstrument.exists():
            parser.error("--profile needs pyinstrument: .venv/bin/pip install -e '.[dev]'")

    with ControlPlane.start() as cp:
        bench = _Bench(cp, kubectl, page_size=args.page_size, candidate=args.candidate)
        creator = fleet.Creator(cp, threads=args.threads)
        creator.namespaces()
        reference = dt.datetime.now(dt.UTC)
        created = 0
        peaks: list[float] = []
        for size in sizes:
            began = time.monotonic()
            requests_before = creator.requests
            creator.create(fleet.plan(i, reference) for i in range(created, size))
            setup_s = time.monotonic() - began
            setup_requests = creator.requests - requests_before
            created = size
            figures = bench.measure(size, args.rounds)
            figures = {
                "jobs": size,
                **figures,
                "setup_s": setup_s,
                "setup_requests": setup_requests,
                "setup_requests_per_s": setup_requests / setup_s if setup_s else None,
            }
            peaks.append(float(figures["sweeper_peak_rss_mb"] or 0.0))
            measure.print_figures(figures)
            print(flush=True)
        creator.close()
        if len(sizes) > 1:
            growth = (peaks[-1] - peaks[0]) / peaks[0] * 100
            measure.print_figures({
                "rss_growth_pct": growth,
                "rss_growth_between": f"{sizes[0]} {sizes[-1]}",
            })
        if pyinstrument is not None:
            bench.profile(pyinstrument, args.profile)
    return 0


class _Bench:
    """The contenders against one control plane: the sweeper, kubectl, and maybe a candidate."""

    def __init__(
        self, cp: ControlPlane, kubectl: Path, *, page_size: int, candidate: Path | None
    ) -> None:
        self.cp = cp
        self.kubectl = kubectl
        self.page_size = page_size
        self.candidate = candidate
        self.sweeper_kubeconfig = cp.user_kubeconfig(SWEEPER_USER, ["system:masters"])
        self.kubectl_kubeconfig = cp.user_kubeconfig(KUBECTL_USER, ["system:masters"])
        self.report = cp.workdir / "sweeper-report.json"
        self.kubectl_out = cp.workdir / "kubectl-out.json"
        self.kubectl_cache = cp.workdir / "kubectl-cache"

    def sweeper_args(self) -> list[str]:
        return [
            "--kubeconfig", str(self.sweeper_kubeconfig),
            "--dry-run", "-o", "json", "--page-size", str(self.page_size),
            # Generous: a neighbour's burst of load must not turn a slow pass into exit 5.
            "--timeout", "600",
        ]

    def kubectl_argv(self, plural: str) -> list[str]:
        return [
            str(self.kubectl), "--kubeconfig", str(self.kubectl_kubeconfig),
            "--cache-dir", str(self.kubectl_cache),
            "get", f"{plural}.{GROUP}", "-A", "-o", "json", "--chunk-size=500",
        ]

    def sweep(self, *, candidate: bool = False) -> tuple[measure.Run, int]:
        """One pass of the installed sweeper (or the candidate); with its list requests."""
        if candidate and self.candidate is not None:
            # From DIR: "-m" puts the working directory first on sys.path, so started from
            # the repository it would import the repository's sweeper/ instead.
            argv = [sys.executable, "-m", "sweeper", *self.sweeper_args()]
            env = measure.clean_env(PYTHONPATH=str(self.candidate))
            cwd = self.candidate
        else:
            argv = [str(measure.sweeper_executable()), *self.sweeper_args()]
            env, cwd = None, None
        offset = self.cp.audit_offset()
        result = measure.run(argv, stdout=self.report, env=env, cwd=cwd).check()
        events = self.cp.audit_events(user=SWEEPER_USER, since=offset)
        return result, sum(1 for e in events if e.get("verb") == "list")

    def read_with_kubectl(self) -> tuple[float, float, float, int]:
        """The six kubectl reads: total seconds, total CPU seconds, largest peak RSS, lists."""
        offset = self.cp.audit_offset()
        runs = [
            measure.run(self.kubectl_argv(kind.plural), stdout=self.kubectl_out).check()
            for kind in KINDS.values()
        ]
        events = self.cp.audit_events(user=KUBECTL_USER, since=offset)
        lists = sum(1 for e in events if e.get("verb") == "list")
        return (
            sum(r.wall_s for r in runs), sum(r.cpu_s for r in runs),
            max(r.peak_rss_mb for r in runs), lists,
        )

    def check_report(self, size: int) -> None:
        """The pass saw every job and planned a touch for exactly the overdue ones."""
        document = json.loads(self.report.read_text(encoding="utf-8"))
        summary = document["summary"]
        overdue = sum(1 for i in range(size) if fleet.is_overdue(i))
        if summary["jobs"] != size or summary["touch"] != overdue or summary["errors"]:
            raise RuntimeError(
                f"unexpected sweeper report for {size} jobs ({overdue} overdue): {summary}"
            )

    def measure(self, size: int, rounds: int) -> dict[str, measure.Figure]:
        load_before = measure.load_average()
        contenders = ["sweeper", "candidate"] if self.candidate else ["sweeper"]
        for name in contenders:  # the unmeasured warm-up round, checked
            self.sweep(candidate=name == "candidate")
            self.check_report(size)
        self.read_with_kubectl()
        passes: dict[str, list[measure.Run]] = {name: [] for name in contenders}
        lists: dict[str, set[int]] = {name: set() for name in [*contenders, "kubectl"]}
        reads: list[float] = []
        read_cpu: list[float] = []
        kubectl_rss = 0.0
        for _ in range(rounds):
            for name in contenders:
                run, count = self.sweep(candidate=name == "candidate")
                passes[name].append(run)
                lists[name].add(count)
            seconds, cpu, rss, count = self.read_with_kubectl()
            reads.append(seconds)
            read_cpu.append(cpu)
            kubectl_rss = max(kubectl_rss, rss)
            lists["kubectl"].add(count)
        kubectl_median = measure.median(reads)
        figures: dict[str, measure.Figure] = {}
        for name in contenders:
            runs = passes[name]
            median = measure.median([r.wall_s for r in runs])
            figures.update({
                f"{name}_median_s": median,
                "kubectl_median_s": kubectl_median,
                f"{name}_ratio_vs_kubectl" if name != "sweeper" else "ratio_vs_kubectl":
                    median / kubectl_median,
                f"{name}_peak_rss_mb": max(r.peak_rss_mb for r in runs),
                # One figure when every pass made the same requests (they should).
                f"{name}_list_requests" if name != "sweeper" else "list_requests":
                    _counts(lists[name]),
            })
        figures["list_requests_expected"] = fleet.expected_list_requests(size, self.page_size)
        figures["rounds"] = rounds
        for name in contenders:
            runs = passes[name]
            figures[f"{name}_min_s"] = min(r.wall_s for r in runs)
            figures[f"{name}_max_s"] = max(r.wall_s for r in runs)
            # CPU seconds of the client alone: what the client costs, whatever the load.
            figures[f"{name}_cpu_median_s"] = measure.median([r.cpu_s for r in runs])
        figures.update({
            "kubectl_min_s": min(reads),
            "kubectl_max_s": max(reads),
            "kubectl_cpu_median_s": measure.median(read_cpu),
            "kubectl_peak_rss_mb": kubectl_rss,
            "kubectl_list_requests": _counts(lists["kubectl"]),
            "load_avg_before": load_before,
            "load_avg_after": measure.load_average(),
        })
        return figures

    def profile(self, pyinstrument: Path, directory: Path) -> None:
        """One more pass under pyinstrument, rendered as text and as HTML."""
        directory.mkdir(parents=True, exist_ok=True)
        session = directory / "scale.pyisession"
        argv = [str(pyinstrument), "-o", str(session), "-r", "pyisession",
                "-m", "sweeper", *self.sweeper_args()]
        result = measure.run(argv, stdout=self.report).check()
        for renderer, name in (("text", "scale.txt"), ("html", "scale.html")):
            measure.run([str(pyinstrument), "--load", str(session), "-r", renderer,
                         "-o", str(directory / name)]).check()
        measure.print_figures({"profiled_pass_s": result.wall_s,
                               "profile": str(directory / "scale.txt")})


def _counts(values: set[int]) -> str:
    return " ".join(str(n) for n in sorted(values))


if __name__ == "__main__":
    sys.exit(main())
