"""Loopback web servers that behave like a fleet of real instances, faults included.

Tests, ``artifactcheck demo`` and the benchmarks need many real HTTP servers (one per
simulated pod, each on its own 127.x.y.z address) that serve real build outputs the
way nginx does (ETag, Cache-Control, Last-Modified) and that can misbehave on demand:
error statuses, hangs, trickles, resets, truncated or lying bodies, redirects, huge
bodies and gzip bombs, flakiness. respx cannot produce most of these: they live in
the socket, not in httpx.

The server is a small HTTP/1.1 implementation on asyncio streams rather than
aiohttp.web, because faults need the raw socket (a reset is an RST, a truncated body
is a FIN after fewer bytes than promised) and connections must be counted where they
are accepted. A :class:`WebFleet` runs any number of :class:`SiteServer` in ONE
background thread and event loop, so synchronous tests and async code can both use it,
and servers record what they received (paths, counts, peak connections, peak requests
in flight) so tests can prove what a client did and did not request.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import hashlib
import http
import ipaddress
import json
import mimetypes
import socket
import ssl
import struct
import threading
import time
import zlib
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self, TypeAlias, TypeVar
from urllib.parse import unquote, urlsplit

from artifactcheck_sim.loop_thread import LoopThread, stop_accepting

__all__ = [
    "Body",
    "Compressed",
    "Delay",
    "Exchange",
    "Flaky",
    "GzipBomb",
    "Handler",
    "Hang",
    "Huge",
    "Received",
    "Redirect",
    "Reset",
    "Site",
    "SiteServer",
    "Status",
    "Trickle",
    "Truncated",
    "WebFleet",
    "WrongLength",
    "loopback_hosts",
]

#: Answers one request by writing to the :class:`Exchange`; every fault is one.
Handler: TypeAlias = Callable[["Exchange"], Awaitable[None]]
T = TypeVar("T")

_CACHE_LIMIT = 8 * 1024 * 1024  # static files up to this size are served from memory
_CHUNK = 256 * 1024
_COMPRESSIBLE = ("text/", "application/javascript", "application/json", "image/svg+xml")


def loopback_hosts(count: int, first: str = "127.0.3.1") -> list[str]:
    """``count`` distinct loopback addresses from ``first``, skipping .0 and .255."""
    out: list[str] = []
    address = ipaddress.IPv4Address(first)
    while len(out) < count:
        if address not in ipaddress.IPv4Network("127.0.0.0/8"):
            raise ValueError(f"ran out of 127.0.0.0/8 addresses after {len(out)}")
        if address.packed[-1] not in (0, 255):
            out.append(str(address))
        address += 1
    return out


def _http_date(second: int) -> str:
    return email.utils.formatdate(second, usegmt=True)


_DATE: list[Any] = [0, ""]  # (second, formatted): one strftime per second, not per request


def _now_date() -> str:
    second = int(time.time())
    if _DATE[0] != second:
        _DATE[:] = [second, _http_date(second)]
    return str(_DATE[1])


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True, slots=True)
class Received:
    """One request as a server received it."""

    method: str
    target: str  # the raw request-target, query included
    path: str  # decoded path, no query
    headers: Mapping[str, str]  # lowercase names
    sni: str | None = None  # TLS server name the client sent, if any

    @property
    def host(self) -> str | None:
        """The Host header."""
        return self.headers.get("host")


def _parse_head(head: bytes, sni: str | None) -> Received | None:
    """A request head as :class:`Received`; None for anything that is not HTTP/1.x."""
    try:
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ")
    except ValueError:
        return None
    if not version.startswith("HTTP/1."):
        return None
    headers: dict[str, str] = {"_version": version}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            return None
        headers[name.strip().lower()] = value.strip()
    path = unquote(urlsplit(target).path) or "/"
    return Received(method.upper(), target, path, headers, sni)


_BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_MAX_HEAD = 64 * 1024


async def _read_head(reader: asyncio.StreamReader, buffer: bytearray) -> bytes | None:
    """The next request head from the connection; None at EOF or on non-HTTP input."""
    while True:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            head = bytes(buffer[: end + 4])
            del buffer[: end + 4]
            return head
        if buffer and not (65 <= buffer[0] <= 90) or len(buffer) > _MAX_HEAD:
            return None  # not a method name: TLS hello, garbage, or an endless head
        data = await reader.read(65536)
        if not data:
            buffer.clear()
            return None
        buffer += data


async def _discard(reader: asyncio.StreamReader, buffer: bytearray, length: int) -> None:
    """Skip a request body."""
    taken = min(length, len(buffer))
    del buffer[:taken]
    if length > taken:
        await reader.readexactly(length - taken)


# --------------------------------------------------------------------------- site


@dataclass(slots=True)
class _File:
    """A static file as served: cached bytes (small files) and nginx-style validators."""

    data: bytes | None  # None: too large to cache, streamed from disk
    path: Path
    size: int
    etag: str
    last_modified: str
    content_type: str
    mtime_ns: int
    gzipped: bytes | None = None


@dataclass(eq=False)
class Site:
    """What one simulated instance serves: a build directory, overrides and faults."""

    root: Path | None = None  # a directory served as static files (a real build output)
    overrides: dict[str, bytes | Handler] = field(default_factory=dict)  # path -> content/fault
    version: str | None = None  # served as JSON {"version": ...} at version_path
    version_path: str = "/version"
    fault: Handler | None = None  # answers every path when set
    headers: dict[str, str] = field(default_factory=dict)  # added to every response
    gzip: Literal["off", "on", "always"] = "off"  # "always" ignores Accept-Encoding
    spa_fallback: bool = False  # nginx try_files $uri /index.html: missing paths -> 200 HTML
    server_header: str = "nginx/1.27.0"
    immutable_prefixes: tuple[str, ...] = ("assets/", "static/", "_next/static/")
    _files: dict[str, _File] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.root is not None:
            self.root = Path(self.root)

    def override_for(self, path: str) -> bytes | Handler | None:
        """The override for a request path, with or without its leading '/'."""
        found = self.overrides.get(path)
        if found is None:
            found = self.overrides.get(path.lstrip("/"))
        return found

    def file_for(self, path: str) -> _File | None:
        """The static file a request path maps to (index for directories), if any."""
        if self.root is None:
            return None
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if ".." in parts or any("\\" in p or "\0" in p for p in parts):
            return None
        if not parts or path.endswith("/"):
            parts.append("index.html")
        key = "/".join(parts)
        candidate = self.root.joinpath(*parts)
        try:
            st = candidate.stat()
        except OSError:
            return None
        if not candidate.is_file():
            return None
        cached = self._files.get(key)
        if cached is not None and cached.mtime_ns == st.st_mtime_ns and cached.size == st.st_size:
            return cached
        data = candidate.read_bytes() if st.st_size <= _CACHE_LIMIT else None
        ctype = mimetypes.guess_type(candidate.name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
            ctype += "; charset=utf-8"
        entry = _File(
            data=data,
            path=candidate,
            size=st.st_size,
            etag=f'"{int(st.st_mtime):x}-{st.st_size:x}"',  # nginx's ETag: mtime-size
            last_modified=_http_date(int(st.st_mtime)),
            content_type=ctype,
            mtime_ns=st.st_mtime_ns,
        )
        self._files[key] = entry
        return entry

    def cache_control(self, path: str) -> str:
        """What nginx configs for hashed builds send: immutable assets, revalidated HTML."""
        if path.lstrip("/").startswith(self.immutable_prefixes):
            return "public, max-age=31536000, immutable"
        return "no-cache"


# --------------------------------------------------------------------------- exchange


class Exchange:
    """One request being answered; handlers and faults write the response through it."""

    def __init__(
        self,
        server: SiteServer,
        request: Received,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.server = server
        self.request = request
        self.reader, self.writer = reader, writer
        self.keep_alive = _wants_keep_alive(request)
        self.aborted = False
        self._chunked = False

    @property
    def site(self) -> Site:
        """The site being served."""
        return self.server.site

    async def send_head(
        self, status: int, headers: Mapping[str, str] | None = None, *, length: int | None
    ) -> None:
        """Write the status line and headers; ``length=None`` means a chunked body."""
        merged: dict[str, tuple[str, str]] = {}
        defaults = {"Server": self.site.server_header, "Date": _now_date()}
        for source in (defaults, self.site.headers, headers or {}):
            for name, value in source.items():
                merged[name.lower()] = (name, value)
        if length is None:
            self._chunked = True
            merged["transfer-encoding"] = ("Transfer-Encoding", "chunked")
        elif "content-length" not in merged:
            merged["content-length"] = ("Content-Length", str(length))
        merged["connection"] = ("Connection", "keep-alive" if self.keep_alive else "close")
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        lines = [f"HTTP/1.1 {status} {reason}"]
        lines.extend(f"{name}: {value}" for name, value in merged.values())
        await self.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    async def write(self, data: bytes) -> None:
        """Write raw bytes and wait for the socket to take them."""
        self.writer.write(data)
        self.server.bytes_sent += len(data)
        await self.writer.drain()

    async def send_body(self, data: bytes) -> None:
        """Write part of the body, framed as a chunk when the head said chunked."""
        if self.request.method == "HEAD" or not data:
            return
        if self._chunked:
            await self.write(b"%x\r\n%s\r\n" % (len(data), data))
        else:
            await self.write(data)

    async def end_body(self) -> None:
        """Finish a chunked body (no-op otherwise)."""
        if self._chunked and self.request.method != "HEAD":
            await self.write(b"0\r\n\r\n")

    async def respond(
        self,
        status: int,
        body: bytes = b"",
        *,
        headers: Mapping[str, str] | None = None,
        content_type: str | None = None,
    ) -> None:
        """Send a whole response with a correct Content-Length."""
        all_headers = dict(headers or {})
        if content_type:
            all_headers.setdefault("Content-Type", content_type)
        await self.send_head(status, all_headers, length=len(body))
        await self.send_body(body)

    def close(self) -> None:
        """Close the connection (FIN) after what was written."""
        self.keep_alive = False
        self.aborted = True
        self.writer.close()

    def reset(self) -> None:
        """Abort the connection with a TCP RST (SO_LINGER 0), as a crashing proxy does."""
        self.keep_alive = False
        self.aborted = True
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    async def wait_for_peer_close(self) -> None:
        """Never answer: read and drop input until the client goes away."""
        self.keep_alive = False
        with contextlib.suppress(ConnectionError, OSError):
            while await self.reader.read(65536):
                pass

    async def serve_default(self) -> None:
        """The site's normal answer for this path, ignoring faults (used by Flaky, Delay)."""
        await self.server.serve_default(self)

    async def serve_with(self, handler: Handler | None) -> None:
        """Answer with ``handler``, or (None) as the site normally would."""
        if handler is not None:
            await handler(self)
        else:
            await self.serve_default()


