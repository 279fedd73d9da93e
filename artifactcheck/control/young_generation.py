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
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_GENERATION", "young_generation"]

#: Objects allocated (net) before a young collection; CPython's default is 700.
YOUNG_GENERATION = 10_000


@contextmanager
def young_generation(size: int = YOUNG_GENERATION) -> Iterator[None]:
    """The young generation at ``size`` objects for the block, as it was after it; the
    older generations' thresholds are kept."""
    before = gc.get_threshold()
    gc.set_threshold(max(size, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
