"""Start-up cost: ``sweeper --version``, and one dry-run pass against an empty control plane.

    .venv/bin/python -m benchmarks.startup [--runs 20]

The control plane has the six Training Operator CRDs installed and no job, so the pass is all
fixed cost: interpreter start, imports, kubeconfig loading, the TLS handshake, discovery and
six empty lists. The two commands alternate, after one unmeasured run of each (page cache).
It prints ``version_median_s`` and ``empty_pass_median_s`` with their extremes and the peak
RSS of each, and the load average.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks import measure
from devcluster import ControlPlane

SWEEPER_USER = "bench-sweeper"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.startup",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (default 20)")
    args = parser.parse_args(argv)
    sweeper = str(measure.sweeper_executable())
    with ControlPlane.start() as cp:
        kubeconfig = cp.user_kubeconfig(SWEEPER_USER, ["system:masters"])
        version_argv = [sweeper, "--version"]
        pass_argv = [sweeper, "--kubeconfig", str(kubeconfig), "--dry-run", "-o", "json"]
        load_before = measure.load_average()
        measure.run(version_argv).check()
        measure.run(pass_argv).check()
        versions: list[measure.Run] = []
        passes: list[measure.Run] = []
        for _ in range(args.runs):
            versions.append(measure.run(version_argv).check())
            passes.append(measure.run(pass_argv).check())
        measure.print_figures(
            {
                "runs": args.runs,
                "version_median_s": measure.median([r.wall_s for r in versions]),
                "version_min_s": min(r.wall_s for r in versions),
                "version_max_s": max(r.wall_s for r in versions),
                "version_peak_rss_mb": max(r.peak_rss_mb for r in versions),
                "empty_pass_median_s": measure.median([r.wall_s for r in passes]),
                "empty_pass_min_s": min(r.wall_s for r in passes),
                "empty_pass_max_s": max(r.wall_s for r in passes),
                "empty_pass_peak_rss_mb": max(r.peak_rss_mb for r in passes),
                "load_avg_before": load_before,
                "load_avg_after": measure.load_average(),
            }
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
