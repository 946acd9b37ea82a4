"""Start-up cost: ``sweeper --version``, and one dry-run pass against an empty control plane.

    .venv/bin/python -m benchmarks.startup [--runs 20] [--candidate DIR]

The control plane has the six Training Operator CRDs installed and no job, so the pass is all
fixed cost: interpreter start, imports, kubeconfig loading, the TLS handshake, discovery and
six empty lists. The two commands alternate, after one unmeasured run of each (page cache).
It prints ``version_median_s`` and ``empty_pass_median_s`` with their extremes, the pass's
CPU seconds (user + system) and the peak RSS of each, and the load average.

``--candidate DIR`` adds the pass of the sweeper package in DIR (a checkout of another commit)
to every round, the two passes in turns (this tree first in odd rounds); both then run as
``python -m sweeper`` from their own tree, so that neither has the console script's start.
``candidate_*`` are its figures, and ``*_vs_candidate_paired`` the median over rounds of this
tree's figure over the candidate's in the same round (CPU, peak RSS, wall).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks import measure
from devcluster import ControlPlane

SWEEPER_USER = "bench-sweeper"
REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.startup",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (default 20)")
    parser.add_argument(
        "--candidate",
        type=Path,
        metavar="DIR",
        help="pair each pass with the sweeper package in DIR (a checkout of another commit)",
    )
    args = parser.parse_args(argv)
    if args.candidate and not (args.candidate / "sweeper" / "__init__.py").is_file():
        parser.error(f"--candidate {args.candidate}: no sweeper package in it")
    sweeper = str(measure.sweeper_executable())
    with ControlPlane.start() as cp:
        kubeconfig = cp.user_kubeconfig(SWEEPER_USER, ["system:masters"])
        version_argv = [sweeper, "--version"]
        pass_args = ["--kubeconfig", str(kubeconfig), "--dry-run", "-o", "json"]
        this = _Pass(sweeper, pass_args, REPO if args.candidate else None)
        other = _Pass(sweeper, pass_args, args.candidate) if args.candidate else None
        load_before = measure.load_average()
        measure.run(version_argv).check()
        for contender in (this, other):
            if contender is not None:
                contender.run()
        versions: list[measure.Run] = []
        passes: list[measure.Run] = []
        candidates: list[measure.Run] = []
        for round_ in range(args.runs):
            versions.append(measure.run(version_argv).check())
            if other is None:
                passes.append(this.run())
            elif round_ % 2 == 0:
                passes.append(this.run())
                candidates.append(other.run())
            else:
                candidates.append(other.run())
                passes.append(this.run())
        figures: dict[str, measure.Figure] = {
            "runs": args.runs,
            "version_median_s": measure.median([r.wall_s for r in versions]),
            "version_min_s": min(r.wall_s for r in versions),
            "version_max_s": max(r.wall_s for r in versions),
            "version_peak_rss_mb": max(r.peak_rss_mb for r in versions),
            **_pass_figures("empty_pass", passes),
        }
        if candidates:
            figures.update(_pass_figures("candidate_empty_pass", candidates))
            for name, of in (("cpu", "cpu_s"), ("peak_rss", "peak_rss_mb"), ("wall", "wall_s")):
                figures[f"{name}_vs_candidate_paired"] = measure.median(
                    [
                        getattr(a, of) / getattr(b, of)
                        for a, b in zip(passes, candidates, strict=True)
                    ]
                )
        figures["load_avg_before"] = load_before
        figures["load_avg_after"] = measure.load_average()
        measure.print_figures(figures)
    return 0


class _Pass:
    """One contender's dry-run pass: the installed CLI, or ``python -m sweeper`` from a tree."""

    def __init__(self, sweeper: str, args: list[str], tree: Path | None) -> None:
        if tree is None:
            self.argv, self.env, self.cwd = [sweeper, *args], None, None
        else:
            # From the tree: "-m" puts the working directory first on sys.path.
            self.argv = [sys.executable, "-m", "sweeper", *args]
            self.env, self.cwd = measure.clean_env(PYTHONPATH=str(tree)), tree

    def run(self) -> measure.Run:
        return measure.run(self.argv, env=self.env, cwd=self.cwd).check()


def _pass_figures(prefix: str, runs: list[measure.Run]) -> dict[str, float]:
    return {
        f"{prefix}_median_s": measure.median([r.wall_s for r in runs]),
        f"{prefix}_min_s": min(r.wall_s for r in runs),
        f"{prefix}_max_s": max(r.wall_s for r in runs),
        f"{prefix}_cpu_median_s": measure.median([r.cpu_s for r in runs]),
        f"{prefix}_peak_rss_mb": max(r.peak_rss_mb for r in runs),
        f"{prefix}_peak_rss_median_mb": measure.median([r.peak_rss_mb for r in runs]),
    }


if __name__ == "__main__":
    sys.exit(main())
