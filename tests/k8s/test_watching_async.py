"""The watch loop on the asynchronous client (control/watching.py ``Watching.run``).

The same rules as the loop on threads (tests/k8s/test_watching.py), driven with
coroutines that fail on cue: a broken watch resumes from the last resourceVersion it
delivered, only a 410 (or a failed list) lists again, the backoff counts the failures
since the last list, a 429's hold binds the watch's name (a run started again waits it
out), and ``stop`` or a cancellation ends a watch that is streaming, at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator
from typing import Any

from artifactcheck.clients.kube import Throttled, WatchExpired
from artifactcheck.control.context import Context
from artifactcheck.control.controller_settings import ControllerSettings
from artifactcheck.control.metrics import Metrics
from artifactcheck.control.watching import Watching
from artifactcheck.model.errors import DependencyError
from artifactcheck.tenancy.admission import AdminConfig

Event = tuple[str, dict[str, Any]]


def watching(seed: int = 7) -> Watching:
    settings = ControllerSettings(backoff_base=0.5, backoff_max=30.0)
    ctx = Context(
        None, settings, AdminConfig(), Metrics(), logging.getLogger("test"), rng=random.Random(seed)
    )
    return Watching(ctx)


async def nothing() -> AsyncIterator[Event]:
    return
    yield  # an async generator that yields nothing


async def test_breaks_resume_from_the_last_version_and_410_relists() -> None:
    """List at 10; the watch delivers 11 then breaks: resumed from 11 (no list); then
    a 410: relisted (at 20), watched from 20; the backoff restarts after that list;
    bookmarks move the version on without being delivered."""
    w = watching()
    lists: list[str] = []
    watches: list[str] = []
    failures_seen: list[int] = []
    stop = asyncio.Event()
    script: list[list[Any]] = [
        [("ADDED", {"metadata": {"resourceVersion": "11"}}), DependencyError("cut")],
        [DependencyError("cut again")],
        [WatchExpired("410")],
        [("BOOKMARK", {"metadata": {"resourceVersion": "25"}}), DependencyError("cut")],
        [],  # ends normally: the test stops here
    ]

    async def list_fn() -> tuple[list[str], str]:
        lists.append("list")
        return ["item"], "10" if len(lists) == 1 else "20"

    async def watch_fn(rv: str) -> AsyncIterator[Event]:
        watches.append(rv)
        for step in script.pop(0):
            if isinstance(step, Exception):
                raise step
            yield step
        if not script:
            stop.set()

    real = w.wait_after

    def spy(failures: int, exc: Any) -> float:
        failures_seen.append(failures)
        return real(failures, exc) / 1000  # the rule, not its wall time, is tested

    w.wait_after = spy  # type: ignore[method-assign]
    events: list[str] = []
    await asyncio.wait_for(
        w.run(
            stop,
            name="test",
            list_fn=list_fn,
            watch_fn=watch_fn,
            on_sync=lambda items: events.append("sync"),
            on_event=lambda kind, obj: events.append(kind),
        ),
        timeout=30,
    )
    assert watches == ["10", "11", "11", "20", "25"]
    assert lists == ["list", "list"]
    assert events == ["sync", "ADDED", "sync"]
    assert failures_seen == [1, 2, 1]  # a 410 is no failure; a list resets the count


async def test_a_watch_started_again_waits_out_its_predecessors_retry_after() -> None:
    """A run throttled (429, Retry-After 0.6 s) and cancelled while it waits: the run
    started in its place asks no sooner than the server asked; another watch is not
    held. The hold is the watch's, not a thread's: both runs are tasks of one loop."""
    w = watching()
    asked: list[tuple[str, float]] = []

    def lister(name: str, fail: bool) -> Any:
        async def list_fn() -> tuple[list[str], str]:
            asked.append((name, time.monotonic()))
            if fail:
                raise Throttled("429", retry_after=0.6)
            raise DependencyError("stop here")

        return list_fn

    async def one(name: str, fail: bool, stop: asyncio.Event) -> None:
        await w.run(
            stop,
            name=name,
            list_fn=lister(name, fail),
            watch_fn=lambda rv: nothing(),
            on_sync=lambda items: None,
            on_event=lambda kind, obj: None,
        )

    first = asyncio.create_task(one("pods a", True, asyncio.Event()))
    while not asked:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    first.cancel()  # ended while waiting out the 429
    again, other = asyncio.Event(), asyncio.Event()
    tasks = [
        asyncio.create_task(one("pods a", False, again)),
        asyncio.create_task(one("pods b", False, other)),
    ]
    async with asyncio.timeout(30):
        while [n for n, _ in asked[1:]].count("pods a") < 1 or len(asked) < 3:
            await asyncio.sleep(0.01)
    again.set()
    other.set()
    await asyncio.gather(*tasks, first, return_exceptions=True)
    throttled_at = asked[0][1]
    a_at = next(t for n, t in asked[1:] if n == "pods a")
    b_at = next(t for n, t in asked[1:] if n == "pods b")
    assert a_at - throttled_at >= 0.6
    assert b_at - throttled_at < 0.6


async def test_stop_ends_a_streaming_watch_at_once_and_closes_it() -> None:
    w = watching()
    stop = asyncio.Event()
    closed: list[bool] = []
    streaming = asyncio.Event()

    async def list_fn() -> tuple[list[str], str]:
        return [], "1"

    async def watch_fn(rv: str) -> AsyncIterator[Event]:
        try:
            yield ("ADDED", {"metadata": {"resourceVersion": "2"}})
            streaming.set()
            await asyncio.sleep(3600)  # a watch the server keeps open
        finally:
            closed.append(True)

    run = asyncio.create_task(
        w.run(
            stop,
            name="test",
            list_fn=list_fn,
            watch_fn=watch_fn,
            on_sync=lambda items: None,
            on_event=lambda kind, obj: None,
        )
    )
    await asyncio.wait_for(streaming.wait(), timeout=10)
    started = time.monotonic()
    stop.set()
    await asyncio.wait_for(run, timeout=5)
    assert time.monotonic() - started < 1.0
    assert closed == [True]
