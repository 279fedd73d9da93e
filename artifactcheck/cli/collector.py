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


def hold_back() -> None:
    """Turn the collector off until :func:`loaded`, unless it is off already."""
    global _held_back
    if gc.isenabled():
        gc.disable()
        _held_back = True


def loaded() -> None:
    """The command's modules are in: freeze them out of collections, collect again.

    Idempotent, and a no-op where :func:`hold_back` did not turn the collector off (the
    CLI's code called from a test or from another program keeps its collector as it was).
    """
    global _held_back
    if _held_back:
        _held_back = False
        gc.freeze()
        gc.enable()
