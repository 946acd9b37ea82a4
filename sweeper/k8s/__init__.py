"""The Kubernetes boundary: the protocol the modes speak, and the one adapter behind it.

:mod:`sweeper.k8s.cluster` is the boundary (protocols and the values crossing it),
:mod:`sweeper.k8s.dryrun` the client dry run (a cluster that records its writes),
:mod:`sweeper.k8s.kube` the adapter (paths, queries, pages), :mod:`sweeper.k8s.client` the
official client under it (configuration, sending, watch streams), :mod:`sweeper.k8s.transport`
the retries, :mod:`sweeper.k8s.answers` the checks of what comes back, and
:mod:`sweeper.k8s.decode` the fast list decoder.
Only this package imports ``kubernetes``, ``urllib3`` and ``msgspec``.
"""
