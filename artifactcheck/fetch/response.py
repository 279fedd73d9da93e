"""Reading one response: its status and evidence, and its body hashed under a cap.

A body is hashed (and, for small documents, kept) while it streams, after its content
codings are undone piece by piece, so the byte cap holds for the decoded bytes: a
gzip bomb stops at the cap. Whatever arrives, the outcome is an :class:`Attempt`
with ``error_kind`` set, never an exception of ours; the transport's exceptions
propagate, for :func:`artifactcheck.fetch.error_kinds.classify`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from concurrent.futures import Executor, Future
from typing import Any, Final, Protocol, cast

from artifactcheck.fetch.copies import KnownBodies
from artifactcheck.fetch.decoders import DecodeError, Decoder, beyond_stored, decoder_for
from artifactcheck.fetch.error_kinds import RequestTimeout, classified
from artifactcheck.fetch.headers import Headers, content_length, evidence, kept_once
from artifactcheck.fetch.http1 import Reply
from artifactcheck.fetch.stats import FetchStats
from artifactcheck.model.errors import ErrorKind
from artifactcheck.model.records import MutableRecord, field

__all__ = ["REDIRECTS", "Attempt", "Response", "drain", "read"]

REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_DRAIN_LIMIT = 64 * 1024  # read at most this much of an error body to keep the connection
#: Bytes of a body hashed on the event loop; the rest goes to the hashing thread.
OFFLOAD_AFTER: Final = 1024 * 1024
_BACKLOG = 16  # pieces (up to 256 KB each) handed to the hashing thread, not hashed yet
#: Each body's hashers made by their own constructors: ``hashlib.new`` finds the
#: algorithm by name through a Python wrapper on every call, twice the cost of a small
#: body's hasher. Any other name still goes through it.
_CONSTRUCTORS: Final[dict[str, Any]] = {
    "sha256": hashlib.sha256,
    "sha384": hashlib.sha384,
    "sha512": hashlib.sha512,
    "sha1": hashlib.sha1,
    "md5": hashlib.md5,
}


class Response(Protocol):
    """What is read of a response: an ``httpx.Response`` from any transport, or the
    :class:`~artifactcheck.fetch.http1.Reply` of the "http1" transport's lean path."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Headers: ...
    @property
    def is_stream_consumed(self) -> bool: ...
    @property
    def content(self) -> bytes: ...
    def aiter_raw(self) -> AsyncIterator[bytes]: ...
    async def aclose(self) -> None: ...


class Attempt(MutableRecord):
    """What one request (one hop, one try) produced."""

    url: str
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)
    size: int | None = None
    body: bytes | None = None
    content_encoding: str | None = None
    error: str | None = None
    error_kind: ErrorKind | None = None
    location: str | None = None
    elapsed: float = 0.0

    def fail(self, kind: ErrorKind, error: str) -> Attempt:
        """This attempt, failed with ``kind`` and ``error``."""
        self.error_kind, self.error = kind, error
        return self

    @property
    def retry_reason(self) -> str | None:
        """Why this attempt deserves a retry, None when it does not."""
        if self.error_kind is not None and self.error_kind.retried:
            return f"{self.error_kind}: {self.error}"
        if self.error is None and self.status is not None:
            if self.status == 429 or self.status >= 500:
                return f"HTTP {self.status}"
        return None


def _response_problem(response: Response) -> str | None:
    """Why a response from any transport cannot be read as content, None when it can.

    A status outside 100..599, or a transfer coding other than one final ``chunked``
    (the bytes handed over would still be encoded, and hashed as if they were the file).
    A 1xx as the final response (a ``101`` upgrade nobody asked for): what follows it is
    another protocol, not a body. ``Transfer-Encoding`` together with ``Content-Length``
    from a transport other than "http1" (the request-smuggling shape, RFC 9112 6.3):
    httpx's pool reads it as chunked but then reuses the connection, so it is refused
    unread, which closes the connection; "http1" reads it as chunked and never pools it.
    """
    status = response.status_code
    if not 100 <= status <= 599:
        return f"invalid status code {status}"
    if status < 200:
        return f"status {status} as the final response (no upgrade was asked for)"
    codings = [
        c.strip().lower()
        for value in response.headers.get_list("transfer-encoding")
        for c in value.split(",")
        if c.strip()
    ]
    if codings and codings != ["chunked"]:
        return f"unsupported Transfer-Encoding {', '.join(codings)[:80]!r}"
    if (
        codings
        and response.headers.get("content-length") is not None
        and not isinstance(response, Reply)
    ):
        return "Transfer-Encoding together with Content-Length (a message framed two ways)"
    return None


def _chunked(response: Response) -> bool:
    """Whether the body is framed by chunked transfer coding (then no Content-Length holds)."""
    return bool(response.headers.get_list("transfer-encoding"))


