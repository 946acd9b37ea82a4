"""The apiserver audit policy of the harness, and reading the audit log it produces.

The policy logs every request at ``Metadata`` level (who, verb, URI, object reference,
response code; never bodies) and only at stage ``ResponseComplete``, so each completed request
is exactly one JSON line. The log backend runs in its default blocking mode: the line is
written before the response is finished, so once a client has its answer, its request is in
the log. The control plane never rotates it (``--audit-log-maxsize=0``), so a byte offset
taken once (``end_offset``) stays valid for its whole life.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
# One line per completed request: RequestReceived would double every request, and
# ResponseStarted only concerns watches, which are logged when they end.
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
"""

AuditEvent = dict[str, Any]
log = logging.getLogger(__name__)


def write_policy(path: Path) -> Path:
    """Write the policy file for ``--audit-policy-file``."""
    path.write_text(POLICY, encoding="utf-8")
    return path


def end_offset(log_path: Path) -> int:
    """The byte offset just after the last complete line: a cursor for ``read_events(since=)``."""
    try:
        with log_path.open("rb") as f:
            end = f.seek(0, 2)
            # Only the tail matters, however long the session's log has grown.
            position = end
            while position > 0:
                step = min(64 * 1024, position)
                position -= step
                f.seek(position)
                newline = f.read(step).rfind(b"\n")
                if newline >= 0:
                    return position + newline + 1
    except FileNotFoundError:
        pass
    return 0


def read_events(log_path: Path, *, user: str | None = None, since: int = 0) -> list[AuditEvent]:
    """Parse the audit log.

    Args:
        log_path: The ``--audit-log-path`` file.
        user: Keep only events whose ``user.username`` is this (e.g. ``sweeper`` or
            ``system:serviceaccount:ns:name``).
        since: Byte offset from ``end_offset`` taken earlier; only later events are returned.

    Returns:
        Events in log order. A last line still being written is left out, and so is a line
        that is not JSON (a warning counts them): an offset into a log that was rotated since
        starts mid-line, and a reader of figures wants the other events rather than nothing.
    """
    try:
        with log_path.open("rb") as f:
            f.seek(since)
            data = f.read()
    except FileNotFoundError:
        return []
    complete = data[: data.rfind(b"\n") + 1]
    events = []
    torn = 0
    for line in complete.splitlines():
        if not line.strip():
            continue
        try:
            event: AuditEvent = json.loads(line)
        except ValueError:
            torn += 1
            continue
        if user is not None and event.get("user", {}).get("username") != user:
            continue
        events.append(event)
    if torn:
        log.warning("%s: left out %d line(s) that are not JSON", log_path, torn)
    return events


def is_write(event: AuditEvent) -> bool:
    """Whether the request could change state (any verb but get, list and watch)."""
    return event.get("verb") not in {"get", "list", "watch"}
