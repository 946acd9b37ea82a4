"""The one-shot engine (the CronJob's mode): list, judge, act, report, exit.

:mod:`sweeper.oneshot.run` holds the pass and the ``--every`` grid,
:mod:`sweeper.oneshot.readahead` the next page's prefetch, and :mod:`sweeper.oneshot.report`
the text, wide and JSON writers.
"""
