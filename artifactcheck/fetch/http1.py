"""A lean HTTP/1.1 client transport on asyncio, also offering the httpx transport API.

Chosen deliberately (docs/http-stacks.md): httpx's own async pool degrades with many
hosts; this transport does what a GET needs and nothing else, at about a tenth of its
CPU per request on a loopback fleet. Its parser is hand-written rather than llhttp
(httptools), which is faster but lets through framing this one refuses. Every byte of
a response is hostile: impossible statuses, oversized numbers, interim responses
without end, transfer codings other than one ``chunked`` and heads or lines over their
limits are refused, never guessed at.

The Fetcher calls :meth:`Http1Transport.exchange` and never imports httpx; httpx is
imported only when httpx's own API is used (:meth:`Http1Transport.handle_async_request`,
under an ``httpx.AsyncClient``), as most of a small check's start-up is imports.
"""

from __future__ import annotations

import asyncio
import math
import re
import ssl
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Final

from artifactcheck.fetch.connection import (
    READ_SIZE,
    STREAM_READ_SIZE,
    Connection,
    closed_error,
    read_line,
    take_line,
)
from artifactcheck.fetch.egress_guard import approved_address
from artifactcheck.fetch.error_kinds import (
    ConnectError,
    ConnectTimeout,
    HeaderRefused,
    ProtocolViolation,
    RemoteProtocolError,
    RequestTimeout,
    UnsupportedProtocol,
)
from artifactcheck.fetch.headers import MAX_DIGITS
from artifactcheck.fetch.tunnel import ProxyEndpoint, refused
from artifactcheck.model.header_rules import FIELD_NAME_BYTES, FIELD_VALUE_BAD_BYTES

if TYPE_CHECKING:
    import httpx

    from artifactcheck.tenancy.egress import Egress

    _TransportBase = httpx.AsyncBaseTransport
else:  # httpx is imported only when httpx's API is used (handle_async_request)
    _TransportBase = object

__all__ = [
    "KEEPALIVE",
    "MAX_HEAD",
    "MAX_INTERIM",
    "Body",
    "Http1Transport",
    "RawHeaders",
    "Reply",
    "framing",
    "header_block",
]

KEEPALIVE: Final = 30.0  # seconds an idle pooled connection is kept
MAX_HEAD: Final = 64 * 1024  # largest response head (and trailers) accepted
MAX_INTERIM: Final = 8  # 1xx responses skipped before the final one
_MERGED = 256 * 1024  # data of consecutive chunks handed on as one piece, at most
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?: ([^\r\n]*))?")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,15}")


class _Held:
    """Chunk data taken off the connection but not handed on yet."""

    __slots__ = ("pieces", "size")

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.size = 0

    def __bool__(self) -> bool:
        return bool(self.pieces)

    def add(self, piece: bytes) -> bool:
        """Hold ``piece``; True once the data held is worth handing on (``_MERGED``)."""
        self.pieces.append(piece)
        self.size += len(piece)
        return self.size >= _MERGED

    def take(self) -> bytes:
        """The data held, as one piece; nothing is held afterwards."""
        pieces = self.pieces
        data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        self.pieces = []
        self.size = 0
        return data


def header_block(raw: list[tuple[bytes, bytes]]) -> bytes:
    """Request header lines, each ended by CRLF, then the empty line's CRLF is the
    caller's; HeaderRefused for a header that would end its line early.

    The last line of defence: whatever validated the configuration, a header that would
    end its line early (and start another) is never written.
    """
    lines = []
    for name, value in raw:
        if not FIELD_NAME_BYTES.fullmatch(name):
            raise HeaderRefused(f"request header name {name[:60]!r} is not a token; not sent")
        if FIELD_VALUE_BAD_BYTES.search(value):
            raise HeaderRefused(
                f"value of request header {name.decode('latin-1')!r} contains CR, LF,"
                " NUL or another control character; not sent"
            )
        lines.append(b"%s: %s\r\n" % (name, value))
    return b"".join(lines)


def _encoding(raw: list[tuple[bytes, bytes]]) -> str:
    """The encoding httpx.Headers would read these headers with (ascii, utf-8, latin-1)."""
    if all(name.isascii() and value.isascii() for name, value in raw):
        return "ascii"
    try:
        for name, value in raw:
            name.decode("utf-8")
            value.decode("utf-8")
    except UnicodeDecodeError:
        return "iso-8859-1"
    return "utf-8"


