"""The run's settings: one frozen, validated object built at the edge (``sweeper.options``).

Nothing here reads the environment. Each value is checked where its flag's row reads it (with
the checks of names, selectors and URLs defined here); ``Config`` checks how they combine.
Each refusal is a ``ConfigError`` (exit code 2), one line naming the option.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from sweeper.core.errors import ConfigError
from sweeper.core.kinds import Kind
from sweeper.core.model import ActionMode, Enforcement
from sweeper.core.platform import Platform
from sweeper.core.scope import RunScope, S

# client-go's JitterFactor: a waiting candidate retries after retry_period * (1 + 1.2 * r).
JITTER_FACTOR = 1.2


@dataclass(frozen=True, slots=True)
class Timing:
    """The three durations of leader election (client-go's defaults; docs/watch.md)."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        """Check client-go's ordering: any other would let two replicas lead at once."""
        if self.retry_period <= 0:
            raise ConfigError("--retry-period must be positive")
        if self.lease_duration <= self.renew_deadline:
            raise ConfigError("--lease-duration must be longer than --renew-deadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ConfigError(
                f"--renew-deadline must be longer than {JITTER_FACTOR} x --retry-period"
            )


class ClockMode(StrEnum):
    """``--clock``: whose clock decides what is overdue."""

    SERVER = "server"
    LOCAL = "local"


class DryRun(StrEnum):
    """``--dry-run``: ``client`` sends no write at all, ``server`` sends them with dryRun=All."""

    CLIENT = "client"
    SERVER = "server"


# kubectl's own spellings, plus the usual booleans (true means client, false none).
_DRY_RUN_ALIASES = {"true": "client", "1": "client", "yes": "client"} | dict.fromkeys(
    ("false", "0", "no"), "none"
)


def parse_dry_run(value: object) -> DryRun | None:
    """Read a ``--dry-run`` word: ``client`` (also the bare flag), ``server``, ``none`` (None)."""
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


class OutputFormat(StrEnum):
    """``--output``: the report's format on stdout."""

    TEXT = "text"
    WIDE = "wide"  # text, with a row for every job, skipped ones included
    JSON = "json"


class LogFormat(StrEnum):
    """``--log-format``: the format of the log lines on stderr."""

    JSON = "json"
    TEXT = "text"


# Lower case: a case-insensitive click choice shows its words so in every click version the
# floors allow (older ones show them as written, newer ones lowered).
LOG_LEVELS = ("debug", "info", "warning", "error")

_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = rf"(?:[a-z0-9](?:[-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}"
_VALUE = rf"(?:{_NAME})?"
_REQUIREMENT = (
    rf"\s*(?:!\s*{_KEY}"
    rf"|{_KEY}\s*(?:==|=|!=)\s*{_VALUE}"
    rf"|{_KEY}\s+(?:in|notin)\s*\(\s*{_VALUE}(?:\s*,\s*{_VALUE})*\s*\)"
    rf"|{_KEY}\s*[<>]\s*-?[0-9]+"
    rf"|{_KEY})\s*"
)
_SELECTOR = re.compile(rf"{_REQUIREMENT}(?:,{_REQUIREMENT})*")
_NAMESPACE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")


def check_selector(selector: str) -> None:
    """Check a selector (``team=a,tier in (gpu,tpu),!x``) as the server's ``labels.Parse`` does."""
    if not _SELECTOR.fullmatch(selector):
        raise ConfigError(f"invalid label selector {selector!r} (--selector)")


def check_namespaces(names: tuple[str, ...], flag: str) -> None:
    """Check namespace names as the API server does (RFC 1123 labels); the error names ``flag``."""
    for name in names:
        if not _NAMESPACE.fullmatch(name):
            raise ConfigError(f"invalid namespace name {name!r} ({flag})")


DEFAULT_PUSHGATEWAY_JOB = "kubeflow-deadline-sweeper"
_OBJECT_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?")


def parse_reference(text: str, flag: str = "--explain") -> tuple[str, str]:
    """Read a reference as kubectl users write one: ``NAMESPACE/NAME`` (``team-a/train``)."""
    namespace, slash, name = text.strip().partition("/")
    if not slash or not _NAMESPACE.fullmatch(namespace) or not _OBJECT_NAME.fullmatch(name):
        raise ConfigError(f"expected NAMESPACE/NAME, got {text!r} ({flag})")
    return namespace, name


def check_url(url: str) -> None:
    """Check a Pushgateway URL before the run rather than after its work is done."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as error:
        raise ConfigError(f"invalid URL {url!r} (--pushgateway): {error}") from error
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"invalid URL {url!r} (--pushgateway): expected http(s)://HOST[:PORT][/PATH]"
        )


_LABEL = r"[A-Za-z0-9](?:[-A-Za-z0-9]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")


def _is_host_name(text: str) -> bool:
    # RFC 1123 labels; a numeric last label is a mistyped IPv4 address (10.0.0.300), no name.
    return (
        len(text) <= 253  # noqa: PLR2004 - DNS's limit
        and _HOST_NAME.fullmatch(text) is not None
        and not text.rsplit(".", 1)[-1].isdigit()
    )


def parse_address(text: str) -> str:
    """Read ``--health-address`` as kubelet's ``--address`` does; an IPv6 one without brackets."""
    address = text.strip()
    bracketed = address.startswith("[") and address.endswith("]")
    bare = address[1:-1] if bracketed else address
    try:
        literal = ipaddress.ip_address(bare)
    except ValueError:
        literal = None
    if literal is not None and (literal.version == 6 or not bracketed):  # noqa: PLR2004 - IPv6
        return bare
    if not bracketed and _is_host_name(address):
        return address
    raise ConfigError(
        f"invalid address {text!r} (--health-address/SWEEPER_HEALTH_ADDRESS): expected an IPv4 "
        "or IPv6 address (0.0.0.0, ::, ::1 or [::1]) or a host name, without a port "
        "(that is --health-port)"
    )


@dataclass(frozen=True, slots=True)
class WatchSettings:
    """The settings of ``--watch``; each field is filled by the flag whose row names it."""

    resync: float = 300.0
    watch_timeout: float = 90.0
    leader_elect: bool = True
    lease_name: str = "kubeflow-deadline-sweeper"
    lease_namespace: str | None = None
    identity: str = "sweeper"
    timing: Timing = field(default_factory=Timing)
    health_address: str = "0.0.0.0"  # noqa: S104 - a pod's probes and scrape come from outside
    health_port: int = 8080


@dataclass(frozen=True, slots=True)
class Config:
    """Every setting of a run; each field is filled by the flag whose row names it (``to``).

    Empty tuples mean every namespace, kind or family; ``None`` an option not given. In watch
    mode ``timeout`` bounds each resync pass; timer fires only by ``--request-timeout``.
    """

    kubeconfig: str | None = None
    context: str | None = None
    namespaces: tuple[str, ...] = ()
    exclude_namespaces: tuple[str, ...] = ()
    kinds: tuple[Kind, ...] = ()
    families: tuple[str, ...] = ()
    selector: str | None = None
    page_size: int = 500
    enforcement: Enforcement = field(default_factory=Enforcement)
    clock: ClockMode = ClockMode.SERVER
    every: float | None = None
    for_seconds: float | None = None
    dry_run: DryRun | None = None
    output: OutputFormat = OutputFormat.TEXT
    log_format: LogFormat = LogFormat.JSON
    log_level: str = "INFO"
    request_timeout: float = 10.0
    timeout: float = 45.0
    pushgateway: str | None = None
    pushgateway_job: str = DEFAULT_PUSHGATEWAY_JOB
    explain: tuple[str, str] | None = None
    watch: WatchSettings | None = None
    platform: Platform | None = None
    training_operator_deployment: tuple[str, str] | None = None

    def scope(self, served: Iterable[S]) -> RunScope[S]:
        """What a run of these settings covers of what the cluster serves."""
        kinds, namespaces = self.kinds, self.namespaces
        return RunScope.of(served, kinds, namespaces, self.exclude_namespaces, self.families)

    def __post_init__(self) -> None:
        """Check what no single flag can: how the settings combine."""
        self._check_quick_retouch()
        self._check_exclusions()
        self._check_repetition()
        self._check_explain()

    def _check_quick_retouch(self) -> None:
        # touched-at records whole seconds: a re-touch within the second writes the same value,
        # which changes nothing (no watch event re-arms the job's timer, and the report would
        # claim a write that did not happen): both spacings of re-touches are held to a second.
        if self.enforcement.retouch_limit > 0 and self.enforcement.retouch_after < 1:
            raise ConfigError(
                "--retouch-after must be at least 1s while --retouch-limit is above 0 "
                "(the touched-at annotation records whole seconds)"
            )
        if self.enforcement.action is ActionMode.TOUCH and self.enforcement.escalate_after < 1:
            raise ConfigError(
                "--escalate-after must be at least 1s under --action touch, where it spaces "
                "the re-touches (the touched-at annotation records whole seconds)"
            )

    def _check_exclusions(self) -> None:
        for namespace in self.exclude_namespaces:
            if namespace in self.namespaces:
                raise ConfigError(
                    f"namespace {namespace!r} is both included (-n) and excluded "
                    "(--exclude-namespace)"
                )

    def _check_explain(self) -> None:
        # --explain reads one job and exits: a mode it would silently drop is refused instead.
        if self.explain is None:
            return
        if self.watch is not None:
            raise ConfigError("--explain explains one job and exits; it does not take --watch")
        if self.every is not None or self.for_seconds is not None:
            raise ConfigError(
                "--explain explains one job and exits; it does not take --every/--for"
            )

    def _check_repetition(self) -> None:
        if (self.every is None) != (self.for_seconds is None):
            raise ConfigError("--every and --for go together")
        if self.watch is not None and self.every is not None:
            raise ConfigError("--watch runs continuously; it does not take --every/--for")
        if self.watch is not None and self.pushgateway is not None:
            # A long-running process is scraped; pushing would leave a stale group behind.
            raise ConfigError("--watch serves /metrics; it does not take --pushgateway")
        if self.watch is not None and self.enforcement.max_actions is not None:
            # A cap per pass has no equivalent when each job is acted on at its deadline.
            raise ConfigError(
                "--watch acts on each job at its deadline; it does not take --max-actions "
                "(a cap per pass)"
            )
