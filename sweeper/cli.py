"""The ``sweeper`` command: the only module that imports click.

It turns flags (and their ``SWEEPER_*`` environment twins) into one frozen
:class:`~sweeper.config.Config`, configures logging, runs, and maps every error to one line on
stderr and its documented exit code. The Kubernetes client is imported only once a run starts,
so ``--version`` and ``--help`` stay fast.

Tests run the command against their own cluster by passing :class:`Seams` as click's
``obj``; mypy checks both :func:`_connect` and theirs against :class:`~sweeper.run.Connect`.
"""

from __future__ import annotations

import logging
import socket
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import click

from sweeper import __version__, logs
from sweeper.cluster import Cluster
from sweeper.config import (
    LOG_LEVELS,
    ClockMode,
    Config,
    DryRun,
    LogFormat,
    OutputFormat,
    WatchSettings,
)
from sweeper.decide import ActionMode, PodsMode, Policy
from sweeper.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, ConfigError, SweeperError
from sweeper.kinds import lookup
from sweeper.lease import Timing
from sweeper.run import Connect, StopFlag, run


def _connect(config: Config, *, stop: StopFlag) -> Cluster:
    from sweeper import kube  # noqa: PLC0415 - the client takes 0.25 s to import; only runs need it

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

    Environment twins also accept the usual booleans (``true`` means ``client``).
    """

    name = "client|server|none"
    _ALIASES: ClassVar[dict[str, str]] = {"true": "client", "1": "client", "yes": "client",
                "false": "none", "0": "none", "no": "none", "": "none"}

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


def _seconds(*, positive: bool = False) -> click.FloatRange:
    return click.FloatRange(min=0, min_open=positive)


_Decorated = TypeVar("_Decorated", bound=Callable[..., Any])


def _option(
    *names: str, env: str | list[str], **kwargs: Any
) -> Callable[[_Decorated], _Decorated]:
    return click.option(*names, envvar=env, show_envvar=True, **kwargs)


@click.command(
    name="sweeper",
    context_settings={
        "auto_envvar_prefix": "SWEEPER",
        "help_option_names": ["-h", "--help"],
        "max_content_width": 100,
        "show_default": True,
    },
)
@_option("--kubeconfig", env=["SWEEPER_KUBECONFIG", "KUBECONFIG"], metavar="PATH",
         help="Kubeconfig file (default: KUBECONFIG, ~/.kube/config, else in-cluster).")
@_option("--context", env="SWEEPER_CONTEXT", metavar="NAME", help="Kubeconfig context to use.")
@_option("-n", "--namespace", "namespaces", env="SWEEPER_NAMESPACE", multiple=True, metavar="NS",
         help="Only this namespace (repeatable; default: all namespaces, never listed).")
@_option("--kind", "kinds", env="SWEEPER_KIND", multiple=True, metavar="KIND",
         help="Only this kind, e.g. PyTorchJob or pytorchjobs (repeatable; default: all).")
@_option("-l", "--selector", env="SWEEPER_SELECTOR", metavar="SEL",
         help="Label selector the jobs must match.")
@_option("--page-size", env="SWEEPER_PAGE_SIZE", type=click.IntRange(min=1), default=500,
         help="Jobs per list request.")
@_option("--grace", env="SWEEPER_GRACE", type=_seconds(), default=0.0, metavar="SECONDS",
         help="Tolerance past the deadline before acting.")
@_option("--clock", env="SWEEPER_CLOCK", type=click.Choice([m.value for m in ClockMode],
         case_sensitive=False), default=ClockMode.SERVER.value,
         help="Whose clock decides: the API server's Date header, or this machine's.")
@_option("--action", env="SWEEPER_ACTION", type=click.Choice([m.value for m in ActionMode],
         case_sensitive=False), default=ActionMode.TOUCH.value,
         help="touch: annotate so the operator fails it; fail: fail it as the operator would; "
              "auto: touch, then fail if still running --escalate-after seconds later.")
@_option("--terminate-pods", env="SWEEPER_TERMINATE_PODS",
         type=click.Choice([m.value for m in PodsMode], case_sensitive=False),
         default=PodsMode.ACTIVE.value,
         help="Pods of a failed job to delete: active (Running, Pending), all, or policy (the "
              "job's cleanPodPolicy).")
@_option("--escalate-after", env="SWEEPER_ESCALATE_AFTER", type=_seconds(), default=120.0,
         metavar="SECONDS", help="Seconds after the sweeper's touch before auto fails a job "
                                 "(and before touch touches it again).")
@_option("--max-actions", env="SWEEPER_MAX_ACTIONS", type=click.IntRange(min=0), default=None,
         metavar="N", show_default="unlimited",
         help="Act on at most N jobs per pass (most overdue first).")
@_option("--every", env="SWEEPER_EVERY", type=_seconds(positive=True), default=None,
         metavar="SECONDS", help="Start a pass every SECONDS (needs --for).")
@_option("--for", "for_seconds", env="SWEEPER_FOR", type=_seconds(positive=True), default=None,
         metavar="SECONDS", help="Start passes during SECONDS (needs --every).")
@_option("--dry-run", env="SWEEPER_DRY_RUN", type=DryRunChoice(), is_flag=False,
         flag_value="client", default=None,
         help="Plan and report, write nothing (client), or send writes with dryRun=All "
              "(server). Bare --dry-run means client.")
@_option("-o", "--output", env="SWEEPER_OUTPUT", type=click.Choice([f.value for f in OutputFormat],
         case_sensitive=False), default=OutputFormat.TEXT.value, help="Report format on stdout.")
@_option("--log-format", env="SWEEPER_LOG_FORMAT", type=click.Choice(
         [f.value for f in LogFormat], case_sensitive=False), default=LogFormat.JSON.value,
         help="Log format on stderr.")
@_option("--log-level", env="SWEEPER_LOG_LEVEL", type=click.Choice(LOG_LEVELS,
         case_sensitive=False), default="INFO", help="Log level.")
@_option("--request-timeout", env="SWEEPER_REQUEST_TIMEOUT", type=_seconds(positive=True),
         default=10.0, metavar="SECONDS", help="Timeout of each HTTP request.")
@_option("--timeout", env="SWEEPER_TIMEOUT", type=_seconds(positive=True), default=45.0,
         metavar="SECONDS", help="Bound on the whole run (exit 5 when reached).")
@_option("--watch", "watch", env="SWEEPER_WATCH", is_flag=True, default=False,
         help="Run continuously: watch the jobs and act on each the moment it is due "
              "(a Deployment; see README 'Choosing a mode').")
@_option("--resync", env="SWEEPER_RESYNC", type=_seconds(positive=True), default=300.0,
         metavar="SECONDS", help="--watch: seconds between full passes (a safety net).")
@_option("--watch-timeout", env="SWEEPER_WATCH_TIMEOUT", type=_seconds(positive=True),
         default=90.0, metavar="SECONDS",
         help="--watch: reopen a watch stream silent for this long (bookmarks come every minute).")
@_option("--leader-elect/--no-leader-elect", env="SWEEPER_LEADER_ELECT", default=True,
         help="--watch: hold a coordination.k8s.io Lease before writing (run 2 replicas).")
@_option("--lease-name", env="SWEEPER_LEASE_NAME", default="kubeflow-deadline-sweeper",
         metavar="NAME", help="--watch: the Lease's name.")
@_option("--lease-namespace", env="SWEEPER_LEASE_NAMESPACE", default=None, metavar="NS",
         show_default="the pod's, else the kubeconfig context's",
         help="--watch: the Lease's namespace.")
@_option("--identity", env="SWEEPER_IDENTITY", default=None, metavar="ID",
         show_default="hostname_random", help="--watch: this replica's Lease holder identity.")
@_option("--lease-duration", env="SWEEPER_LEASE_DURATION", type=_seconds(positive=True),
         default=15.0, metavar="SECONDS",
         help="--watch: seconds a Lease unrenewed is waited for before a takeover.")
@_option("--renew-deadline", env="SWEEPER_RENEW_DEADLINE", type=_seconds(positive=True),
         default=10.0, metavar="SECONDS",
         help="--watch: the leader stops writing and exits if it cannot renew within this.")
@_option("--retry-period", env="SWEEPER_RETRY_PERIOD", type=_seconds(positive=True),
         default=2.0, metavar="SECONDS", help="--watch: seconds between Lease attempts.")
@_option("--health-address", env="SWEEPER_HEALTH_ADDRESS", default="0.0.0.0",  # noqa: S104 - probes
         metavar="ADDR", help="--watch: address of /healthz, /readyz and /metrics.")
@_option("--health-port", env="SWEEPER_HEALTH_PORT", type=click.IntRange(0, 65535),
         default=8080, metavar="PORT", help="--watch: port of the probes and /metrics (0: off).")
@click.version_option(__version__, "--version", prog_name="sweeper")
@click.pass_context
def command(ctx: click.Context, /, **options: Any) -> None:
    """Find Kubeflow v1 jobs past spec.runPolicy.activeDeadlineSeconds and touch or fail them.

    Exit codes: 0 completed, 1 some actions failed, 2 usage or configuration error, 3 the
    cluster could not be listed, 4 interrupted (SIGTERM/SIGINT), 5 --timeout reached,
    70 internal error (a bug: the log has its traceback).
    """
    connect = (ctx.find_object(Seams) or Seams()).connect
    try:
        config = build_config(options)
    except SweeperError as error:
        _fail(error)
    logs.configure(config.log_format, config.log_level)
    try:
        if config.watch is not None:
            from sweeper.watch import watch  # noqa: PLC0415 - prometheus-client only for --watch

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
            "internal error: %s: %s", type(error).__name__, error, exc_info=True,
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
    return Config(
        kubeconfig=options["kubeconfig"] or None,
        context=options["context"] or None,
        namespaces=tuple(dict.fromkeys(options["namespaces"])),
        kinds=kinds,
        selector=options["selector"] or None,
        page_size=options["page_size"],
        policy=Policy(
            action=ActionMode(options["action"].lower()),
            grace=options["grace"],
            escalate_after=options["escalate_after"],
            max_actions=options["max_actions"],
            terminate_pods=PodsMode(options["terminate_pods"].lower()),
        ),
        clock=ClockMode(options["clock"].lower()),
        every=options["every"],
        for_seconds=options["for_seconds"],
        dry_run=options["dry_run"],
        output=OutputFormat(options["output"].lower()),
        log_format=LogFormat(options["log_format"].lower()),
        log_level=options["log_level"].upper(),
        request_timeout=options["request_timeout"],
        timeout=options["timeout"],
        watch=_watch_settings(options) if options.get("watch") else None,
    )


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


def main() -> None:
    """Console-script entry point."""
    command(prog_name="sweeper")
