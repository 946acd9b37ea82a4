"""``benchmarks.traced_watch``: the traced run leaves its snapshots, and ``compare`` names the
site that grew (no figure is asserted: only where the growth is)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Three snapshots of a process whose one growing structure is built at a line of its own.
GROWER = """\
import tracemalloc
tracemalloc.start(25)
kept = []
def grow(count):
    for _ in range(count):
        kept.append(bytearray(1000))  # the growing line
for n in range(3):
    grow(200)
    tracemalloc.take_snapshot().dump(f"{DIR}/snapshot-{n:03d}.tm")
"""


def traced(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.traced_watch", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_run_dumps_a_first_snapshot_and_runs_the_sweeper_command(tmp_path: Path) -> None:
    result = traced("run", str(tmp_path), "600", "--", "--version")
    assert result.returncode == 0, result.stderr
    assert "version" in result.stdout
    assert (tmp_path / "snapshot-000.tm").stat().st_size > 0
    stats = [json.loads(line) for line in (tmp_path / "stats.jsonl").read_text().splitlines()]
    assert [line["n"] for line in stats] == [0]


def test_compare_puts_the_growing_site_first(tmp_path: Path) -> None:
    script = tmp_path / "grower.py"
    script.write_text(GROWER.replace("{DIR}", str(tmp_path)))
    subprocess.run([sys.executable, str(script)], check=True, timeout=120)
    (tmp_path / "stats.jsonl").write_text('{"n": 0}\n')
    result = traced("compare", str(tmp_path), "--top", "1", "--frames", "1")
    assert result.returncode == 0, result.stderr
    sites = result.stdout.split("\ngrowth ", 1)[1]
    assert f'File "{script}", line 6' in sites
    assert "kept.append(bytearray(1000))" in sites
