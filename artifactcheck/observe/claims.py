"""A run's hosts handed out one at a time to whichever observing process is free.

``verify --processes`` once gave each process a fixed share of the hosts. On two busy
cores (the processes, the fleet's own server, the kernel's loopback work) a share's
time moved by a tenth of a second from run to run, so one process often sat idle, or
judged alone at the end, while the other still observed (docs/benchmarks.md,
"Observing processes"). Here every process takes the next host group when it has room
for one, so all of them end within one instance of each other whatever the load.

The hand-out is a pipe written in full before the fork, its write end closed: each
4-byte record is the index of one batch of host groups, and a ``read`` of 4 bytes takes
one record whole (Linux takes every ``read`` of a pipe under the pipe's lock, and the
writes were of whole records), so no two processes ever take the same batch, and an
empty pipe is its end (``read`` returns nothing). The kernel keeps that promise for a
process killed at any moment: no lock in shared memory is left held by a dead worker,
which :class:`multiprocessing.Lock` cannot promise. Why not a ``multiprocessing.Queue``:
its feeder thread (a thread before the fork) and its lock have the same two problems.

Only for a pool of forks (one run's): the pipe is inherited at the fork, under the same
descriptor number.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from typing import Final, Generic, TypeVar

__all__ = ["Claims", "batches"]

T = TypeVar("T")

_RECORD: Final = struct.Struct("=I")
#: Records in a pipe at most: its buffer must hold all of them before the fork, when
#: nobody reads yet (16 pages: the 64 KiB every Linux pipe has, without F_SETPIPE_SZ).
MAX_RECORDS: Final = 64 * 1024 // _RECORD.size


def batches(groups: Sequence[Sequence[T]]) -> list[list[T]]:
    """``groups`` in order, joined into at most :data:`MAX_RECORDS` batches (one group
    each for any fleet up to that many hosts)."""
    per = -(-len(groups) // MAX_RECORDS) if groups else 1
    return [[x for g in groups[i : i + per] for x in g] for i in range(0, len(groups), per)]


class Claims(Generic[T]):
    """The batches of a run, each taken by exactly one process (see the module)."""

    def __init__(self, batches: Sequence[Sequence[T]]) -> None:
        if len(batches) > MAX_RECORDS:
            raise ValueError(f"{len(batches)} batches: at most {MAX_RECORDS} fit the pipe")
        self.batches = [list(b) for b in batches]
        read_end, write_end = os.pipe()
        try:
            data = b"".join(_RECORD.pack(i) for i in range(len(self.batches)))
            written = os.write(write_end, data) if data else 0
            if written != len(data):  # pragma: no cover - the pipe's buffer holds them all
                raise OSError(f"wrote {written} of {len(data)} bytes of the hand-out")
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)  # the end of the hand-out is an empty pipe, in every process
        self.fd: int | None = read_end  # not inheritable by a program run (os.pipe)

    def take(self) -> list[T] | None:
        """The next batch, or None when every batch is taken (or the hand-out closed)."""
        if self.fd is None:
            return None
        record = os.read(self.fd, _RECORD.size)
        if len(record) != _RECORD.size:  # empty: all taken (never a part: whole writes)
            return None
        return self.batches[_RECORD.unpack(record)[0]]

    def close(self) -> None:
        """Close this process's end (each process closes its own)."""
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)
