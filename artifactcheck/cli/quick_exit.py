"""The command's end: what must run at exit runs, and the interpreter is not taken apart.

Once a command has returned, its process is done: the report is written, the workers
are reaped, the connections closed. CPython's own exit still clears every module and
frees every object one by one (after a large ``verify``: the observations, the
report's rows, the fetchers' state), for memory the kernel takes back whole a moment
later; what that costs is measured in docs/benchmarks.md, "The end of a run".

:func:`leave` keeps everything a process's end promises and skips only that walk: the
functions registered with :mod:`atexit` run (``logging.shutdown``, multiprocessing's
reaping of its children, ``weakref.finalize``'s cleanups such as a temporary directory
still open), the standard streams are flushed, and the process exits with the command's
status. Whenever that could differ from the interpreter's own exit, it exits the
interpreter's way: a thread other than a daemon is still running (the interpreter
would wait for it), a profiler or tracer is watching (``python -m cProfile`` writes its
profile once the command has returned), the status is not a number, or a stream cannot
be flushed (the interpreter reports that itself).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

__all__ = ["leave"]


def leave(code: object) -> NoReturn:
    """Exit with ``code`` (a :class:`SystemExit`'s), quickly where that is the same exit."""
    status = 0 if code is None else code
    run_exit_functions = getattr(atexit, "_run_exitfuncs", None)  # CPython's, since 2.x
    if (
        not isinstance(status, int)
        or not -(2**31) <= status < 2**31
        or run_exit_functions is None
        or sys.getprofile() is not None  # cProfile, a debugger: they report at the
        or sys.gettrace() is not None  # interpreter's exit, after the command returns
        or any(
            t.is_alive() and not t.daemon and t is not threading.main_thread()
            for t in threading.enumerate()
        )
        or not _flushed()
    ):
        raise SystemExit(code)
    run_exit_functions()  # each once: CPython forgets them as it runs them
    if not _flushed():  # what they wrote: the interpreter's way from here
        raise SystemExit(code)
    os._exit(status)


def _flushed() -> bool:
    """Whether standard output and error took everything written to them."""
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a reader gone, a stream closed
        return False
    return True
