"""``sweeper --explain NAMESPACE/NAME``: why one job was (or was not) acted on.

Reads the job (every served kind, or those of ``--kind``), takes the pass's instant as a run
would, and walks the rules ``judge`` applies (``sweeper.core.decide.explain``), printing each
with the value it saw and its outcome, after the run's own scope (``-n``,
``--exclude-namespace``, and ``-l`` as the API server matches it). A clean-up is planned as a
pass plans it, from the job's pods. Writes nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from http import HTTPStatus
from typing import Any, TextIO

from sweeper.act.cleanup import leftovers_by_owner
from sweeper.config import ClockMode, Config, OutputFormat
from sweeper.core.clock import SYSTEM_CLOCK, Clock, format_rfc3339, human
from sweeper.core.decide import Step, assemble, explain
from sweeper.core.errors import EXIT_OK, ApiError, ClusterUnavailable, ConfigError, NotFound
from sweeper.core.held import (
    Held,
    classify,
    explain_held,
    graces,
    load_of,
    overrule,
    pods_of,
    watched,
)
from sweeper.core.jobs import Job, parse_job
from sweeper.core.model import CLEAN_UPS, Action, ActionKind, Entry
from sweeper.core.platform import PlatformRule, explain_rule
from sweeper.core.scope import RunScope
from sweeper.core.warn import explain_warning
from sweeper.k8s.cluster import Cluster, ServedKind, list_all
from sweeper.oneshot import namespaces
from sweeper.oneshot.run import Connect
from sweeper.stop import Stop

log = logging.getLogger(__name__)

# The text's width, a terminal's and a code review's; what a rule saw wraps to fit it, in a
# column of at least _MIN_SEEN.
_COLUMNS = 100
_MIN_SEEN = 30


@dataclass(frozen=True, slots=True)
class Explanation:
    """One job's explanation: ``scope`` the run's filters as (name, what it saw, passes?).

    ``entry`` is ``None`` when the run's scope leaves the job out.
    """

    kind: str
    namespace: str
    name: str
    now: datetime
    clock: str
    scope: tuple[tuple[str, str, bool], ...]
    steps: tuple[Step, ...]
    entry: Entry | None
    max_actions: int | None = None


def run_explain(
    config: Config, connect: Connect, out: TextIO, *, clock: Clock = SYSTEM_CLOCK
) -> int:
    """Explain the job ``config.explain`` names, at ``clock``'s instant; exit code 0.

    Raises ``ConfigError`` when no served kind has a job of that name, ``ClusterUnavailable``
    when the cluster could not be read.
    """
    assert config.explain is not None  # noqa: S101 - the CLI calls this only with --explain
    namespace, name = config.explain
    stop = Stop(clock, deadline=clock.monotonic() + config.timeout, timeout=config.timeout)
    cluster = connect(config, stop=stop)
    with contextlib.closing(cluster):
        try:
            discovery = cluster.discover()
            covered = config.scope(discovery.served)
            # In discovery's order (not --kind's): the order it always looked in and printed.
            served = [s for s in discovery.served if s in covered.kinds]
            refused: list[ApiError] = []
            found = [
                (s, raw) for s in served if (raw := _get(cluster, s, namespace, name, refused))
            ]
            scopes = [
                _scope(config, covered, cluster, s, namespace=namespace, name=name)
                for s, _ in found
            ]
        except ApiError as error:
            raise ClusterUnavailable(f"{error} ({cluster.endpoint})") from error
        if refused and not found:
            # The job may be of a kind it may not read: "no such job" would be a guess.
            raise ClusterUnavailable(f"{refused[0]} ({cluster.endpoint})") from refused[0]
        for refusal in refused:
            log.warning("%s; explaining the job found in another kind", refusal)
        if not found:
            kinds = ", ".join(s.kind.name for s in served) or "none served"
            raise ConfigError(f'no Kubeflow job "{namespace}/{name}" (looked in: {kinds})')
        if config.clock is ClockMode.SERVER and discovery.server_date is not None:
            now, whose = discovery.server_date, "server"
        else:
            now, whose = clock.now(), "local"
        # The job's Namespace alone: the rule is chosen by its labels, as a pass chooses it.
        view = namespaces.read_view(cluster, config, (namespace,))
        explanations = []
        for (served_kind, raw), scope in zip(found, scopes, strict=True):
            job = view(parse_job(raw, served_kind.kind, served_kind.version))
            steps, entry = explain(job, now, config.enforcement)
            if job.warn_before is not None:
                seen = explain_warning(job, now, config.enforcement)
                steps = (Step("deadline-approaching", seen, None, reached=True), *steps)
            rule = view.rule(job.namespace, job.kind.name)
            held = _held(cluster, config, job, now, rule) if watched(job) else None
            if held is not None:
                steps = (Step("held-gpus", explain_held(held, rule), None, reached=True), *steps)
                entry = overrule(entry, held, rule)
            if config.platform is not None:
                steps = (Step("platform-rule", explain_rule(job), None, reached=True), *steps)
            keep = all(passes for _, _, passes in scope)
            planned = _as_planned(cluster, config, entry, now) if keep else None
            kind = served_kind.kind.name
            explanations.append(
                Explanation(
                    kind,
                    namespace,
                    name,
                    now,
                    whose,
                    scope,
                    steps,
                    planned,
                    config.enforcement.max_actions,
                )
            )
    if config.output is OutputFormat.JSON:
        out.write(json.dumps([as_json(e) for e in explanations], indent=2) + "\n")
    else:
        out.write("\n".join(as_text(e) for e in explanations))
    out.flush()
    return EXIT_OK


def _held(
    cluster: Cluster, config: Config, job: Job, now: datetime, rule: PlatformRule | None
) -> Held | None:
    # The job's pods, summed as a pass sums them from its one list.
    left, _ = pods_of(job)
    pods = list_all(cluster, left.resource, job.namespace, left.of(job.name))
    load = load_of(job, pods, config.enforcement.gpu_resources)
    stuck, finished = graces(config.enforcement.stuck_after, config.enforcement.reclaim_grace, rule)
    return classify(job, load, now, stuck_after=stuck, finished_after=finished)


def _as_planned(cluster: Cluster, config: Config, entry: Entry, now: datetime) -> Entry:
    # A pass lists what a job failed by its deadline left (pods, a JobSet) before planning its
    # clean-up, and a clean-up with nothing to delete is a skip (finished) there: the same here.
    if not isinstance(entry, Action) or entry.kind not in CLEAN_UPS:
        return entry
    leftovers = leftovers_by_owner(cluster, [entry], (entry.job.namespace,))
    (planned,) = assemble([entry], now, config.enforcement, leftovers).entries
    return planned


def _get(
    cluster: Cluster, served: ServedKind, namespace: str, name: str, refused: list[ApiError]
) -> Any:
    # Per-kind RBAC (the chart's kinds) refuses the kinds it does not grant: 403 like 404.
    try:
        return cluster.get(served.resource, namespace, name)
    except NotFound:
        return None
    except ApiError as error:
        if error.status != HTTPStatus.FORBIDDEN:
            raise
        refused.append(error)
        return None


def _scope(
    config: Config,
    covered: RunScope[ServedKind],
    cluster: Cluster,
    served: ServedKind,
    *,
    namespace: str,
    name: str,
) -> tuple[tuple[str, str, bool], ...]:
    scope = []
    if config.namespaces:
        listed = covered.listed(namespace)
        scope.append(("namespace", f"-n {' -n '.join(config.namespaces)}", listed))
    if config.exclude_namespaces:
        kept = covered.kept(namespace)
        seen = "not excluded" if kept else f"--exclude-namespace {namespace}"
        scope.append(("exclude-namespace", seen, kept))
    if config.selector:
        listed = any(
            job.name == name
            for page in cluster.list_job_views(served, namespace, config.selector, config.page_size)
            for job in page.jobs
        )
        scope.append(
            ("selector", f"-l {config.selector}: {'matches' if listed else 'no match'}", listed)
        )
    return tuple(scope)


def _outcome(step: Step) -> str:
    if not step.reached:
        return "not reached"
    if step.entry is None:
        return "passes"
    return _decision(step.entry)


def _decision(entry: Entry) -> str:
    text = f"{entry.decision} ({entry.reason})"
    return f"{text}: {entry.detail}" if entry.detail else text


def as_text(explanation: Explanation) -> str:
    """Render an explanation for a person: one rule per line, in the decision's order."""
    e = explanation
    lines = [f"{e.kind} {e.namespace}/{e.name} at {format_rfc3339(e.now)} ({e.clock} clock)"]
    rows: list[tuple[str, str, str]] = [
        (f"scope: {name}", seen, "passes" if passes else "leaves the job out")
        for name, seen, passes in e.scope
    ]
    # The deciding rule's detail is the Decision line's: the table names the decision alone.
    rows += [(step.rule, step.seen, _outcome(step).partition(": ")[0]) for step in e.steps]
    rule_width = max(len(rule) for rule, _, _ in rows)
    outcome_width = max(len(outcome) for _, _, outcome in rows)
    # What a rule saw is wrapped so that a line fits a terminal of _COLUMNS; a word longer
    # than its column (an annotation key) is kept whole.
    room = max(_COLUMNS - len("NNN. ") - rule_width - 2 - 2 - outcome_width, _MIN_SEEN)
    seen_width = min(room, max(len(seen) for _, seen, _ in rows))
    for number, (rule, seen, outcome) in enumerate(rows, 1):
        first, *more = textwrap.wrap(
            seen, seen_width, break_long_words=False, break_on_hyphens=False
        ) or [""]
        lines.append(
            f"{number:>3}. {rule.ljust(rule_width)}  {first.ljust(seen_width)}  {outcome}".rstrip()
        )
        indent = " " * (len("NNN. ") + rule_width + 2)
        lines += [f"{indent}{part}" for part in more]
    if e.entry is None:
        lines.append("Decision: none; the run's scope leaves this job out.")
    else:
        lines.append(f"Decision: {_decision(e.entry)}")
        if isinstance(e.entry, Action) and e.entry.targets is not None:
            what = "JobSet" if e.entry.kind is ActionKind.DELETE_JOBSET else "Pods"
            names = ", ".join(p.name for p in e.entry.targets)
            lines.append(f"{what} it would delete: {names}")
        if e.entry.decision != "skip" and e.max_actions is not None:
            lines.append(
                f"(--max-actions {e.max_actions} may still defer it behind more overdue jobs)"
            )
    return "\n".join(lines) + "\n"


def as_json(explanation: Explanation) -> dict[str, Any]:
    """Render an explanation as a JSON-ready dictionary (exact seconds)."""
    e = explanation
    entry = e.entry
    steps: Sequence[Step] = e.steps
    return {
        "kind": e.kind,
        "namespace": e.namespace,
        "name": e.name,
        "now": format_rfc3339(e.now),
        "clock": e.clock,
        "scope": [{"filter": n, "seen": s, "passes": p} for n, s, p in e.scope],
        "rules": [
            {"rule": s.rule, "seen": s.seen, "outcome": _outcome(s), "reached": s.reached}
            for s in steps
        ],
        "decision": None if entry is None else entry.decision,
        "reason": None if entry is None else entry.reason,
        "detail": None if entry is None else entry.detail,
        "seconds_overdue": None if entry is None else entry.seconds_overdue,
        "overdue": None if entry is None else human(entry.seconds_overdue),
        "pods": [p.name for p in entry.targets]
        if isinstance(entry, Action) and entry.targets is not None
        else None,
    }
