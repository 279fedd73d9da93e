"""The cyclic garbage collector held back while the program loads (why: cli/entry.py).

A module of its own, imported by the entry point and by the commands alike, so that
neither imports the other.
"""

from __future__ import annotations

import gc

__all__ = ["hold_back", "loaded"]

#: Whether :func:`hold_back` turned the collector off (and :func:`loaded` has not yet
#: turned it back on): only then is it turned on again.
_held_back = False

#: The young generation a command runs with (CPython's default is 700): a run keeps most
#: of what it makes to its end (observations, findings, the report's rows), and every
#: young collection walks what was made since the last (docs/benchmarks.md, "The
#: collector in a verify"). The controller runs with the same size, for the same reason
#: (control/young_generation.py).
_YOUNG_GENERATION = 10_000


def hold_back() -> None:
    """Turn the collector off until :func:`loaded`, unless it is off already."""
    global _held_back
    if gc.isenabled():
        gc.disable()
        _held_back = True


def loaded() -> None:
    """The command's modules are in: freeze them out of collections, collect again,
    with a young generation of :data:`_YOUNG_GENERATION` objects.

    Idempotent, and a no-op where :func:`hold_back` did not turn the collector off (the
    CLI's code called from a test or from another program keeps its collector as it was).
    """
    global _held_back
    if _held_back:
        _held_back = False
        gc.freeze()
        young, *older = gc.get_threshold()
        gc.set_threshold(max(young, _YOUNG_GENERATION), *older)
        gc.enable()