class _Wire:
    """The body as it comes off the wire, counted (before decoding)."""

    __slots__ = ("_response", "_stats", "read")

    def __init__(self, response: Response, stats: FetchStats | None) -> None:
        self._response = response
        self._stats = stats
        self.read = 0

    def source(self) -> AsyncGenerator[bytes, None]:
        """The response's own stream of raw chunks, not counted: whoever reads it counts
        (:meth:`counted`). An async generator, closed by the caller."""
        response = self._response
        if response.is_stream_consumed:  # an injected transport that pre-read the body
            return _once(response.content)
        return cast(AsyncGenerator[bytes, None], response.aiter_raw())

    def counted(self, size: int) -> None:
        """Count ``size`` bytes read off the wire (those of :meth:`source`)."""
        self.read += size
        if self._stats is not None:
            self._stats.bytes_read += size

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """The raw chunks, counted; an async generator, closed by the caller."""
        raw = self.source()
        async with contextlib.aclosing(raw):
            async for chunk in raw:
                self.counted(len(chunk))
                yield chunk

    async def decoded(self, decoder: Decoder) -> AsyncGenerator[bytes, None]:
        """The decoded pieces, the decoder's last ones included."""
        async with contextlib.aclosing(self.chunks()) as chunks:
            async for chunk in chunks:
                for piece in decoder.feed(chunk):
                    yield piece
        for piece in decoder.flush():
            yield piece


def _update(hashers: list[Any], piece: bytes) -> None:
    for hasher in hashers:
        hasher.update(piece)


class _Offload:
    """The pieces of one body hashed on a hashing thread, in order, with at most
    ``_BACKLOG`` of them waiting (memory stays flat when hashing is the slower side).

    ``hashlib`` releases the GIL while it hashes a buffer of more than 2 KiB, so pieces
    hashed there use the second core while the event loop reads the next ones. The
    executor must have ONE worker, so the pieces of a body are hashed in their order.
    """

    __slots__ = ("_executor", "_hashers", "_pending")

    def __init__(self, executor: Executor, hashers: list[Any]) -> None:
        self._executor = executor
        self._hashers = hashers
        self._pending: deque[Future[None]] = deque()

    def submit(self, piece: bytes) -> Future[None] | None:
        """Queue ``piece``; a future to wait for when the backlog is full, else None."""
        pending = self._pending
        pending.append(self._executor.submit(_update, self._hashers, piece))
        while pending and pending[0].done():
            pending.popleft()
        return pending.popleft() if len(pending) > _BACKLOG else None

    async def finish(self, deadline: float | None) -> None:
        """Wait until every piece queued is hashed (one thread: the last one is last)."""
        if self._pending:
            await hashed(self._pending[-1], deadline)
            self._pending.clear()


async def hashed(future: Future[None], deadline: float | None) -> None:
    """Wait for a piece handed to the hashing thread, until the request's ``deadline``
    on the loop's clock (None: the caller's own ``asyncio.timeout`` bounds it).

    The connection's timer bounds only waits for bytes; the hashing thread is another
    wait (behind other bodies' pieces), so it keeps an ``asyncio.timeout``: only bodies
    past :data:`OFFLOAD_AFTER` come here, a few times per body at most.
    """
    if deadline is None:
        await asyncio.wrap_future(future)
        return
    bound = asyncio.timeout_at(deadline)
    try:
        async with bound:
            await asyncio.wrap_future(future)
    except TimeoutError as exc:
        if bound.expired():
            raise RequestTimeout("the request's deadline passed while hashing") from exc
        raise


def _new_hasher(name: str) -> Any:
    constructor = _CONSTRUCTORS.get(name)
    return constructor() if constructor is not None else hashlib.new(name)


def _digests(algorithms: tuple[str, ...], data: bytes) -> dict[str, str]:
    """The hex digests of a body taken whole."""
    out = {}
    for name in algorithms:
        hasher = _new_hasher(name)
        hasher.update(data)
        out[name] = kept_once(hasher.hexdigest())
    return out


async def _once(content: bytes) -> AsyncGenerator[bytes, None]:
    yield content


