"""One HTTP/1.1 client connection on asyncio: the bytes received, and reading them.

:class:`Connection` is the asyncio protocol under :mod:`artifactcheck.fetch.http1`:
it queues what the socket delivers without copying, pauses the socket at
:data:`HIGH_WATER` unread bytes, and condemns itself when bytes arrive while no request
is outstanding (HTTP/1.1 has no request ids: an early response would be taken as the
answer to the next request). Errors are the lean transport errors of
:mod:`artifactcheck.fetch.error_kinds`, named as httpcore's for the same events.
"""

from __future__ import annotations

import asyncio
import math
import select
from collections import deque
from collections.abc import Callable
from typing import Any, Final, cast

from artifactcheck.fetch.error_kinds import (
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    RequestTimeout,
    TransportError,
)

__all__ = [
    "HIGH_WATER",
    "MAX_LINE",
    "READ_SIZE",
    "STREAM_READ_SIZE",
    "Connection",
    "closed_error",
    "pending",
    "take_line",
    "read_line",
]

MAX_LINE: Final = 4 * 1024  # largest chunk-size or trailer line accepted
HIGH_WATER: Final = 1024 * 1024  # received but unread bytes before the socket is paused

#: The most one read of the socket asks for, for a response's head and a small body.
#: asyncio's socket transport reads into a new bytes object of its ``max_size`` (256 KiB)
#: each time, and the C library serves an allocation that large with a fresh ``mmap``
#: (glibc's threshold is 128 KiB, and so is musl's); a read that brings less (a whole
#: 50 KB response) is shrunk with ``mremap`` and freed with ``munmap``, and such a free
#: never raises glibc's threshold: every response cost a mapping and a page fault for
#: each page the kernel filled. Below the threshold the allocation comes from the heap,
#: whose pages stay mapped (docs/benchmarks.md, "One read, no mapping").
READ_SIZE: Final = 96 * 1024

#: The most one read asks for while a larger body streams (asyncio's own size): fewer
#: pieces through every layer above. Those reads come back full, and glibc raises its
#: threshold once it frees a full one, so they stop being mapped after the first.
STREAM_READ_SIZE: Final = 256 * 1024


def pending(transport: asyncio.BaseTransport) -> bool:
    """True when the socket under ``transport`` is readable: bytes (or a FIN, or an
    error) arrived that asyncio has not delivered yet.

    An idle keep-alive connection must be silent; a response the server sent before we
    asked would otherwise be read as the answer to our next request.
    """
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        fd = sock.fileno()
    except (OSError, ValueError):
        return True
    if fd < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - no poll()
    return bool(readable)