class RawHeaders:
    """Response headers as received, read as :class:`httpx.Headers` reads them.

    The few lookups a response needs (``get``, ``get_list``, ``[]``, ``multi_items``)
    with httpx's results: names compared lowercase, repeated values joined with ", ",
    values decoded as ascii, else utf-8, else latin-1 (for all headers alike).

    Every response is looked up five or six times (evidence, framing, coding, length),
    mostly for names it does not carry, so the values are indexed by name once, and a
    missing name is a dictionary miss, not a scan of every header and a ``KeyError``.
    """

    __slots__ = ("_index", "_items", "raw")

    def __init__(self, raw: list[tuple[bytes, bytes]], encoding: str | None = None) -> None:
        """``encoding``: the head's, where the reader already knows it (an all-ASCII
        head is ``"ascii"``); else found from ``raw`` as httpx finds it."""
        self.raw = raw
        if encoding is None:
            encoding = _encoding(raw)
        self._items = items = [
            (name.decode(encoding).lower(), value.decode(encoding)) for name, value in raw
        ]
        index: dict[str, list[str]] = {}
        for name, value in items:
            index.setdefault(name, []).append(value)
        self._index = index

    def multi_items(self) -> list[tuple[str, str]]:
        return list(self._items)

    def get_list(self, key: str, split_commas: bool = False) -> list[str]:
        values = self._index.get(key.lower())
        if values is None:
            return []
        if not split_commas:
            return list(values)
        return [item.strip() for value in values for item in value.split(",")]

    def __getitem__(self, key: str) -> str:
        values = self._index.get(key.lower())
        if values is None:
            raise KeyError(key)
        return ", ".join(values)

    def get(self, key: str, default: Any = None) -> Any:
        values = self._index.get(key.lower())
        return default if values is None else ", ".join(values)


class Reply:
    """The response head :meth:`Http1Transport.exchange` read, and its body stream.

    Read like an ``httpx.Response`` by :func:`artifactcheck.fetch.response.read`.
    """

    __slots__ = ("headers", "http11", "reason", "status_code", "stream")

    is_stream_consumed: Final = False
    content: Final = b""  # never pre-read: the body is :attr:`stream`

    def __init__(
        self, status: int, reason: bytes, headers: RawHeaders, stream: Body, http11: bool
    ) -> None:
        self.status_code = status
        self.reason = reason
        self.headers = headers
        self.stream = stream
        self.http11 = http11

    def aiter_raw(self) -> AsyncIterator[bytes]:
        return self.stream.__aiter__()

    async def aclose(self) -> None:
        await self.stream.aclose()


