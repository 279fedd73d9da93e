"""The cyclic collector's young generation while the controller runs.

A controller's heap holds what it keeps between cycles (the informer's pods, the last
verdicts, the judge's cache): hundreds of thousands of long-lived objects at thousands
of pods. With CPython's default threshold of 700, a cycle's allocations trigger a full
collection every 70,000 objects or so, and each walks that whole heap for the little
cyclic garbage asyncio leaves. A young generation of 10,000 makes the full collections
about fourteen times rarer, and the young ones too; cyclic garbage is still collected,
later, and the heap grows by at most the one larger generation of young objects.
(docs/benchmarks.md, "The collector during the first cycle", has the measurements.)
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_GENERATION", "young_generation"]

#: Objects allocated (net) before a young collection; CPython's default is 700.
YOUNG_GENERATION = 10_000

_lock = threading.Lock()
#: Controllers inside :func:`young_generation` now, and the thresholds before the first.
_inside = 0
_before: tuple[int, int, int] | None = None


@contextmanager
def young_generation(size: int = YOUNG_GENERATION) -> Iterator[None]:
    """The young generation at ``size`` objects (at least) while any controller of the
    process runs in this block; the thresholds the process had before the first one
    are back when the last one leaves, whatever order they stop in."""
    global _inside, _before
    with _lock:
        if _inside == 0:
            _before = gc.get_threshold()
            gc.set_threshold(max(size, _before[0]), *_before[1:])
        _inside += 1
    try:
        yield
    finally:
        with _lock:
            _inside -= 1
            if _inside == 0 and _before is not None:
                gc.set_threshold(*_before)
                _before = None
