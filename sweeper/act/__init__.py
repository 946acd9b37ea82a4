"""The executor: a plan applied to the cluster, one write at a time, each with its outcome.

:mod:`sweeper.act.executor` orders a plan's writes and turns each action (touch, fail) into an
outcome, with resourceVersion preconditions; :mod:`sweeper.act.cleanup` deletes a failed job's
pods and services and records the Event after each action. Both engines (one-shot and watch)
run the same executor; ``--dry-run`` wraps the cluster so that nothing it does can write.
"""
