"""No read of a socket asks for more than ``READ_SIZE``, and bodies arrive whole.

asyncio's socket transport reads into a new bytes object as large as it asks for; at its
default (256 KiB) the C library maps fresh memory for every read
(:data:`artifactcheck.fetch.connection.READ_SIZE`). These tests hold the read size where
it is set, on a real loopback connection with a whole megabyte waiting in the kernel, and
that what is read in those pieces is every byte served.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import threading

from rawserver import RawConn, RawServer, response, serve_each

from artifactcheck.fetch.connection import READ_SIZE, Connection
from artifactcheck.fetch.fetcher import Fetcher
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
