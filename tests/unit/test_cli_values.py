"""Empty and unknown values, for every option and every environment twin: exit 2, never a run.

The tables are built from the command itself, so an option added later is covered without
being listed: ``--dry-run=``, an empty ``SWEEPER_DRY_RUN`` and ``--explain ''`` each ran a
writing touch pass over every namespace before (issue 19, item 11).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import click
import pytest

from sweeper import cli, options
from sweeper.config import Config, Timing, WatchSettings
from sweeper.core.model import Enforcement
from tests.unit.objects import job
from tests.unit.test_cli import Harness

OPTIONS = [
    p
    for p in cli.command.params
    if isinstance(p, click.Option) and p.name not in ("help", "version")
]


def flag(option: click.Option) -> str:
    return max(option.opts, key=len)


def variables(option: click.Option) -> list[str]:
    return [option.envvar] if isinstance(option.envvar, str) else list(option.envvar or ())


def test_every_option_is_the_programs_own_and_has_a_sweeper_twin() -> None:
    assert len(OPTIONS) >= 39  # the 39 functional options of 0.1.0
    for option in OPTIONS:
        assert isinstance(option, cli.Option), flag(option)
        assert any(v.startswith("SWEEPER_") for v in variables(option)), flag(option)


def settings(cls: type, prefix: str = "") -> set[str]:
    """Every attribute a flag may fill, as a row's ``to`` names it (``enforcement.grace``)."""
    nested = {"enforcement": Enforcement, "watch": WatchSettings, "timing": Timing}
    found: set[str] = set()
    for field in dataclasses.fields(cls):
        if field.name in nested:
            found |= settings(nested[field.name], f"{prefix}{field.name}.")
        else:
            found.add(prefix + field.name)
    return found


def test_each_flag_is_declared_once_and_fills_one_setting_no_other_flag_fills() -> None:
    # One row per flag (sweeper.options.FLAGS) is the whole declaration: click's option, its
    # twin, and where build_config puts its value. A setting no row fills would keep its
    # default whatever the command line says; two rows for one would race.
    rows = {row.param: row for row in options.FLAGS}
    assert {option.name for option in OPTIONS} == set(rows)
    filled = [row.to for row in options.FLAGS if row.to is not None]
    assert sorted(filled) == sorted(set(filled))
    assert set(filled) == settings(Config)
    assert {name for name, row in rows.items() if row.to is None} == {"all_namespaces", "watch"}


def empty_on_the_command_line() -> Iterator[object]:
    for option in OPTIONS:
        name = flag(option)
        if option.is_bool_flag:
            # A boolean flag takes no value: `--watch=` is refused by click itself.
            yield pytest.param([f"{name}="], name, id=f"{name}=")
            continue
        yield pytest.param([name, ""], name, id=f"{name} ''")
        yield pytest.param([f"{name}="], name, id=f"{name}=")
        yield pytest.param([name, "  "], name, id=f"{name} blank")


@pytest.mark.parametrize(("args", "named"), list(empty_on_the_command_line()))
def test_an_empty_value_on_the_command_line_is_a_usage_error(args: list[str], named: str) -> None:
    harness = Harness()
    harness.fake.add_job(job())  # overdue: a run would touch it

    result = harness.invoke(*args)

    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("sweeper: error: ")
    assert named in line
    assert harness.config is None  # never connected, so never wrote
    assert harness.fake.writes == []


def empty_in_the_environment() -> Iterator[object]:
    for option in OPTIONS:
        for variable in variables(option):
            if variable == "KUBECONFIG":
                continue  # empty means unset, as kubectl reads it (below)
            for value in ("", " "):
                yield pytest.param(variable, value, flag(option), id=f"{variable}={value!r}")


@pytest.mark.parametrize(("variable", "value", "named"), list(empty_in_the_environment()))
def test_an_empty_environment_twin_is_a_usage_error_naming_option_and_variable(
    variable: str, value: str, named: str
) -> None:
    harness = Harness()
    harness.fake.add_job(job())

    result = harness.invoke(env={variable: value})

    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"sweeper: error: invalid value for {named} (from {variable}): ")
    assert f"unset {variable}" in line
    assert harness.config is None
    assert harness.fake.writes == []


def test_the_command_line_wins_over_an_empty_twin_as_over_any_twin() -> None:
    harness = Harness()
    result = harness.invoke("--dry-run=server", env={"SWEEPER_DRY_RUN": ""})
    assert result.exit_code == 0, result.output
    assert harness.config is not None
    assert harness.config.dry_run is not None


def test_an_empty_kubeconfig_variable_is_unset_as_kubectl_reads_it() -> None:
    harness = Harness()
    result = harness.invoke("--dry-run", env={"KUBECONFIG": ""})
    assert result.exit_code == 0, result.output
    assert harness.config is not None
    assert harness.config.kubeconfig is None


def typed_options() -> Iterator[object]:
    # Every option whose type knows its values (choices, durations, numbers, booleans); a free
    # text (a path, a name) has its own checks in sweeper.config.
    for option in OPTIONS:
        if isinstance(option.type, click.types.StringParamType) or (
            option.is_flag and not option.is_bool_flag
        ):
            continue
        name = flag(option)
        if not option.is_bool_flag:
            yield pytest.param([name, "bogus"], {}, name, id=f"{name} bogus")
        for variable in variables(option):
            yield pytest.param([], {variable: "bogus"}, name, id=f"{variable}=bogus")


@pytest.mark.parametrize(("args", "env", "named"), list(typed_options()))
def test_an_unknown_value_is_a_usage_error(
    args: list[str], env: dict[str, str], named: str
) -> None:
    harness = Harness()
    harness.fake.add_job(job())

    result = harness.invoke(*args, env=env)

    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert named in line
    if env:
        assert f"(from {next(iter(env))})" in line
    assert harness.config is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--explain", "a/b", "--watch"], "it does not take --watch", id="watch"),
        pytest.param(
            ["--explain", "a/b", "--every", "1m", "--for", "5m"],
            "it does not take --every/--for",
            id="every-for",
        ),
    ],
)
def test_explain_refuses_a_mode_it_would_silently_drop(args: list[str], message: str) -> None:
    harness = Harness()
    result = harness.invoke(*args)
    assert result.exit_code == 2
    assert result.stderr == f"sweeper: error: --explain explains one job and exits; {message}\n"
    assert harness.config is None
