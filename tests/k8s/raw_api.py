"""A raw-socket API server for the bytes on the wire: what a client sent, exactly, and
answers written by hand (the fake API server speaks correct HTTP; these tests need to
read a request's bytes and to cut an answer where they choose)."""

from __future__ import annotations

import asyncio
import socket


def listening(backlog: int = 1) -> socket.socket:
    """A non-blocking listener on 127.0.0.1, on a port of the system's choice."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(backlog)
    srv.setblocking(False)
    return srv


async def request_of(conn: socket.socket) -> bytes:
    """One whole request read off ``conn``: its head and its Content-Length body (what
    arrived, if the client closed first)."""
    loop = asyncio.get_running_loop()
    data = b""
    while True:
        head, sep, rest = data.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        if sep and len(rest) >= length:
            return data
        chunk = await loop.sock_recv(conn, 65536)
        if not chunk:
            return data
        data += chunk


def json_answer(body: bytes, *, chunked: bool = False, ended: bool = True) -> bytes:
    """A 200 with a JSON ``body``; ``chunked``: as one chunk (a watch's events), and the
    stream's last chunk too unless not ``ended`` (the watch goes on)."""
    if chunked:
        return (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(body), body)
        ) + (b"0\r\n\r\n" if ended else b"")
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
