"""A pass's look at GPUs held for nothing: its one pod list summed per job, and what it found.

The listing keeps the jobs that could hold pods for nothing; the pass's one pod list per
namespace scope and family label (``training.kubeflow.org/job-name``, a JobSet's
``jobset.sigs.k8s.io/jobset-name``; the lists the clean-ups read too:
``sweeper.act.cleanup.leftovers_by_owner``) is summed per job as it comes (``Loads``: a few
numbers per job, no pod kept but those that wait), and each job is classified
(``sweeper.core.held.classify``). The jobs found are kept for the report: one line in the text,
one line per job with ``-o wide``, a ``held`` list in ``-o json``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TextIO

from sweeper.core.clock import format_rfc3339, human
from sweeper.core.held import (
    Held,
    HeldState,
    Load,
    classify,
    graces,
    parse_pod_load,
    pods_of,
    start_warning,
)
from sweeper.core.jobs import Job, Owned
from sweeper.core.kinds import Leftovers
from sweeper.core.model import Enforcement
from sweeper.core.platform import PlatformRule

log = logging.getLogger(__name__)

_NAMED = 3  # pods a text line names; the rest are counted


@dataclass(slots=True)
class Found:
    """The jobs a pass found holding pods for nothing (or waiting), in listing order."""

    jobs: list[Held] = field(default_factory=list)

    def gpus(self, state: HeldState) -> int:
        """The GPUs held by the jobs in one state."""
        return sum(held.gpus for held in self.jobs if held.state is state)

    def pods(self, state: HeldState) -> int:
        """The active pods of the jobs in one state."""
        return sum(held.pods for held in self.jobs if held.state is state)


class Loads:
    """Sums the pass's pods per watched job, as its one pod list comes (a ``PodSink``).

    Only the pods of the jobs the listing kept (``sweeper.core.held.watched``) are summed; a
    few numbers per job, and the pods that wait, named. A pod is its controller's, or else the
    job its label names (``sweeper.core.held.pods_of``).
    """

    def __init__(self, watched: Mapping[str, Job], patterns: Sequence[str]) -> None:
        self._watched = watched
        self._patterns = patterns
        self._loads: dict[str, Load] = {}
        self._lost: set[str | None] = set()
        # (namespace, label, its value) -> uid, of the jobs whose pods a label names.
        self._named: dict[tuple[str, str, str], str] = {}
        self._scopes: set[tuple[Leftovers, str]] = set()
        for uid, job in watched.items():
            pods, named = pods_of(job)
            self._scopes.add((pods, job.namespace))
            if named and pods.selector is not None:
                self._named[job.namespace, pods.selector, job.name] = uid
        self._labels = {label for _, label, _ in self._named}

    def add(self, raw: object, pod: Owned) -> None:
        """Sum one listed pod into its job's load, if its job is watched.

        A finished job's pods are summed if active; a running job's all are (counted as
        created).
        """
        uid = pod.controller_uid
        if uid not in self._watched:
            uid = self._named_by(raw) if self._named else None
        if uid is None:
            return
        active = pod.phase in ("Running", "Pending") and not pod.deleting
        if not active and self._watched[uid].finished:
            return
        load = self._loads.get(uid)
        if load is None:
            load = self._loads[uid] = Load()
        load.add(parse_pod_load(raw, pod, self._patterns))

    def _named_by(self, raw: object) -> str | None:
        meta = raw.get("metadata") if isinstance(raw, Mapping) else None
        labels = meta.get("labels") if isinstance(meta, Mapping) else None
        if not isinstance(labels, Mapping):
            return None
        namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
        for label in self._labels:
            uid = self._named.get((str(namespace), label, str(labels.get(label))))
            if uid is not None:
                return uid
        return None

    def lost(self, namespace: str | None) -> None:
        """A scope's list failed: its jobs are not judged by their pods this pass."""
        self._lost.add(namespace)
        log.warning(
            "GPUs held by stuck or finished jobs are not reported this pass%s",
            f" in namespace {namespace}" if namespace else "",
            extra={"namespace": namespace},
        )

    def scopes(self) -> set[tuple[Leftovers, str]]:
        """The pod lists its jobs' pods are in (each job's family's ``PODS``, its namespace)."""
        return self._scopes

    def find(
        self,
        now: datetime,
        enforcement: Enforcement,
        rule: Callable[[str, str], PlatformRule | None],
    ) -> Found:
        """The watched jobs holding pods for nothing (or waiting for all), in listing order.

        ``rule`` gives a job's platform rule (by namespace and kind name), whose keys may
        shorten the graces (``sweeper.core.held.graces``).
        """
        found = Found()
        for uid, job in self._watched.items():
            if None in self._lost or job.namespace in self._lost:
                continue
            its = rule(job.namespace, job.kind.name)
            stuck, finished = graces(enforcement.stuck_after, enforcement.reclaim_grace, its)
            held = classify(
                job, self._loads.get(uid), now, stuck_after=stuck, finished_after=finished
            )
            if held is not None:
                found.jobs.append(replace(held, warning=start_warning(held, its)))
        return found


def summary_line(found: Found) -> str:
    """The report's one line: the GPUs held by stuck jobs and by finished ones, at a glance."""
    stuck, finished = HeldState.STUCK, HeldState.FINISHED
    waiting = found.pods(HeldState.WAITING)
    return (
        f"GPUs held for nothing: {found.gpus(stuck)} by jobs stuck starting "
        f"({found.pods(stuck)} pods), {found.gpus(finished)} by finished jobs "
        f"({found.pods(finished)} pods)"
        + (f"; {waiting} pods waiting, none started" if waiting else "")
    )


def line(held: Held) -> str:
    """One held job for a person: what, how long, the GPUs and the pods waiting."""
    job = held.job
    named = held.never_started(_NAMED)
    parts = [f"{job.kind.name} {job.namespace}/{job.name}: {held.state.value}"]
    if held.since is not None:
        parts.append(f"for {human(held.seconds)}")
    parts.append(f"{held.gpus} GPU(s) on {held.placed} placed pod(s)")
    if named:
        parts.append(f"waiting: {named}")
    if job.queued:
        parts.append("kueue (its waitForPodsReady decides)")
    return "; ".join(parts)


def write_text(stream: TextIO, found: Found, *, wide: bool) -> None:
    """The text report's lines: one per job with ``-o wide``, then the summary line."""
    if not found.jobs:
        return
    if wide:
        for held in found.jobs:
            stream.write(f"Held: {line(held)}\n")
    stream.write(summary_line(found) + "\n")


def record(held: Held) -> dict[str, Any]:
    """One held job as ``-o json``'s ``held`` item."""
    job = held.job
    return {
        "kind": job.kind.name,
        "namespace": job.namespace,
        "name": job.name,
        "uid": job.uid,
        "state": held.state.value,
        "since": None if held.since is None else format_rfc3339(held.since),
        "seconds": round(held.seconds, 3),
        "gpus": held.gpus,
        "pods": held.pods,
        "placed": held.placed,
        "waiting": [pod.name for pod in held.waiting],
        "missing": held.missing,
        "rule": job.rule,
        "kueue": job.queued,
    }


def write_json(stream: TextIO, jobs: Iterable[Held]) -> None:
    """``-o json``'s ``"held"`` key (after the jobs), one job per line."""
    lines = [json.dumps(record(held)) for held in jobs]
    stream.write(', "held": [')
    stream.write(("\n    " + ",\n    ".join(lines) + "\n  ") if lines else "")
    stream.write("]")
