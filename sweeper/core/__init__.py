"""The pure core: what a job is, what its controller would judge, and what to do about it.

No I/O and no logging (an import-linter contract); only ``clock.SystemClock`` reads the
clock: every other function takes the instant it judges at and returns values.
"""
