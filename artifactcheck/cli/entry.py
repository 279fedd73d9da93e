"""The console script and ``python -m artifactcheck``: the collector held back while
the program loads.

A one-instance ``verify`` spends most of its life importing (docs/benchmarks.md): by the
time its check starts, about 58,000 objects the collector tracks have been made, nearly
all of them kept for the whole process (modules, classes, functions, pydantic's
validators). The cyclic collector ran 81 times over them as they piled up, and once
more over everything at exit, for nothing it could free. So the collector is off until
the command's modules are loaded; then :func:`~artifactcheck.cli.collector.loaded`
freezes what exists (``gc.freeze``: out of every later collection, the one at exit
included, so a long run or a controller never walks its start-up objects again) and
turns the collector back on with its usual thresholds: 0.201 -> 0.170 s for that
command, paired runs. CPython documents the same pair for a server that forks
(disable early, freeze before forking).

``loaded`` is called where each command starts its work: ``run_quietly`` for the
commands that load their modules on the way (``verify``, ``investigate``), the
group's callback for every other command (artifactcheck/cli/main.py).

At the other end, the finished command leaves without the interpreter's teardown
(:mod:`artifactcheck.cli.quick_exit`).
"""

from __future__ import annotations

from artifactcheck.cli.collector import hold_back
from artifactcheck.cli.quick_exit import leave

__all__ = ["run"]


def run() -> None:
    """The ``artifactcheck`` command: click ends every command with ``SystemExit``."""
    hold_back()
    from artifactcheck.cli.main import main

    try:
        main()
    except SystemExit as done:
        leave(done.code)
