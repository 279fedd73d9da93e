"""The local file system as the tool writes to it: why a file cannot be written.

One rule for every file the tool writes (reports, the pins file), checked before any
work is done, so a typo'd path is a clear error up front, not a lost run at the end.
"""

from __future__ import annotations

import os
from pathlib import Path


def unwritable(path: Path, *, replaced: bool = False) -> str | None:
    """Why ``path`` cannot be written, or None (checked without creating anything).

    ``replaced``: the file is written beside itself and renamed over (never truncated,
    as the pins file is), so its directory must be writable even when the file exists;
    otherwise it is written in place (a report) and a writable file is enough.
    """
    if path.is_dir():
        return "is a directory"
    parent = path.parent
    if not parent.is_dir():
        return f"directory {parent} does not exist"
    exists = path.exists()
    if exists and not os.access(path, os.W_OK):
        return "is not writable"
    if exists and not replaced:
        return None
    if os.access(parent, os.W_OK | os.X_OK):
        return None
    why = " (the file is replaced, never truncated)" if replaced else ""
    return f"directory {parent} is not writable{why}"
