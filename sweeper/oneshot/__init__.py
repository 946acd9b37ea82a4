"""The one-shot engine (the CronJob's mode): list, judge, act, report, exit.

``sweeper.oneshot.run`` holds the pass and the ``--every`` grid,
``sweeper.oneshot.readahead`` the next page's prefetch, ``sweeper.oneshot.report``
the text, wide and JSON writers, and ``sweeper.oneshot.ledger`` what a pass keeps for them.
"""