class Body:
    """A response body read off one connection; back to the pool when read completely."""

    def __init__(
        self,
        pool: Http1Transport,
        conn: Connection,
        *,
        length: int | None,
        chunked: bool,
        reusable: bool,
        timeout: float | None,
    ) -> None:
        self._pool = pool
        self._conn = conn
        self._length = length  # None: until the connection closes (or chunked)
        self._chunked = chunked
        self._reusable = reusable
        self._timeout = timeout
        self._complete = length == 0
        self._closed = False

    def __aiter__(self) -> AsyncIterator[bytes]:
        # The reader's generator itself, not one wrapped in another: every piece of
        # every body passes here, and each generator layer costs a resumption per piece.
        if self._complete:
            return _nothing()
        if self._length is None or self._length - self._conn.size > READ_SIZE:
            self._conn.read_in(STREAM_READ_SIZE)  # a larger body: larger pieces
        return self._chunks() if self._chunked else self._sized()

    def buffered(self, limit: int) -> bytes | None:
        """The whole body at once, when it has a Content-Length of at most ``limit``
        bytes and all of it is received already (a small file arrives with its head);
        else None, and nothing is taken: the body is read through :meth:`__aiter__`.

        Exactly the declared bytes are taken: whatever follows them stays on the
        connection, which then is not pooled (:attr:`Connection.clean`).
        """
        length, conn = self._length, self._conn
        if self._chunked or length is None or length > limit or conn.size < length:
            return None
        self._complete = True
        if length == 0:
            return b""
        piece = conn.take(length)
        if len(piece) == length:
            return piece
        pieces, left = [piece], length - len(piece)
        while left:
            piece = conn.take(left)
            pieces.append(piece)
            left -= len(piece)
        return b"".join(pieces)

    async def _sized(self) -> AsyncIterator[bytes]:
        conn, left, received = self._conn, self._length, 0
        while left is None or left > 0:
            if conn.chunks:
                piece = conn.take(left if left is not None else conn.size)
                received += len(piece)
                if left is not None:
                    left -= len(piece)
                yield piece
            elif conn.eof:
                if left is None and conn.error is None:
                    self._complete = True
                    return  # read-until-close body ended
                raise closed_error(
                    conn,
                    "peer closed connection without sending complete message body "
                    f"(received {received} bytes, expected {self._length})",
                )
            else:
                await conn.wait(self._timeout)
        self._complete = True

    async def _chunks(self) -> AsyncIterator[bytes]:
        """The chunked body's data. Data of consecutive chunks already received is
        handed on as one piece (up to ``_MERGED`` bytes): a body of tiny chunks costs a
        parse per chunk, not a trip through every layer above per chunk. Nothing is
        held back while waiting for the network."""
        conn, timeout = self._conn, self._timeout
        held = _Held()
        while True:
            line = take_line(conn, "chunk size line")
            if line is None:
                if held:
                    yield held.take()
                line = await read_line(conn, timeout, "chunk size line")
            size_text = line.split(b";", 1)[0].strip(b" \t")
            if not _CHUNK_SIZE.fullmatch(size_text):
                raise RemoteProtocolError(f"invalid chunk size {size_text[:20]!r}")
            left = int(size_text, 16)
            if left == 0:
                if held:
                    yield held.take()
                trailers = 0
                while line := await read_line(conn, timeout, "trailer"):
                    trailers += len(line) + 2
                    if trailers > MAX_HEAD:
                        raise ProtocolViolation(f"trailers longer than {MAX_HEAD} bytes")
                self._complete = True
                return
            while left > 0:
                if conn.chunks:
                    piece = conn.take(left)
                    left -= len(piece)
                    if held.add(piece):
                        yield held.take()
                elif conn.eof:
                    raise closed_error(conn, "connection closed in the middle of a chunk")
                else:
                    if held:
                        yield held.take()
                    await conn.wait(timeout)
            end = take_line(conn, "chunk end")
            if end is None:
                if held:
                    yield held.take()
                end = await read_line(conn, timeout, "chunk end")
            if end != b"":
                raise RemoteProtocolError("chunk data longer than its declared size")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._complete and self._reusable:
            self._conn.read_in(READ_SIZE)  # the next response's head, and a small body
            self._pool.release(self._conn)
        else:
            self._conn.close()  # mid-body or not reusable: never pooled


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield  # an async generator that yields nothing


