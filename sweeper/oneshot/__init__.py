"""The one-shot engine (the CronJob's mode): list, judge, act, report, exit.

``run`` holds the pass and the ``--every`` grid, ``listing`` the lists (read ahead,
``sweeper.k8s.readahead``), ``report`` the text, wide and JSON writers, ``ledger`` what a pass
keeps for them.
"""
