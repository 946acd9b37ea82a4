"""The ``sweeper`` command: the only module that imports click.

It turns flags (and their ``SWEEPER_*`` twins) into one frozen ``Config``, configures logging,
runs, and maps every error to one line on stderr and its documented exit code. The HTTP client
is imported only once a run starts, so ``--version`` and ``--help`` stay fast. Tests run the
command against their own cluster by passing ``Seams`` as click's ``obj``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sweeper import __version__, flag, logs, options
from sweeper.config import Config, parse_dry_run
from sweeper.core.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, SweeperError
from sweeper.core.model import ActionMode, PodsMode
from sweeper.explain import run_explain
from sweeper.k8s.cluster import WatchCluster
from sweeper.oneshot.run import run
from sweeper.stop import Stop

if TYPE_CHECKING:
    # Only for the annotation: the watch machinery is imported for --watch alone.
    from sweeper.watch.engine import WatchConnect


def _connect(config: Config, *, stop: Stop) -> WatchCluster:
    from sweeper.k8s.connection import client  # noqa: PLC0415 - urllib3, ssl, YAML: runs only

    return client.connect(config, stop=stop)


@dataclass(frozen=True, slots=True)
class Seams:
    """What a caller may replace in a run (click's ``obj``): tests connect to a fake cluster."""

    connect: WatchConnect = _connect


# Not subscripted: ParamType is generic only from click 8.2 on, and we support 8.1.
class Parsed(click.ParamType):  # type: ignore[type-arg]
    """A value read by one of the sweeper's parsers, whose ``ValueError`` is a usage error."""

    def __init__(self, name: str, parse: Callable[[Any], Any]) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Read a flag or environment value."""
        try:
            return self._parse(value)
        except ValueError as error:
            self.fail(str(error), param, ctx)


class UsageError(click.UsageError):
    """A usage error worded like the program's own: ``sweeper: error: ...`` on one line."""

    def show(self, file: Any = None) -> None:
        """Print the one line (click's own shows the usage text and a hint first)."""
        click.echo(
            f"sweeper: error: {self.format_message()} (see sweeper --help)", file=file, err=True
        )


class Command(click.Command):
    """The ``sweeper`` command, whose usage errors read like every other error (exit 2)."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """Parse the arguments, rewording click's usage errors."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except UsageError:
            raise
        except click.BadParameter as error:
            raise UsageError(_bad_value(error), error.ctx) from error
        except click.UsageError as error:
            raise UsageError(error.format_message(), error.ctx) from error


def _bad_value(error: click.BadParameter) -> str:
    # click's own wording names every environment variable of the option even when the value
    # came from the command line; say where this one came from instead.
    param, ctx = error.param, error.ctx
    if param is None or ctx is None or param.name is None:
        return error.format_message()
    name = max(param.opts, key=len)
    variable = error.variable if isinstance(error, EmptyValue) else None
    if (
        variable is None
        and isinstance(param, Option)
        and ctx.get_parameter_source(param.name) is click.core.ParameterSource.ENVIRONMENT
    ):
        variable = next(
            (n for n in param.variables(ctx) if (os.environ.get(n) or "").strip()), None
        )
    origin = f" (from {variable})" if variable else ""
    return f"invalid value for {name}{origin}: {error.message}"


# Empty like an unset variable, as kubectl and client-go read it: a shell's `export
# KUBECONFIG=` is common, and it never decides what the sweeper writes.
_EMPTY_MEANS_UNSET = frozenset({"KUBECONFIG"})


class EmptyValue(click.BadParameter):
    """An option given an empty (or blank) value; ``variable`` ``None`` for the command line's."""

    def __init__(self, param: click.Parameter, ctx: click.Context, variable: str | None) -> None:
        hint = f"unset {variable}" if variable else "leave the option out"
        super().__init__(f"empty value ({hint} for its default)", ctx=ctx, param=param)
        self.variable = variable


class Option(click.Option):
    """Every option of the command: an empty value is a usage error, wherever it comes from.

    Else an empty ``SWEEPER_DRY_RUN`` (click: unset) or ``--explain "$JOB"`` with ``JOB`` unset
    ran a writing pass over every namespace. Only ``KUBECONFIG`` reads empty as unset (kubectl).
    """

    def variables(self, ctx: click.Context) -> list[str]:
        """The option's variables as click reads them: its twins, then the derived one."""
        names = [self.envvar] if isinstance(self.envvar, str) else list(self.envvar or ())
        if self.allow_from_autoenv and ctx.auto_envvar_prefix and self.name:
            names.append(f"{ctx.auto_envvar_prefix}_{self.name.upper()}")
        return names

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        """The value of the first variable that is set; an empty or blank one is refused."""
        for name in self.variables(ctx):
            value = os.environ.get(name)
            if value is None:
                continue
            if value.strip():
                return value
            if name not in _EMPTY_MEANS_UNSET and not ctx.resilient_parsing:
                raise EmptyValue(self, ctx, name)
        return None

    def process_value(self, ctx: click.Context, value: Any) -> Any:
        """Refuse an empty (or blank) command-line value, then convert as click does."""
        values = value if isinstance(value, tuple | list) else (value,)
        blank = any(isinstance(v, str) and not v.strip() for v in values)
        if blank and not ctx.resilient_parsing:
            raise EmptyValue(self, ctx, None)
        return super().process_value(ctx, value)


_Decorated = TypeVar("_Decorated", bound=Callable[..., Any])


def _type(value: flag.Value) -> Any:
    # The click type of each kind of value sweeper.options declares.
    if isinstance(value, flag.Duration):
        parse = partial(flag.parse_duration, positive=value.positive, longest=value.longest)
        return Parsed("duration", parse)
    if isinstance(value, flag.Count):
        return click.IntRange(value.minimum, value.maximum)
    if isinstance(value, flag.Choice):
        return click.Choice(value.words, case_sensitive=not value.any_case)
    if isinstance(value, flag.DryRunWord):
        return Parsed("client|server|none", parse_dry_run)
    return None


def _option(row: flag.Flag) -> Callable[[_Decorated], _Decorated]:
    settings: dict[str, Any] = {"default": row.default, "help": row.help}
    if isinstance(row.value, flag.Switch):
        if "/" not in row.names[0]:
            settings["is_flag"] = True
    elif row.value is not None:
        settings["type"] = _type(row.value)
    if row.bare is not None:
        settings.update(is_flag=False, flag_value=row.bare)
    if row.metavar is not None:
        settings["metavar"] = row.metavar
    if row.multiple:
        settings["multiple"] = True
    if row.shown_default is not None:
        settings["show_default"] = row.shown_default
    twins = row.variables
    env: str | list[str] = twins[0] if len(twins) == 1 else list(twins)
    return click.option(*row.names, cls=Option, envvar=env, show_envvar=True, **settings)


def _options(function: _Decorated) -> _Decorated:
    # In reverse: the last decorator applied is the first option of --help.
    for row in reversed(options.FLAGS):
        function = _option(row)(function)
    return function


@click.command(
    cls=Command,
    name="sweeper",
    context_settings={
        "auto_envvar_prefix": "SWEEPER",
        "help_option_names": ["-h", "--help"],
        "max_content_width": 100,
        "show_default": True,
    },
)
@_options
@click.version_option(__version__, "--version", prog_name="sweeper")
@click.pass_context
def command(ctx: click.Context, /, **values: Any) -> None:
    """End Kubeflow training jobs past their deadline and reclaim what they leave running.

    Exit codes: 0 completed, 1 some actions failed, 2 usage or configuration error, 3 the
    cluster could not be listed, 4 interrupted (SIGTERM/SIGINT; --watch exits 0 once it
    stopped cleanly), 5 --timeout reached, 70 internal error (a bug: the log has its
    traceback).
    """
    connect = (ctx.find_object(Seams) or Seams()).connect
    try:
        config = options.build_config(values)
    except SweeperError as error:
        _fail(error)
    logs.configure(config.log_format, config.log_level)
    enforcement = config.enforcement
    if (
        enforcement.action is not ActionMode.TOUCH
        and enforcement.terminate_pods is PodsMode.POLICY
        and enforcement.operator_version is None
    ):
        # Fail safe: keep what v1.9.4 keeps, and say what older releases would have deleted.
        logging.getLogger(__name__).warning(
            "--terminate-pods policy without --operator-version: following each job's "
            "cleanPodPolicy as operator v1.9.4 does; releases v1.7.0 to v1.9.3 delete every pod "
            "of a job failed by its deadline, so pods they would delete keep running",
            extra={"terminate_pods": "policy", "operator_version": None},
        )
    try:
        if config.explain is not None:
            code = run_explain(config, connect, sys.stdout)
        elif config.watch is not None:
            from sweeper.watch.engine import watch  # noqa: PLC0415 - the watch machinery only for --watch

            code = watch(config, connect, sys.stdout)
        else:
            code = run(config, connect, sys.stdout)
    except SweeperError as error:
        _fail(error)
    except KeyboardInterrupt:
        click.echo("sweeper: interrupted", err=True)
        ctx.exit(EXIT_INTERRUPTED)
    except Exception as error:  # last resort: a bug, reported as one
        # The traceback goes to the log at ERROR, one JSON line (a CronJob's logs keep it);
        # stderr's last line stays the one-line message.
        logging.getLogger(__name__).error(
            "internal error: %s: %s",
            type(error).__name__,
            error,
            exc_info=True,
            extra={"exit_code": EXIT_INTERNAL},
        )
        click.echo(f"sweeper: internal error: {type(error).__name__}: {error}", err=True)
        ctx.exit(EXIT_INTERNAL)
    ctx.exit(code)


def _fail(error: SweeperError) -> None:
    click.echo(f"sweeper: error: {error}", err=True)
    raise SystemExit(error.exit_code)


def main() -> None:
    """Console-script entry point."""
    command(prog_name="sweeper")
