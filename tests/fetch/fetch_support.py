"""Helpers shared by the fetch tests (fake sleep and rng, settings, polling, TLS)."""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import trustme

from artifactcheck.model.settings import HttpSettings


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