def _wants_keep_alive(request: Received) -> bool:
    connection = request.headers.get("connection", "").lower()
    if request.headers.get("_version") == "HTTP/1.0":
        return "keep-alive" in connection
    return "close" not in connection


# --------------------------------------------------------------------------- faults


@dataclass(frozen=True)
class Body:
    """A fixed response: status, bytes and headers."""

    data: bytes
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    content_type: str = "application/octet-stream"

    async def __call__(self, ex: Exchange) -> None:
        etag = '"' + hashlib.sha1(self.data).hexdigest()[:16] + '"'  # noqa: S324 - not security
        headers = {"ETag": etag, **self.headers}
        await ex.respond(self.status, self.data, headers=headers, content_type=self.content_type)


@dataclass(frozen=True)
class Status:
    """An error status, e.g. ``Status(404)`` or ``Status(429, retry_after="2")``."""

    code: int
    body: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    retry_after: str | None = None

    async def __call__(self, ex: Exchange) -> None:
        headers = dict(self.headers)
        if self.retry_after is not None:
            headers["Retry-After"] = self.retry_after
        body = self.body if self.body is not None else f"{self.code}\n".encode()
        await ex.respond(self.code, body, headers=headers, content_type="text/plain")


@dataclass(frozen=True)
class Hang:
    """Accept the request and never answer (the client's timeouts must fire)."""

    async def __call__(self, ex: Exchange) -> None:
        await ex.wait_for_peer_close()


