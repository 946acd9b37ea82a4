"""The Kubernetes boundary: the protocol the modes speak, and the one adapter behind it.

:mod:`sweeper.k8s.cluster` is the boundary (protocols and the values crossing it),
:mod:`sweeper.k8s.kube` the adapter (paths, queries, the official client),
:mod:`sweeper.k8s.transport` the retries, and :mod:`sweeper.k8s.decode` the fast list decoder.
Only this package imports ``kubernetes``, ``urllib3`` and ``msgspec``.
"""
