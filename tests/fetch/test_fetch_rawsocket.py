"""The HTTP edge against byte-level adversaries: raw-socket servers that send exact bytes.

Each test names the rule it pins. Every hostile response must become that fetch's
error (or a refusal), never an exception out of the Fetcher, never bytes hashed as
content that the server did not serve as content, never a response read as the answer
to a request it was not sent for.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fetch_support import RecordingSleep, settings
from rawserver import RawConn, RawServer, response, serve_each

from artifactcheck.fetch import MAX_CONTENT_CODINGS, Fetcher, build_ssl_context, urls
from artifactcheck.fetch.connection import Connection
from artifactcheck.fetch.error_kinds import HeaderRefused, ProtocolViolation
from artifactcheck.fetch.http1 import Body, Http1Transport, framing
from artifactcheck.model.errors import ConfigError
from artifactcheck.model.settings import HttpSettings, RetrySettings


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fixed(wire: bytes) -> Callable[[RawConn], None]:
    """Answer every request with the same exact bytes."""
    return serve_each(lambda conn, head: wire)


def once(wire: bytes) -> Callable[[RawConn], None]:
    """Answer the first request with exact bytes, then close."""

    def handler(conn: RawConn) -> None:
        if conn.read_request() is not None:
            conn.send(wire)

    return handler


# --------------------------------------------------------------- content codings


def gzipped(data: bytes, times: int) -> bytes:
    for _ in range(times):
        data = gzip.compress(data, compresslevel=1, mtime=0)
    return data


async def test_a_long_content_encoding_chain_is_a_protocol_error(
    make_fetcher, host: Callable[[], str]
) -> None:
    body = gzipped(b"hello", 1200)
    wire = response(200, body, headers={"Content-Encoding": ", ".join(["gzip"] * 1200)})
    with RawServer(host(), fixed(wire)) as server:
        async with make_fetcher() as f:
            got = await f.get_asset(server.url, "a.js")
    assert got.error_kind == "protocol" and not got.hashes
    assert "1200 codings" in (got.error or ""), got.error
    assert f"more than the {MAX_CONTENT_CODINGS} accepted" in (got.error or "")
    assert got.attempts == 1  # a hostile response is not retried


async def test_a_chain_at_the_cap_is_decoded(make_fetcher, host: Callable[[], str]) -> None:
    codings = ", ".join(["gzip"] * MAX_CONTENT_CODINGS)
    wire = response(
        200, gzipped(b"hello", MAX_CONTENT_CODINGS), headers={"Content-Encoding": codings}
    )
    with RawServer(host(), fixed(wire)) as server:
        async with make_fetcher() as f:
            got = await f.get_asset(server.url, "a.js")
    assert got.ok, got.error
    assert got.hashes["sha256"] == sha(b"hello") and got.content_encoding == codings


# --------------------------------------------------------------- keep-alive desync


FORGED = response(200, b"forged")


def busy(event: threading.Event) -> None:
    """Block the event loop until the server has sent its forgery, as a loop busy with
    other instances' work would: the bytes wait in the kernel, undelivered."""
    assert event.wait(5)
    time.sleep(0.05)


async def test_a_forged_response_after_a_404_is_not_the_next_answer(
    make_fetcher, host: Callable[[], str]
) -> None:
    """The manifest probe loop: a 404, then a 200 nobody asked for, then the next probe."""
    forged_sent = threading.Event()

    def handler(conn: RawConn) -> None:
        while (head := conn.read_request()) is not None:
            if conn.index == 0:
                conn.send(response(404, b"no"))
                time.sleep(0.05)
                conn.send(FORGED)
                forged_sent.set()
            else:
                conn.send(response(200, b"real " + RawConn.target(head).encode()))

    with RawServer(host(), handler) as server:
        async with make_fetcher() as f:
            first = await f.get_document(server.url, "a.json")
            busy(forged_sent)
            second = await f.get_document(server.url, "b.json")
    assert first.status == 404
    assert second.ok and second.body == b"real /b.json", second.body
    assert server.connections == 2
    assert [RawConn.target(r) for r in server.requests] == ["/a.json", "/b.json"]


