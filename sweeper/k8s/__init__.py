"""The Kubernetes boundary: the protocol the modes speak, and the one adapter behind it.

``sweeper.k8s.cluster`` is the boundary (protocols and the values crossing it),
``sweeper.k8s.dryrun`` the client dry run (a cluster that records its writes),
``sweeper.k8s.kube`` the adapter (paths, queries, pages), ``sweeper.k8s.client`` the
official client under it (configuration, sending, watch streams), ``sweeper.k8s.transport``
the retries, ``sweeper.k8s.answers`` the checks of what comes back, and
``sweeper.k8s.decode`` the fast list decoder.
Only this package imports ``kubernetes``, ``urllib3`` and ``msgspec``.
"""
