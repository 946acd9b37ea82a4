"""A skewed local clock against a real apiserver: ``--clock server`` decides by the server's clock.

The local clock is moved by hours with freezegun, which reaches only this process: so the CLI
runs in-process through click's ``CliRunner`` (the same ``command`` the console script calls),
against the session's real apiserver, whose ``Date`` header keeps the true time. The job
times are written by the test from the true clock, as the operator writes them from its own.

- ``--clock server``: a job that is not due by the server's clock is never acted on, however
  far the local clock runs ahead; a job that is overdue is acted on even when the local clock
  lags behind.
- ``--clock local``: the local clock decides, and a skew larger than ``--grace`` is reported
  as a warning naming the direction.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any

import pytest
from click.testing import Result
from freezegun import freeze_time

from devcluster import ControlPlane
from sweeper.cli import command
from tests.cli_runner import runner
from tests.e2e import workloads as w

pytestmark = pytest.mark.e2e

SKEW = dt.timedelta(hours=3)
HOUR = 3600


def sweep_with_local_clock(kubeconfig: Any, skew: dt.timedelta, *args: str) -> Result:
    """Run the CLI in this process with the local clock off by ``skew`` (ticking)."""
    # Nothing from the developer's shell: no KUBECONFIG, no SWEEPER_* twins.
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SWEEPER_")}
    env["KUBECONFIG"] = None
    # The client's models import lazily (pydantic) and must not see freezegun's FakeDatetime
    # while it scans modules; the sweeper's own clock reading is what must see the skew.
    with freeze_time(dt.datetime.now(dt.UTC) + skew, tick=True, ignore=["kubernetes", "pydantic"]):
        return runner().invoke(
            command,
            ["--kubeconfig", str(kubeconfig), "-o", "json", *args],
            env=env,
            catch_exceptions=False,
        )


def the_report(result: Result) -> dict[str, Any]:
    (report,) = w.passes(result.stdout)
    return report


def warnings(result: Result) -> list[str]:
    records = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    return [r["message"] for r in records if r.get("level") == "WARNING"]


def decision(report: dict[str, Any], name: str) -> tuple[str, str]:
    [job] = [j for j in report["jobs"] if j["name"] == name]
    return job["decision"], job["reason"]


def was_written(cp: ControlPlane, namespace: str, name: str) -> bool:
    job = w.get_job(cp, namespace, "PyTorchJob", name)
    annotated = w.TOUCHED_AT in (job["metadata"].get("annotations") or {})
    failed = any(c["type"] == "Failed" for c in job.get("status", {}).get("conditions", []))
    return annotated or failed


@pytest.mark.parametrize("action", ["touch", "fail"], ids=str)
def test_a_local_clock_hours_ahead_does_not_make_server_clock_act_early(
    control_plane: ControlPlane, namespace: str, sweeper_kubeconfig: Any, action: str
) -> None:
    # Due in one hour by the true clock; two hours overdue by the skewed local one.
    w.create_job(control_plane, namespace, "due-in-an-hour", deadline=2 * HOUR, started_ago=HOUR)

    result = sweep_with_local_clock(
        sweeper_kubeconfig, SKEW, "-n", namespace, "--clock", "server", "--action", action
    )

    assert result.exit_code == 0, result.output
    report = the_report(result)
    assert decision(report, "due-in-an-hour") == ("skip", "not-yet-due")
    assert not was_written(control_plane, namespace, "due-in-an-hour")
    # The pass's "now" is the server's, not the skewed local time.
    reported_now = w.parse_stamp(report["now"])
    assert abs(reported_now - w.now()) < SKEW / 2


def test_a_local_clock_hours_behind_does_not_stop_server_clock_from_acting(
    control_plane: ControlPlane, namespace: str, sweeper_kubeconfig: Any
) -> None:
    # One hour overdue by the true clock; not due for two hours by the lagging local one.
    w.create_job(control_plane, namespace, "overdue", deadline=HOUR, started_ago=2 * HOUR)

    result = sweep_with_local_clock(sweeper_kubeconfig, -SKEW, "-n", namespace, "--clock", "server")

    assert result.exit_code == 0, result.output
    assert decision(the_report(result), "overdue") == ("touch", "overdue")
    assert was_written(control_plane, namespace, "overdue")


@pytest.mark.parametrize(
    ("skew", "job", "expected", "direction"),
    [
        (SKEW, {"deadline": 2 * HOUR, "started_ago": HOUR}, ("touch", "overdue"), "ahead"),
        (-SKEW, {"deadline": HOUR, "started_ago": 2 * HOUR}, ("skip", "not-yet-due"), "behind"),
    ],
    ids=["ahead", "behind"],
)
def test_local_clock_decides_by_the_local_time_and_warns_of_the_skew(  # noqa: PLR0917 - fixtures and a parameter table
    control_plane: ControlPlane,
    namespace: str,
    sweeper_kubeconfig: Any,
    skew: dt.timedelta,
    job: dict[str, Any],
    expected: tuple[str, str],
    direction: str,
) -> None:
    w.create_job(control_plane, namespace, "job", **job)

    result = sweep_with_local_clock(sweeper_kubeconfig, skew, "-n", namespace, "--clock", "local")

    assert result.exit_code == 0, result.output
    assert decision(the_report(result), "job") == expected
    [warning] = [m for m in warnings(result) if "clock" in m]
    assert direction in warning
    assert "--clock local" in warning


@pytest.mark.parametrize(
    ("grace", "warned"),
    [(0, True), (2 * HOUR, True), (4 * HOUR, False)],
    ids=["no-grace", "grace-below-skew", "grace-above-skew"],
)
def test_the_skew_warning_appears_exactly_when_the_skew_exceeds_grace(
    control_plane: ControlPlane, namespace: str, sweeper_kubeconfig: Any, grace: int, warned: bool
) -> None:
    w.create_job(control_plane, namespace, "job", deadline=10 * HOUR, started_ago=HOUR)

    result = sweep_with_local_clock(
        sweeper_kubeconfig, SKEW, "-n", namespace, "--clock", "local", "--grace", str(grace)
    )

    assert result.exit_code == 0, result.output
    assert bool([m for m in warnings(result) if "clock" in m]) is warned, result.stderr


def test_server_clock_with_an_honest_local_clock_raises_no_skew_warning(
    control_plane: ControlPlane, namespace: str, sweeper_kubeconfig: Any
) -> None:
    w.create_job(control_plane, namespace, "job", deadline=10 * HOUR, started_ago=HOUR)

    result = sweep_with_local_clock(sweeper_kubeconfig, dt.timedelta(0), "-n", namespace)

    assert result.exit_code == 0, result.output
    assert [m for m in warnings(result) if "clock" in m] == []
