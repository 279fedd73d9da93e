"""The read timeout bounds each wait for bytes, not the whole response.

``read_timeout`` is the time allowed between two reads: every wait for more bytes has
its own deadline, counted from when it starts. A connection keeps one timer for these
deadlines (re-armed when it fires early, for a later wait), so the rule is pinned here
where it could break: a body arriving in pieces over longer than one read timeout,
a stall after several pieces, and a stall on a connection taken again from the pool.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import httpx
import pytest
from rawserver import RawConn, RawServer

from artifactcheck.fetch import build_ssl_context
from artifactcheck.fetch.error_kinds import ReadTimeout
from artifactcheck.fetch.http1 import Http1Transport
from artifactcheck.model.settings import HttpSettings

PIECE = b"x" * 100


def _drip(pieces: int, gap: float, *, stall_after: bool) -> Callable[[RawConn], None]:
    """Answer the first request with a head then ``pieces`` pieces ``gap`` apart; with
    ``stall_after`` the declared length is one piece longer and never completed."""

    def handler(conn: RawConn) -> None:
        if conn.read_request() is None:
            return
        declared = len(PIECE) * (pieces + (1 if stall_after else 0))
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % declared)
        for _ in range(pieces):
            time.sleep(gap)
            conn.send(PIECE)
        conn.wait_closed(timeout=10)

    return handler


def _answers_once_then_silent(*, for_seconds: float) -> Callable[[RawConn], None]:
    """A server that answers a connection's first request and never its second."""

    def handler(conn: RawConn) -> None:
        if conn.read_request() is None:
            return
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        conn.read_request()
        conn.wait_closed(timeout=for_seconds)  # the second request is never answered

    return handler


async def test_a_body_arriving_in_pieces_is_not_cut_by_the_first_read_deadline(
    make_fetcher, host: Callable[[], str]
) -> None:
    """Six pieces 0.15 s apart: 0.9 s in all, past 0.4 s, but no gap is."""
    http = {"read_timeout": 0.4, "request_timeout": 10}
    with RawServer(host(), _drip(6, 0.15, stall_after=False)) as server:
        async with make_fetcher(http=http, retry={"attempts": 1}) as f:
            got = await f.get_asset(server.url, "a.js")
    assert got.ok, got.error
    assert got.hashes["sha256"] == hashlib.sha256(PIECE * 6).hexdigest()


async def test_a_stall_after_pieces_times_out_one_read_timeout_after_the_last(
    make_fetcher, host: Callable[[], str]
) -> None:
    """Pieces keep the wait alive past the first deadline; the stall after them is a
    read timeout about 0.4 s after the last piece, never the 10 s request limit."""
    http = {"read_timeout": 0.4, "request_timeout": 10}
    with RawServer(host(), _drip(4, 0.15, stall_after=True)) as server:
        async with make_fetcher(http=http, retry={"attempts": 1}) as f:
            started = time.monotonic()
            got = await f.get_asset(server.url, "a.js")
            took = time.monotonic() - started
    assert got.error_kind == "timeout", got.error
    assert "read_timeout" in (got.error or "")
    assert 0.6 + 0.4 - 0.1 <= took < 3.0, took  # 4 gaps of 0.15, then 0.4 of silence


async def test_a_stall_on_a_reused_connection_is_a_read_timeout(
    make_fetcher, host: Callable[[], str]
) -> None:
    """The first answer comes at once; the second request, on the same pooled
    connection, gets no answer: a read timeout, however the connection's timer stood."""

    handler = _answers_once_then_silent(for_seconds=10)
    http = {"read_timeout": 0.4, "request_timeout": 10}
    with RawServer(host(), handler) as server:
        async with make_fetcher(http=http, retry={"attempts": 1}) as f:
            first = await f.get_asset(server.url, "a.js")
            started = time.monotonic()
            second = await f.get_asset(server.url, "b.js")
            took = time.monotonic() - started
    assert first.ok, first.error
    assert server.connections == 1  # the second request went on the pooled connection
    assert second.error_kind == "timeout", second.error
    assert "read_timeout" in (second.error or "")
    assert 0.3 <= took < 3.0, took


async def test_a_shorter_read_timeout_on_a_reused_connection_is_kept(
    host: Callable[[], str],
) -> None:
    """The connection's timer still stands for the first request's long read timeout;
    the second request, on the same connection, asks for a short one (a deadline cut
    short) and gets no answer: it times out by its own, not by the timer left armed."""

    handler = _answers_once_then_silent(for_seconds=20)

    def timeouts(read: float) -> dict[str, dict[str, float]]:
        return {"timeout": {"connect": 5.0, "read": read, "write": 5.0, "pool": 5.0}}

    with RawServer(host(), handler) as server:
        pool = Http1Transport(ssl_context=build_ssl_context(HttpSettings()))
        try:
            first = await pool.handle_async_request(
                httpx.Request("GET", server.url + "a.js", extensions=timeouts(10.0))
            )
            assert await first.aread() == b"ok"
            await first.aclose()
            started = time.monotonic()
            with pytest.raises(ReadTimeout):
                await pool.handle_async_request(
                    httpx.Request("GET", server.url + "b.js", extensions=timeouts(0.3))
                )
            took = time.monotonic() - started
        finally:
            await pool.aclose()
    assert server.connections == 1
    assert 0.25 <= took < 5.0, took
