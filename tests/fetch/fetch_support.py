"""Helpers shared by the fetch tests (fake sleep and rng, settings, polling, TLS)."""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import trustme

from artifactcheck.model.settings import HttpSettings

if TYPE_CHECKING:
    from rawserver import RawConn


class RecordingSleep:
    """A fake asyncio.sleep: records the delays, yields once, never waits."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


class UpperBoundRng(random.Random):
    """An rng whose ``uniform(a, b)`` returns ``b``: shows the backoff ceilings."""

    def uniform(self, a: float, b: float) -> float:
        return b


def settings(**http: Any) -> HttpSettings:
    """Test HTTP settings: short timeouts unless a test says otherwise."""
    http.setdefault("connect_timeout", 2.0)
    http.setdefault("read_timeout", 5.0)
    http.setdefault("request_timeout", 10.0)
    return HttpSettings(**http)


async def eventually(predicate: Callable[[], bool], timeout: float = 3.0) -> None:
    """Wait until ``predicate()`` holds (state changed by the fleet's thread)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


def server_context(
    ca: trustme.CA, *names: str, not_after: datetime | None = None
) -> ssl.SSLContext:
    """A server's TLS context with a certificate from ``ca`` for ``names``."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names, not_after=not_after).configure_cert(ctx)
    return ctx


def tls_origin(
    ctx: ssl.SSLContext, heads: list[bytes], body: bytes = b"hello"
) -> Callable[[RawConn], None]:
    """A raw TLS origin for a :class:`rawserver.RawServer`: records each decrypted request
    head and answers ``body``, then closes."""
    from rawserver import response

    def handler(conn: RawConn) -> None:
        with ctx.wrap_socket(conn.sock, server_side=True) as tls:
            buffer = b""
            while b"\r\n\r\n" not in buffer:
                data = tls.recv(65536)
                if not data:
                    return
                buffer += data
            heads.append(buffer.partition(b"\r\n\r\n")[0])
            tls.sendall(response(200, body, headers={"Connection": "close"}))

    return handler
