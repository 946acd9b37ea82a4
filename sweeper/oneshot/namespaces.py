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
from sweeper.core.model import JSON
from sweeper.core.platform import PlatformView, namespace_labels
from sweeper.k8s.cluster import Cluster, list_all

log = logging.getLogger(__name__)


def read_view(cluster: Cluster, config: Config, only: tuple[str, ...] = ()) -> PlatformView:
    """The pass's view of every job under its rule, from the labels of ``only`` or -n's or all."""
    if config.platform is None:
        return PlatformView()
    read: list[JSON] = []
    if only or config.namespaces:
        for name in only or config.namespaces:
            try:
                read.append(cluster.get(NAMESPACES, None, name))
            except ApiError as error:
                _unread(error, name)
    else:
        try:
            read = list_all(cluster, NAMESPACES, None)
        except ApiError as error:
            _unread(error, None)
    labels = dict(found for found in map(namespace_labels, read) if found is not None)
    return PlatformView(config.platform, labels)


def _unread(error: ApiError, namespace: str | None) -> None:
    whose = f'namespace "{namespace}"' if namespace else "every namespace"
    log.error(
        "%s; the jobs of %s are judged by their own deadlines this pass (no platform rule)",
        error,
        whose,
        extra={"namespace": namespace},
    )
