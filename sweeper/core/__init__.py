"""The pure core: what a job is, what the operator would judge, and what to do about it.

Nothing in this package does I/O or logs, and only ``sweeper.core.clock.SystemClock`` reads
the clock (the edge hands it to a run, which reads it once per pass): every other function
takes the instant it judges at and returns values (a plan, a patch, a schedule). An
import-linter contract keeps it so (``pyproject.toml``); the unit and property tests
exercise it without a cluster.
"""
