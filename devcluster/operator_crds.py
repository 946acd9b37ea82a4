"""Find the Training Operator's CRDs that ``scripts/build-binaries`` copies into its cache.

The six ``kubeflow.org/v1`` CustomResourceDefinitions are the operator's own
``manifests/base/crds/``, taken from the Go module ``github.com/kubeflow/training-operator`` at
the version the build table pins (the module the operator binary is built from). They are
upstream data, so the repository never holds a copy: they live beside the operator binary, in
``<cache>/training-operator-<version>/crds/``.
"""

from __future__ import annotations

from pathlib import Path

from devcluster import binaries


def crd_dir() -> Path:
    """Where the CRDs of the pinned operator version live once copied, whether or not they do."""
    return binaries.path("training-operator").parent / "crds"


def crd_files() -> list[Path]:
    """The Training Operator's CRD manifests, for the operator version the build table pins.

    Raises:
        binaries.BinaryMissing: They have not been copied yet; the message says how.
    """
    directory = crd_dir()
    files = sorted(directory.glob("kubeflow.org_*.yaml"))
    if not files:
        raise binaries.BinaryMissing(
            f"no CRDs in {directory}; run scripts/build-binaries training-operator "
            "(needs Go 1.26) to copy them from the operator's Go module"
        )
    return files
