"""Answers that are not the API server's JSON, read as states of the cluster.

An auth proxy's sign-in page, a captive portal or a gateway can answer 200 in the API server's
place; a connection cut mid-body leaves truncated JSON. Such an answer is a state of the
cluster, never a bug: each becomes an ApiError naming the request (exit 3 for discovery and
lists, a per-job error for a job's own requests), never a traceback. Nor is it ever read as
"nothing there": a body without the List's items or the discovery document's entries would
otherwise make a pass that finds no job and exits 0. A write's answer is read too: the API
server answers every write with the object (or a Status), so anything else means the write
may not have reached it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from sweeper.core.errors import ApiError, RequestRef, api_error
from sweeper.k8s import decode
from sweeper.k8s.transport import Response, one_line


def decoded(
    response: Response, ref: RequestRef, loads: Callable[[bytes], Any] = json.loads
) -> dict[str, Any]:
    """The JSON object of a successful answer, read by ``loads``; ``ApiError`` if it is none."""
    try:
        document = loads(response.data)
    except (ValueError, RecursionError) as error:
        raise undecodable(ref, response, error) from error
    if not isinstance(document, dict):
        raise undecodable(ref, response, f"a JSON {type(document).__name__}, not an object")
    return document


def one_object(response: Response, ref: RequestRef) -> dict[str, Any]:
    """A successful answer that must be one object (a job, a Lease) with a uid; else ``ApiError``.

    Read as an object without one, a re-read job would look replaced by a new one.
    """
    document = decoded(response, ref)
    metadata = document.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("uid"), str):
        raise undecodable(ref, response, "no 'metadata.uid': not a Kubernetes object")
    return document


def entries(response: Response, ref: RequestRef, key: str) -> list[Any]:
    """The list under ``key`` of a discovery document; ``ApiError`` if it has none."""
    found = decoded(response, ref).get(key)
    if not isinstance(found, list):
        raise undecodable(ref, response, f"no {key!r} list")
    return found


def list_page(
    response: Response, ref: RequestRef, loads: Callable[[bytes], Any] = json.loads
) -> tuple[list[Any], str | None, str | None]:
    """A List answer's items, continue token and resourceVersion (read by ``loads``)."""
    try:
        return decode.list_parts(decoded(response, ref, loads))
    except decode.NotAList as error:
        raise undecodable(ref, response, error) from error


def undecodable(ref: RequestRef, response: Response, why: object) -> ApiError:
    """The error for an answer that is not what the request asks for; a JSON one shows its start."""
    if isinstance(why, ValueError | RecursionError) and not isinstance(why, decode.NotAList):
        why = f"not JSON ({start_of(response.data)}; a proxy answering for the API server?)"
    return api_error(
        ref, None, f"undecodable answer (HTTP {response.status}, {len(response.data)} bytes): {why}"
    )


def start_of(data: bytes) -> str:
    """The first characters of a body, printable and on one line (it may hold any bytes)."""
    if not data:
        return "empty body"
    text = data[:_SHOWN].decode("utf-8", "replace")
    shown = "".join(c if c.isprintable() else "?" for c in one_line(text))
    return f"starts {shown!r}" + ("..." if len(data) > _SHOWN else "")


_SHOWN = 40  # bytes of an undecodable body quoted in its error: enough to tell HTML from JSON


# Reasons (metav1.StatusReason) whose code decides what the watch does next: a relist.
_REASON_STATUS = {"Expired": HTTPStatus.GONE, "Gone": HTTPStatus.GONE}


def watch_error_status(status: dict[str, Any]) -> int:
    """The HTTP status of a watch's ERROR event, from the Status it carries.

    An ERROR event is the server's answer even when its Status has no numeric ``code`` (a
    proxy's, an aggregated server's): read by its ``reason`` (an expired resourceVersion is a
    410, which relists), else as a server error (500, retried with the answers' backoff), never
    as "no answer", which is retried within a second.
    """
    code = status.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    return int(_REASON_STATUS.get(str(status.get("reason")), HTTPStatus.INTERNAL_SERVER_ERROR))
