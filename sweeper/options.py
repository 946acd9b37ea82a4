"""The command line's surface as data, and its values turned into one :class:`Config`.

No click here (``sweeper.cli`` is its only importer): :data:`FLAGS` lists every option in
``--help`` order with its names, ``SWEEPER_*`` twin, default, value and help, and
:mod:`sweeper.cli` turns each into a click option. What a value means is decided here:
:func:`parse_duration` and :func:`parse_dry_run` read one value each, :func:`build_config`
assembles the parsed options into the frozen :class:`~sweeper.config.Config` (which validates
their combination). A new flag is one :class:`Flag` row, one line of :func:`build_config`
and a field of the config.
"""

from __future__ import annotations

import socket
import sys
import uuid
from dataclasses import dataclass
from typing import Any

import durationpy

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
    parse_address,
    parse_reference,
)
from sweeper.core.errors import ConfigError
from sweeper.core.kinds import lookup
from sweeper.core.model import ActionMode, PodsMode, Policy
from sweeper.core.releases import Release, parse_release

AUTO = "auto"


@dataclass(frozen=True, slots=True)
class Duration:
    """A duration, in seconds (:func:`parse_duration`); ``positive`` refuses zero too."""

    positive: bool = True


@dataclass(frozen=True, slots=True)
class Count:
    """An integer from ``minimum`` to ``maximum`` (``None``: no upper bound)."""

    minimum: int
    maximum: int | None = None


@dataclass(frozen=True, slots=True)
class Choice:
    """One of fixed words, in any case."""

    words: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DryRunWord:
    """``--dry-run``'s words (:func:`parse_dry_run`)."""


@dataclass(frozen=True, slots=True)
class Switch:
    """A flag that takes no value (``--watch``; ``--a/--no-a`` when its names say so)."""


Value = Duration | Count | Choice | DryRunWord | Switch | None  # None: free text


@dataclass(frozen=True, slots=True)
class Flag:
    """One option of the command.

    Attributes:
        names: The flags, then the parameter's name when it differs from the long flag's.
        help: The ``--help`` text.
        value: What it takes; ``None`` for free text.
        default: The default, as the user would type it.
        metavar: The value's name in ``--help`` (a duration's is ``DURATION``).
        env: Its environment variables; ``SWEEPER_<LONG FLAG>`` when empty.
        multiple: Repeatable.
        shown_default: ``--help``'s wording of a default that is not a value.
        bare: The value of the flag given without one (``--dry-run`` means ``client``).
    """

    names: tuple[str, ...]
    help: str
    value: Value = None
    default: object = None
    metavar: str | None = None
    env: tuple[str, ...] = ()
    multiple: bool = False
    shown_default: str | None = None
    bare: str | None = None

    @property
    def variables(self) -> tuple[str, ...]:
        """The environment twins: ``env``, else the one the long flag names."""
        if self.env:
            return self.env
        long = max((n for n in self.names if n.startswith("--")), key=len)
        return ("SWEEPER_" + long.split("/")[0].removeprefix("--").replace("-", "_").upper(),)


def _durations(*names: str, default: str | None, help: str, positive: bool = True) -> Flag:
    return Flag(names, help, Duration(positive), default, metavar="DURATION")


def _choice(names: str, words: tuple[str, ...], default: str, help: str) -> Flag:
    return Flag(tuple(names.split()), help, Choice(words), default)


