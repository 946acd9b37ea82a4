"""The executor: a plan applied to the cluster, one write at a time, each with its outcome.

Both engines run the same executor; ``--dry-run`` wraps the cluster so that nothing it does
can write.
"""
