"""The Kubernetes boundary: the protocol the modes speak, the adapter behind it, the connection.

Two rooms. The cluster adapter: ``sweeper.k8s.cluster`` is the boundary (protocols and the
values crossing it), ``sweeper.k8s.dryrun`` the client dry run (a cluster that records its
writes), ``sweeper.k8s.kube`` the requests (paths, queries, pages), ``sweeper.k8s.transport``
the retries, ``sweeper.k8s.answers`` the checks of what comes back,
``sweeper.k8s.decode`` the fast list decoders and ``sweeper.k8s.readahead`` the lists read on
threads ahead of the pass that reads them. The connection, ``sweeper.k8s.connection``: the
kubeconfig, the credentials, the proxies and the HTTP client (the only ``urllib3`` import),
which builds the adapter over itself. Only this package imports ``urllib3`` and ``msgspec``.
"""
