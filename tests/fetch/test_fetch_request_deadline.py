"""The whole-request deadline (``request_timeout``) is kept by the connection's one timer.

Direct over our own transport no ``asyncio.timeout`` surrounds a request: every wait
for bytes ends at the earlier of its read timeout and the request's deadline. So the
rule is pinned where it could break, against raw sockets: a body or a head dripping in
one byte at a time (each byte well within the read timeout) ends at the request's
deadline, on a new connection and on one taken from the pool, with the message users
read today; the connection is closed, never pooled again; a request on another
connection to the same host runs on untouched; connecting (an ``asyncio.timeout``
still) ends at the request's deadline too when it comes first.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import math
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from rawserver import RawConn, RawServer, full_backlog

from artifactcheck.fetch.connection import Connection
from artifactcheck.fetch.error_kinds import ReadTimeout, RequestTimeout
from artifactcheck.fetch.proxy import Proxies
from artifactcheck.fetch.response import hashed
from artifactcheck.model.values import Fetched

REQUEST_TIMEOUT = 1.0
# Each byte 0.2 s after the last: far within the read timeout, never complete in time.
HTTP = {"read_timeout": 2.0, "request_timeout": REQUEST_TIMEOUT}
TIMED_OUT = f"no complete response within {REQUEST_TIMEOUT}s (request_timeout)"
GAP = 0.2


class Dripped:
    """When the client went away from a dripping answer (a send failed, or it closed)."""

    def __init__(self) -> None:
        self.gone = threading.Event()
        self.sent = 0

    def drip(self, conn: RawConn, data: bytes) -> None:
        """Send ``data`` one byte every :data:`GAP` s until it is all sent or the client
        closes; then wait for the close, at most 10 s."""
        for byte in data:
            time.sleep(GAP)
            try:
                conn.send(bytes([byte]))
            except OSError:
                self.gone.set()
                return
            self.sent += 1
        if conn.wait_closed(timeout=10):
            self.gone.set()

    def answer(self, head: bytes, body: bytes) -> Callable[[RawConn], None]:
        """A raw server's handler: read one request, send ``head`` at once, then drip
        ``body``."""

        def handler(conn: RawConn) -> None:
            if conn.read_request() is None:
                return
            conn.send(head)
            self.drip(conn, body)

        return handler


async def _timed(get: Awaitable[Fetched]) -> tuple[Fetched, float]:
    """``get``'s answer and the seconds it took."""
    started = time.monotonic()
    got = await get
    return got, time.monotonic() - started


def _timed_out(got: Fetched, took: float) -> None:
    """The request ended at its deadline with today's message, nothing of its body kept."""
    assert got.error_kind == "timeout", got.error
    assert got.error == TIMED_OUT
    assert got.hashes == {} and got.size is None and got.body is None
    assert REQUEST_TIMEOUT - 0.05 <= took < REQUEST_TIMEOUT + 1.0, took


async def test_a_body_dripping_within_the_read_timeout_ends_at_the_request_deadline(
    make_fetcher, host: Callable[[], str]
) -> None:
    dripped = Dripped()
    handler = dripped.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", b"x" * 100)
    with RawServer(host(), handler) as server:
        async with make_fetcher(http=HTTP, retry={"attempts": 1}) as f:
            got, took = await _timed(f.get_asset(server.url, "a.js"))
            assert f.stats.bytes_read >= 2  # bytes did arrive: no read timeout was near
        _timed_out(got, took)
        # the connection is closed at once, not left for the server's 20 s of bytes
        assert await asyncio.to_thread(dripped.gone.wait, 3.0)
        assert dripped.sent < 15


async def test_a_body_dripping_on_a_pooled_connection_ends_at_the_request_deadline(
    make_fetcher, host: Callable[[], str]
) -> None:
    """The first request on the connection is answered at once, the second one drips:
    the reused connection's timer keeps the second's deadline, counted from the second
    request, not the first; the third request needs a new connection."""
    dripped = Dripped()

    def handler(conn: RawConn) -> None:
        if conn.read_request() is None:
            return
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        if conn.index > 0:  # the connection after the failure: answers at once
            while conn.read_request() is not None:
                conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            return
        if conn.read_request() is None:
            return
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        dripped.drip(conn, b"x" * 100)

    with RawServer(host(), handler) as server:
        async with make_fetcher(http=HTTP, retry={"attempts": 1}) as f:
            first = await f.get_asset(server.url, "a.js")
            # idle past the first request's deadline: the second one counts from its own
            await asyncio.sleep(REQUEST_TIMEOUT + 0.2)
            second, took = await _timed(f.get_asset(server.url, "b.js"))
            assert first.ok, first.error
            assert server.connections == 1  # the second went on the pooled connection
            _timed_out(second, took)
            third = await f.get_asset(server.url, "c.js")
        assert third.ok, third.error
        assert server.connections == 2  # the failed connection was not pooled
        assert await asyncio.to_thread(dripped.gone.wait, 3.0)