class Http1Transport(_TransportBase):
    """A lean HTTP/1.1 client transport on asyncio protocols, for fleets of many hosts.

    Per request it does what a GET needs and nothing else: one pooled keep-alive
    connection per (scheme, host, port, server name), the request written in one
    send, the response head parsed once, the body streamed as the socket delivers it
    (Content-Length, chunked or until close). Measured (docs/http-stacks.md): httpx's own
    async pool degrades with many hosts. The concurrency
    limits are the Fetcher's semaphores; this pool only keeps at most ``max_idle``
    idle connections (least recently used closed first), each for ``keepalive`` s.
    Errors are the lean transport errors of :mod:`artifactcheck.fetch.error_kinds`, named
    as httpcore's for the same events.

    A pooled connection is reused only while its socket is silent (checked with
    ``poll`` right before reuse, as httpcore does): HTTP/1.1 has no request ids, so a
    response the server sent early would be taken as the answer to the next request.
    With ``egress``, every new connection goes to one address resolved once and
    approved by the policy (see :class:`Fetcher`).

    With ``proxy`` (:mod:`artifactcheck.fetch.tunnel`), every connection goes to that
    HTTP proxy: a tunnel for https, absolute-form requests for http (the caller writes
    the target from :attr:`proxy`); no egress policy then, the caller judges the
    destination.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext,
        keepalive: float = KEEPALIVE,
        max_idle: int = 256,
        egress: Egress | None = None,
        proxy: ProxyEndpoint | None = None,
    ) -> None:
        if proxy is not None and egress is not None:
            raise ValueError("a proxy's connections are not judged by an egress policy")
        self._ssl = ssl_context
        self._egress = egress
        self.proxy = proxy
        self._keepalive = keepalive
        self._max_idle = max_idle
        self._idle: dict[tuple[str, str, int, str | None], list[Connection]] = {}
        self._lru: OrderedDict[Connection, None] = OrderedDict()
        self._closed = False

    def release(self, conn: Connection) -> None:
        """Keep a connection whose response was read completely, if it is still clean.

        Not polled here: bytes that reach the socket while it is idle condemn it
        (:meth:`Connection.data_received`), and :meth:`_checkout` polls it before reuse,
        so one poll per request answers both (a poll here too was a second system call
        per GET that decided nothing the one at reuse does not)."""
        if self._closed or not conn.clean:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        conn.idle = True
        self._idle.setdefault(conn.key, []).append(conn)
        self._lru[conn] = None
        while len(self._lru) > self._max_idle:
            oldest, _ = self._lru.popitem(last=False)
            self._idle[oldest.key].remove(oldest)
            oldest.close()

    def _checkout(self, key: tuple[str, str, int, str | None]) -> Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            self._lru.pop(conn, None)
            if conn.usable and now - conn.idle_since < self._keepalive:
                conn.idle = False
                return conn
            conn.close()
        if idle is not None:
            del self._idle[key]
        return None

    async def _connect(
        self, key: tuple[str, str, int, str | None], timeout: float | None, deadline: float
    ) -> Connection:
        """A new connection for ``key``: connected, TLS and any proxy tunnel set up,
        within ``timeout`` (ConnectTimeout) and the request's ``deadline`` on the loop's
        clock (RequestTimeout when that comes first; inf: none).

        The connection's timer bounds only its waits for bytes; resolving, connecting and
        the TLS handshake are asyncio's, so their bound stays an ``asyncio.timeout``, the
        one the connect timeout needs anyway, set to the earlier of the two.
        """
        scheme, host, port, server_name = key
        loop = asyncio.get_running_loop()
        connect_by = math.inf if timeout is None else loop.time() + timeout
        by_request = deadline <= connect_by and deadline != math.inf
        until = deadline if by_request else connect_by
        bound = asyncio.timeout_at(None if until == math.inf else until)
        proxy = self.proxy
        to_scheme, to_host, to_port = (
            (scheme, host, port) if proxy is None else (proxy.scheme, proxy.host, proxy.port)
        )
        options: dict[str, Any] = {}
        if to_scheme == "https":
            name = server_name or host if proxy is None else proxy.host
            options = {"ssl": self._ssl, "server_hostname": name}
        conn: Connection | None = None
        try:
            async with bound:
                address = to_host
                if self._egress is not None:
                    address = await approved_address(to_host, to_port, self._egress)
                _transport, conn = await loop.create_connection(
                    lambda: Connection(loop, key), address, to_port, **options
                )
                conn.request_deadline = deadline
                if proxy is not None and scheme == "https":
                    await self._tunnel(conn, proxy, server_name)
        except TimeoutError as exc:
            if conn is not None:
                conn.close()
            if by_request and bound.expired():  # not a TimeoutError of the socket's own
                raise RequestTimeout(f"no connection to {to_host}:{to_port} in time") from exc
            raise ConnectTimeout(f"connect to {to_host}:{to_port} timed out") from exc
        except OSError as exc:  # ssl.SSLError is an OSError
            if conn is not None:
                conn.close()
            raise ConnectError(str(exc) or type(exc).__name__) from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        return conn

    async def _tunnel(
        self, conn: Connection, proxy: ProxyEndpoint, server_name: str | None
    ) -> None:
        """Open a ``CONNECT`` tunnel through ``proxy`` on ``conn`` and start TLS with
        the destination inside it (the caller bounds the time taken)."""
        _scheme, host, port, _name = conn.key
        assert conn.transport is not None
        conn.transport.write(proxy.connect_request(host, port))
        status, reason, _headers, _http11, _ascii = await self._read_head(conn, None)
        if not 200 <= status <= 299:
            raise refused(host, port, status, reason)
        if conn.size:  # the destination speaks only after our TLS hello
            raise ProtocolViolation("the proxy sent bytes after its answer to CONNECT")
        loop = asyncio.get_running_loop()
        tls = await loop.start_tls(
            conn.transport, conn, self._ssl, server_hostname=server_name or host
        )
        if tls is None:  # the proxy closed the tunnel during the handshake
            raise ConnectError(f"the proxy closed the tunnel to {host}:{port}")
        conn.transport = tls

    async def __aenter__(self) -> Http1Transport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The httpx transport API over :meth:`exchange` (the Fetcher calls that directly)."""
        if self._closed:
            raise RuntimeError("the transport is closed")
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
        timeouts = request.extensions.get("timeout", {})
        server_name = request.extensions.get("sni_hostname")
        key = (scheme, url.host, url.port or (443 if scheme == "https" else 80), server_name)
        content = request.content  # GETs carry none; a small body is sent as is
        target, extra = url.raw_path, b""
        if self.proxy is not None and scheme == "http":
            target = self.proxy.forwarded_target(scheme, url.netloc, target)
            extra = self.proxy.authorization
        line = b"%s %s HTTP/1.1" % (request.method.encode(), target)
        head = header_block(request.headers.raw) + extra
        payload = line + b"\r\n" + head + b"\r\n" + content
        reply = await self.exchange(
            key,
            payload,
            method=request.method,
            connect_timeout=timeouts.get("connect"),
            read_timeout=timeouts.get("read"),
        )
        import httpx

        return httpx.Response(
            status_code=reply.status_code,
            headers=reply.headers.raw,
            stream=_httpx_stream(reply.stream),
            request=request,
            extensions={
                "http_version": b"HTTP/1.1" if reply.http11 else b"HTTP/1.0",
                "reason_phrase": reply.reason,
            },
        )

    async def exchange(
        self,
        key: tuple[str, str, int, str | None],
        payload: bytes,
        *,
        method: str = "GET",
        connect_timeout: float | None,
        read_timeout: float | None,
        deadline: float | None = None,
    ) -> Reply:
        """Send ``payload`` (a whole request, its head from :func:`header_block`) on a
        connection for ``key`` (scheme, host, port, TLS server name) and read the head
        of the response; its body streams from :attr:`Reply.stream`.

        The lean path under :meth:`handle_async_request`: no ``httpx.Request`` or
        ``httpx.Response`` is built (their URL and header normalisation cost about a
        quarter of the CPU of a small GET), every limit and refusal stays the same.

        ``deadline``, on the loop's clock, bounds the whole request, its body included:
        every wait on the connection ends by then (RequestTimeout), by the connection's
        one timer, so the caller needs no ``asyncio.timeout`` of its own for it.
        """
        if self._closed:
            raise RuntimeError("the transport is closed")
        until = math.inf if deadline is None else deadline
        conn = self._checkout(key)
        if conn is None:
            conn = await self._connect(key, connect_timeout, until)
        else:
            conn.request_deadline = until
        try:
            assert conn.transport is not None
            conn.transport.write(payload)
            for _ in range(MAX_INTERIM + 1):
                status, reason, headers, http11, ascii_head = await self._read_head(
                    conn, read_timeout
                )
                if status >= 200 or status == 101:
                    break  # 1xx interim responses are skipped
            else:  # a stream of 1xx would hold the request until its deadline
                raise ProtocolViolation(f"more than {MAX_INTERIM} interim (1xx) responses")
            if status == 101:
                raise RemoteProtocolError("101 Switching Protocols is not supported")
            length, chunked, reusable = framing(method, status, headers, http11)
        except BaseException:
            conn.close()
            raise
        body = Body(
            self, conn, length=length, chunked=chunked, reusable=reusable, timeout=read_timeout
        )
        encoding = "ascii" if ascii_head else None
        return Reply(status, reason, RawHeaders(headers, encoding), body, http11)

    @staticmethod
    async def _read_head(
        conn: Connection, timeout: float | None
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bool, bool]:
        """(status, reason, header lines, HTTP/1.1, the whole head ASCII) of the next
        response head on ``conn``."""
        while True:
            index = conn.find(b"\r\n\r\n", MAX_HEAD)
            if index >= 0:
                break
            if conn.size > MAX_HEAD:
                raise RemoteProtocolError(f"response head larger than {MAX_HEAD} bytes")
            if conn.eof:
                if conn.size == 0:
                    raise closed_error(conn, "Server disconnected without sending a response.")
                raise closed_error(conn, "connection closed in the middle of the response head")
            await conn.wait(timeout)
        head = conn.take(index + 4)[:-4]
        lines = head.split(b"\r\n")
        match = _STATUS_LINE.fullmatch(lines[0])
        if match is None:
            if lines[0].startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")):  # HTTP, but no status
                raise ProtocolViolation(f"invalid status line {lines[0][:60]!r}")
            raise RemoteProtocolError(f"invalid status line {lines[0][:60]!r}")
        if not 100 <= int(match[2]) <= 599:  # "099" is no interim response to skip
            raise ProtocolViolation(f"invalid status code {match[2].decode()}")
        headers: list[tuple[bytes, bytes]] = []
        token = FIELD_NAME_BYTES.fullmatch  # looked up once per head, not per line
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or not token(name):
                raise RemoteProtocolError(f"invalid header line {line[:60]!r}")
            headers.append((name, value.strip(b" \t")))
        return int(match[2]), match[3] or b"", headers, match[1] == b"1", head.isascii()

    async def aclose(self) -> None:
        self._closed = True
        closing = [conn for conns in self._idle.values() for conn in conns]
        for conn in closing:
            conn.close()
        self._idle.clear()
        self._lru.clear()
        # A TLS close (close_notify) finishes asynchronously: left alone, the socket
        # outlives the event loop of the run (an fd held until GC, a ResourceWarning).
        # A plain TCP close is over after one turn of the loop: only a TLS one is
        # waited for, so a run of plain HTTP ends without a sleep.
        if closing:
            await asyncio.sleep(0)
        deadline = time.monotonic() + 1.0
        while any(not c.lost for c in closing) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in closing:
            if not conn.lost and conn.transport is not None:
                conn.transport.abort()
        await asyncio.sleep(0)  # let the aborted transports run connection_lost