async def test_bytes_arriving_on_an_idle_connection_condemn_it_at_once(
    make_fetcher, host: Callable[[], str]
) -> None:
    closed: list[bool] = []

    def handler(conn: RawConn) -> None:
        while (head := conn.read_request()) is not None:
            conn.send(response(200, RawConn.target(head).encode()))
            if conn.index == 0:
                time.sleep(0.05)
                conn.send(FORGED)
                closed.append(conn.wait_closed(timeout=3))
                return

    with RawServer(host(), handler) as server:
        async with make_fetcher() as f:
            first = await f.get_asset(server.url, "a.js")
            for _ in range(300):  # the loop runs: the forgery is delivered while idle
                if closed:
                    break
                await asyncio.sleep(0.01)
            second = await f.get_asset(server.url, "b.js")
    assert closed == [True], "the idle connection that received a forgery was kept open"
    assert first.hashes["sha256"] == sha(b"/a.js")
    assert second.hashes["sha256"] == sha(b"/b.js")
    assert server.connections == 2


async def test_shifted_answers_one_request_at_a_time(make_fetcher, host: Callable[[], str]) -> None:
    """The sequential asset loop (--concurrency 1): a server that answers each request and
    then, unasked, the one it expects next. Reused, every later answer would be shifted
    by one and a right file reported as a wrong one."""
    paths = ["a.js", "b.js", "c.js", "d.js"]
    bodies = {f"/{p}": f"content of {p}".encode() for p in paths}
    sent = threading.Semaphore(0)

    def handler(conn: RawConn) -> None:
        while (head := conn.read_request()) is not None:
            target = RawConn.target(head)
            conn.send(response(200, bodies[target]))
            index = paths.index(target[1:])
            if index + 1 < len(paths):
                time.sleep(0.03)
                conn.send(response(200, bodies[f"/{paths[index + 1]}"]))
            sent.release()

    with RawServer(host(), handler) as server:
        async with make_fetcher() as f:
            got = {}
            for path in paths:
                got[path] = await f.get_asset(server.url, path)
                assert sent.acquire(timeout=5)
                time.sleep(0.05)  # a busy loop: whatever came early waits in the kernel
    assert {p: g.hashes["sha256"] for p, g in got.items()} == {
        p: sha(bodies[f"/{p}"]) for p in paths
    }
    assert server.connections == len(paths)