FLAGS: tuple[Flag, ...] = (
    Flag(
        ("--kubeconfig",),
        "Kubeconfig file (default: KUBECONFIG, ~/.kube/config, else in-cluster).",
        metavar="PATH",
        env=("SWEEPER_KUBECONFIG", "KUBECONFIG"),
    ),
    Flag(("--context",), "Kubeconfig context to use.", metavar="NAME"),
    Flag(
        ("-n", "--namespace", "namespaces"),
        "Only this namespace (repeatable; default: all namespaces, never listed).",
        metavar="NS",
        multiple=True,
    ),
    Flag(
        ("-A", "--all-namespaces"),
        "Every namespace: the default, spelled out as kubectl does (not with -n).",
        Switch(),
    ),
    Flag(
        ("--exclude-namespace", "exclude_namespaces"),
        "Leave this namespace's jobs alone (repeatable).",
        metavar="NS",
        multiple=True,
    ),
    Flag(
        ("--kind", "kinds"),
        "Only this kind, e.g. PyTorchJob or pytorchjobs (repeatable; default: all).",
        metavar="KIND",
        multiple=True,
    ),
    Flag(("-l", "--selector"), "Label selector the jobs must match.", metavar="SEL"),
    Flag(("--page-size",), "Jobs per list request.", Count(1), 500),
    _durations(
        "--grace", default="0s", help="Tolerance past the deadline before acting.", positive=False
    ),
    _choice(
        "--clock",
        tuple(m.value for m in ClockMode),
        ClockMode.SERVER.value,
        "Whose clock decides: the API server's Date header, or this machine's.",
    ),
    _choice(
        "--action",
        tuple(m.value for m in ActionMode),
        ActionMode.TOUCH.value,
        "touch: annotate so the operator fails it; fail: fail it as the operator would; "
        "auto: touch, then fail if still running --escalate-after later.",
    ),
    _choice(
        "--terminate-pods",
        tuple(m.value for m in PodsMode),
        PodsMode.ACTIVE.value,
        "Pods of a failed job to delete: active (Running, Pending), all, or policy (what "
        "--operator-version keeps).",
    ),
    Flag(
        ("--operator-version",),
        "The Training Operator release the cluster runs, for --terminate-pods policy "
        "(v1.7.0 to v1.9.3 delete every pod at the deadline; v1.9.4 follows cleanPodPolicy).",
        metavar="vX.Y.Z",
    ),
    _durations(
        "--escalate-after",
        default="2m",
        help="Time after the sweeper's touch before auto fails a job "
        "(and before touch touches it again).",
        positive=False,
    ),
    _durations(
        "--reclaim-grace",
        default="2m",
        help="Time a controller that frees a job's resources itself (Trainer v2) has after its "
        "deadline failure before the sweeper deletes what it left running (a TrainJob's "
        "JobSet); also how late past its deadline a running TrainJob is reported.",
        positive=False,
    ),
    _durations(
        "--retouch-after",
        default="5s",
        help="Touch a job again this soon when a touch written near its deadline did not fail "
        "it (the operator judges with its own clock).",
    ),
    Flag(
        ("--retouch-limit",),
        "At most N such quick touches per deadline before --escalate-after applies; 0: none.",
        Count(0),
        3,
        metavar="N",
    ),
    Flag(
        ("--max-actions",),
        "Act on at most N jobs per pass (most overdue first).",
        Count(0),
        metavar="N",
        shown_default="unlimited",
    ),
    _durations("--every", default=None, help="Start a pass every DURATION (needs --for)."),
    _durations(
        "--for", "for_seconds", default=None, help="Start passes during DURATION (needs --every)."
    ),
    Flag(
        ("--dry-run",),
        "Plan and report, write nothing (client), or send writes with dryRun=All "
        "(server). Bare --dry-run means client.",
        DryRunWord(),
        bare="client",
    ),
    _choice(
        "-o --output",
        tuple(f.value for f in OutputFormat),
        OutputFormat.TEXT.value,
        "Report on stdout: text (actions, errors, skips counted by reason), wide (text "
        "with every job), json (one document per pass).",
    ),
    _choice(
        "--log-format",
        (AUTO, *(f.value for f in LogFormat)),
        AUTO,
        "Log format on stderr; auto: text on a terminal, JSON otherwise.",
    ),
    _choice("--log-level", LOG_LEVELS, "INFO", "Log level."),
    _durations("--request-timeout", default="10s", help="Timeout of each HTTP request."),
    _durations(
        "--timeout",
        default="45s",
        help="Bound on the whole run (exit 5 when reached); --watch: on each resync pass.",
    ),
    Flag(
        ("--pushgateway",),
        "Push the run's deadline_sweeper_* metrics to this Prometheus Pushgateway when "
        "it ends (a failed push is logged; the exit code stays).",
        metavar="URL",
    ),
    Flag(
        ("--pushgateway-job",),
        "The job label (grouping key) of the pushed metrics: one per "
        "sweeper sharing a Pushgateway.",
        default=DEFAULT_PUSHGATEWAY_JOB,
        metavar="NAME",
    ),
    Flag(
        ("--explain",),
        "Print, for one job, every rule of the decision in order with the value it saw "
        "and its outcome, then exit (writes nothing).",
        metavar="NAMESPACE/NAME",
    ),
    Flag(
        ("--watch",),
        "Run continuously: watch the jobs and act on each the moment it is due "
        "(a Deployment; see README 'Choosing a mode').",
        Switch(),
        False,
    ),
    _durations("--resync", default="5m", help="--watch: time between full passes (a safety net)."),
    _durations(
        "--watch-timeout",
        default="90s",
        help="--watch: reopen a watch stream silent for this long (bookmarks come every minute).",
    ),
    Flag(
        ("--leader-elect/--no-leader-elect",),
        "--watch: hold a coordination.k8s.io Lease before writing (run 2 replicas); "
        "never with --dry-run, which writes no Lease either (each replica reports alone).",
        Switch(),
        True,
    ),
    Flag(
        ("--lease-name",),
        "--watch: the Lease's name.",
        default="kubeflow-deadline-sweeper",
        metavar="NAME",
    ),
    Flag(
        ("--lease-namespace",),
        "--watch: the Lease's namespace.",
        metavar="NS",
        shown_default="the pod's, else the kubeconfig context's",
    ),
    Flag(
        ("--identity",),
        "--watch: this replica's Lease holder identity.",
        metavar="ID",
        shown_default="hostname_random",
    ),
    _durations(
        "--lease-duration",
        default="15s",
        help="--watch: how long a Lease unrenewed is waited for before a takeover.",
    ),
    _durations(
        "--renew-deadline",
        default="10s",
        help="--watch: the leader stops writing if it cannot renew within this (and takes the "
        "Lease back when it can, if nobody else did).",
    ),
    _durations("--retry-period", default="2s", help="--watch: time between Lease attempts."),
    Flag(
        ("--health-address",),
        "--watch: address of /healthz, /readyz and /metrics (IPv4 or IPv6; :: is dual-stack).",
        default="0.0.0.0",  # noqa: S104 - probes
        metavar="ADDR",
    ),
    Flag(
        ("--health-port",),
        "--watch: port of the probes and /metrics (0: off).",
        Count(0, 65535),
        8080,
        metavar="PORT",
    ),
)


