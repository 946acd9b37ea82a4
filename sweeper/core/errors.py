"""The sweeper's own error vocabulary and the exit code each error class maps to.

Client errors are translated into these in ``sweeper.k8s.connection.client`` (``raise ...
from``), so the rest of the package never sees the HTTP client's exceptions. The exit codes are the
documented contract (docs/cli.md, "Exit codes").
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus

EXIT_OK = 0
EXIT_ACTIONS_FAILED = 1
EXIT_CONFIG = 2
EXIT_CLUSTER = 3
EXIT_INTERRUPTED = 4
EXIT_TIMEOUT = 5
# sysexits' EX_SOFTWARE: a bug in the sweeper, never a state of the cluster or of a job, so
# that alerts can tell it from "some actions failed" (1).
EXIT_INTERNAL = 70


class SweeperError(Exception):
    """Base class of every error the sweeper reports on its own terms."""

    exit_code = EXIT_ACTIONS_FAILED


class ConfigError(SweeperError):
    """The command line, the environment or the kubeconfig is unusable (a usage error)."""

    exit_code = EXIT_CONFIG


class ClusterUnavailable(SweeperError):  # noqa: N818 - a state, like kopf's and kr8s' names
    """The cluster could not be reached, or refused to let the sweeper list what it needs."""

    exit_code = EXIT_CLUSTER


class Interrupted(SweeperError):  # noqa: N818 - InterruptedError is a builtin
    """SIGTERM or SIGINT asked the run to stop."""

    exit_code = EXIT_INTERRUPTED


class RunTimeout(SweeperError):  # noqa: N818 - TimeoutError is a builtin
    """The whole run took longer than ``--timeout``."""

    exit_code = EXIT_TIMEOUT


@dataclass(frozen=True, slots=True)
class RequestRef:
    """What one API request is about: its errors, retry logs and timeouts name it.

    ``resource`` is qualified by its group (``pytorchjobs.kubeflow.org``, ``pods``);
    ``namespace`` is ``None`` for cluster-wide requests and ``name`` for collections.
    """

    verb: str
    resource: str
    namespace: str | None = None
    name: str | None = None
    cluster_scoped: bool = False

    def describe(self) -> str:
        """The request in words, e.g. ``list pytorchjobs.kubeflow.org in namespace "a"``."""
        target = self.resource if self.name is None else f"{self.resource} {self.name!r}"
        if self.cluster_scoped:
            where = ""
        elif self.namespace is None:
            where = " in all namespaces"
        else:
            where = f' in namespace "{self.namespace}"'
        return f"{self.verb} {target}{where}"


class ApiError(SweeperError):
    """One API request failed for good; ``status`` ``None``: no usable answer came back."""

    def __init__(self, request: RequestRef, status: int | None, detail: str = "") -> None:
        self.request = request
        self.status = status
        self.detail = detail
        super().__init__(self.describe())

    def describe(self) -> str:
        """The one-line message, with the server's own unless it repeats the status (kubectl's).

        For a 403 it tells RBAC from admission, and names the identity refused.
        """
        if self.status is None:
            what = self.detail or "no response"
        else:
            label = _STATUS_LABELS.get(self.status, "error")
            what = f"{label} ({self.status})"
            if self.detail and _words(self.detail) != _words(label):
                what = f"{what}: {self.detail}"
        return f"cannot {self.request.describe()}: {what}"


class NotFound(ApiError):  # noqa: N818 - named after the HTTP status
    """404: the object (or the resource) does not exist (any more)."""


class Conflict(ApiError):  # noqa: N818 - named after the HTTP status
    """409: the object changed since it was read (stale ``resourceVersion``), or exists already."""


class Gone(ApiError):  # noqa: N818 - named after the HTTP status
    """410: a list's continue token expired."""


class WatchStalled(ApiError):  # noqa: N818 - a state, like Gone
    """A watch stream sent nothing, not even a bookmark, for longer than its read timeout."""


# Each status's phrase (422: kubectl's word); "error" for any other.
_STATUS_LABELS = {
    code: HTTPStatus(code).phrase.lower()
    for code in (400, 401, 403, 404, 409, 410, 429, 500, 502, 503, 504)
} | {422: "invalid"}


def _words(text: str) -> str:
    # "Unauthorized", "unauthorized" and "Not Found" say no more than the status's label.
    return "".join(text.split()).lower()


def api_error(request: RequestRef, status: int | None, detail: str = "") -> ApiError:
    """Build the most specific ``ApiError`` for a status."""
    cls = {404: NotFound, 409: Conflict, 410: Gone}.get(status or 0, ApiError)
    return cls(request, status, detail)
