"""The connection to the API server: where it is, who the sweeper is to it, how requests get there.

Everything an auditor of credentials reads, and nothing else: ``kubeconfig`` reads the
kubeconfig or the pod's service account into a ``Target``; ``credentials`` keeps what each
request presents fresh (a token, a token file, an exec plugin); ``proxies`` picks the proxy by
Go's rules; ``client`` sends over urllib3 (TLS, impersonation, the proxy's credentials, the
401 retry) and builds the cluster adapter (``sweeper.k8s.kube``) over it. The adapter never
imports this package: it sends through the ``sweeper.k8s.transport.Send`` that ``client``
gives it, and sees no credential.
"""