@dataclass(frozen=True)
class Trickle:
    """A correct response sent ``chunk`` bytes every ``interval`` seconds (1 byte/s)."""

    body: bytes = b"x" * 64
    interval: float = 1.0
    chunk: int = 1

    async def __call__(self, ex: Exchange) -> None:
        await ex.send_head(200, {"Content-Type": "text/plain"}, length=len(self.body))
        for i in range(0, len(self.body), self.chunk):
            await ex.send_body(self.body[i : i + self.chunk])
            await asyncio.sleep(self.interval)


@dataclass(frozen=True)
class Reset:
    """TCP reset: before any byte (``after=None``) or after ``after`` body bytes."""

    after: int | None = None
    body: bytes = b"x" * 4096

    async def __call__(self, ex: Exchange) -> None:
        if self.after is not None:
            await ex.send_head(200, {"Content-Type": "text/plain"}, length=len(self.body))
            await ex.send_body(self.body[: self.after])
            await asyncio.sleep(0.01)  # let the bytes leave before the RST
        ex.reset()


@dataclass(frozen=True)
class Truncated:
    """Promise ``len(body)`` bytes, send ``sent`` of them, then close the connection."""

    body: bytes
    sent: int

    async def __call__(self, ex: Exchange) -> None:
        await ex.send_head(200, {"Content-Type": "text/plain"}, length=len(self.body))
        await ex.send_body(self.body[: self.sent])
        ex.close()


