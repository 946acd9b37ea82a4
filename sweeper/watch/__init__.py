"""The watch engine (the Deployment's mode): one timer per job, fired at its deadline.

``engine`` is the main loop; it builds one ``context.WatchContext`` and hands it to the threads,
which speak to it through the ``inbox``: ``streams`` (list + watch per scope), ``leader`` (the
Lease loop over ``elector``, client-go's algorithm, pure), ``fire`` (a due job read again,
judged and acted on) and ``resync`` (the periodic one-shot pass). ``agenda`` is the book of
jobs, ``servertime`` the server clock estimate, ``health`` the probe endpoints.
"""
