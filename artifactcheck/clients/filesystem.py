"""The local file system as the tool writes to it: why a file cannot be written, and
writes that never follow a link someone else planted.

One rule for every file the tool writes (reports, the pins file), checked before any
work is done, so a typo'd path is a clear error up front, not a lost run at the end.

Files written beside others (the pins file, its lock, ``FILE.releases/``, a signature
envelope) often sit in a shared directory (a CI workspace, ``/tmp``) where another user
can create names. So a temporary file gets a random name and is created with
``O_CREAT | O_EXCL | O_NOFOLLOW`` (a planted name or link makes the create fail, and the
next random name is tried), the final name is taken by ``rename`` (which replaces a link
itself, never what it points to), and names opened for reading or locking are opened
with ``O_NOFOLLOW``. :func:`tempfile.mkstemp` makes the same kind of file but only under
a path: here the file is made relative to a directory descriptor (``dir_fd``), so a
directory checked once (``FILE.releases`` being a real directory) cannot be swapped for
a link before the write.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
#: Random temporary names tried before giving up (each a fresh 64-bit name).
_TEMP_ATTEMPTS = 16


class LinkRefused(OSError):
    """A name this tool writes, locks or reads beside its files is a symbolic link."""

    def __init__(self, path: Path | str) -> None:
        try:
            points = f" (to {os.readlink(path)})"
        except OSError:
            points = ""
        super().__init__(errno.ELOOP, f"is a symbolic link{points}, never followed", str(path))


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


@contextlib.contextmanager
def directory(path: Path, *, follow: bool = True, create: bool = False) -> Iterator[int]:
    """A descriptor of the directory ``path``, closed on exit.

    ``follow=False``: ``path`` itself must be a real directory, not a link to one
    (LinkRefused); ``create``: made (mode 0o777 less the umask) when missing.
    """
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except NotADirectoryError:
        if not follow and os.path.islink(path):
            raise LinkRefused(path) from None
        raise
    try:
        yield fd
    finally:
        os.close(fd)


def _refuse_link_at(dir_fd: int, name: str, shown: Path) -> None:
    try:
        mode = os.lstat(name, dir_fd=dir_fd).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise LinkRefused(shown)


def replace_at(dir_fd: int, name: str, data: bytes, *, shown: Path) -> None:
    """Write ``data`` as ``name`` in the directory ``dir_fd``, all or nothing.

    A fresh temporary file beside it (random name, ``O_CREAT | O_EXCL | O_NOFOLLOW``) is
    written, fsynced and renamed over ``name``; the directory is fsynced so the rename
    lasts. A ``name`` that is a symbolic link is refused (LinkRefused naming ``shown``):
    renaming over it would not write through it, but the link's maker meant the write
    to land elsewhere, and silently replacing it hides that.
    """
    _refuse_link_at(dir_fd, name, shown)
    fd, tmp = _fresh_temporary(dir_fd, name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    with contextlib.suppress(OSError):  # the rename itself made durable
        os.fsync(dir_fd)


def _fresh_temporary(dir_fd: int, name: str) -> tuple[int, str]:
    """A new file ``.NAME.<random>.tmp`` in ``dir_fd``, created, never opened."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
    for _ in range(_TEMP_ATTEMPTS):
        tmp = f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            return os.open(tmp, flags, 0o666, dir_fd=dir_fd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", name)


def write_atomically(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` through a temporary file beside it (:func:`replace_at`);
    OSError (LinkRefused for a link at ``target``) when it cannot."""
    with directory(target.parent) as fd:
        replace_at(fd, target.name, data, shown=target)


def read_limited(path: Path, limit: int, *, dir_fd: int | None = None) -> bytes:
    """At most ``limit`` bytes of ``path``, opened without following a link at its last
    component (LinkRefused); FileNotFoundError when it is not there."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefused(path) from None
        raise
    with os.fdopen(fd, "rb") as f:
        return f.read(limit)


def is_regular_at(dir_fd: int, name: str) -> bool:
    """``name`` in ``dir_fd`` is a regular file (not a link, not missing)."""
    try:
        return stat.S_ISREG(os.lstat(name, dir_fd=dir_fd).st_mode)
    except FileNotFoundError:
        return False


def open_lock(path: Path) -> int:
    """A descriptor of the lock file ``path`` (created when missing, never through a
    link: LinkRefused), for ``fcntl.flock``."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefused(path) from None
        raise
