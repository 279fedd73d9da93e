"""HTTP/1.1 message framing (RFC 9112 section 6), pinned byte by byte on the transport.

A parser swap is only safe against a suite that fails when framing changes. Each test
is one rule, against a raw-socket server sending exact bytes. Where a body is framed
wrongly, the bytes that follow are read as the wrong thing: a body hashed short or long
is a false mismatch, the next response read as the body of this one is a desync. So
each outcome is either the right content or a clear fetch error with nothing hashed,
and connection reuse is asserted on the server's own count of accepted connections,
never inferred from the client.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable

import httpx
import pytest
from fetch_support import eventually, settings
from rawserver import RawConn, RawServer, response, serve_each

from artifactcheck.fetch import build_ssl_context
from artifactcheck.fetch.http1 import MAX_HEAD, Http1Transport
from artifactcheck.model.values import Fetched

HELLO = b"hello"
# Kinds a refused response may be reported as: never "mismatch"-prone, never a crash.
REFUSED = {"protocol", "connect", "truncated"}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def by_target(answers: dict[str, bytes]) -> Callable[[RawConn], None]:
    """Answer each request (kept alive) with the exact bytes for its target."""
    return serve_each(lambda conn, head: answers[RawConn.target(head)])


def refused(got: Fetched, words: str | None = None) -> None:
    """The fetch failed clearly: an error, a refusal kind, nothing hashed."""
    assert got.error is not None and not got.hashes, (got.hashes, got.error)
    assert got.error_kind in REFUSED, (got.error_kind, got.error)
    if words is not None:
        assert words in got.error, got.error


# ------------------------------------------------------------- responses without a body


@pytest.mark.parametrize(
    "status_head",
    [
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
    ],
    ids=["204", "204-with-length", "304-with-length", "304-chunked"],
)
async def test_204_and_304_end_at_their_head(
    make_fetcher, host: Callable[[], str], status_head: bytes
) -> None:
    """A 204 or 304 ends at its blank line whatever its headers say; a client waiting
    for those 5 bytes would stall, or take the start of the next response as them."""
    answers = {"/a.js": status_head, "/b.js": response(200, HELLO)}
    with RawServer(host(), by_target(answers)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            first = await f.get_asset(server.url, "a.js")
            second = await f.get_asset(server.url, "b.js")
    status = int(status_head[9:12])
    assert first.status == status and first.error is None, first.error
    if status == 204:  # a 2xx: read and hashed as the empty body it is
        assert first.size == 0 and first.hashes["sha256"] == sha(b"")
    assert second.ok and second.hashes["sha256"] == sha(HELLO), second.error
    assert server.connections == 1  # the next response was read on the same connection


@pytest.mark.parametrize(
    "head_reply",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    ],
    ids=["length", "chunked"],
)
async def test_a_head_response_has_no_body(host: Callable[[], str], head_reply: bytes) -> None:
    """The Fetcher sends only GETs; HEAD is pinned on the transport itself (the httpx
    transport API it offers), with a GET after it on the same connection."""
    answers = {"HEAD": head_reply, "GET": response(200, HELLO)}
    handler = serve_each(lambda conn, head: answers[head.split(b" ", 1)[0].decode()])
    timeouts = {"timeout": {"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0}}
    with RawServer(host(), handler) as server:
        pool = Http1Transport(ssl_context=build_ssl_context(settings()))
        try:
            async with httpx.AsyncClient(transport=pool) as client:
                head = await client.request("HEAD", server.url + "a.js", extensions=timeouts)
                get = await client.request("GET", server.url + "a.js", extensions=timeouts)
        finally:
            await pool.aclose()
    assert head.status_code == 200 and head.content == b""
    assert get.status_code == 200 and get.content == HELLO
    assert server.connections == 1
    assert [r.split(b" ", 1)[0] for r in server.requests] == [b"HEAD", b"GET"]


# ------------------------------------------------------------- chunked and Content-Length


@pytest.mark.parametrize("length", [b"3", b"100"], ids=["shorter", "longer"])
async def test_chunked_with_a_content_length_is_read_as_chunked_and_never_reused(
    make_fetcher, host: Callable[[], str], length: bytes
) -> None:
    """The request-smuggling shape: Transfer-Encoding overrides Content-Length, and a
    connection that framed a message two ways is closed, never pooled (RFC 9112 6.3)."""
    content = b"0123456789abcdef"
    wire = (
        b"HTTP/1.1 200 OK\r\nContent-Length: " + length + b"\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n10\r\n" + content + b"\r\n0\r\n\r\n"
    )
    with RawServer(host(), serve_each(lambda conn, head: wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            first = await f.get_asset(server.url, "a.js")
            second = await f.get_asset(server.url, "a.js")
    for got in (first, second):
        # never the first three bytes hashed as the file (a false mismatch)
        assert got.ok, got.error
        assert got.hashes["sha256"] == sha(content) and got.size == len(content)
    assert server.connections == 2  # never reused


# ------------------------------------------------------------- persistence


def keep_open(wire: bytes) -> Callable[[RawConn], None]:
    """Answer every request with ``wire`` and never close: the client decides."""
    return serve_each(lambda conn, head: wire)


@pytest.mark.parametrize(
    "wire",
    [
        response(200, HELLO, headers={"Connection": "close"}),
        response(200, HELLO, headers={"Connection": "Keep-Alive, Close"}),
        response(200, HELLO).replace(b"HTTP/1.1", b"HTTP/1.0", 1),
    ],
    ids=["close", "close-among-tokens", "http1.0-default"],
)
async def test_a_connection_the_server_closes_is_not_reused(
    make_fetcher, host: Callable[[], str], wire: bytes
) -> None:
    with RawServer(host(), keep_open(wire)) as server:
        async with make_fetcher() as f:
            got = [await f.get_asset(server.url, "a.js") for _ in range(3)]
    assert all(g.ok and g.hashes["sha256"] == sha(HELLO) for g in got), got
    assert server.connections == 3


async def test_http_1_0_keep_alive_is_reused_by_the_default_transport(
    make_fetcher, host: Callable[[], str]
) -> None:
    """``Connection: keep-alive`` on an HTTP/1.0 response keeps it open (RFC 9112 9.3)."""
    wire = response(200, HELLO, headers={"Connection": "keep-alive"})
    wire = wire.replace(b"HTTP/1.1", b"HTTP/1.0", 1)
    with RawServer(host(), keep_open(wire)) as server:
        async with make_fetcher() as f:
            got = [await f.get_asset(server.url, "a.js") for _ in range(3)]
    assert all(g.ok and g.hashes["sha256"] == sha(HELLO) for g in got), got
    assert server.connections == 1


# ------------------------------------------------------------- refused responses


async def test_101_switching_protocols_is_refused(make_fetcher, host: Callable[[], str]) -> None:
    """Nobody asked for an upgrade: what follows a 101 is another protocol, not a body."""
    wire = (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
        + response(200, b"forged")
    )
    with RawServer(host(), keep_open(wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    refused(got, "101 Switching Protocols is not supported")
    assert got.status in (None, 101)


def head_of(size: int) -> bytes:
    """A 200 response (body "hello") whose head is ``size`` bytes before its blank line
    (status line and header lines; the CRLF CRLF that ends it not counted)."""
    start = b"HTTP/1.1 200 OK\r\nContent-Length: 5"
    filler = b""
    while size - len(start) - len(filler) >= 100 + 10:
        filler += b"\r\nX-Filler: " + b"f" * 88  # 100-byte lines: under every line cap
    head = start + filler + b"\r\nX-Last: "
    head += b"l" * (size - len(head))
    assert len(head) == size
    return head + b"\r\n\r\n" + HELLO


async def test_a_response_head_over_every_limit_is_refused(
    make_fetcher, host: Callable[[], str]
) -> None:
    """The head limit is 64 KiB (MAX_HEAD): a 256 KiB head is refused."""
    with RawServer(host(), keep_open(head_of(4 * MAX_HEAD))) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    refused(got, f"response head larger than {MAX_HEAD} bytes")


@pytest.mark.parametrize(("size", "ok"), [(MAX_HEAD, True), (MAX_HEAD + 1, False)])
async def test_the_head_limit_is_exact(
    make_fetcher, host: Callable[[], str], size: int, ok: bool
) -> None:
    with RawServer(host(), keep_open(head_of(size))) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    if ok:
        assert got.ok and got.hashes["sha256"] == sha(HELLO), got.error
    else:
        refused(got, f"response head larger than {MAX_HEAD} bytes")


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("size", [b"zz", b"-5", b"0x5", b"+5", b"", b"5 5"], ids=repr)
async def test_an_invalid_chunk_size_is_refused(
    make_fetcher, host: Callable[[], str], size: bytes
) -> None:
    wire = CHUNKED_HEAD + size + b"\r\nhello\r\n0\r\n\r\n"
    with RawServer(host(), keep_open(wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    refused(got, "invalid chunk size")


async def test_a_chunk_size_of_16_hex_digits_is_refused(
    make_fetcher, host: Callable[[], str]
) -> None:
    """Sizes past 15 hex digits (2**60 bytes) are no file: refused at once, not waited on."""
    wire = CHUNKED_HEAD + b"1" * 16 + b"\r\nhello\r\n0\r\n\r\n"
    with RawServer(host(), keep_open(wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    refused(got, "invalid chunk size")


async def test_a_chunk_longer_than_declared_is_refused(
    make_fetcher, host: Callable[[], str]
) -> None:
    wire = CHUNKED_HEAD + b"5\r\nhello, and more\r\n0\r\n\r\n"
    with RawServer(host(), keep_open(wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    refused(got, "chunk data longer than its declared size")


async def test_a_connection_closed_mid_chunk_is_refused(
    make_fetcher, host: Callable[[], str]
) -> None:
    def handler(conn: RawConn) -> None:
        if conn.read_request() is not None:
            conn.send(CHUNKED_HEAD + b"a\r\nhello")  # 5 of 10 bytes, then the close

    with RawServer(host(), handler) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    refused(got, "connection closed in the middle of a chunk")


@pytest.mark.parametrize(
    "line", [b"NoColonHere", b"X-Name value", b" folded: continuation"], ids=repr
)
async def test_a_header_line_without_a_colon_is_refused(
    make_fetcher, host: Callable[[], str], line: bytes
) -> None:
    wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n" + line + b"\r\n\r\n" + HELLO
    with RawServer(host(), keep_open(wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    refused(got, "invalid header line")


# ------------------------------------------------------------- repeated Content-Length


@pytest.mark.parametrize(
    "lengths",
    [[b"5, 5"], [b"5", b"5"], [b"5,5, 5"]],
    ids=["list", "two-lines", "three"],
)
async def test_repeated_identical_content_lengths_are_one_length(
    make_fetcher, host: Callable[[], str], lengths: list[bytes]
) -> None:
    """RFC 9110 8.6: a recipient may read identical values as one, or refuse them."""
    fields = b"".join(b"Content-Length: " + value + b"\r\n" for value in lengths)
    wire = b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n" + HELLO
    with RawServer(host(), keep_open(wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            first = await f.get_asset(server.url, "a.js")
            second = await f.get_asset(server.url, "a.js")
    for got in (first, second):
        assert got.hashes.get("sha256") in (None, sha(HELLO)), got.hashes
    assert first.ok and second.ok, (first.error, second.error)
    assert server.connections == 1


@pytest.mark.parametrize(
    "lengths", [[b"5, 6"], [b"5", b"6"], [b"5, 5, 50"]], ids=["list", "two-lines", "three"]
)
async def test_differing_content_lengths_are_refused(
    make_fetcher, host: Callable[[], str], lengths: list[bytes]
) -> None:
    fields = b"".join(b"Content-Length: " + value + b"\r\n" for value in lengths)
    wire = b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n" + HELLO + b"X"
    with RawServer(host(), keep_open(wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    refused(got, "invalid Content-Length")


# ------------------------------------------------------------- bytes nobody asked for


@pytest.mark.parametrize("arrival", ["same-segment", "while-idle", "undelivered"])
async def test_a_response_nobody_asked_for_is_never_the_next_answer(
    make_fetcher, host: Callable[[], str], arrival: str
) -> None:
    """HTTP/1.1 has no request ids: a second response sent after the first, in the
    same segment (read with it) or later (while the connection is idle in the pool),
    would be taken as the answer to the next request, and the right file reported as
    a wrong one. Such a connection is never reused. "undelivered": the forgery sits in
    the socket, not yet handed to the connection (the event loop has not run since),
    when the next request takes the connection out of the pool: the poll before reuse
    is all that stands between it and the next answer."""
    sent = threading.Event()
    forged = response(200, b"forged")

    def handler(conn: RawConn) -> None:
        while (head := conn.read_request()) is not None:
            answer = response(200, b"real " + RawConn.target(head).encode())
            if conn.index != 0:
                conn.send(answer)
            elif arrival == "same-segment":
                conn.send(answer + forged)
            else:
                conn.send(answer)
                time.sleep(0.05)  # the client has read its answer and pooled the connection
                conn.send(forged)
                sent.set()

    with RawServer(host(), handler) as server:
        async with make_fetcher(retry={"attempts": 1}) as f:
            first = await f.get_asset(server.url, "a.js")
            if arrival == "while-idle":
                await eventually(sent.is_set, timeout=10)
                for _ in range(10):  # the event loop runs: the forgery is delivered
                    await asyncio.sleep(0.01)
            elif arrival == "undelivered":  # the event loop does not run meanwhile
                assert sent.wait(timeout=10)
                time.sleep(0.05)  # the forgery reaches the client's socket
            second = await f.get_asset(server.url, "b.js")
    assert first.hashes["sha256"] == sha(b"real /a.js"), first.error
    assert second.ok and second.hashes["sha256"] == sha(b"real /b.js"), second.error
    assert server.connections == 2