def _poller_of(transport: asyncio.BaseTransport) -> Callable[[int], list[tuple[int, int]]] | None:
    """The ``poll`` of a poll object watching the socket under ``transport`` for what
    :func:`pending` looks for, or None (no socket, no ``poll()``: :func:`pending` then).

    Made once per connection: a connection is asked whether it is still silent on
    every reuse, and the socket lookup and a new poll object each time cost more than
    the system call.
    """
    sock = transport.get_extra_info("socket")
    if sock is None or not hasattr(select, "poll"):
        return None
    try:
        fd = sock.fileno()
    except (OSError, ValueError):
        return None
    if fd < 0:
        return None
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return poller.poll


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: received bytes are queued as they arrive (no copy).

    The first queued piece is consumed through an offset, so taking many small pieces
    (1-byte chunks) costs their size, not a copy of what is left each time. While the
    connection sits idle in the pool no request is outstanding: any byte arriving then
    is a response nobody asked for, and it condemns the connection unread.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, key: tuple[str, str, int, str | None]):
        self.loop = loop
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.offset = 0  # bytes of chunks[0] already taken
        self.size = 0  # bytes queued in chunks, not yet taken
        self.idle = False  # pooled, no request outstanding
        self.condemned = False  # received bytes while idle: never reused
        self.eof = False
        self.error: BaseException | None = None
        self.idle_since = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self.lost = False  # connection_lost was called: the socket is closed
        self._poll: Callable[[int], list[tuple[int, int]]] | None = None
        # The read timeout: the current wait's deadline on the loop's clock, and the one
        # timer armed for it (or for an earlier wait's deadline, re-armed when it fires).
        self._deadline = math.inf
        self._timer: asyncio.TimerHandle | None = None
        # The whole request's deadline on the loop's clock (inf: none), set for each
        # request: no wait outlives it, and the same timer enforces it.
        self.request_deadline = math.inf

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self._poll = _poller_of(transport)
        self.read_in(READ_SIZE)

    def data_received(self, data: bytes) -> None:
        if self.idle or self.condemned:  # unsolicited: never parsed, never reused
            self.condemned = True
            self.close()
            return
        self.chunks.append(data)
        self.size += len(data)
        if self.size > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self.lost = True
        self._wake()

    def read_in(self, size: int) -> None:
        """Ask the socket for at most ``size`` bytes a read (:data:`READ_SIZE` or
        :data:`STREAM_READ_SIZE`), where the transport takes a size: asyncio's socket
        transport does; its TLS transport (also after a proxy's tunnel is upgraded)
        reads through the TLS layer's own buffer, allocated once per connection."""
        transport = self.transport
        if transport is not None and hasattr(transport, "max_size"):
            cast(Any, transport).max_size = size

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- reading
    @property
    def clean(self) -> bool:
        """Open, nothing queued, nothing unsolicited seen: what is known without a
        system call. Enough to pool a connection whose response was read completely;
        :attr:`usable` polls the socket when it is taken out again, right before reuse."""
        transport = self.transport
        return not (
            self.eof or self.condemned or self.chunks or transport is None or transport.is_closing()
        )

    @property
    def usable(self) -> bool:
        """Open and silent, also at the socket: safe to send the next request on.

        The socket is polled last, once the transport is known open (so its descriptor
        is still this connection's): through the poll object made when it connected.
        """
        if not self.clean:
            return False
        transport = self.transport
        assert transport is not None
        poll = self._poll
        return not (poll(0) if poll is not None else pending(transport))

    async def wait(self, timeout: float | None) -> None:
        """Wait until more bytes arrive or the peer closes; ReadTimeout after ``timeout``,
        RequestTimeout at :attr:`request_deadline` when that comes first.

        Each wait has its own deadline, but not its own timer: one timer per connection
        is armed for the earliest deadline still ahead, and when it fires it fails the
        wait whose deadline has come or re-arms for the current one. A body read in many
        pieces, and a connection reused within the timeout, arm no timer per wait (a
        timer made, pushed on the loop's heap and cancelled was most of a wait's cost).
        The request's deadline is the bound of every wait, so a body dripping in within
        each read timeout still ends with its request, with no timer of its own either.
        A wait that starts past it fails at once: bytes arriving on every turn of the
        loop would otherwise keep winning the race against the timer.
        """
        loop = self.loop
        limit = self.request_deadline
        if limit != math.inf:
            now = loop.time()
            if now >= limit:
                raise RequestTimeout("the request's deadline passed")
            deadline = limit if timeout is None else now + timeout
            if deadline > limit:
                deadline = limit
        elif timeout is None:
            deadline = math.inf
        else:
            deadline = loop.time() + timeout
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        waiter = self._waiter = loop.create_future()
        self._deadline = deadline
        if deadline != math.inf:
            timer = self._timer
            if timer is None or timer.when() > deadline:
                if timer is not None:
                    timer.cancel()
                self._timer = loop.call_at(deadline, self._expire, deadline)
        try:
            await waiter
        finally:
            self._waiter = None

    def _expire(self, due: float) -> None:
        """The timer armed for ``due`` fired: fail the wait whose deadline that is (the
        request's, or the wait's own read timeout), or re-arm for the current wait's
        later one (none when nobody waits)."""
        self._timer = None
        waiter = self._waiter
        deadline = self._deadline
        if waiter is None or waiter.done() or deadline == math.inf:
            return
        if deadline <= due:
            if deadline >= self.request_deadline:
                waiter.set_exception(RequestTimeout("the request's deadline passed"))
            else:
                waiter.set_exception(ReadTimeout("timed out waiting for data"))
        else:
            self._timer = self.loop.call_at(deadline, self._expire, deadline)

    def take(self, limit: int) -> bytes:
        """Up to ``limit`` queued bytes, whole received pieces when they fit.

        Only the bytes returned are copied: the rest of the first piece stays where it
        is, behind :attr:`offset`.
        """
        first = self.chunks[0]
        start = self.offset
        if len(first) - start <= limit:
            self.chunks.popleft()
            self.offset = 0
            piece = first[start:] if start else first
        else:
            end = start + limit
            piece = first[start:end]
            self.offset = end
        self.size -= len(piece)
        return piece

    def find(self, sep: bytes, limit: int) -> int:
        """Index of ``sep`` in the queued bytes (from :attr:`offset`), merging leading
        pieces; -1 if absent yet."""
        chunks = self.chunks
        if not chunks:
            return -1
        first, start = chunks[0], self.offset
        index = first.find(sep, start, start + limit + len(sep))
        if index >= 0:
            return index - start
        while len(chunks) > 1 and len(first) - start <= limit:
            rest = len(first) - start
            merged = first[start:] + chunks[1]
            chunks.popleft()
            chunks[0] = merged
            self.offset = start = 0
            first = merged
            index = merged.find(sep, max(0, rest - len(sep) + 1), limit + len(sep))
            if index >= 0:
                return index
        return -1

    def close(self) -> None:
        # abort, not close: a connection we give up is never written to again, and a TLS
        # close (close_notify) finishes only when the peer answers, so a graceful close
        # can outlive the event loop of the run (an fd held until GC, a ResourceWarning)
        if self.transport is not None:
            self.transport.abort()
        self.eof = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def closed_error(conn: Connection, what: str) -> TransportError:
    """The error for a connection that ended ``what`` (reset vs orderly close)."""
    if conn.error is not None:
        err: TransportError = ReadError(str(conn.error) or type(conn.error).__name__)
        err.__cause__ = conn.error
        return err
    return RemoteProtocolError(what)


def take_line(conn: Connection, what: str) -> bytes | None:
    """The next CRLF-terminated line already received (without CRLF), None if not yet."""
    index = conn.find(b"\r\n", MAX_LINE)
    if index >= 0:
        return conn.take(index + 2)[:-2]
    if conn.size > MAX_LINE:
        raise RemoteProtocolError(f"{what} longer than {MAX_LINE} bytes")
    if conn.eof:
        raise closed_error(conn, f"connection closed while reading the {what}")
    return None


async def read_line(conn: Connection, timeout: float | None, what: str) -> bytes:
    while (text := take_line(conn, what)) is None:
        await conn.wait(timeout)
    return text
