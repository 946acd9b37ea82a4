"""The watch engine (the Deployment's mode): one timer per job, fired at its deadline.

:mod:`sweeper.watch.engine` is the main loop; :mod:`sweeper.watch.elector` the pure Lease
algorithm (client-go's); :mod:`sweeper.watch.servertime` the server clock estimate; and
:mod:`sweeper.watch.health` the probe endpoints.
"""
