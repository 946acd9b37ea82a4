"""A Training Operator v1 that still runs its MPIJob controller beside mpi-operator's CRD.

Only one ``mpijobs.kubeflow.org`` CRD can exist: beside mpi-operator's (``v2beta1``), such an
operator crash-loops, and no v1 kind's deadline is enforced for minutes at a time
(docs/compatibility.md). With ``--training-operator-deployment`` each pass reads that one
Deployment and says so; nothing is acted on because of it, and an unreadable Deployment costs
one WARNING, never the pass.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from sweeper.core.errors import ApiError, ClusterUnavailable
from sweeper.core.families import family_of
from sweeper.core.kinds import DEPLOYMENTS, VERSION
from sweeper.core.model import JSON
from sweeper.core.tally import MPIJOB_SCHEME
from sweeper.k8s.cluster import Cluster, ServedKind

__all__ = ["MPIJOB_SCHEME", "check_mpijob_scheme", "enabled_schemes"]

log = logging.getLogger(__name__)

_FLAG = "enable-scheme"


def enabled_schemes(deployment: JSON) -> set[str] | None:
    """The schemes the Deployment's containers name with ``--enable-scheme``, in lower case.

    ``None`` when no container passes the flag: the operator then enables every scheme. Read
    from ``command`` and ``args`` as Go's ``flag`` package reads them.
    """
    found: set[str] | None = None
    template = (deployment.get("spec") or {}).get("template") or {}
    for container in (template.get("spec") or {}).get("containers") or []:
        words = [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]
        for at, word in enumerate(words):
            name, equals, value = word.lstrip("-").partition("=")
            if not word.startswith("-") or name != _FLAG:
                continue
            if not equals:
                if at + 1 >= len(words):
                    continue
                value = words[at + 1]
            found = (found or set()) | {value.strip().lower()}
    return found


def check_mpijob_scheme(
    cluster: Cluster, deployment: tuple[str, str] | None, served: Iterable[ServedKind]
) -> bool:
    """Whether the operator's Deployment runs the v1 MPIJob controller beside the v2beta1 CRD.

    ``False`` also when the Deployment cannot be read (logged once, as a WARNING).
    """
    # A kind the Training Operator serves at v1 that another family's CRD serves here.
    mpi = next(
        (s for s in served if family_of(s.kind, VERSION) is not family_of(s.kind, s.version)), None
    )
    if deployment is None or mpi is None:
        return False
    scheme = mpi.kind.name.lower()
    namespace, name = deployment
    fields = {"namespace": namespace, "misconfigured": MPIJOB_SCHEME}
    try:
        raw = cluster.get(DEPLOYMENTS, namespace, name)
    except (ApiError, ClusterUnavailable) as error:
        log.warning(
            "cannot check the Training Operator's schemes (--training-operator-deployment "
            "%s/%s): %s",
            namespace,
            name,
            error,
            extra=fields,
        )
        return False
    schemes = enabled_schemes(raw)
    if schemes is not None and scheme not in schemes:
        return False
    why = "passes no --enable-scheme (every scheme)" if schemes is None else f"enables {scheme}"
    log.warning(
        "Deployment %s/%s %s: the Training Operator runs its kubeflow.org/v1 MPIJob controller "
        "while MPIJob is served at %s/%s (mpi-operator's CRD), so it exits after a 2-minute "
        "cache sync timeout, again and again, and enforces no v1 job meanwhile; fix: give it "
        "--enable-scheme for each kind it should run but mpijob (the sweeper acts on nothing "
        "because of it)",
        namespace,
        name,
        why,
        mpi.kind.group,
        mpi.version,
        extra=fields,
    )
    return True
