"""The write bodies the sweeper sends: the touch's merge patch and ``--action fail``'s status.

Pure: built from the job as read. The status document (``status_patch``) reproduces what the
Training Operator v1 writes when a job passes its deadline (docs/operator.md, "What the operator
does on the deadline", and the operator's ``setCondition`` / ``filterOutCondition``):
``completionTime`` set if unset; every other condition kept verbatim except that ``Running``
gets ``status: "False"``; any previous ``Failed`` condition replaced by a new ``Failed=True``
condition at the end, with reason ``<Kind>Failed``, the operator's message (saying that the
sweeper enforced it) and both times set to ``now`` (whole seconds, ``Z``). Beside it, the
touch's merge patch and the deadline's.
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
    """The ``Failed`` condition's message: the operator's own plus who enforced it.

    ``source`` names a deadline the job does not carry (``sweeper.core.platform.source_note``);
    the operator's words stay first, so the message still reads as a deadline failure.
    """
    if source:
        return f"Job {name} {DEADLINE_MESSAGE} ({source}) (enforced by {COMPONENT})"
    return f"Job {name} {DEADLINE_MESSAGE} (enforced by {COMPONENT})"


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
    """Build the status fields that fail a job by its deadline.

    ``completionTime`` only when the job has none yet. Written as a JSON merge patch, this
    replaces the whole conditions list and leaves every other status field as it is. The
    reason is the operator's ``<Kind>Failed`` and the message :func:`failure_message`'s,
    unless a family spells its failure otherwise (``reason``, ``message``).
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
    """Build the whole merge patch sent to ``.../<plural>/<name>/status``.

    ``raw_job`` is the job as just read: its ``resourceVersion`` guards the write (a job
    changed since makes the API answer 409 Conflict).
    """
    meta = raw_job.get("metadata") or {}
    return {
        "metadata": {"resourceVersion": meta.get("resourceVersion")},
        "status": failed_status(
            kind,
            str(meta.get("name", "")),
            raw_job.get("status"),
            now,
            source=source,
            reason=reason,
            message=message,
        ),
    }


@dataclass(frozen=True, slots=True)
class DeadlineWrite:
    """A platform deadline's write into its carrier (:func:`deadline_patch`), and its Event."""

    patch: dict[str, Any]
    event: str
    warning: bool


def deadline_patch(raw: Mapping[str, Any], seconds: int) -> dict[str, Any]:
    """Build the merge patch that writes ``spec.activeDeadlineSeconds`` into ``raw``.

    A TrainJob's, or an MPIJob's launcher Job's; ``raw``'s ``resourceVersion`` guards it.
    """
    meta = raw.get("metadata") or {}
    return {
        "metadata": {"resourceVersion": meta.get("resourceVersion")},
        "spec": {"activeDeadlineSeconds": seconds},
    }


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