@dataclass(frozen=True)
class WrongLength:
    """Send ``body`` under a false Content-Length ``declared``.

    Declared shorter: the client reads a prefix (the rest is junk on the connection,
    which is then closed). Declared longer: the connection stays open, silent, as a
    buggy upstream would leave it, so the client's read timeout must fire.
    """

    body: bytes
    declared: int

    async def __call__(self, ex: Exchange) -> None:
        headers = {"Content-Type": "text/plain", "Content-Length": str(self.declared)}
        await ex.send_head(200, headers, length=self.declared)
        await ex.send_body(self.body)
        if self.declared > len(self.body):
            await ex.wait_for_peer_close()
        else:
            ex.close()


@dataclass(frozen=True)
class Redirect:
    """A redirect to ``location`` (absolute or relative)."""

    location: str
    status: int = 302

    async def __call__(self, ex: Exchange) -> None:
        await ex.respond(self.status, b"", headers={"Location": self.location})


@dataclass(frozen=True)
class Huge:
    """A body of ``size`` bytes generated on the fly (a 50 MB "manifest"), never stored.

    ``declare_length=False`` sends it chunked, so only a client that counts while
    streaming can stop it.
    """

    size: int = 50 * 1024 * 1024
    declare_length: bool = True
    content_type: str = "application/json"

    async def __call__(self, ex: Exchange) -> None:
        length = self.size if self.declare_length else None
        await ex.send_head(200, {"Content-Type": self.content_type}, length=length)
        prefix, suffix = b'{"files": {}, "padding": "', b'"}'
        remaining = self.size - len(prefix) - len(suffix)
        await ex.send_body(prefix)
        block = b"x" * _CHUNK
        while remaining > 0:
            piece = block[: min(remaining, _CHUNK)]
            await ex.send_body(piece)
            remaining -= len(piece)
        await ex.send_body(suffix)
        await ex.end_body()


@functools.cache
def _gzip_of_zeros(size: int) -> bytes:
    """Compressed once per size and cached: a 64 MB bomb is ~64 KB on the wire."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1024 * 1024)
    parts = []
    remaining = size
    while remaining > 0:
        parts.append(compressor.compress(block[: min(remaining, len(block))]))
        remaining -= len(block)
    parts.append(compressor.flush())
    return b"".join(parts)


@dataclass(frozen=True)
class GzipBomb:
    """``Content-Encoding: gzip`` of ``decoded_size`` zero bytes (~1000:1), whatever was asked."""

    decoded_size: int = 64 * 1024 * 1024
    content_type: str = "application/javascript"

    async def __call__(self, ex: Exchange) -> None:
        data = _gzip_of_zeros(self.decoded_size)
        headers = {"Content-Type": self.content_type, "Content-Encoding": "gzip"}
        await ex.respond(200, data, headers=headers)


@dataclass(frozen=True)
class Compressed:
    """``body`` compressed with ``encoding`` (gzip/deflate), even when identity was asked."""

    body: bytes
    encoding: Literal["gzip", "deflate"] = "gzip"
    content_type: str = "application/javascript"

    async def __call__(self, ex: Exchange) -> None:
        wbits = 16 + zlib.MAX_WBITS if self.encoding == "gzip" else zlib.MAX_WBITS
        compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
        data = compressor.compress(self.body) + compressor.flush()
        headers = {"Content-Type": self.content_type, "Content-Encoding": self.encoding}
        await ex.respond(200, data, headers=headers)


@dataclass(frozen=True)
class Flaky:
    """Fail ``times`` times with ``fault`` (per server), then answer normally or with ``then``."""

    times: int
    fault: Handler = field(default_factory=lambda: Status(503))
    then: Handler | None = None

    async def __call__(self, ex: Exchange) -> None:
        await ex.serve_with(self.fault if ex.server.bump(self) <= self.times else self.then)


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` before answering normally (or with ``then``)."""

    seconds: float
    then: Handler | None = None

    async def __call__(self, ex: Exchange) -> None:
        await asyncio.sleep(self.seconds)
        await ex.serve_with(self.then)


