"""What grows in a long ``--watch``: the sweeper under ``tracemalloc``, then the snapshots compared.

    .venv/bin/python -m benchmarks.watch_soak --minutes 25 --tracemalloc DIR
    .venv/bin/python -m benchmarks.traced_watch compare DIR [--top 15] [--frames 6]

RSS alone cannot say whether a rise is the sweeper's own (a cache or a per-job dict never
pruned) or the allocator's warm-up (pymalloc arenas, interned strings, import-time caches), so
``watch_soak --tracemalloc DIR`` starts the watcher as ``python -m benchmarks.traced_watch run
DIR EVERY -- <sweeper arguments>``: ``tracemalloc`` traces 25 frames from the first line, and a
thread dumps a snapshot every ``EVERY`` seconds (``snapshot-NNN.tm``) with a line of
``stats.jsonl`` (traced bytes, RSS, objects the garbage collector tracks), then the sweeper's own
``main`` runs. Tracing slows every allocation: this run is for the where, never for lateness.

``compare`` prints the ``stats.jsonl`` curve, then the allocation sites (by traceback, the
benchmark's and ``tracemalloc``'s own frames filtered out) that grew most from the second
snapshot (after the warm-up's imports and the first resync) to the last, and for each the
growth in the second half alone: a leak keeps growing there, a warm-up does not.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import threading
import time
import tracemalloc
from pathlib import Path

FRAMES = 25
_IGNORED = (tracemalloc.__file__, threading.__file__, __file__, "<frozen importlib._bootstrap>")


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _dump(directory: Path, n: int, began: float) -> None:
    snapshot = tracemalloc.take_snapshot()
    snapshot.dump(str(directory / f"snapshot-{n:03d}.tm"))
    current, peak = tracemalloc.get_traced_memory()
    line = {
        "n": n,
        "at_s": round(time.monotonic() - began, 1),
        "traced_mb": round(current / 2**20, 3),
        "traced_peak_mb": round(peak / 2**20, 3),
        "rss_mb": round(_rss_mib(), 1),
        "tracemalloc_overhead_mb": round(tracemalloc.get_tracemalloc_memory() / 2**20, 1),
        "gc_objects": len(gc.get_objects()),
    }
    with (directory / "stats.jsonl").open("a") as out:
        out.write(json.dumps(line) + "\n")


def _dump_loop(directory: Path, every: float, began: float) -> None:
    n = 1
    while True:
        time.sleep(max(0.0, began + n * every - time.monotonic()))
        _dump(directory, n, began)
        n += 1


def run(directory: Path, every: float, sweeper_args: list[str]) -> None:
    """Trace from here on, dump snapshots (the first at once), and run the sweeper's command."""
    tracemalloc.start(FRAMES)
    directory.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    _dump(directory, 0, began)
    threading.Thread(target=_dump_loop, args=(directory, every, began), daemon=True).start()
    from sweeper.cli import main  # noqa: PLC0415 - imported under the trace, as it grows

    sys.argv = ["sweeper", *sweeper_args]
    main()


def compare(directory: Path, top: int, frames: int) -> None:
    """Print the curve and the allocation sites that grew most, in ``directory``'s snapshots."""
    for line in (directory / "stats.jsonl").read_text().splitlines():
        print(line)
    paths = sorted(directory.glob("snapshot-*.tm"))
    if len(paths) < 3:  # noqa: PLR2004 - a base, a middle and an end
        print(f"{len(paths)} snapshot(s): too few to compare")
        return
    keep = [tracemalloc.Filter(False, pattern) for pattern in _IGNORED]
    base, middle, last = (
        tracemalloc.Snapshot.load(str(paths[i])).filter_traces(keep)
        for i in (1, len(paths) // 2, -1)
    )
    late = {stat.traceback: stat for stat in last.compare_to(middle, "traceback")}
    print(f"\ngrowth {paths[1].name} -> {paths[-1].name} (late: {paths[len(paths) // 2].name} ->)")
    for stat in last.compare_to(base, "traceback")[:top]:
        second = late.get(stat.traceback)
        print(
            f"\n{stat.size_diff / 1024:+.1f} KiB ({stat.count_diff:+d} blocks), "
            f"now {stat.size / 1024:.1f} KiB; late half "
            f"{(second.size_diff if second else 0) / 1024:+.1f} KiB"
        )
        for frame_line in stat.traceback.format(limit=frames, most_recent_first=True):
            print(f"    {frame_line}")
    for key in ("filename", "lineno"):
        print(f"\nby {key}:")
        for stat in last.compare_to(base, key)[:top]:
            print(f"  {stat}")


def main(argv: list[str] | None = None) -> int:
    """``run DIR EVERY -- ARGS`` (the watcher, traced) or ``compare DIR``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.traced_watch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    run_parser = sub.add_parser("run", help="run the sweeper traced (watch_soak does it)")
    run_parser.add_argument("directory", type=Path)
    run_parser.add_argument("every", type=float, help="seconds between snapshots")
    run_parser.add_argument("sweeper_args", nargs=argparse.REMAINDER)
    compare_parser = sub.add_parser("compare", help="print what grew")
    compare_parser.add_argument("directory", type=Path)
    compare_parser.add_argument("--top", type=int, default=15)
    compare_parser.add_argument("--frames", type=int, default=6)
    args = parser.parse_args(argv)
    if args.mode == "run":
        rest = args.sweeper_args
        run(args.directory, args.every, rest[1:] if rest[:1] == ["--"] else rest)
    else:
        compare(args.directory, args.top, args.frames)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
