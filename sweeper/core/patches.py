"""The merge patches the sweeper sends: a touch, a deadline, and the status that fails a job.

Pure: built from the object as read, each guarded by its ``resourceVersion`` (a write to an
object changed since is refused, 409). The status reproduces what the Training Operator v1
writes at a deadline (docs/operator.md, "What the operator does on the deadline").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sweeper.core.clock import format_rfc3339
from sweeper.core.kinds import (
    COMPONENT,
    DEADLINE_MESSAGE,
    LEGACY_TOUCHED_AT_ANNOTATION,
    TOUCHED_AT_ANNOTATION,
    Kind,
)


def failure_message(name: str, source: str = "") -> str:
    """The ``Failed`` condition's message: the operator's own, a platform deadline's ``source``."""
    note = f" ({source})" if source else ""
    return f"Job {name} {DEADLINE_MESSAGE}{note} (enforced by {COMPONENT})"


def failed_status(
    kind: Kind,
    name: str,
    status: Mapping[str, Any] | None,
    now: datetime,
    *,
    source: str = "",
    reason: str = "",
    message: str = "",
) -> dict[str, Any]:
    """The status fields that fail a job by its deadline, as the operator writes them.

    The whole conditions list, each kept but a ``Running`` turned ``False`` and a ``Failed``
    replaced by the new one at the end (``<Kind>Failed`` with ``failure_message``, unless a
    family says ``reason`` and ``message``), and ``completionTime`` when it has none.
    """
    status = status or {}
    stamp = format_rfc3339(now)
    conditions: list[dict[str, Any]] = []
    for condition in status.get("conditions") or ():
        ctype = condition.get("type")
        if ctype == "Failed":
            continue  # replaced by the new one, as the operator's filterOutCondition does
        copied = dict(condition)
        if ctype == "Running":
            copied["status"] = "False"  # only the status flips; the times stay
        conditions.append(copied)
    conditions.append(
        {
            "type": "Failed",
            "status": "True",
            "reason": reason or f"{kind.name}Failed",
            "message": message or failure_message(name, source),
            "lastUpdateTime": stamp,
            "lastTransitionTime": stamp,
        }
    )
    document: dict[str, Any] = {"conditions": conditions}
    if not status.get("completionTime"):
        document["completionTime"] = stamp
    return document


def status_patch(
    kind: Kind,
    raw_job: Mapping[str, Any],
    now: datetime,
    *,
    source: str = "",
    reason: str = "",
    message: str = "",
) -> dict[str, Any]:
    """The merge patch sent to ``.../<plural>/<name>/status`` to fail the job read."""
    name = str((raw_job.get("metadata") or {}).get("name", ""))
    status = raw_job.get("status")
    fields = failed_status(kind, name, status, now, source=source, reason=reason, message=message)
    return guarded(raw_job, status=fields)


def guarded(raw: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """A merge patch of ``fields``, guarded by the ``resourceVersion`` of ``raw``."""
    meta = raw.get("metadata") or {}
    return {"metadata": {"resourceVersion": meta.get("resourceVersion")}, **fields}


@dataclass(frozen=True, slots=True)
class DeadlineWrite:
    """A platform deadline's write into its carrier (:func:`deadline_patch`), and its Event."""

    patch: dict[str, Any]
    event: str
    warning: bool


def deadline_patch(raw: Mapping[str, Any], seconds: int) -> dict[str, Any]:
    """The merge patch that writes ``spec.activeDeadlineSeconds`` into ``raw``."""
    return guarded(raw, spec={"activeDeadlineSeconds": seconds})


def touch_patch(touched_at: datetime) -> dict[str, Any]:
    """Build the merge patch of a touch: the sweeper's annotation, nothing else.

    The same patch removes 0.1.0's touch key (``null`` in a merge patch; nothing when the job
    has none), so a job carries one stamp, under the project's own prefix, from its first touch
    by this release on, and the old key does not outlive the release that still reads it.
    """
    return {
        "metadata": {
            "annotations": {
                TOUCHED_AT_ANNOTATION: format_rfc3339(touched_at),
                LEGACY_TOUCHED_AT_ANNOTATION: None,
            }
        }
    }
