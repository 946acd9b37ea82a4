"""Benchmarks of the sweeper against the real local control plane (not shipped, not in CI).

Run them from the repository root as modules, e.g. ``.venv/bin/python -m benchmarks.scale
--jobs 1000 --jobs 10000``; docs/benchmarks.md has the commands and the figures of a real run.
Each script starts its own ``devcluster.ControlPlane``, prints its figures one per line as
``key: value``, and stops what it started.
"""
