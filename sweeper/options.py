"""The command line's surface as data, and its values turned into one ``Config``.

No click here: ``FLAGS`` lists every option in ``--help`` order, each a ``Flag`` row;
``sweeper.cli`` turns each into a click option, and ``build_config`` puts each parsed value
where its row says in the frozen ``Config``. A new flag is one row, and its field.
"""

from __future__ import annotations

import socket
import sys
import uuid
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

from sweeper.config import (
    DEFAULT_PUSHGATEWAY_JOB,
    LOG_LEVELS,
    ClockMode,
    Config,
    LogFormat,
    OutputFormat,
    Timing,
    WatchSettings,
    check_namespaces,
    check_selector,
    check_url,
    parse_address,
    parse_reference,
)
from sweeper.core.errors import ConfigError
from sweeper.core.families import FAMILIES, KIND_NAMES, lookup
from sweeper.core.held import parse_gpu_resources
from sweeper.core.kinds import GPU_RESOURCES, Kind
from sweeper.core.model import ActionMode, Enforcement, PodsMode
from sweeper.core.platform import Platform, load_platform
from sweeper.core.releases import Release, parse_release
from sweeper.flag import LONGEST_WAIT, Choice, Count, DryRunWord, Duration, Flag, Switch

AUTO = "auto"


def _durations(
    *names: str,
    default: str | None,
    help: str,
    to: str = "",
    positive: bool = True,
    waited: bool = True,
) -> Flag:
    value = Duration(positive, LONGEST_WAIT if waited else None)
    return Flag(names, help, value, default, metavar="DURATION", to=to)


def _knob(name: str, default: str, help: str) -> Flag:
    # An enforcement duration: 0 allowed, no upper bound (compared with a job's times, never slept).
    to = "enforcement." + name.removeprefix("--").replace("-", "_")
    return _durations(name, default=default, help=help, to=to, positive=False, waited=False)


def _choice(
    names: str,
    words: type[StrEnum] | tuple[str, ...],
    default: str,
    help: str,
    *,
    to: str = "",
    read: Callable[[Any], Any] | None = None,
    any_case: bool = False,
) -> Flag:
    # An enum's words are its values; other words as read says.
    if isinstance(words, tuple):
        return Flag(tuple(names.split()), help, Choice(words, any_case), default, to=to, read=read)
    enum = words
    choice = Choice(tuple(m.value for m in enum), any_case)
    return Flag(tuple(names.split()), help, choice, default, to=to, read=lambda v: enum(v.lower()))


def _namespaces(*names: str, help: str) -> Flag:
    # The last name is the parameter's, and the field's; the one before it, the flag's.
    def read(values: tuple[str, ...]) -> tuple[str, ...]:
        check_namespaces(values, names[-2])
        return tuple(dict.fromkeys(values))

    return Flag(names, help, metavar="NS", multiple=True, to=names[-1], read=read)


def _checked(check: Callable[[str], None]) -> Callable[[str | None], str | None]:
    # A free text the check accepts, as it is; unset stays None.
    def read(text: str | None) -> str | None:
        if text is not None:
            check(text)
        return text

    return read


def _kinds(names: tuple[str, ...]) -> tuple[Kind, ...]:
    try:
        return tuple(dict.fromkeys(lookup(name) for name in names))
    except KeyError as error:
        raise ConfigError(f"{error.args[0]} (--kind)") from error


def _log_format(word: str) -> LogFormat:
    if word.lower() == AUTO:
        # kubectl's habit: people at a terminal read text, log collectors parse JSON.
        return LogFormat.TEXT if stderr_is_tty() else LogFormat.JSON
    return LogFormat(word.lower())


def _release(text: str | None) -> Release | None:
    if not text:
        return None
    try:
        return parse_release(text)
    except ValueError as error:
        raise ConfigError(f"--operator-version: {error}") from error


def _platform(path: str | None) -> Platform | None:
    # Read and checked here, with every other flag: a bad file is exit 2 before any request.
    if not path:
        return None
    source = f"--policy {path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise ConfigError(f"{source}: cannot read: {reason}") from None
    return load_platform(text, source, KIND_NAMES)


def _identity(text: str | None) -> str:
    return text or f"{socket.gethostname()}_{uuid.uuid4().hex[:10]}"


