"""How much one read of a socket asks for: READ_SIZE for heads and small bodies,
STREAM_READ_SIZE while a larger body streams; and bodies arrive whole either way.

asyncio's socket transport reads into a new bytes object as large as it asks for; at its
default (256 KiB) the C library maps fresh memory for every read that brings a small
response (:data:`artifactcheck.fetch.connection.READ_SIZE`). These tests hold the read
sizes where they are set, on real loopback connections (one with a whole megabyte
waiting in the kernel), and that what is read in those pieces is every byte served.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
import trustme
from fetch_support import server_context, tls_origin
from proxy_support import LoggingProxy
from rawserver import RawConn, RawServer, response, serve_each

from artifactcheck.fetch import http1
from artifactcheck.fetch.connection import READ_SIZE, STREAM_READ_SIZE, Connection
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.proxy import Proxies
from artifactcheck.model.settings import HttpSettings, RetrySettings

MEGABYTE = bytes(range(256)) * 4096


async def test_a_megabyte_waiting_in_the_kernel_is_read_in_pieces_of_at_most_read_size() -> None:
    sent = threading.Event()

    def push(conn: RawConn) -> None:
        conn.send(MEGABYTE)  # returns once the kernel holds all of it
        sent.set()
        conn.wait_closed()

    loop = asyncio.get_running_loop()
    with RawServer("127.0.0.1", push) as server:
        pieces: list[int] = []

        class Recording(Connection):
            def data_received(self, data: bytes) -> None:
                pieces.append(len(data))
                super().data_received(data)

        sock = socket.socket()
        # room in the kernel for the whole megabyte, so one read could take far more
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * len(MEGABYTE))
        sock.setblocking(False)
        await loop.sock_connect(sock, (server.host, server.port))
        transport, conn = await loop.create_connection(
            lambda: Recording(loop, ("http", server.host, server.port, None)), sock=sock
        )
        try:
            transport.pause_reading()  # nothing read until the whole megabyte waits
            assert await asyncio.to_thread(sent.wait, 10)
            transport.resume_reading()
            while conn.size < len(MEGABYTE):
                await conn.wait(5)
            assert max(pieces) <= READ_SIZE, pieces
            assert pieces[0] == READ_SIZE  # a read asks for all it may: no smaller either
            assert b"".join(conn.take(conn.size) for _ in range(len(pieces))) == MEGABYTE
        finally:
            transport.close()


async def test_a_body_larger_than_one_read_is_hashed_whole() -> None:
    def answer(_conn: RawConn, _head: bytes) -> bytes:
        return response(200, MEGABYTE, headers={"Content-Type": "application/javascript"})

    with RawServer("127.0.0.1", serve_each(answer)) as server:
        async with Fetcher(http=HttpSettings(), retry=RetrySettings()) as fetcher:
            got = await fetcher.get_asset(server.url, "assets/vendor-9c1f.js")
    assert got.ok, got.error
    assert got.size == len(MEGABYTE) > 2 * READ_SIZE
    assert got.hashes["sha256"] == hashlib.sha256(MEGABYTE).hexdigest()


SMALL = b"export default 1;\n" * 2_000  # 36 KB: one read


async def test_a_large_body_streams_in_larger_reads_and_the_next_head_is_read_small(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While a body larger than one read streams, the socket is asked for
    STREAM_READ_SIZE a read (fewer pieces through every layer); once it is read and the
    connection pooled, the next response is read in READ_SIZE pieces again."""
    reads: list[tuple[int, int]] = []  # (bytes, the read size asked) of each read

    class Recording(Connection):
        def data_received(self, data: bytes) -> None:
            reads.append((len(data), cast(Any, self.transport).max_size))
            super().data_received(data)

    monkeypatch.setattr(http1, "Connection", Recording)

    def answer(_conn: RawConn, head: bytes) -> bytes:
        body = MEGABYTE if RawConn.target(head).endswith("vendor.js") else SMALL
        return response(200, body, headers={"Content-Type": "application/javascript"})

    with RawServer("127.0.0.1", serve_each(answer)) as server:
        async with Fetcher(http=HttpSettings(), retry=RetrySettings()) as fetcher:
            first = await fetcher.get_asset(server.url, "assets/app.js")
            streamed = len(reads)
            large = await fetcher.get_asset(server.url, "assets/vendor.js")
            during = reads[streamed:]
            small = await fetcher.get_asset(server.url, "assets/app.js")
            after = reads[streamed + len(during) :]
    assert [g.hashes["sha256"] for g in (first, large, small)] == [
        hashlib.sha256(SMALL).hexdigest(),
        hashlib.sha256(MEGABYTE).hexdigest(),
        hashlib.sha256(SMALL).hexdigest(),
    ]
    assert server.connections == 1  # one pooled connection for all three
    assert {asked for _, asked in reads[:streamed]} == {READ_SIZE}
    # the head arrives in a read of READ_SIZE; the rest of the megabyte in larger ones
    asked = [size for _, size in during]
    assert asked[0] == READ_SIZE and asked[-1] == STREAM_READ_SIZE and asked == sorted(asked)
    assert after and {asked for _, asked in after} == {READ_SIZE}