async def test_a_forged_response_between_redirect_hops_is_not_followed(
    make_fetcher, host: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    forged_sent = threading.Event()

    def handler(conn: RawConn) -> None:
        while (head := conn.read_request()) is not None:
            if RawConn.target(head) == "/a.js":
                conn.send(response(302, headers={"Location": "/b.js"}))
                time.sleep(0.05)
                conn.send(FORGED)
                forged_sent.set()
            else:
                conn.send(response(200, b"real b"))

    original = urls.is_under

    def slow_is_under(base: str, url: str) -> bool:  # the loop is busy between the hops
        if url.endswith("/b.js"):
            busy(forged_sent)
        return original(base, url)

    monkeypatch.setattr(urls, "is_under", slow_is_under)
    with RawServer(host(), handler) as server:
        async with make_fetcher() as f:
            got = await f.get_asset(server.url, "a.js")
    assert got.ok and got.hashes["sha256"] == sha(b"real b")
    assert got.attempts == 2 and server.connections == 2


# --------------------------------------------------------------- numbers and framing


async def test_a_content_length_of_5000_digits_is_a_protocol_error(
    make_fetcher, host: Callable[[], str]
) -> None:
    wire = b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\nbody"
    with RawServer(host(), fixed(wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    assert got.error is not None and not got.hashes
    assert len(got.error) < 500  # a hostile header is not copied whole into reports
    assert got.error_kind == "protocol"
    assert "invalid Content-Length" in got.error, got.error


def test_framing_refuses_overlong_lengths() -> None:
    assert framing("GET", 200, [(b"Content-Length", b"9" * 18)], True)[0] == int("9" * 18)
    for value in (b"9" * 19, b"9" * 5000, b"1, 2", b"-1", b"0x10"):
        with pytest.raises(ProtocolViolation):
            framing("GET", 200, [(b"Content-Length", value)], True)


@pytest.mark.parametrize(
    "codings", [b"gzip, chunked", b"chunked, chunked", b"gzip", b"chunked, gzip", b"identity"]
)
def test_framing_refuses_transfer_codings_other_than_one_chunked(codings: bytes) -> None:
    with pytest.raises(ProtocolViolation, match="Transfer-Encoding"):
        framing("GET", 200, [(b"Transfer-Encoding", codings)], True)
    assert framing("GET", 200, [(b"Transfer-Encoding", b"Chunked")], True)[1]


def chunked(data: bytes, size: int = 7) -> bytes:
    out = b"".join(
        b"%x\r\n%s\r\n" % (len(data[i : i + size]), data[i : i + size])
        for i in range(0, len(data), size)
    )
    return out + b"0\r\n\r\n"


CONTENT = b"console.log('the right bytes');\n" * 40


@pytest.mark.parametrize(
    ("te", "body", "close"),
    [
        ("gzip, chunked", chunked(gzip.compress(CONTENT)), False),
        ("chunked, chunked", chunked(chunked(CONTENT)), False),
        ("gzip", gzip.compress(CONTENT), True),
    ],
    ids=["gzip-chunked", "chunked-chunked", "close-delimited-gzip"],
)
async def test_transfer_codings_are_never_hashed_as_content(
    make_fetcher, host: Callable[[], str], te: str, body: bytes, close: bool
) -> None:
    head = f"HTTP/1.1 200 OK\r\nTransfer-Encoding: {te}\r\n"
    wire = (head + ("Connection: close\r\n" if close else "") + "\r\n").encode() + body
    with RawServer(host(), once(wire) if close else fixed(wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    # the right file must never become a false mismatch: no hash at all, or the right one
    assert got.hashes.get("sha256") in (None, sha(CONTENT)), (got.hashes, got.error)
    assert got.error is not None
    assert got.error_kind == "protocol" and "Transfer-Encoding" in got.error, got.error


@pytest.mark.parametrize("status", [b"099", b"000", b"600", b"999", b"1000", b"20", b"2x0"])
async def test_an_impossible_status_is_a_protocol_error(
    make_fetcher, host: Callable[[], str], status: bytes
) -> None:
    # read as an interim response, "099" would be skipped and the forged 200 after it
    # taken as the answer
    wire = b"HTTP/1.1 " + status + b" Odd\r\nContent-Length: 0\r\n\r\n" + FORGED
    with RawServer(host(), fixed(wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    assert got.error is not None and not got.hashes
    assert got.error_kind == "protocol" and "invalid status" in got.error, got.error


async def test_endless_interim_responses_and_trailers_are_protocol_errors(
    make_fetcher, host: Callable[[], str]
) -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" * 9 + response(200, b"late")
    trailers = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n"
    trailers += b"X-T: " + b"t" * 1000 + b"\r\n"
    trailers = trailers + (b"X-T: " + b"t" * 1000 + b"\r\n") * 70 + b"\r\n"
    for wire, words in ((interim, "interim"), (trailers, "trailers longer")):
        with RawServer(host(), fixed(wire)) as server:
            async with make_fetcher(retry={"attempts": 1}) as f:
                got = await f.get_asset(server.url, "a.js")
        assert got.error_kind == "protocol" and words in (got.error or ""), got.error
    eight = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n" * 8 + response(200, b"ok")
    with RawServer(host(), fixed(eight)) as server:
        async with make_fetcher() as f:
            got = await f.get_asset(server.url, "a.js")
    assert got.ok and got.hashes["sha256"] == sha(b"ok")


@pytest.mark.parametrize(
    "location",
    [b"http://[", b"/a\x00b.js", b"/a\x7fb.js", b"http://[::1", b"//h:99999/x"],
    ids=["open-bracket", "nul", "del", "open-v6", "bad-port"],
)
async def test_an_unusable_location_is_that_fetch_s_error(
    make_fetcher, host: Callable[[], str], location: bytes
) -> None:
    wire = b"HTTP/1.1 302 Found\r\nLocation: " + location + b"\r\nContent-Length: 0\r\n\r\n"
    with RawServer(host(), fixed(wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    assert got.error is not None and not got.hashes
    assert got.error_kind in ("protocol", "redirect-off-base"), got.error
    if location != b"//h:99999/x":
        assert got.error_kind == "protocol" and "unusable Location" in got.error, got.error
    assert len(server.requests) == 1


# --------------------------------------------------------------- chunk parsing


async def test_chunk_parsing_is_linear_in_the_body() -> None:
    """300,000 one-byte chunks received as one piece parse in about a second; copying
    the rest of the piece on each take (quadratic), they took half a minute."""
    loop = asyncio.get_running_loop()
    conn = Connection(loop, ("http", "h", 80, None))
    count = 300_000
    conn.data_received(b"1\r\nx\r\n" * count + b"0\r\n\r\n")
    pool = Http1Transport(ssl_context=build_ssl_context(HttpSettings()))
    body = Body(pool, conn, length=None, chunked=True, reusable=False, timeout=1.0)
    received = 0
    started = time.perf_counter()
    async for piece in body:  # no await inside: a timeout could not interrupt it
        received += len(piece)
    elapsed = time.perf_counter() - started
    await body.aclose()
    assert received == count and conn.size == 0
    assert elapsed < 8.0, f"{count} one-byte chunks took {elapsed:.1f}s"


def test_taking_a_few_bytes_leaves_the_rest_of_a_piece_uncopied() -> None:
    conn = Connection(asyncio.new_event_loop(), ("http", "h", 80, None))
    conn.loop.close()
    piece = b"abc\r\ndef\r\n" + b"x" * 100_000
    conn.data_received(piece)
    assert conn.find(b"\r\n", 10) == 3
    assert conn.take(5) == b"abc\r\n"
    assert conn.chunks[0] is piece and conn.offset == 5  # not a copy of the rest
    assert conn.find(b"\r\n", 10) == 3 and conn.take(5) == b"def\r\n"
    conn.data_received(b"tail")
    assert conn.take(200_000) == b"x" * 100_000  # the rest of the piece, then the next
    assert conn.take(10) == b"tail" and conn.size == 0 and conn.offset == 0
    conn.data_received(b"no line e")
    conn.data_received(b"nd\r\nrest")
    assert conn.find(b"\r\n", 100) == 11 and conn.take(13) == b"no line end\r\n"


async def test_chunks_split_at_every_boundary_are_reassembled(
    make_fetcher, host: Callable[[], str]
) -> None:
    content = bytes(range(256)) * 20
    wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(content, 5)

    def handler(conn: RawConn) -> None:
        while conn.read_request() is not None:
            for i in range(0, len(wire), 3):  # CRLFs and sizes cut across segments
                conn.send(wire[i : i + 3])
                if i % 300 == 0:
                    time.sleep(0.001)

    with RawServer(host(), handler) as server:
        async with make_fetcher() as f:
            first = await f.get_asset(server.url, "a.js")
            second = await f.get_asset(server.url, "a.js")
    for got in (first, second):
        assert got.ok and got.hashes["sha256"] == sha(content) and got.size == len(content)
    assert server.connections == 1  # read to the end and silent: kept alive


# --------------------------------------------------------------- headers we send


INJECTED = "shop.example\r\nX-Injected: yes"


async def test_a_host_header_with_a_line_break_is_never_sent(
    make_fetcher, host: Callable[[], str]
) -> None:
    with RawServer(host(), fixed(response(200, b"ok"))) as server:
        async with make_fetcher() as f:
            got = await f.get_asset(server.url, "a.js", host_header=INJECTED)
            fine = await f.get_asset(server.url, "a.js", host_header="shop.example")
    assert got.error_kind == "config" and got.attempts == 0
    assert got.error and got.error.startswith("refused without a request")
    assert "X-Injected" not in got.error  # a header value may be a secret: never echoed
    assert fine.ok
    assert b"X-Injected" not in server.received and len(server.requests) == 1
    assert b"\r\nhost: shop.example\r\n" in server.received.lower()


def test_a_configured_host_header_with_a_line_break_is_a_config_error() -> None:
    http = HttpSettings().model_copy(update={"host_header": INJECTED})  # unvalidated
    with pytest.raises(ConfigError, match="http.host_header") as info:
        Fetcher(http=http, retry=RetrySettings())
    assert "X-Injected" not in str(info.value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("host", INJECTED),
        ("x-token", "a\nX-Injected: yes"),
        ("x-token", "a\x00b"),
        ("x-token", "a\rb"),
        ("X Injected", "yes"),
        ("x-token:X-Injected", "yes"),
    ],
)
async def test_the_transport_never_writes_an_invalid_header(
    host: Callable[[], str], name: str, value: str
) -> None:
    """The last line of defence, below every validation of the configuration."""
    with RawServer(host(), fixed(response(200, b"ok"))) as server:
        pool = Http1Transport(ssl_context=build_ssl_context(HttpSettings()))
        request = httpx.Request("GET", server.url + "a.js", headers={name: value})
        try:
            with pytest.raises(HeaderRefused, match="not sent"):
                await pool.handle_async_request(request)
        finally:
            await pool.aclose()
    assert server.connections == 0 and server.received == b""


# --------------------------------------------------------------- unexpected failures


class Exploding(httpx.AsyncBaseTransport):
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise self.exc


class ExplodingBody(httpx.AsyncByteStream):
    async def __aiter__(self) -> Any:
        yield b"part"
        raise KeyError("deep inside a decoder")


def injected(transport: httpx.AsyncBaseTransport, **kw: Any) -> Fetcher:
    kw.setdefault("sleep", RecordingSleep())
    return Fetcher(http=settings(), retry=RetrySettings(), transport=transport, **kw)


@pytest.mark.parametrize(
    "exc", [ValueError("odd"), RecursionError("deep"), KeyError("k"), AttributeError("a")]
)
async def test_any_exception_in_one_fetch_is_its_result(exc: Exception) -> None:
    async with injected(Exploding(exc)) as f:
        got = await f.get_asset("http://10.1.2.3/", "a.js")
        assert f.stats.in_flight == 0
    assert got.error_kind == "protocol" and got.attempts == 1
    assert got.error and got.error.startswith(f"unexpected error: {type(exc).__name__}")


async def test_an_exception_while_reading_the_body_is_its_result() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=ExplodingBody()))
    async with injected(transport) as f:
        got = await f.get_asset("http://10.1.2.3/", "a.js")
    assert got.error_kind == "protocol" and "KeyError" in (got.error or "")


async def test_an_exception_outside_the_request_is_the_fetch_s_result() -> None:
    async def failing_sleep(delay: float) -> None:
        raise RuntimeError("the clock broke")

    transport = httpx.MockTransport(lambda request: httpx.Response(503))
    async with injected(transport, sleep=failing_sleep) as f:
        got = await f.get_asset("http://10.1.2.3/", "a.js")
    assert got.error_kind == "protocol" and "RuntimeError" in (got.error or "")
    assert got.attempts == 1


async def test_cancellation_always_propagates() -> None:
    async with injected(Exploding(asyncio.CancelledError())) as f:
        with pytest.raises(asyncio.CancelledError):
            await f.get_asset("http://10.1.2.3/", "a.js")


# --------------------------------------------------------------- paths


async def test_servlet_dot_dot_segments_are_refused_without_a_request(
    make_fetcher, host: Callable[[], str]
) -> None:
    with RawServer(host(), fixed(response(200, b"ok"))) as server:
        async with make_fetcher() as f:
            got = await f.get_asset(server.url + "app/", "assets/..;/..;/x")
    assert got.error_kind == "unsafe" and got.attempts == 0
    assert server.connections == 0


# --------------------------------------------------------------------------- closing


async def test_closing_plain_connections_waits_for_no_tls_close(
    host: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain TCP close is over after one turn of the loop: the pool's close waits for
    nothing more (only a TLS close_notify is waited for), and no socket outlives it."""
    with RawServer(host(), fixed(response(200, b"ok"))) as server:
        pool = Http1Transport(ssl_context=build_ssl_context(HttpSettings()))
        for name in ("a.js", "b.js"):
            answer = await pool.handle_async_request(httpx.Request("GET", server.url + name))
            assert await answer.aread() == b"ok"
            await answer.aclose()
        idle = [conn for conns in pool._idle.values() for conn in conns]
        assert len(idle) == 1
        slept: list[float] = []
        real = asyncio.sleep

        async def recorded(delay: float, *args: Any) -> Any:
            slept.append(delay)
            return await real(delay, *args)

        monkeypatch.setattr(asyncio, "sleep", recorded)
        await pool.aclose()
    assert [d for d in slept if d > 0] == []
    assert all(conn.lost for conn in idle)