# --------------------------------------------------------------------------- server


@dataclass(slots=True)
class _Gauge:
    """A count that goes up and down (open connections, requests being answered), the
    most it has been, and how many times it went up."""

    now: int = 0
    peak: int = 0
    total: int = 0

    def enter(self) -> None:
        self.now += 1
        self.total += 1
        self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        self.now -= 1

    def reset(self) -> None:
        """Forget the past: what is open now is all there has been."""
        self.peak = self.total = self.now


@dataclass(slots=True)
class _Counters:
    """A server's, or a whole fleet's, counters (a fleet's servers all run on one loop)."""

    requests: int = 0
    in_flight: _Gauge = field(default_factory=_Gauge)
    connections: _Gauge = field(default_factory=_Gauge)

    def reset(self) -> None:
        self.requests = 0
        self.in_flight.reset()
        self.connections.reset()


class _Reading:
    """A read-only ``int`` attribute that reads a dotted path of its object's counters."""

    def __init__(self, path: str, doc: str = "") -> None:
        self._path = path.split(".")
        self.__doc__ = doc

    def __get__(self, obj: object, owner: type | None = None) -> int:
        value: Any = obj
        for name in self._path:
            value = getattr(value, name)
        return int(value)


_SNI_LOCK = threading.Lock()


def _record_sni(ctx: ssl.SSLContext) -> None:
    """Make ``ctx`` remember the server name each TLS client sent (for tests)."""
    with _SNI_LOCK:
        if getattr(ctx.sni_callback, "_artifactcheck", False):
            return
        previous = ctx.sni_callback

        def callback(obj: Any, name: str | None, context: ssl.SSLContext) -> int | None:
            with contextlib.suppress(AttributeError):
                obj.artifactcheck_sni = name
            if previous is None:
                return None
            return previous(obj, name, context)  # type: ignore[arg-type]  # None: no SNI sent

        callback._artifactcheck = True  # type: ignore[attr-defined]
        ctx.sni_callback = callback


#: Turns of the loop from an accept to its connection's handler running: the transport
#: is made in one, ``connection_made`` runs in the next, the handler's task in a third.
_TURNS_TO_A_HANDLER = 4


