"""The deadlines the platform sets: the rules file (``--policy``) and a job's view under its rule.

A rule selects jobs by the labels of their Namespace (cluster-scoped, so a tenant cannot
relabel their own) and optionally by kind, and sets a default deadline, a cap, whether the
exclude annotation is honoured, and how long before the deadline to warn. The first matching
rule wins. Pure: the caller reads the file and the Namespaces; docs/policy.md is the reference.
"""

from __future__ import annotations

import dataclasses
import re
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sweeper.core.clock import LONGEST_WAIT, human, parse_duration
from sweeper.core.errors import ConfigError
from sweeper.core.jobs import DeadlineSource, Job, overflows

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_RULE_KEYS = (
    "name",
    "namespaceSelector",
    "kinds",
    "defaultDeadline",
    "maxDeadline",
    "allowExemption",
    "warnBefore",
    "startDeadline",
    "reclaimFailedAfter",
)
# A DNS label (RFC 1123), as Kubernetes names many things: it goes into metric labels and logs.
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` entry; ``values`` is empty for Exists and DoesNotExist."""

    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether labels satisfy it, as Kubernetes' ``labels.Selector`` decides."""
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        # NotIn: a Namespace without the key matches, as in Kubernetes.
        return self.key not in labels or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class Selector:
    """A Kubernetes LabelSelector; empty, it selects every Namespace."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether labels satisfy every ``matchLabels`` pair and every expression (AND)."""
        return all(labels.get(key) == value for key, value in self.match_labels) and all(
            requirement.matches(labels) for requirement in self.expressions
        )


@dataclass(frozen=True, slots=True)
class PlatformRule:
    """One rule of the file (docs/policy.md); seconds, ``None`` where unset; ``kinds``: names."""

    name: str
    selector: Selector = Selector()
    kinds: frozenset[str] | None = None
    default_deadline: float | None = None
    max_deadline: float | None = None
    allow_exemption: bool = False
    warn_before: float | None = None
    start_deadline: float | None = None
    reclaim_failed_after: float | None = None


@dataclass(frozen=True, slots=True)
class Platform:
    """The rules, in the file's order."""

    rules: tuple[PlatformRule, ...] = ()

    def match(self, labels: Mapping[str, str], kind_name: str) -> PlatformRule | None:
        """The first rule selecting a job of this kind in a Namespace with these labels."""
        for rule in self.rules:
            if (rule.kinds is None or kind_name in rule.kinds) and rule.selector.matches(labels):
                return rule
        return None


def apply(job: Job, rule: PlatformRule | None) -> Job:
    """The job's view under its rule: the effective deadline, its source, the exemption.

    Applying again, with any rule, starts from the job's own fields (a Namespace relabelled).
    """
    if rule is None and job.rule is None:
        return job
    # A view no rule was applied to has its own deadline in deadline_seconds (one made by hand
    # may not fill declared_seconds).
    own = job.deadline_seconds if job.rule is None else job.declared_seconds
    annotated = job.excluded or job.exemption_refused
    return dataclasses.replace(job, **terms(own, annotated, rule))


def terms(own: int | None, annotated: bool, rule: PlatformRule | None) -> dict[str, Any]:
    """The fields of a job's view that its rule decides, from its own deadline and annotation.

    The effective deadline is its own, else the rule's default, capped by its maximum (which
    bounds every job). A decoder passes them to ``Job`` itself: a listed job is built once.
    """
    effective, source = own, DeadlineSource.JOB
    if rule is not None and effective is None and rule.default_deadline is not None:
        effective, source = int(rule.default_deadline), DeadlineSource.DEFAULT
    # A deadline no controller can represent (either way) is longer than any cap.
    if (rule is not None and rule.max_deadline is not None) and (
        effective is None or overflows(effective) or effective > rule.max_deadline
    ):
        effective, source = int(rule.max_deadline), DeadlineSource.CAP
    return {
        "deadline_seconds": effective,
        "declared_seconds": own,
        "deadline_source": source,
        "rule": None if rule is None else rule.name,
        "excluded": annotated and (rule is None or rule.allow_exemption),
        "exemption_refused": annotated and rule is not None and not rule.allow_exemption,
        "warn_before": None if rule is None else rule.warn_before,
    }


def load_platform(text: str, source: str, kinds: Sequence[str]) -> Platform:
    """Read and check a rules file's text; ``source`` names it in every error, ``kinds`` are known.

    A ``ConfigError`` names the file, the rule and the field; an unknown key is one too (a typo
    must not silently widen a cap).
    """
    import yaml  # noqa: PLC0415 - only a run with --policy reads YAML: --help and --version stay quick

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(error, "problem", None) or "unreadable"
        raise ConfigError(f"{source}: not YAML{where}: {problem}") from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise ConfigError(f"{source}: not YAML: nested too deeply") from None
    except ValueError as error:  # a value its constructors refuse (a 13th month, 5,000 digits)
        # What follows a ';' is Python's advice to programmers (sys.set_int_max_str_digits).
        raise ConfigError(f"{source}: not YAML: {str(error).partition(';')[0]}") from None
    if not isinstance(document, Mapping) or set(document) != {"rules"}:
        raise ConfigError(f"{source}: expected a mapping with one key, rules (a list of rules)")
    items = [] if document["rules"] is None else document["rules"]
    if not isinstance(items, list):
        raise ConfigError(f"{source}: rules: expected a list of rules")
    rules: list[PlatformRule] = []
    for index, item in enumerate(items):
        rule = _rule(item, f"{source}: rules[{index}]", source, kinds)
        if any(rule.name == other.name for other in rules):
            raise ConfigError(f"{source}: rule {rule.name}: name: used by an earlier rule")
        rules.append(rule)
    return Platform(tuple(rules))


def _rule(item: object, where: str, source: str, kinds: Sequence[str]) -> PlatformRule:
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: expected a mapping")
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        shown = reprlib.repr(name)  # quoted in part: one short line, whatever the file holds
        raise ConfigError(
            f"{where}: name: {shown}: expected a DNS label (a-z, 0-9 and -, at most 63)"
        )
    where = f"{source}: rule {name}"
    for key in item:
        if key not in _RULE_KEYS:
            raise ConfigError(f"{where}: {key}: unknown field (expected {', '.join(_RULE_KEYS)})")
    default = _duration(item, "defaultDeadline", where, whole=True)
    cap = _duration(item, "maxDeadline", where, whole=True)
    if default is not None and cap is not None and default > cap:
        raise ConfigError(
            f"{where}: defaultDeadline: {reprlib.repr(item['defaultDeadline'])} is longer than "
            f"maxDeadline {reprlib.repr(item['maxDeadline'])}"
        )
    allow = item.get("allowExemption", False)
    if not isinstance(allow, bool):
        raise ConfigError(f"{where}: allowExemption: {reprlib.repr(allow)}: expected true or false")
    return PlatformRule(
        name=name,
        selector=_selector(item.get("namespaceSelector"), f"{where}: namespaceSelector"),
        kinds=_kinds(item.get("kinds"), f"{where}: kinds", kinds),
        default_deadline=default,
        max_deadline=cap,
        allow_exemption=allow,
        warn_before=_duration(item, "warnBefore", where, whole=False),
        start_deadline=_duration(item, "startDeadline", where, whole=False),
        reclaim_failed_after=_duration(item, "reclaimFailedAfter", where, whole=False),
    )


def _duration(item: Mapping[str, object], key: str, where: str, *, whole: bool) -> float | None:
    value = item.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{where}: {key}: {reprlib.repr(value)}: not a duration")
    try:
        seconds = parse_duration(value, positive=True, longest=LONGEST_WAIT)
    except ValueError as error:
        raise ConfigError(f"{where}: {key}: {error}") from None
    if whole and seconds != int(seconds):
        # It becomes an activeDeadlineSeconds, an integer.
        raise ConfigError(f"{where}: {key}: {reprlib.repr(value)}: not a whole number of seconds")
    return seconds


def _kinds(value: object, where: str, known: Sequence[str]) -> frozenset[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: expected a non-empty list of kinds, e.g. [PyTorchJob]")
    for name in value:
        if not isinstance(name, str) or name not in known:
            shown, kinds = reprlib.repr(name), ", ".join(known)
            raise ConfigError(f"{where}: {shown}: not a kind (expected one of {kinds})")
    return frozenset(value)


def _selector(value: object, where: str) -> Selector:
    if value is None:
        return Selector()
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a mapping (matchLabels, matchExpressions)")
    for key in value:
        if key not in ("matchLabels", "matchExpressions"):
            raise ConfigError(f"{where}: {key}: unknown field (matchLabels, matchExpressions)")
    labels = value.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise ConfigError(
            f"{where}: matchLabels: expected a mapping of strings (quote values like 'true')"
        )
    expressions = value.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise ConfigError(f"{where}: matchExpressions: expected a list")
    return Selector(
        tuple(sorted(labels.items())),
        tuple(
            _requirement(entry, f"{where}: matchExpressions[{index}]")
            for index, entry in enumerate(expressions)
        ),
    )


def _requirement(entry: object, where: str) -> Requirement:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: expected a mapping (key, operator, values)")
    for field in entry:
        if field not in ("key", "operator", "values"):
            raise ConfigError(f"{where}: {field}: unknown field (key, operator, values)")
    key, operator, values = entry.get("key"), entry.get("operator"), entry.get("values")
    if not isinstance(key, str) or not key:
        raise ConfigError(f"{where}: key: expected a label key")
    if operator not in OPERATORS:
        raise ConfigError(
            f"{where}: operator: {reprlib.repr(operator)}: expected one of {', '.join(OPERATORS)}"
        )
    if operator in ("In", "NotIn"):
        if not (isinstance(values, list) and values and all(isinstance(v, str) for v in values)):
            raise ConfigError(f"{where}: values: {operator} needs a non-empty list of strings")
        return Requirement(key, operator, frozenset(values))
    if values:
        raise ConfigError(f"{where}: values: {operator} takes no values")
    return Requirement(key, operator)


def source_note(job: Job) -> str:
    """Where the job's deadline comes from (``24h, the default of platform rule gpu``), or empty."""
    if job.deadline_source is DeadlineSource.JOB or job.deadline_seconds is None:
        return ""
    return f"{human(job.deadline_seconds)}, {rule_source(job)}"


def rule_source(job: Job) -> str:
    """The platform rule's part that sets a job's deadline: ``the cap of platform rule gpu``."""
    return f"the {job.deadline_source.value} of platform rule {job.rule}"


class PlatformView:
    """Puts each job under its rule, from its Namespace's labels read for the pass.

    Without a platform, or in a Namespace whose labels could not be read, a job is its own
    view. The rule is looked up once per (namespace, kind).
    """

    def __init__(
        self,
        platform: Platform | None = None,
        labels: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.platform = platform
        self.labels = labels or {}
        self._rules: dict[tuple[str, str], PlatformRule | None] = {}

    def __call__(self, job: Job) -> Job:
        """The job's view under its rule (``apply``)."""
        if self.platform is None:
            return job
        return apply(job, self.rule(job.namespace, job.kind.name))

    def terms(
        self, namespace: str, kind_name: str, own: int | None, annotated: bool
    ) -> dict[str, Any]:
        """``terms`` under the rule of a job being built."""
        return terms(own, annotated, self.rule(namespace, kind_name))

    def rule(self, namespace: str, kind_name: str) -> PlatformRule | None:
        """The rule jobs of this kind in this namespace fall under, if any."""
        if self.platform is None:
            return None
        key = (namespace, kind_name)
        # The pass's two list readers may look up one key at once: both store the same rule.
        try:
            return self._rules[key]
        except KeyError:
            labels = self.labels.get(namespace)
            rule = None if labels is None else self.platform.match(labels, kind_name)
            self._rules[key] = rule
            return rule


# Jobs as without --policy: each is its own view (nothing is cached without a platform).
NO_PLATFORM = PlatformView()


def namespace_labels(raw: object) -> tuple[str, dict[str, str]] | None:
    """A Namespace object's name and labels; ``None`` without a name."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        return None
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping):
        return name, {}
    return name, {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}


def explain_rule(job: Job) -> str:
    """What ``--explain``'s ``platform-rule`` step saw: the rule, the deadline's source."""
    if job.rule is None:
        return "no rule matches: the job's own deadline, as without --policy"
    own = "none" if job.declared_seconds is None else human(job.declared_seconds)
    if overflows(job.declared_seconds):
        own = f"{job.declared_seconds} s, beyond Go's time.Duration: longer than any cap"
    if job.deadline_source is DeadlineSource.JOB and job.deadline_seconds is None:
        deadline = "no deadline"
    elif job.deadline_source is DeadlineSource.JOB:
        deadline = f"deadline {human(job.deadline_seconds)} from the job"
    else:
        deadline = f"deadline {source_note(job)} (the job declares {own})"
    parts = [f"rule {job.rule}", deadline]
    if job.exemption_refused:
        parts.append("exclude annotation ignored: the rule allows no exemption")
    elif job.excluded:
        parts.append("exclude annotation honoured: the rule allows exemptions")
    return "; ".join(parts)
