"""Hypothesis profiles for the property tests of the decision core.

``ci`` (selected when ``CI=true``) is deterministic and bounded: the same examples on every
run (``derandomize``), no example database, and a fixed budget, so a red CI run can be
reproduced byte for byte on a laptop with ``HYPOTHESIS_PROFILE=ci``. ``dev`` (the default
elsewhere) explores new random examples on each run and remembers failures in
``.hypothesis/``. Neither has a per-example deadline: the machine is shared, and a timing
limit would make a correct property flaky.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Verbosity, settings

from devcluster import binaries, operator_crds

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    max_examples=200,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=200, deadline=None, print_blob=True)
settings.register_profile("deep", max_examples=5000, deadline=None, verbosity=Verbosity.normal)

settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "dev")
)


@pytest.fixture(scope="session")
def real_crds() -> None:
    """The operator's CRDs copied by ``scripts/build-binaries``: skip without them, fail in CI.

    They come from the operator's Go module, so a machine without Go cannot have them; in CI
    (``CI=true``) a missing copy is an error, since a skipped schema check would hide a status
    document the real apiserver rejects.
    """
    try:
        operator_crds.crd_files()
    except binaries.BinaryMissing as e:
        if os.environ.get("CI") == "true":
            pytest.fail(str(e))
        pytest.skip(str(e))
