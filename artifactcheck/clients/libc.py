"""The C library's allocator, for the long-running controller: two malloc arenas.

glibc gives every thread that allocates its own arena while there are fewer than
eight per core, and memory freed in an arena stays with it for that arena's next
allocations instead of going back to the system. The controller's threads (pod
watches, the Lease, the executor that summarises pages of pods) each got one, and a
rollout's peak stayed spread over them: in the soak (``bench/soak.py``, 1,000 pods, a
rollout that also rebuilds the check) the resident size rose 10% over the rollout
and stayed there while the live objects were flat; with two arenas, 4%
(docs/benchmarks.md). Python threads hold the GIL while they allocate, so more arenas
buy the controller almost nothing.

Written by hand because no library offers it: Python has no binding for
``mallopt``, and this is one call through ctypes. ``MALLOC_ARENA_MAX`` in the
environment, when set, is the operator's choice and wins (glibc has read it already).
Elsewhere (musl, macOS) nothing changes.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["limit_malloc_arenas"]

#: glibc's <malloc.h> M_ARENA_MAX.
M_ARENA_MAX = -8


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap glibc's malloc arenas at ``arenas`` for threads that allocate from now on;
    whether the cap was set (False: not glibc, or ``MALLOC_ARENA_MAX`` is set).

    Call it before the process starts threads: an arena made already stays."""
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # glibc answers 1 on success; musl's mallopt is a stub that answers 0
    return bool(mallopt(M_ARENA_MAX, arenas) == 1)