async def test_a_small_body_arriving_late_is_still_read_small(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A body whose rest fits in one read streams after its head (it had not all
    arrived) without larger reads: the larger size is for what is larger."""
    reads: list[int] = []

    class Recording(Connection):
        def data_received(self, data: bytes) -> None:
            reads.append(cast(Any, self.transport).max_size)
            super().data_received(data)

    monkeypatch.setattr(http1, "Connection", Recording)

    def late(conn: RawConn) -> None:
        while conn.read_request() is not None:
            whole = response(200, SMALL, headers={"Content-Type": "application/javascript"})
            conn.send(whole[:4096])  # the head and a little of the body
            time.sleep(0.2)  # the client has read them, and waits for the rest
            conn.send(whole[4096:])

    with RawServer("127.0.0.1", late) as server:
        async with Fetcher(http=HttpSettings(), retry=RetrySettings()) as fetcher:
            got = await fetcher.get_asset(server.url, "assets/app.js")
    assert got.hashes["sha256"] == hashlib.sha256(SMALL).hexdigest()
    assert len(reads) >= 2 and set(reads) == {READ_SIZE}, reads


async def test_through_a_proxys_tunnel_the_tls_layer_reads_for_itself(
    make_fetcher, host: Callable[[], str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Upgraded to TLS inside a CONNECT tunnel, a connection reads through asyncio's TLS
    layer, whose buffer is allocated once: no read size is set on its transport (it
    takes none), and a megabyte arrives whole."""
    seen: list[object] = []  # what each read's transport says of a read size

    class Recording(Connection):
        def data_received(self, data: bytes) -> None:
            seen.append(getattr(self.transport, "max_size", None))
            super().data_received(data)

    monkeypatch.setattr(http1, "Connection", Recording)
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    address = host()
    origin = tls_origin(server_context(ca, address), [], MEGABYTE)
    with RawServer(address, origin) as cdn, LoggingProxy(host()) as proxy:
        async with make_fetcher(
            http={"ca_bundle": str(ca_file), "proxy_instances": True},
            proxies=Proxies.single(proxy.url),
        ) as fetcher:
            got = await fetcher.get_asset(f"https://{address}:{cdn.port}/", "vendor.js")
    assert got.ok, got.error
    assert got.hashes["sha256"] == hashlib.sha256(MEGABYTE).hexdigest()
    assert proxy.requests == [f"CONNECT {address}:{cdn.port} HTTP/1.1"]
    # the proxy's answer to CONNECT on the plain socket; then every read of the TLS layer
    assert seen[0] == READ_SIZE and len(seen) > 2 and set(seen[1:]) == {None}, seen