async def test_a_head_dripping_within_the_read_timeout_ends_at_the_request_deadline(
    make_fetcher, host: Callable[[], str]
) -> None:
    dripped = Dripped()

    def handler(conn: RawConn) -> None:
        if conn.read_request() is None:
            return
        head = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * 100 + b"\r\nContent-Length: 2\r\n\r\nok"
        dripped.drip(conn, head)

    with RawServer(host(), handler) as server:
        async with make_fetcher(http=HTTP, retry={"attempts": 1}) as f:
            got, took = await _timed(f.get_asset(server.url, "a.js"))
        _timed_out(got, took)
        assert got.status is None
        assert await asyncio.to_thread(dripped.gone.wait, 3.0)


async def test_a_head_that_stalls_past_a_shorter_request_timeout_is_the_request_timeout(
    make_fetcher, host: Callable[[], str]
) -> None:
    """No byte at all, the read timeout longer than the request's: the request's
    deadline, not the read timeout, ends the wait (and says so)."""

    def handler(conn: RawConn) -> None:
        if conn.read_request() is None:
            return
        conn.wait_closed(timeout=10)

    http = {"read_timeout": 5.0, "request_timeout": REQUEST_TIMEOUT}
    with RawServer(host(), handler) as server:
        async with make_fetcher(http=http, retry={"attempts": 1}) as f:
            got, took = await _timed(f.get_asset(server.url, "a.js"))
    _timed_out(got, took)


async def test_an_error_body_dripping_is_the_request_timeout_not_its_status(
    make_fetcher, host: Callable[[], str]
) -> None:
    """A 404's small body is drained to keep the connection; drained past the request's
    deadline, the request timed out (a dripping 404 is not "missing")."""
    dripped = Dripped()
    head = b"HTTP/1.1 404 Not Found\r\nContent-Length: 100\r\n\r\n"
    with RawServer(host(), dripped.answer(head, b"n" * 100)) as server:
        async with make_fetcher(http=HTTP, retry={"attempts": 1}) as f:
            got, took = await _timed(f.get_asset(server.url, "a.js"))
        assert got.error_kind == "timeout", (got.status, got.error)
        assert got.error == TIMED_OUT
        assert REQUEST_TIMEOUT - 0.05 <= took < REQUEST_TIMEOUT + 1.0, took
        assert await asyncio.to_thread(dripped.gone.wait, 3.0)


async def test_a_deadline_on_one_connection_leaves_the_other_of_the_host_alone(
    make_fetcher, host: Callable[[], str]
) -> None:
    """Two requests to one host on two connections: the first drips past its deadline;
    the second, started 0.6 s later and still streaming when that deadline fires, ends
    complete and correct."""
    body = b"0123456789" * 2
    dripped = Dripped()

    def handler(conn: RawConn) -> None:
        head = conn.read_request()
        if head is None:
            return
        if RawConn.target(head) == "/slow.js":
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
            dripped.drip(conn, b"x" * 100)
            return
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
        for i in range(0, len(body), 5):  # 0.2 s .. 0.8 s after its start
            time.sleep(GAP)
            conn.send(body[i : i + 5])
        conn.wait_closed(timeout=10)

    with RawServer(host(), handler) as server:
        http = {**HTTP, "max_per_host": 2}
        async with make_fetcher(http=http, retry={"attempts": 1}) as f:
            started = time.monotonic()

            async def later() -> Fetched:
                await asyncio.sleep(0.6)
                return await f.get_asset(server.url, "fine.js")

            slow, fine = await asyncio.gather(f.get_asset(server.url, "slow.js"), later())
            took = time.monotonic() - started
    assert server.connections == 2
    assert slow.error == TIMED_OUT, slow.error
    assert fine.ok, fine.error
    assert fine.hashes["sha256"] == hashlib.sha256(body).hexdigest()
    assert took >= 0.6 + 4 * GAP - 0.05, took  # the fine one outlived the slow one's deadline


async def test_connecting_ends_at_a_request_deadline_shorter_than_connect_timeout(
    make_fetcher, host: Callable[[], str]
) -> None:
    """A listener that never accepts, its queue full: SYNs are dropped (Linux), the
    connect hangs; the request's deadline ends it with the request_timeout message."""
    address = host()
    with full_backlog(address) as port:
        http = {"connect_timeout": 5.0, "request_timeout": REQUEST_TIMEOUT}
        async with make_fetcher(http=http, retry={"attempts": 1}) as f:
            got, took = await _timed(f.get_asset(f"http://{address}:{port}/", "a.js"))
    _timed_out(got, took)


