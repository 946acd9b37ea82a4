"""Empty values against a real apiserver: exit 2, not one request, the overdue job untouched.

``--dry-run=``, an empty ``SWEEPER_DRY_RUN`` and ``--explain ''`` each ran a real touch pass
before (issue 19, item 11); ``tests/unit/test_cli_values.py`` covers every option, this file
shows that the hazardous ones send nothing at all to a real cluster.
"""

from __future__ import annotations

import pytest

from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e


@pytest.fixture
def late(control_plane, namespace):
    """An overdue job: a pass that ran would touch it."""
    w.create_job(control_plane, namespace, "late")
    return control_plane, namespace


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        pytest.param(["--dry-run="], {}, "--dry-run", id="dry-run="),
        pytest.param(["--dry-run", ""], {}, "--dry-run", id="dry-run-empty-argument"),
        pytest.param([], {"SWEEPER_DRY_RUN": ""}, "--dry-run (from SWEEPER_DRY_RUN)", id="env"),
        pytest.param(["--explain", ""], {}, "--explain", id="explain-empty"),
        pytest.param([], {"SWEEPER_EXPLAIN": " "}, "--explain (from SWEEPER_EXPLAIN)", id="env-"),
        pytest.param([], {"SWEEPER_NAMESPACE": ""}, "--namespace (from SWEEPER_NAMESPACE)", id="n"),
    ],
)
def test_an_empty_value_sends_nothing_and_exits_2(late, sweep, args, env, named):
    control_plane, namespace = late

    run = sweep(*args, env=env)

    assert run.result.returncode == 2, run.explain()
    assert run.result.stderr.startswith(f"sweeper: error: invalid value for {named}: empty value")
    assert run.requests == [], run.explain()
    annotations = w.get_job(control_plane, namespace, "PyTorchJob", "late")["metadata"].get(
        "annotations"
    )
    assert w.TOUCHED_AT not in (annotations or {})
