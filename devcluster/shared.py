"""Find the project's shared data directory (CRDs, facts) that lives beside the repository.

The repository is cloned next to a ``shared`` directory (``../shared`` from the repo root),
in development and in CI alike; ``SWEEPER_SHARED_DIR`` points elsewhere when needed.
"""

from __future__ import annotations

import os
from pathlib import Path

from devcluster import binaries


def shared_dir() -> Path:
    """The shared directory: ``$SWEEPER_SHARED_DIR``, else ``../shared`` beside the repo root."""
    override = os.environ.get("SWEEPER_SHARED_DIR")
    return Path(override) if override else binaries.REPO_ROOT.parent / "shared"


def crd_files() -> list[Path]:
    """The Training Operator's CRD manifests, for the operator version the build table pins.

    Raises:
        FileNotFoundError: The directory is missing or holds no CRD.
    """
    directory = shared_dir() / "crds" / f"training-operator-{binaries.version('training-operator')}"
    files = sorted(p for p in directory.glob("kubeflow.org_*.yaml"))
    if not files:
        raise FileNotFoundError(
            f"no CRDs in {directory}; clone the repository beside its shared/ directory "
            "or set SWEEPER_SHARED_DIR"
        )
    return files