_STREAMS: list[type] = []  # the httpx stream class over Body, made on first use


def _httpx_stream(body: Body) -> httpx.AsyncByteStream:
    """``body`` as an ``httpx.AsyncByteStream`` (httpx.Response reads only those)."""
    if not _STREAMS:
        import httpx

        class _Stream(httpx.AsyncByteStream):
            __slots__ = ("body",)

            def __init__(self, body: Body) -> None:
                self.body = body

            def __aiter__(self) -> AsyncIterator[bytes]:
                return self.body.__aiter__()

            async def aclose(self) -> None:
                await self.body.aclose()

        _STREAMS.append(_Stream)
    stream: httpx.AsyncByteStream = _STREAMS[0](body)
    return stream


def framing(
    method: str, status: int, headers: list[tuple[bytes, bytes]], http11: bool
) -> tuple[int | None, bool, bool]:
    """(Content-Length or None, chunked, connection reusable) per RFC 9112 section 6."""
    lengths: set[bytes] = set()
    codings: list[bytes] = []
    close = not http11
    for name, value in headers:
        lower = name.lower()
        if lower == b"content-length":
            lengths.update(v.strip() for v in value.split(b","))
        elif lower == b"transfer-encoding":
            codings += [c.strip().lower() for c in value.split(b",") if c.strip()]
        elif lower == b"connection":
            tokens = {t.strip().lower() for t in value.split(b",")}
            if b"close" in tokens:
                close = True
            elif b"keep-alive" in tokens and not http11:
                close = False
    if method == "HEAD" or status in (204, 304):
        return 0, False, not close
    if codings:
        # Only "chunked" is undone here. Any other transfer coding (gzip, chunked; a
        # close-delimited gzip; chunked twice) would leave encoded bytes in the body,
        # to be hashed as content: refused, never guessed at.
        if codings != [b"chunked"]:
            listed = b", ".join(codings)[:80].decode("latin-1")
            raise ProtocolViolation(f"unsupported Transfer-Encoding {listed!r}")
        return None, True, not close and not lengths
    if lengths:
        value = next(iter(lengths))
        if len(lengths) != 1 or not value.isdigit() or len(value) > MAX_DIGITS:
            shown = sorted(v[:20] for v in lengths)
            raise ProtocolViolation(f"invalid Content-Length {shown!r}")
        return int(value), False, not close
    return None, False, False  # until close
