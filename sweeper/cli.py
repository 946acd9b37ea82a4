"""The ``sweeper`` command: the only module that imports click.

It turns flags (and their ``SWEEPER_*`` environment twins) into one frozen
:class:`~sweeper.config.Config`, configures logging, runs, and maps every error to one line on
stderr and its documented exit code. The Kubernetes client is imported only once a run starts,
so ``--version`` and ``--help`` stay fast.

Tests run the command against their own cluster by passing :class:`Seams` as click's
``obj``; mypy checks both :func:`_connect` and theirs against :class:`~sweeper.oneshot.run.Connect`.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import click
import durationpy

from sweeper import __version__, logs
from sweeper.config import (
    DEFAULT_PUSHGATEWAY_JOB,
    LOG_LEVELS,
    ClockMode,
    Config,
    DryRun,
    LogFormat,
    OutputFormat,
    Timing,
    WatchSettings,
    parse_reference,
)
from sweeper.core.decide import ActionMode, PodsMode, Policy
from sweeper.core.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, ConfigError, SweeperError
from sweeper.core.kinds import lookup
from sweeper.core.releases import Release, parse_release
from sweeper.explain import run_explain
from sweeper.k8s.cluster import Cluster
from sweeper.oneshot.run import Connect, StopFlag, run


def _connect(config: Config, *, stop: StopFlag) -> Cluster:
    from sweeper.k8s import kube  # noqa: PLC0415 - the client takes 0.25 s to import; only runs need it

    return kube.connect(config, stop=stop)


@dataclass(frozen=True, slots=True)
class Seams:
    """What a caller may replace in a run (click's ``obj``): tests connect to a fake cluster.

    Attributes:
        connect: Builds the run's cluster; the Kubernetes client by default.
    """

    connect: Connect = _connect


# Not subscripted: ParamType is generic only from click 8.2 on, and we support 8.1.
class DryRunChoice(click.ParamType):  # type: ignore[type-arg]
    """``--dry-run`` values: ``client`` (also the bare flag), ``server``, or ``none``.

    The usual booleans are accepted too (``true`` means ``client``, ``false`` ``none``). An
    empty value is not (:class:`Option`): kubectl refuses ``--dry-run=``, and an empty
    ``SWEEPER_DRY_RUN`` in a template must never turn into a writing run.
    """

    name = "client|server|none"
    _ALIASES: ClassVar[dict[str, str]] = {
        "true": "client",
        "1": "client",
        "yes": "client",
        "false": "none",
        "0": "none",
        "no": "none",
    }

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> DryRun | None:
        """Read a flag or environment value; ``None`` means no dry run at all."""
        if value is None or isinstance(value, DryRun):
            return value
        text = str(value).strip().lower()
        text = self._ALIASES.get(text, text)
        if text == "none":
            return None
        try:
            return DryRun(text)
        except ValueError:
            self.fail(f"{value!r} is not one of client, server, none", param, ctx)


class Duration(click.ParamType):  # type: ignore[type-arg]
    """A duration as kubectl takes one (``30s``, ``5m``, ``1h30m``, ``250ms``) or plain seconds.

    Args:
        positive: Zero is refused too.
    """

    name = "duration"

    def __init__(self, *, positive: bool = False) -> None:
        self.positive = positive

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        """Turn the text into seconds.

        Args:
            value: ``30s``, ``1h``, ``90``...
            param: The option.
            ctx: The context.

        Returns:
            Seconds.
        """
        if isinstance(value, int | float):
            seconds = float(value)
        else:
            text = str(value).strip()
            try:
                seconds = float(text)
            except ValueError:
                try:
                    seconds = durationpy.from_str(text).total_seconds()
                except durationpy.DurationError:
                    self.fail(
                        f"{value!r} is not a duration (e.g. 30s, 5m, 1h30m, or seconds)", param, ctx
                    )
        if seconds != seconds or seconds in (float("inf"), float("-inf")):  # noqa: PLR0124 - NaN
            self.fail(f"{value!r} is not a finite duration", param, ctx)
        if seconds < 0 or (self.positive and seconds == 0):
            self.fail(
                f"{value!r} must be {'positive' if self.positive else 'zero or more'}", param, ctx
            )
        return seconds


def _seconds(*, positive: bool = False) -> Duration:
    return Duration(positive=positive)


AUTO = "auto"


class UsageError(click.UsageError):
    """A usage error worded like the program's own: ``sweeper: error: ...`` on one line."""

    def show(self, file: Any = None) -> None:
        """Print the one line (click's own shows the usage text and a hint first).

        Args:
            file: Where to (stderr by default).
        """
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
        """Parse the arguments, rewording click's usage errors.

        Args:
            info_name: The program's name.
            args: The arguments.
            parent: The parent context.
            **extra: click's settings.

        Returns:
            The context.

        Raises:
            UsageError: An option or a value is invalid.
        """
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
    flag = max(param.opts, key=len)
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
    return f"invalid value for {flag}{origin}: {error.message}"


# Empty like an unset variable, as kubectl and client-go read it: a shell's `export
# KUBECONFIG=` is common, and it never decides what the sweeper writes.
_EMPTY_MEANS_UNSET = frozenset({"KUBECONFIG"})


class EmptyValue(click.BadParameter):
    """An option given an empty (or blank) value, on the command line or in its variable.

    Args:
        param: The option.
        ctx: The context.
        variable: The environment variable it came from; ``None`` for the command line.
    """

    def __init__(self, param: click.Parameter, ctx: click.Context, variable: str | None) -> None:
        hint = f"unset {variable}" if variable else "leave the option out"
        super().__init__(f"empty value ({hint} for its default)", ctx=ctx, param=param)
        self.variable = variable


class Option(click.Option):
    """Every option of the command: an empty value is a usage error, wherever it comes from.

    click reads an empty environment variable as an unset one, and takes ``--dry-run=`` or
    ``--explain ''`` as values, so an empty ``SWEEPER_DRY_RUN``, ``SWEEPER_NAMESPACE`` or
    ``--explain "$JOB"`` with ``JOB`` unset ran a writing pass over every namespace. Here an
    empty or blank value (flags included: an empty ``SWEEPER_WATCH`` is neither true nor
    false) is refused with exit 2, naming the option and the variable; only ``KUBECONFIG``
    reads empty as unset, as kubectl does. A value that is not empty still goes through the
    option's type, which refuses unknown values.
    """

    def variables(self, ctx: click.Context) -> list[str]:
        """The environment variables of this option, in the order click reads them.

        Returns:
            The explicit twins, then the ``SWEEPER_<NAME>`` one click derives.
        """
        names = [self.envvar] if isinstance(self.envvar, str) else list(self.envvar or ())
        if self.allow_from_autoenv and ctx.auto_envvar_prefix and self.name:
            names.append(f"{ctx.auto_envvar_prefix}_{self.name.upper()}")
        return names

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        """The first variable that is set; an empty one is refused.

        Returns:
            Its value, or ``None`` when none is set.

        Raises:
            EmptyValue: The first variable set is empty or blank.
        """
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
        """Refuse an empty command-line value, then convert as click does.

        Returns:
            The converted value.

        Raises:
            EmptyValue: The value (or one of a repeated option's) is empty or blank.
        """
        values = value if isinstance(value, tuple | list) else (value,)
        blank = any(isinstance(v, str) and not v.strip() for v in values)
        if blank and not ctx.resilient_parsing:
            raise EmptyValue(self, ctx, None)
        return super().process_value(ctx, value)


_Decorated = TypeVar("_Decorated", bound=Callable[..., Any])


def _option(*names: str, env: str | list[str], **kwargs: Any) -> Callable[[_Decorated], _Decorated]:
    return click.option(*names, cls=Option, envvar=env, show_envvar=True, **kwargs)


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
@_option(
    "--kubeconfig",
    env=["SWEEPER_KUBECONFIG", "KUBECONFIG"],
    metavar="PATH",
    help="Kubeconfig file (default: KUBECONFIG, ~/.kube/config, else in-cluster).",
)
@_option("--context", env="SWEEPER_CONTEXT", metavar="NAME", help="Kubeconfig context to use.")
@_option(
    "-n",
    "--namespace",
    "namespaces",
    env="SWEEPER_NAMESPACE",
    multiple=True,
    metavar="NS",
    help="Only this namespace (repeatable; default: all namespaces, never listed).",
)
@_option(
    "-A",
    "--all-namespaces",
    env="SWEEPER_ALL_NAMESPACES",
    is_flag=True,
    help="Every namespace: the default, spelled out as kubectl does (not with -n).",
)
@_option(
    "--exclude-namespace",
    "exclude_namespaces",
    env="SWEEPER_EXCLUDE_NAMESPACE",
    multiple=True,
    metavar="NS",
    help="Leave this namespace's jobs alone (repeatable).",
)
@_option(
    "--kind",
    "kinds",
    env="SWEEPER_KIND",
    multiple=True,
    metavar="KIND",
    help="Only this kind, e.g. PyTorchJob or pytorchjobs (repeatable; default: all).",
)
@_option(
    "-l",
    "--selector",
    env="SWEEPER_SELECTOR",
    metavar="SEL",
    help="Label selector the jobs must match.",
)
@_option(
    "--page-size",
    env="SWEEPER_PAGE_SIZE",
    type=click.IntRange(min=1),
    default=500,
    help="Jobs per list request.",
)
@_option(
    "--grace",
    env="SWEEPER_GRACE",
    type=_seconds(),
    default="0s",
    metavar="DURATION",
    help="Tolerance past the deadline before acting.",
)
@_option(
    "--clock",
    env="SWEEPER_CLOCK",
    type=click.Choice([m.value for m in ClockMode], case_sensitive=False),
    default=ClockMode.SERVER.value,
    help="Whose clock decides: the API server's Date header, or this machine's.",
)
@_option(
    "--action",
    env="SWEEPER_ACTION",
    type=click.Choice([m.value for m in ActionMode], case_sensitive=False),
    default=ActionMode.TOUCH.value,
    help="touch: annotate so the operator fails it; fail: fail it as the operator would; "
    "auto: touch, then fail if still running --escalate-after later.",
)
@_option(
    "--terminate-pods",
    env="SWEEPER_TERMINATE_PODS",
    type=click.Choice([m.value for m in PodsMode], case_sensitive=False),
    default=PodsMode.ACTIVE.value,
    help="Pods of a failed job to delete: active (Running, Pending), all, or policy (what "
    "--operator-version keeps).",
)
@_option(
    "--operator-version",
    env="SWEEPER_OPERATOR_VERSION",
    metavar="vX.Y.Z",
    help="The Training Operator release the cluster runs, for --terminate-pods policy "
    "(v1.7.0 to v1.9.3 delete every pod at the deadline; v1.9.4 follows cleanPodPolicy).",
)
@_option(
    "--escalate-after",
    env="SWEEPER_ESCALATE_AFTER",
    type=_seconds(),
    default="2m",
    metavar="DURATION",
    help="Time after the sweeper's touch before auto fails a job "
    "(and before touch touches it again).",
)
@_option(
    "--retouch-after",
    env="SWEEPER_RETOUCH_AFTER",
    type=_seconds(positive=True),
    default="5s",
    metavar="DURATION",
    help="Touch a job again this soon when a touch written near its deadline did not fail it "
    "(the operator judges with its own clock).",
)
@_option(
    "--retouch-limit",
    env="SWEEPER_RETOUCH_LIMIT",
    type=click.IntRange(min=0),
    default=3,
    metavar="N",
    help="At most N such quick touches per deadline before --escalate-after applies; 0: none.",
)
@_option(
    "--max-actions",
    env="SWEEPER_MAX_ACTIONS",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    show_default="unlimited",
    help="Act on at most N jobs per pass (most overdue first).",
)
@_option(
    "--every",
    env="SWEEPER_EVERY",
    type=_seconds(positive=True),
    default=None,
    metavar="DURATION",
    help="Start a pass every DURATION (needs --for).",
)
@_option(
    "--for",
    "for_seconds",
    env="SWEEPER_FOR",
    type=_seconds(positive=True),
    default=None,
    metavar="DURATION",
    help="Start passes during DURATION (needs --every).",
)
@_option(
    "--dry-run",
    env="SWEEPER_DRY_RUN",
    type=DryRunChoice(),
    is_flag=False,
    flag_value="client",
    default=None,
    help="Plan and report, write nothing (client), or send writes with dryRun=All "
    "(server). Bare --dry-run means client.",
)
@_option(
    "-o",
    "--output",
    env="SWEEPER_OUTPUT",
    type=click.Choice([f.value for f in OutputFormat], case_sensitive=False),
    default=OutputFormat.TEXT.value,
    help="Report on stdout: text (actions, errors, skips counted by reason), wide (text "
    "with every job), json (one document per pass).",
)
@_option(
    "--log-format",
    env="SWEEPER_LOG_FORMAT",
    type=click.Choice([AUTO, *(f.value for f in LogFormat)], case_sensitive=False),
    default=AUTO,
    help="Log format on stderr; auto: text on a terminal, JSON otherwise.",
)
@_option(
    "--log-level",
    env="SWEEPER_LOG_LEVEL",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="INFO",
    help="Log level.",
)
@_option(
    "--request-timeout",
    env="SWEEPER_REQUEST_TIMEOUT",
    type=_seconds(positive=True),
    default="10s",
    metavar="DURATION",
    help="Timeout of each HTTP request.",
)
@_option(
    "--timeout",
    env="SWEEPER_TIMEOUT",
    type=_seconds(positive=True),
    default="45s",
    metavar="DURATION",
    help="Bound on the whole run (exit 5 when reached); --watch: on each resync pass.",
)
@_option(
    "--pushgateway",
    env="SWEEPER_PUSHGATEWAY",
    metavar="URL",
    help="Push the run's deadline_sweeper_* metrics to this Prometheus Pushgateway when "
    "it ends (a failed push is logged; the exit code stays).",
)
@_option(
    "--pushgateway-job",
    env="SWEEPER_PUSHGATEWAY_JOB",
    default=DEFAULT_PUSHGATEWAY_JOB,
    metavar="NAME",
    help="The job label (grouping key) of the pushed metrics: one per "
    "sweeper sharing a Pushgateway.",
)
@_option(
    "--explain",
    env="SWEEPER_EXPLAIN",
    metavar="NAMESPACE/NAME",
    help="Print, for one job, every rule of the decision in order with the value it saw "
    "and its outcome, then exit (writes nothing).",
)
@_option(
    "--watch",
    "watch",
    env="SWEEPER_WATCH",
    is_flag=True,
    default=False,
    help="Run continuously: watch the jobs and act on each the moment it is due "
    "(a Deployment; see README 'Choosing a mode').",
)
@_option(
    "--resync",
    env="SWEEPER_RESYNC",
    type=_seconds(positive=True),
    default="5m",
    metavar="DURATION",
    help="--watch: time between full passes (a safety net).",
)
@_option(
    "--watch-timeout",
    env="SWEEPER_WATCH_TIMEOUT",
    type=_seconds(positive=True),
    default="90s",
    metavar="DURATION",
    help="--watch: reopen a watch stream silent for this long (bookmarks come every minute).",
)
@_option(
    "--leader-elect/--no-leader-elect",
    env="SWEEPER_LEADER_ELECT",
    default=True,
    help="--watch: hold a coordination.k8s.io Lease before writing (run 2 replicas); "
    "never with --dry-run, which writes no Lease either (each replica reports alone).",
)
@_option(
    "--lease-name",
    env="SWEEPER_LEASE_NAME",
    default="kubeflow-deadline-sweeper",
    metavar="NAME",
    help="--watch: the Lease's name.",
)
@_option(
    "--lease-namespace",
    env="SWEEPER_LEASE_NAMESPACE",
    default=None,
    metavar="NS",
    show_default="the pod's, else the kubeconfig context's",
    help="--watch: the Lease's namespace.",
)
@_option(
    "--identity",
    env="SWEEPER_IDENTITY",
    default=None,
    metavar="ID",
    show_default="hostname_random",
    help="--watch: this replica's Lease holder identity.",
)
@_option(
    "--lease-duration",
    env="SWEEPER_LEASE_DURATION",
    type=_seconds(positive=True),
    default="15s",
    metavar="DURATION",
    help="--watch: how long a Lease unrenewed is waited for before a takeover.",
)
@_option(
    "--renew-deadline",
    env="SWEEPER_RENEW_DEADLINE",
    type=_seconds(positive=True),
    default="10s",
    metavar="DURATION",
    help="--watch: the leader stops writing if it cannot renew within this (and takes the "
    "Lease back when it can, if nobody else did).",
)
@_option(
    "--retry-period",
    env="SWEEPER_RETRY_PERIOD",
    type=_seconds(positive=True),
    default="2s",
    metavar="DURATION",
    help="--watch: time between Lease attempts.",
)
@_option(
    "--health-address",
    env="SWEEPER_HEALTH_ADDRESS",
    default="0.0.0.0",  # noqa: S104 - probes
    metavar="ADDR",
    help="--watch: address of /healthz, /readyz and /metrics.",
)
@_option(
    "--health-port",
    env="SWEEPER_HEALTH_PORT",
    type=click.IntRange(0, 65535),
    default=8080,
    metavar="PORT",
    help="--watch: port of the probes and /metrics (0: off).",
)
@click.version_option(__version__, "--version", prog_name="sweeper")
@click.pass_context
def command(ctx: click.Context, /, **options: Any) -> None:
    """Find Kubeflow v1 jobs past spec.runPolicy.activeDeadlineSeconds and touch or fail them.

    Exit codes: 0 completed, 1 some actions failed, 2 usage or configuration error, 3 the
    cluster could not be listed, 4 interrupted (SIGTERM/SIGINT; --watch exits 0 once it
    stopped cleanly), 5 --timeout reached, 70 internal error (a bug: the log has its
    traceback).
    """
    connect = (ctx.find_object(Seams) or Seams()).connect
    try:
        config = build_config(options)
    except SweeperError as error:
        _fail(error)
    logs.configure(config.log_format, config.log_level)
    policy = config.policy
    if (
        policy.action is not ActionMode.TOUCH
        and policy.terminate_pods is PodsMode.POLICY
        and policy.operator_version is None
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

            code = watch(config, connect, sys.stdout)  # type: ignore[arg-type]  # kube's connect serves both
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


def build_config(options: dict[str, Any]) -> Config:
    """Turn the parsed options into the run's configuration.

    Args:
        options: click's parameters, by name.

    Returns:
        The frozen, validated configuration.

    Raises:
        ConfigError: A value is invalid (unknown kind, bad selector, contradictory options).
    """
    try:
        kinds = tuple(dict.fromkeys(lookup(kind) for kind in options["kinds"]))
    except KeyError as error:
        raise ConfigError(f"{error.args[0]} (--kind)") from error
    if options["all_namespaces"] and options["namespaces"]:
        raise ConfigError("-A/--all-namespaces and -n/--namespace contradict each other")
    log_format = options["log_format"].lower()
    if log_format == AUTO:
        # kubectl's habit: people at a terminal read text, log collectors parse JSON.
        log_format = LogFormat.TEXT if stderr_is_tty() else LogFormat.JSON
    return Config(
        kubeconfig=options["kubeconfig"] or None,
        context=options["context"] or None,
        namespaces=tuple(dict.fromkeys(options["namespaces"])),
        exclude_namespaces=tuple(dict.fromkeys(options["exclude_namespaces"])),
        kinds=kinds,
        selector=options["selector"] or None,
        page_size=options["page_size"],
        policy=Policy(
            action=ActionMode(options["action"].lower()),
            grace=options["grace"],
            escalate_after=options["escalate_after"],
            retouch_after=options["retouch_after"],
            retouch_limit=options["retouch_limit"],
            max_actions=options["max_actions"],
            terminate_pods=PodsMode(options["terminate_pods"].lower()),
            operator_version=_release(options.get("operator_version") or ""),
        ),
        clock=ClockMode(options["clock"].lower()),
        every=options["every"],
        for_seconds=options["for_seconds"],
        dry_run=options["dry_run"],
        output=OutputFormat(options["output"].lower()),
        log_format=LogFormat(log_format),
        log_level=options["log_level"].upper(),
        request_timeout=options["request_timeout"],
        timeout=options["timeout"],
        pushgateway=options["pushgateway"] or None,
        pushgateway_job=options["pushgateway_job"],
        explain=parse_reference(options["explain"]) if options["explain"] else None,
        watch=_watch_settings(options) if options.get("watch") else None,
    )


def _release(text: str) -> Release | None:
    if not text:
        return None
    try:
        return parse_release(text)
    except ValueError as error:
        raise ConfigError(f"--operator-version: {error}") from error


def _watch_settings(options: dict[str, Any]) -> WatchSettings:
    identity = options.get("identity") or f"{socket.gethostname()}_{uuid.uuid4().hex[:10]}"
    return WatchSettings(
        resync=options["resync"],
        watch_timeout=options["watch_timeout"],
        leader_elect=options["leader_elect"],
        lease_name=options["lease_name"],
        lease_namespace=options["lease_namespace"] or None,
        identity=identity,
        timing=Timing(
            lease_duration=options["lease_duration"],
            renew_deadline=options["renew_deadline"],
            retry_period=options["retry_period"],
        ),
        health_address=options["health_address"],
        health_port=options["health_port"],
    )


def stderr_is_tty() -> bool:
    """Whether a person is likely reading stderr.

    Returns:
        True when stderr is a terminal.
    """
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


def main() -> None:
    """Console-script entry point."""
    command(prog_name="sweeper")