def parse_duration(value: object, *, positive: bool) -> float:
    """Read a duration as kubectl takes one (``30s``, ``5m``, ``1h30m``, ``250ms``) or seconds.

    The one duration parser of the command line: every duration flag and twin goes through it.

    Args:
        value: ``30s``, ``1h``, ``90``... (a number is taken as seconds).
        positive: Zero is refused too.

    Returns:
        Seconds, finite.

    Raises:
        ValueError: Not a duration, not finite, negative (or zero when ``positive``); the
            message is the usage error's wording.
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
                raise ValueError(
                    f"{value!r} is not a duration (e.g. 30s, 5m, 1h30m, or seconds)"
                ) from None
    if seconds != seconds or seconds in (float("inf"), float("-inf")):  # noqa: PLR0124 - NaN
        raise ValueError(f"{value!r} is not a finite duration")
    if seconds < 0 or (positive and seconds == 0):
        raise ValueError(f"{value!r} must be {'positive' if positive else 'zero or more'}")
    return seconds


# kubectl's own spellings, plus the usual booleans (true means client, false none).
_DRY_RUN_ALIASES = {"true": "client", "1": "client", "yes": "client"} | dict.fromkeys(
    ("false", "0", "no"), "none"
)


def parse_dry_run(value: object) -> DryRun | None:
    """Read a ``--dry-run`` word: ``client`` (also the bare flag), ``server``, or ``none``.

    An empty value never gets here (the CLI refuses it): kubectl refuses ``--dry-run=``, and an
    empty ``SWEEPER_DRY_RUN`` in a template must never turn into a writing run.

    Returns:
        The dry run; ``None`` for none at all.

    Raises:
        ValueError: Not one of the words.
    """
    if value is None or isinstance(value, DryRun):
        return value
    text = str(value).strip().lower()
    text = _DRY_RUN_ALIASES.get(text, text)
    if text == "none":
        return None
    try:
        return DryRun(text)
    except ValueError:
        raise ValueError(f"{value!r} is not one of client, server, none") from None


def build_config(options: dict[str, Any]) -> Config:
    """Turn the parsed options into the run's configuration.

    Args:
        options: The parameters, by name (:data:`FLAGS`, each value parsed).

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
            reclaim_grace=options["reclaim_grace"],
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
        health_address=parse_address(options["health_address"]),
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
