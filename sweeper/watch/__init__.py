"""The watch engine (the Deployment's mode): one timer per job, fired at its deadline.

``sweeper.watch.engine`` is the main loop and its timers; the threads around it speak to it
through ``sweeper.watch.inbox``: ``sweeper.watch.streams`` (list + watch per scope),
``sweeper.watch.leader`` (the Lease loop), ``sweeper.watch.fire`` (a due job read again,
judged and acted on) and ``sweeper.watch.resync`` (the periodic one-shot pass).
``sweeper.watch.elector`` is the pure Lease algorithm (client-go's);
``sweeper.watch.servertime`` the server clock estimate; ``sweeper.watch.health`` the
probe endpoints.
"""
