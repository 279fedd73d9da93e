"""The demo's way to the simulator, which is a distribution of its own.

The fake API server, the loopback fleet and the demo's builds are ``artifactcheck-sim``
(``sim/`` in this repository), so the product's wheel carries no simulator. ``artifactcheck
demo`` is the one place the product reaches for it: lazily, here, so that every other
command starts without it, and so that a user who installed only the product is told how
to get it (exit 2, like any other bad invocation) instead of reading a traceback.

A plain lazy import rather than a click entry-point plugin group: the command stays in
``--help`` and the README whether or not the simulator is there (a plugin group would make
``demo`` vanish, and an unknown command says nothing about how to install it), and no
command pays for scanning entry points at start-up.
"""

from __future__ import annotations

from typing import Any

from artifactcheck.cli.common import fail

#: What a user without the simulator is told (both ways install it next to the product).
NOT_INSTALLED = (
    "the demo needs the simulator (the artifactcheck-sim distribution), which is not"
    " installed: run `sh scripts/setup.sh demo` in the artifactcheck repository, or"
    " `pip install -e ./sim` there into this environment"
)


def run_demo(*, instances: int, keep: bool, console: Any, kubernetes: bool) -> int:
    """Run the simulator's demo; exit 2 with :data:`NOT_INSTALLED` when it is missing.

    Only the simulator's own absence is caught: a module missing *inside* an installed
    simulator is a broken install, and its traceback names the culprit.
    """
    try:
        from artifactcheck_sim.demo import run_demo as simulated
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "artifactcheck_sim":
            raise
        fail(NOT_INSTALLED)
    return simulated(instances=instances, keep=keep, console=console, kubernetes=kubernetes)