async def read(
    response: Response,
    url: str,
    *,
    cap: int,
    algorithms: tuple[str, ...],
    keep_body: bool,
    stats: FetchStats,
    hashing: Executor | None = None,
    stored: str | None = None,
    deadline: float | None = None,
    known: KnownBodies | None = None,
) -> Attempt:
    """Hash (and keep, for documents) the decoded body piece by piece under the cap.

    With ``hashing`` (an executor with one worker thread), the bytes of a body past
    :data:`OFFLOAD_AFTER` are hashed there, while the next pieces are read. ``stored``:
    the coding the file is stored in, whose label alone is not undone
    (:func:`~artifactcheck.fetch.decoders.beyond_stored`). ``deadline``: the request's,
    on the loop's clock, for the waits on the hashing thread (RequestTimeout); the
    transport bounds the waits for bytes. ``known``: the run's bodies hashed already; a
    small body equal byte for byte to one of them reuses its digests
    (:mod:`artifactcheck.fetch.copies`).
    """
    status = response.status_code
    result = Attempt(url, status=status, headers=evidence(response.headers))
    problem = _response_problem(response)
    if problem is not None:  # the "http1" transport refuses these itself
        return result.fail(ErrorKind.PROTOCOL, f"invalid HTTP response: {problem}")
    if not 200 <= status < 300:
        if status in REDIRECTS and response.headers.get("location"):
            result.location = response.headers["location"]
        await drain(response)
        return result

    header = response.headers.get("content-encoding")
    beyond = beyond_stored(header, stored) if stored is not None else None
    try:  # a file labelled with the coding it is stored in: undone down to its bytes
        decoder, encoding = decoder_for(header if beyond is None else beyond)
    except DecodeError as exc:
        return result.fail(exc.kind, str(exc))
    result.content_encoding = (
        encoding if beyond is None else ", ".join(filter(None, [stored, beyond]))
    )
    # A 204 has no body and a chunked body no length, whatever Content-Length says
    # (RFC 9112 6.3): read as a promise, it made a complete response "truncated".
    declared = None if status == 204 or _chunked(response) else content_length(response.headers)
    if declared is not None and encoding is None and declared > cap:
        message = f"Content-Length {declared} is over the cap of {cap} bytes; not read"
        return result.fail(ErrorKind.TOO_LARGE, message)

    body = bytearray() if keep_body else None
    wire = _Wire(response, stats)
    size = 0
    hashes: dict[str, str] | None = None
    # identity (no content coding): the response's own stream, its pieces counted here.
    # Every piece of every body passes this loop, and each generator layer between the
    # connection and the hashers costs a resumption per piece and its own closing.
    identity = encoding is None
    # A small identity body received with its head (most files of a fleet) is taken
    # at once: no stream to open, iterate and close; at most the cap, and not past
    # OFFLOAD_AFTER, so no piece of it is over the cap or for the hashing thread.
    whole = (
        response.stream.buffered(min(cap, OFFLOAD_AFTER))
        if identity and type(response) is Reply
        else None
    )
    if whole is not None:
        wire.counted(len(whole))
        size = len(whole)
        hashes = known.digests(url, algorithms, whole) if known is not None else None
        if hashes is not None:
            stats.hashes_reused += 1
        else:
            hashes = _digests(algorithms, whole)
            if known is not None:
                known.keep(url, algorithms, whole, hashes)
        if body is not None:
            body += whole
    else:
        hashers = [_new_hasher(name) for name in algorithms]
        offload = _Offload(hashing, hashers) if hashing is not None else None
        stream = wire.source() if identity else wire.decoded(decoder)
        try:
            async with contextlib.aclosing(stream) as pieces:
                async for piece in pieces:
                    if identity:
                        wire.counted(len(piece))
                    size += len(piece)
                    if size > cap:
                        what = f"decoded {encoding} body" if encoding else "body"
                        message = (
                            f"{what} over the cap of {cap} bytes"
                            f" (stopped after {wire.read} bytes read)"
                        )
                        return result.fail(ErrorKind.TOO_LARGE, message)
                    if offload is not None and size > OFFLOAD_AFTER:
                        full = offload.submit(piece)
                        if full is not None:
                            await hashed(full, deadline)
                    else:
                        for hasher in hashers:
                            hasher.update(piece)
                    if body is not None:
                        body += piece
        except DecodeError as exc:
            return result.fail(ErrorKind.DECODE, f"{encoding} body: {exc}")
        if offload is not None:
            await offload.finish(deadline)
        hashes = {
            name: kept_once(h.hexdigest()) for name, h in zip(algorithms, hashers, strict=True)
        }
    if declared is not None and wire.read < declared:
        message = f"body ended after {wire.read} of {declared} bytes (Content-Length)"
        return result.fail(ErrorKind.TRUNCATED, message)
    if not decoder.complete:
        message = f"{encoding} body ended before the end of its compressed stream"
        return result.fail(ErrorKind.TRUNCATED, message)
    result.hashes = hashes
    result.size = size
    result.body = bytes(body) if body is not None else None
    return result


async def drain(response: Response) -> None:
    """Read a small unused body so its kept-alive connection can serve the next GET."""
    declared = content_length(response.headers)
    if declared is not None and declared > _DRAIN_LIMIT:
        return
    wire = _Wire(response, None)
    try:
        async with contextlib.aclosing(wire.chunks()) as chunks:
            async for _ in chunks:
                if wire.read > _DRAIN_LIMIT:
                    return
    except classified():
        return  # the status was observed; the connection is simply not reused
