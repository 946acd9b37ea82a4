"""The chart as ``helm template`` renders it, for the e2e tests that create parts of it.

The helm binary is the one ``scripts/build-binaries helm`` builds into the cache: without it a
test skips locally and fails in CI, as for every other binary.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from devcluster import BinaryMissing, binaries
from tests.e2e import clusters

CHART = Path(__file__).resolve().parents[2] / "chart"


def helm() -> Path:
    """The helm binary (skips locally, fails in CI, when it is not built)."""
    try:
        return binaries.find("helm")
    except BinaryMissing as e:
        clusters.binaries_missing(e)
        raise  # unreachable: binaries_missing always raises


def render(values: dict[str, Any], namespace: str | None = None) -> list[dict[str, Any]]:
    """The chart's objects with ``values`` (given on stdin), released into ``namespace``."""
    argv = [str(helm()), "template", "sw", str(CHART), "-f", "-"]
    if namespace is not None:
        argv += ["-n", namespace]
    out = subprocess.run(
        argv, input=json.dumps(values), capture_output=True, text=True, check=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]