async def test_a_tls_handshake_that_stalls_ends_at_the_request_deadline(
    make_fetcher, host: Callable[[], str]
) -> None:
    """The server accepts and never answers the TLS hello: the handshake is part of
    connecting, bounded by the request's deadline when it is the shorter one."""

    def handler(conn: RawConn) -> None:
        conn.wait_closed(timeout=10)

    http = {"connect_timeout": 5.0, "request_timeout": REQUEST_TIMEOUT}
    with RawServer(host(), handler) as server:
        async with make_fetcher(http=http, retry={"attempts": 1}) as f:
            got, took = await _timed(f.get_asset(f"https://{server.host}:{server.port}/", "a.js"))
    _timed_out(got, took)


async def test_a_body_dripping_through_a_proxy_ends_at_the_request_deadline(
    make_fetcher, host: Callable[[], str]
) -> None:
    """Through an HTTP proxy (the raw server, answering the absolute-form request as a
    proxy forwarding a dripping origin would) the whole request keeps its bound too."""
    dripped = Dripped()
    handler = dripped.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n", b"x" * 30)
    with RawServer(host(), handler) as proxy:
        proxies = Proxies.single(proxy.url)
        async with make_fetcher(http=HTTP, retry={"attempts": 1}, proxies=proxies) as f:
            got, took = await _timed(f.get_asset("http://cdn.example/", "a.js", host_header=""))
        assert proxy.requests[0].startswith(b"GET http://cdn.example/a.js HTTP/1.1")
        assert got.error is not None and got.error.startswith(TIMED_OUT), got.error
        assert "through the HTTP proxy" in got.error
        assert REQUEST_TIMEOUT - 0.05 <= took < REQUEST_TIMEOUT + 1.0, took
        assert await asyncio.to_thread(dripped.gone.wait, 3.0)


# --------------------------------------------------------------------------- the units


async def test_a_wait_that_starts_past_the_request_deadline_fails_at_once() -> None:
    """Bytes arriving on every turn of the loop must not outrun the deadline's timer:
    a wait that starts after the deadline fails before waiting at all."""
    loop = asyncio.get_running_loop()
    conn = Connection(loop, ("http", "127.0.0.1", 80, None))
    conn.request_deadline = loop.time() - 0.001
    started = loop.time()
    # bytes delivered on the turn the deadline's timer would run: they come first
    loop.call_soon(conn.data_received, b"x")
    with pytest.raises(RequestTimeout):
        await conn.wait(0.5)
    assert loop.time() - started < 0.1
    conn.close()
    other = Connection(loop, ("http", "127.0.0.1", 80, None))
    assert other.request_deadline == math.inf
    with pytest.raises(ReadTimeout):  # no request deadline: the read timeout alone
        await other.wait(0.05)
    other.close()


async def test_a_wait_on_the_hashing_thread_ends_at_the_request_deadline() -> None:
    """A piece queued behind other bodies' on the hashing thread is waited for until
    the request's deadline, no longer."""
    loop = asyncio.get_running_loop()
    never: concurrent.futures.Future[None] = concurrent.futures.Future()
    started = loop.time()
    with pytest.raises(RequestTimeout):
        async with asyncio.timeout(3):  # a wait left unbounded fails here, not hangs
            await hashed(never, loop.time() + 0.2)
    assert 0.15 <= loop.time() - started < 1.0
    done: concurrent.futures.Future[None] = concurrent.futures.Future()
    done.set_result(None)
    await hashed(done, loop.time() + 0.2)  # in time: no error


async def test_a_body_behind_a_busy_hashing_thread_ends_at_the_request_deadline() -> None:
    """A large body's pieces go to the hashing thread; with that thread held by other
    bodies, reading waits for it, and that wait ends at the request's deadline."""
    import httpx

    from artifactcheck.fetch.response import OFFLOAD_AFTER, read
    from artifactcheck.fetch.stats import FetchStats

    piece = b"z" * (64 * 1024)
    count = OFFLOAD_AFTER // len(piece) + 40  # past the backlog of the hashing thread

    async def pieces() -> AsyncIterator[bytes]:
        for _ in range(count):
            yield piece

    response = httpx.Response(200, content=pieces())
    busy = threading.Event()
    hashing = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    hashing.submit(busy.wait, 10)  # another body's hashing, holding the one thread
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with pytest.raises(RequestTimeout):
            async with asyncio.timeout(5):  # a wait left unbounded fails here, not hangs
                await read(
                    response,
                    "http://127.0.0.1/a.js",
                    cap=len(piece) * count,
                    algorithms=("sha256",),
                    keep_body=False,
                    stats=FetchStats(),
                    hashing=hashing,
                    deadline=loop.time() + 0.3,
                )
        assert 0.25 <= loop.time() - started < 2.0
    finally:
        busy.set()
        hashing.shutdown(wait=True)
        await response.aclose()
