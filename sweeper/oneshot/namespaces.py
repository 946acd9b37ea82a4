"""The Namespace labels a pass judges under (``--policy``): read once per pass, before the jobs.

Without ``--policy`` nothing is read. With it, one cluster-scoped list of Namespaces, or, with
``--namespace``, one get per namespace (a Role may grant those alone). A Namespace that cannot
be read is one error line, and its jobs are judged as without ``--policy`` (by their own
deadlines): the sweep goes on for every other namespace.
"""

from __future__ import annotations

import logging

from sweeper.config import Config
from sweeper.core.errors import ApiError
from sweeper.core.kinds import NAMESPACES
from sweeper.core.platform import PlatformView, namespace_labels
from sweeper.k8s.cluster import Cluster, list_all

log = logging.getLogger(__name__)


def read_view(cluster: Cluster, config: Config) -> PlatformView:
    """The pass's view of every job under its rule, from the Namespaces' labels as now."""
    if config.platform is None:
        return PlatformView()
    labels: dict[str, dict[str, str]] = {}
    if config.namespaces:
        for name in config.namespaces:
            try:
                found = namespace_labels(cluster.get(NAMESPACES, None, name))
            except ApiError as error:
                _unread(error, name)
                continue
            if found is not None:
                labels[found[0]] = found[1]
    else:
        try:
            listed = list_all(cluster, NAMESPACES, None)
        except ApiError as error:
            _unread(error, None)
            listed = []
        for raw in listed:
            found = namespace_labels(raw)
            if found is not None:
                labels[found[0]] = found[1]
    return PlatformView(config.platform, labels)


def _unread(error: ApiError, namespace: str | None) -> None:
    whose = f'namespace "{namespace}"' if namespace else "every namespace"
    log.error(
        "%s; the jobs of %s are judged by their own deadlines this pass (no platform rule)",
        error,
        whose,
        extra={"namespace": namespace},
    )