FLAGS: tuple[Flag, ...] = (
    Flag(
        ("--kubeconfig",),
        "Kubeconfig file (default: KUBECONFIG, ~/.kube/config, else in-cluster).",
        metavar="PATH",
        env=("SWEEPER_KUBECONFIG", "KUBECONFIG"),
    ),
    Flag(("--context",), "Kubeconfig context to use.", metavar="NAME"),
    _namespaces(
        "-n",
        "--namespace",
        "namespaces",
        help="Only this namespace (repeatable; default: all namespaces, never listed).",
    ),
    Flag(
        ("-A", "--all-namespaces"),
        "Every namespace: the default, spelled out as kubectl does (not with -n).",
        Switch(),
        to=None,
    ),
    _namespaces(
        "--exclude-namespace",
        "exclude_namespaces",
        help="Leave this namespace's jobs alone (repeatable).",
    ),
    Flag(
        ("--kind", "kinds"),
        "Only this kind, e.g. PyTorchJob or pytorchjobs (repeatable; default: all).",
        metavar="KIND",
        multiple=True,
        read=_kinds,
    ),
    Flag(
        ("--family", "families"),
        "Only this controller family's jobs: training-operator, mpi-operator (MPIJob at "
        "v2beta1) or trainer (repeatable; default: all).",
        Choice(tuple(family.NAME for family in FAMILIES)),
        metavar="FAMILY",
        multiple=True,
        read=lambda names: tuple(dict.fromkeys(names)),
    ),
    Flag(
        ("-l", "--selector"),
        "Label selector the jobs must match.",
        metavar="SEL",
        read=_checked(check_selector),
    ),
    Flag(("--page-size",), "Jobs per list request.", Count(1), 500),
    Flag(
        ("--policy", "policy_file"),
        "Rules file of the platform's deadlines: a default and a cap per Namespace labels and "
        "kind, and where the exclude annotation is honoured (docs/policy.md).",
        metavar="FILE",
        to="platform",
        read=_platform,
    ),
    _knob("--grace", "0s", "Tolerance past the deadline before acting."),
    _choice(
        "--clock",
        ClockMode,
        ClockMode.SERVER.value,
        "Whose clock decides: the API server's Date header, or this machine's.",
    ),
    _choice(
        "--action",
        ActionMode,
        ActionMode.TOUCH.value,
        "touch: annotate so the operator fails it; fail: fail it as the operator would; "
        "auto: touch, then fail if still running --escalate-after later.",
        to="enforcement.action",
    ),
    _choice(
        "--terminate-pods",
        PodsMode,
        PodsMode.ACTIVE.value,
        "Pods of a failed job to delete: active (Running, Pending), all, or policy (what "
        "--operator-version keeps).",
        to="enforcement.terminate_pods",
    ),
    Flag(
        ("--operator-version",),
        "The Training Operator release the cluster runs, for --terminate-pods policy "
        "(v1.7.0 to v1.9.3 delete every pod at the deadline; v1.9.4 follows cleanPodPolicy).",
        metavar="vX.Y.Z",
        to="enforcement.operator_version",
        read=_release,
    ),
    _knob(
        "--escalate-after",
        "2m",
        "Time after the sweeper's touch before auto fails a job "
        "(and before touch touches it again).",
    ),
    _knob(
        "--reclaim-grace",
        "2m",
        "Time a controller that frees a job's resources itself (Trainer v2) has after its "
        "deadline failure before the sweeper deletes what it left running (a TrainJob's "
        "JobSet); also how late past its deadline a running TrainJob is reported.",
    ),
    _knob(
        "--stuck-after",
        "10m",
        "Report a job stuck starting when pods of it still wait this long after its first "
        "pod was scheduled (a finished job holding pods: --reclaim-grace after its end).",
    ),
    Flag(
        ("--gpu-resources",),
        "The extended resources counted as GPUs, comma-separated (a trailing * matches the rest).",
        default=",".join(GPU_RESOURCES),
        metavar="NAMES",
        to="enforcement.gpu_resources",
        read=parse_gpu_resources,
    ),
    _durations(
        "--retouch-after",
        default="5s",
        help="Touch a job again this soon when a touch written near its deadline did not fail "
        "it (the operator judges with its own clock).",
        to="enforcement.retouch_after",
        waited=False,
    ),
    Flag(
        ("--retouch-limit",),
        "At most N such quick touches per deadline before --escalate-after applies; 0: none.",
        Count(0),
        3,
        metavar="N",
        to="enforcement.retouch_limit",
    ),
    Flag(
        ("--max-actions",),
        "Act on at most N jobs per pass (most overdue first).",
        Count(0),
        metavar="N",
        shown_default="unlimited",
        to="enforcement.max_actions",
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
        OutputFormat,
        OutputFormat.TEXT.value,
        "Report on stdout: text (actions, errors, skips counted by reason), wide (text "
        "with every job), json (one document per pass).",
    ),
    _choice(
        "--log-format",
        (AUTO, *(f.value for f in LogFormat)),
        AUTO,
        "Log format on stderr; auto: text on a terminal, JSON otherwise.",
        read=_log_format,
    ),
    _choice("--log-level", LOG_LEVELS, "INFO", "Log level.", read=str.upper, any_case=True),
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
        read=_checked(check_url),
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
        read=lambda text: parse_reference(text) if text else None,
    ),
    Flag(
        ("--training-operator-deployment",),
        "The Training Operator's Deployment: warn when it runs its v1 MPIJob controller "
        "beside mpi-operator's v2beta1 CRD (a crash loop); needs get on that Deployment.",
        metavar="NAMESPACE/NAME",
        read=lambda text: parse_reference(text, "--training-operator-deployment") if text else None,
    ),
    Flag(
        ("--watch",),
        "Run continuously: watch the jobs and act on each the moment it is due "
        "(a Deployment; see README 'Choosing a mode').",
        Switch(),
        False,
        to=None,
    ),
    _durations(
        "--resync",
        default="5m",
        help="--watch: time between full passes (a safety net).",
        to="watch.resync",
    ),
    _durations(
        "--watch-timeout",
        default="90s",
        help="--watch: reopen a watch stream silent for this long (bookmarks come every minute).",
        to="watch.watch_timeout",
    ),
    Flag(
        ("--leader-elect/--no-leader-elect",),
        "--watch: hold a coordination.k8s.io Lease before writing (run 2 replicas); "
        "never with --dry-run, which writes no Lease either (each replica reports alone).",
        Switch(),
        True,
        to="watch.leader_elect",
    ),
    Flag(
        ("--lease-name",),
        "--watch: the Lease's name.",
        default="kubeflow-deadline-sweeper",
        metavar="NAME",
        to="watch.lease_name",
    ),
    Flag(
        ("--lease-namespace",),
        "--watch: the Lease's namespace.",
        metavar="NS",
        shown_default="the pod's, else the kubeconfig context's",
        to="watch.lease_namespace",
        read=_checked(lambda name: check_namespaces((name,), "--lease-namespace")),
    ),
    Flag(
        ("--identity",),
        "--watch: this replica's Lease holder identity.",
        metavar="ID",
        shown_default="hostname_random",
        to="watch.identity",
        read=_identity,
    ),
    _durations(
        "--lease-duration",
        default="15s",
        help="--watch: how long a Lease unrenewed is waited for before a takeover.",
        to="watch.timing.lease_duration",
    ),
    _durations(
        "--renew-deadline",
        default="10s",
        help="--watch: the leader stops writing if it cannot renew within this (and takes the "
        "Lease back when it can, if nobody else did).",
        to="watch.timing.renew_deadline",
    ),
    _durations(
        "--retry-period",
        default="2s",
        help="--watch: time between Lease attempts.",
        to="watch.timing.retry_period",
    ),
    Flag(
        ("--health-address",),
        "--watch: address of /healthz, /readyz and /metrics (IPv4 or IPv6; :: is dual-stack).",
        default="0.0.0.0",  # noqa: S104 - probes
        metavar="ADDR",
        to="watch.health_address",
        read=parse_address,
    ),
    Flag(
        ("--health-port",),
        "--watch: port of the probes and /metrics (0: off).",
        Count(0, 65535),
        8080,
        metavar="PORT",
        to="watch.health_port",
    ),
)


def build_config(options: dict[str, Any]) -> Config:
    """Turn the parsed options into the run's configuration; ``ConfigError`` for a bad value."""
    if options["all_namespaces"] and options["namespaces"]:
        raise ConfigError("-A/--all-namespaces and -n/--namespace contradict each other")
    watching = bool(options["watch"])
    parts: dict[str, dict[str, Any]] = {"": {}, "enforcement": {}, "watch": {}, "watch.timing": {}}
    for flag in FLAGS:
        if flag.to is None or (flag.to.startswith("watch.") and not watching):
            continue
        value = options[flag.param]
        part, _, attribute = flag.to.rpartition(".")
        parts[part][attribute] = flag.read(value) if flag.read else value
    watch = None
    if watching:
        watch = WatchSettings(**parts["watch"], timing=Timing(**parts["watch.timing"]))
    return Config(**parts[""], enforcement=Enforcement(**parts["enforcement"]), watch=watch)


def stderr_is_tty() -> bool:
    """Whether a person is likely reading stderr: it is a terminal."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False