class SiteServer:
    """One :class:`Site` served on one (host, port), counting what it receives.

    Counters are written by the serving loop and may be read from any thread.
    """

    def __init__(
        self,
        site: Site,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        counters: _Counters,
    ) -> None:
        self.site = site
        self.host, self.port = host, port  # port 0: any free one (set once bound)
        self.ssl_context = ssl_context
        self._fleet = counters
        self._own = _Counters()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._fault_counts: dict[int, int] = {}
        self.received: list[Received] = []
        self.bytes_sent = 0

    connections_current = _Reading("_own.connections.now")
    connections_peak = _Reading("_own.connections.peak")
    connections_total = _Reading("_own.connections.total", "Connections accepted.")
    in_flight = _Reading("_own.in_flight.now", "Requests being answered now.")
    peak_in_flight = _Reading("_own.in_flight.peak")

    # ----------------------------------------------------------------- state

    @property
    def base_url(self) -> str:
        """``http(s)://host:port/`` once started."""
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}/"

    @property
    def request_count(self) -> int:
        """Requests received since start or the last reset."""
        return len(self.received)

    @property
    def paths(self) -> list[str]:
        """Raw request targets received, in order."""
        return [r.target for r in list(self.received)]

    def reset_stats(self) -> None:
        """Forget received requests and peaks (current connections stay counted)."""
        self.received = []
        self.bytes_sent = 0
        self._own.reset()
        self._fault_counts.clear()

    def bump(self, fault: object) -> int:
        """Count one use of a stateful fault on this server; returns the new count."""
        count = self._fault_counts.get(id(fault), 0) + 1
        self._fault_counts[id(fault)] = count
        return count

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> str:
        """Bind and listen; returns the base URL (the bound port when ``port`` was 0)."""
        if self.ssl_context is not None:
            _record_sni(self.ssl_context)
        self._server = await asyncio.start_server(
            self._on_connection,
            self.host,
            self.port,
            ssl=self.ssl_context,
            reuse_address=True,
            backlog=1024,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.base_url

    async def stop(self) -> None:
        """Stop listening and drop every open connection, the ones accepted as it stops
        included: the listening sockets stop accepting first (:func:`stop_accepting`),
        what was accepted is let through to its handler, and every handler, late ones
        included (:meth:`_on_connection`), ends.
        """
        server, self._server = self._server, None
        if server is None:
            return
        await stop_accepting(server.sockets, turns=_TURNS_TO_A_HANDLER)
        server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    # ----------------------------------------------------------------- serving

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """One connection: counted at accept, serving requests until close (keep-alive).

        One whose handler starts after :meth:`stop` began is closed unserved, as a
        stopped server's connection is.
        """
        if self._server is None:
            writer.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        counters = (self._own, self._fleet)
        for c in counters:
            c.connections.enter()
        ssl_object = writer.get_extra_info("ssl_object")
        sni = getattr(ssl_object, "artifactcheck_sni", None)
        aborted = False
        buffer = bytearray()
        try:
            while True:
                head = await _read_head(reader, buffer)
                request = _parse_head(head, sni) if head is not None else None
                if request is None:
                    if head is not None or buffer:  # garbage (a TLS hello?), like nginx: 400
                        writer.write(_BAD_REQUEST)
                    break
                length = request.headers.get("content-length")
                if length and length.isdigit():
                    await _discard(reader, buffer, int(length))
                self.received.append(request)
                for c in counters:
                    c.requests += 1
                    c.in_flight.enter()
                exchange = Exchange(self, request, reader, writer)
                try:
                    await self._dispatch(exchange)
                finally:
                    for c in counters:
                        c.in_flight.leave()
                if exchange.aborted:
                    aborted = True
                if not exchange.keep_alive:
                    break
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            if self._server is not None:
                raise
            # stop() ended it: a handler that ends cancelled makes Python 3.11's streams
            # log "Exception in callback" (its done-callback asks the task's exception)
        finally:
            for c in counters:
                c.connections.leave()
            if task is not None:
                self._tasks.discard(task)
            if not aborted and not writer.is_closing():
                writer.close()

    async def _dispatch(self, ex: Exchange) -> None:
        """Site-wide fault first, then a per-path handler, then the normal content."""
        site = self.site
        if site.fault is not None:
            await site.fault(ex)
            return
        override = site.override_for(ex.request.path)
        if override is not None and not isinstance(override, bytes):
            await override(ex)
            return
        await self.serve_default(ex)

    async def serve_default(self, ex: Exchange) -> None:
        """Serve bytes overrides, the version document, static files, else 404."""
        site = self.site
        path = ex.request.path
        if ex.request.method not in ("GET", "HEAD"):
            await ex.respond(405, b"", headers={"Allow": "GET, HEAD"})
            return
        override = site.override_for(path)
        if isinstance(override, bytes):
            ctype = mimetypes.guess_type(path)[0] or "application/octet-stream"
            await Body(override, content_type=ctype)(ex)
            return
        if site.version is not None and path == site.version_path:
            body = json.dumps({"version": site.version}).encode()
            headers = {"Cache-Control": "no-cache"}
            await ex.respond(200, body, headers=headers, content_type="application/json")
            return
        entry = site.file_for(path)
        if entry is None and site.spa_fallback and "." not in path.rsplit("/", 1)[-1]:
            entry = site.file_for("/")
        if entry is None:
            await ex.respond(404, b"404 Not Found\n", content_type="text/html")
            return
        await self._serve_file(ex, path, entry)

    async def _serve_file(self, ex: Exchange, path: str, entry: _File) -> None:
        """Serve a file as nginx would: validators, 304, optional gzip, large files streamed."""
        site = self.site
        headers = {
            "Content-Type": entry.content_type,
            "ETag": entry.etag,
            "Last-Modified": entry.last_modified,
            "Cache-Control": site.cache_control(path),
            "Accept-Ranges": "bytes",
        }
        if ex.request.headers.get("if-none-match") == entry.etag:
            await ex.send_head(304, headers, length=0)
            return
        compressible = entry.content_type.startswith(_COMPRESSIBLE)
        accepts_gzip = "gzip" in ex.request.headers.get("accept-encoding", "")
        if (
            entry.data is not None
            and compressible
            and (site.gzip == "always" or (site.gzip == "on" and accepts_gzip))
        ):
            if entry.gzipped is None:
                compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
                entry.gzipped = compressor.compress(entry.data) + compressor.flush()
            headers["Content-Encoding"] = "gzip"
            headers["Vary"] = "Accept-Encoding"
            headers["ETag"] = "W/" + entry.etag  # nginx weakens the ETag when it compresses
            await ex.respond(200, entry.gzipped, headers=headers)
            return
        if entry.data is not None:
            await ex.respond(200, entry.data, headers=headers)
            return
        await ex.send_head(200, headers, length=entry.size)
        with entry.path.open("rb") as handle:  # large file: stream, never hold it whole
            while chunk := handle.read(_CHUNK):
                await ex.send_body(chunk)


# --------------------------------------------------------------------------- fleet


class WebFleet:
    """Many :class:`SiteServer` in one background thread and event loop.

    Usable from synchronous tests (``with WebFleet() as fleet:``) and from async code
    (``async with``); :meth:`add` returns each site's base URL.
    """

    def __init__(self, *, name: str = "artifactcheck-webfleet") -> None:
        self._name = name
        self._thread = LoopThread(name, join_timeout=10, drain=False)
        self._counters = _Counters()
        self.servers: list[SiteServer] = []

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> Self:
        """Start the background loop (idempotent)."""
        if not self._thread.started:
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop every server, then the loop and its thread."""
        self._thread.stop(self._stop_all(), timeout=30.0)

    async def _stop_all(self) -> None:
        servers, self.servers = self.servers, []
        await asyncio.gather(*(s.stop() for s in servers), return_exceptions=True)
        for _ in range(3):  # let closing transports finish their callbacks
            await asyncio.sleep(0)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        self.stop()  # brief; a thread hop would leave an executor thread behind

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run a coroutine on the fleet's loop from any other thread and wait for it."""
        loop = self._thread.loop
        if loop is None:
            coro.close()
            raise RuntimeError("WebFleet is not started")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError("WebFleet methods cannot be called from the fleet's own loop")
        return self._thread.call(coro, timeout)

    # ----------------------------------------------------------------- servers

    def add(
        self,
        site: Site,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> str:
        """Serve ``site`` on (host, port); returns its base URL."""
        return self.add_many([(site, host)], port=port, ssl_context=ssl_context)[0]

    def add_many(
        self,
        sites: Iterable[tuple[Site, str]],
        *,
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> list[str]:
        """Serve many (site, host) pairs in one round trip to the fleet's loop."""
        servers = [
            SiteServer(site, host, port, ssl_context=ssl_context, counters=self._counters)
            for site, host in sites
        ]

        async def start_all() -> list[str]:
            urls = []
            for server in servers:
                urls.append(await server.start())
                self.servers.append(server)
            return urls

        return self._call(start_all())

    def remove(self, base_url: str) -> None:
        """Stop and forget one server."""
        server = self.server(base_url)
        self.servers.remove(server)
        self._call(server.stop())

    def server(self, base_url: str) -> SiteServer:
        """The server behind a base URL returned by :meth:`add`."""
        for server in self.servers:
            if server.base_url == base_url:
                return server
        raise KeyError(base_url)

    def __iter__(self) -> Iterator[SiteServer]:
        return iter(list(self.servers))

    # ----------------------------------------------------------------- counters

    total_requests = _Reading("_counters.requests", "Requests to every server since the reset.")
    peak_in_flight = _Reading("_counters.in_flight.peak", "Most requests answered at once.")
    peak_connections = _Reading("_counters.connections.peak", "Most connections open at once.")
    open_connections = _Reading("_counters.connections.now", "Connections open now, in all.")

    def reset_stats(self) -> None:
        """Reset every server's and the fleet's counters."""

        async def reset() -> None:
            for server in self.servers:
                server.reset_stats()
            self._counters.reset()

        self._call(reset())
