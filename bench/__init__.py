"""Benchmarks of artifactcheck at fleet scale; not part of the test suite.

Run everything with ``bench/run.sh`` (or ``python -m bench``); each benchmark also runs
alone (``python -m bench.sampled``, ``bench.throughput``, ``bench.controller``,
``bench.cache``). Every benchmark is bounded in time, targets loopback addresses only,
and stops the processes it started, by PID. ``docs/benchmarks.md`` has the figures.
"""
