"""The watch engine (the Deployment's mode): one timer per job, fired at its deadline.

:mod:`sweeper.watch.engine` is the main loop and its timers; the threads around it speak to it
through :mod:`sweeper.watch.inbox`: :mod:`sweeper.watch.streams` (list + watch per scope),
:mod:`sweeper.watch.leader` (the Lease loop), :mod:`sweeper.watch.fire` (a due job read again,
judged and acted on) and :mod:`sweeper.watch.resync` (the periodic one-shot pass).
:mod:`sweeper.watch.elector` is the pure Lease algorithm (client-go's);
:mod:`sweeper.watch.servertime` the server clock estimate; :mod:`sweeper.watch.health` the
probe endpoints.
"""
