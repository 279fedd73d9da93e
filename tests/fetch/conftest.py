"""Fixtures for the fetch tests: a loopback fleet, fresh 127.x addresses, fetchers.

Everything here is hermetic (the root conftest clears proxy and CA variables): every
test gets its own servers on distinct loopback addresses and random ports, and a test
fails if it leaves a thread or (through ``make_fetcher``) an asyncio task behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from fetch_support import RecordingSleep, settings

from artifactcheck.fetch import Fetcher
from artifactcheck.model.settings import RetrySettings
from artifactcheck_sim.web import WebFleet, loopback_hosts

# Addresses 127.0.3.1 onwards, handed out once per session so tests never share one.
_HOSTS = iter(loopback_hosts(20_000, "127.0.3.1"))


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5
    while True:
        leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert not leaked, f"threads left behind: {leaked}"


@pytest.fixture
def host() -> Callable[[], str]:
    """Call to get a loopback address no other test uses."""
    return lambda: next(_HOSTS)


@pytest.fixture
def fleet() -> Iterator[WebFleet]:
    with WebFleet() as running:
        yield running
    assert not running.servers


@pytest.fixture
def make_fetcher() -> Callable[..., contextlib.AbstractAsyncContextManager[Fetcher]]:
    """``async with make_fetcher(http={...}, retry={...}, **kw) as fetcher:``.

    Retries default to instant (fake sleep); on exit the fetcher is closed and no task
    other than the test's own may remain.
    """

    @contextlib.asynccontextmanager
    async def make(
        *, http: dict[str, Any] | None = None, retry: dict[str, Any] | None = None, **kw: Any
    ) -> AsyncIterator[Fetcher]:
        kw.setdefault("sleep", RecordingSleep())
        fetcher = Fetcher(http=settings(**(http or {})), retry=RetrySettings(**(retry or {})), **kw)
        async with fetcher:
            yield fetcher
        # Abandoned async generators inside httpx are finalised by short-lived tasks
        # the loop schedules itself; anything still running after a moment is a leak.
        current = asyncio.current_task()
        for _ in range(50):
            left = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
            if not left:
                break
            await asyncio.sleep(0.01)
        assert not left, f"tasks left behind: {left}"

    return make
