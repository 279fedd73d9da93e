"""The controller's watch loop (control/watching.py): when it lists, from where it
resumes, and how long it waits after a failure.

Driven with list and watch functions that fail on cue, no API server: a watch that
breaks resumes from the last resourceVersion it delivered, only a 410 (or a failed
list) lists again, and the waits grow with the failures since the last successful
list, by the project's one backoff rule (fetch/retry.retry_wait): full jitter, never
sooner than a 429's Retry-After.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from artifactcheck.clients.kube import Throttled, WatchExpired
from artifactcheck.control.context import Context
from artifactcheck.control.metrics import Metrics
from artifactcheck.control.settings import ControllerSettings
from artifactcheck.control.watching import Watching
from artifactcheck.fetch.retry import full_jitter
from artifactcheck.model.errors import DependencyError
from artifactcheck.tenancy.admission import AdminConfig

BASE, CAP = 0.5, 30.0


def watching(seed: int = 7) -> Watching:
    settings = ControllerSettings(backoff_base=BASE, backoff_max=CAP)
    ctx = Context(
        None, settings, AdminConfig(), Metrics(), logging.getLogger("test"), rng=random.Random(seed)
    )
    return Watching(ctx)


def drive(w: Watching, scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a test's scenario (30 s at most), then end its watch threads. Shutdown is
    announced before the loop closes, so a request still waiting for its turn or a
    hold (a test that failed) gives up instead of hanging the loop's executor."""

    async def bounded() -> None:
        try:
            await asyncio.wait_for(scenario(), timeout=30)
        finally:
            w._stopping.set()

    try:
        asyncio.run(bounded())
    finally:
        w.pool.shutdown(wait=True)


def test_the_wait_is_full_jitter_growing_with_the_failures() -> None:
    w, rng = watching(), random.Random(7)
    for failures in range(1, 10):
        want = full_jitter(failures - 1, BASE, CAP, rng)
        assert w.wait_after(failures, DependencyError("cut")) == want


def test_the_wait_is_never_sooner_than_retry_after() -> None:
    w = watching()
    for failures in range(1, 6):  # ceilings 0.5 .. 8: all below the asked 9 s
        assert w.wait_after(failures, Throttled("429", retry_after=9.0)) >= 9.0
    # a late failure's jitter may exceed a short Retry-After: the longer wait wins
    waits = [w.wait_after(8, Throttled("429", retry_after=0.1)) for _ in range(200)]
    assert min(waits) >= 0.1 and max(waits) > 1.0


def test_breaks_resume_from_the_last_version_and_410_relists() -> None:
    """List at 10; the watch delivers 11 then breaks: resumed from 11 (no list); then
    a 410: relisted (at 20), watched from 20; the backoff restarts after that list."""
    w = watching()
    lists: list[str] = []
    watches: list[str] = []
    failures_seen: list[int] = []
    stop = asyncio.Event()
    script: list[Any] = [
        [("ADDED", {"metadata": {"resourceVersion": "11"}}), DependencyError("cut")],
        [DependencyError("cut again")],
        [WatchExpired("410")],
        [DependencyError("cut after the relist")],
        [],  # ends normally: the test stops here
    ]

    def list_fn() -> tuple[list[str], str]:
        lists.append("list")
        return ["item"], "10" if len(lists) == 1 else "20"

    def watch_fn(rv: str) -> Iterator[tuple[str, dict[str, Any]]]:
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

    async def run() -> None:
        await w.run(
            stop,
            name="test",
            list_fn=list_fn,
            watch_fn=watch_fn,
            on_sync=lambda items: events.append("sync"),
            on_event=lambda kind, obj: events.append(kind),
        )

    drive(w, run)
    assert watches == ["10", "11", "11", "20", "20"]
    assert lists == ["list", "list"]
    assert events == ["sync", "ADDED", "sync"]
    assert failures_seen == [1, 2, 1]  # a 410 is no failure; a list resets the count


def test_a_stream_opened_after_shutdown_began_is_aborted() -> None:
    stopping = threading.Event()
    settings = ControllerSettings()
    ctx = Context(
        None, settings, AdminConfig(), Metrics(), logging.getLogger("t"), stopping=stopping
    )
    w = Watching(ctx)
    aborted: list[str] = []

    class Response:
        def shutdown(self) -> None:
            aborted.append("shutdown")

        def close(self) -> None:
            aborted.append("close")

    w.track(Response(), True)
    assert aborted == []
    stopping.set()
    w.track(Response(), True)
    assert aborted, "a stream opened during shutdown was left open"
    w.pool.shutdown(wait=True)


def test_a_watch_started_again_waits_out_its_predecessors_retry_after() -> None:
    """A check's loop ended while a 429's Retry-After was running (leadership lost, spec
    rebuilt), and started again at once: its first request still waits for the rest of
    the server's ask. Another watch is not held."""
    w = watching()
    asked: list[tuple[str, float]] = []

    def lister(name: str, fail: bool) -> Any:
        def list_fn() -> tuple[list[str], str]:
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
            watch_fn=lambda rv: iter(()),
            on_sync=lambda items: None,
            on_event=lambda kind, obj: None,
        )

    async def scenario() -> None:
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
        while [n for n, _ in asked[1:]].count("pods a") < 1 or len(asked) < 3:
            await asyncio.sleep(0.01)
        again.set()
        other.set()
        await asyncio.gather(*tasks, first, return_exceptions=True)

    drive(w, scenario)
    throttled_at = asked[0][1]
    a_at = next(t for n, t in asked[1:] if n == "pods a")
    b_at = next(t for n, t in asked[1:] if n == "pods b")
    assert a_at - throttled_at >= 0.6
    assert b_at - throttled_at < 0.5


class Relay:
    """A run cancelled while its request is in flight (leadership lost), a new run of
    the same watch started in its place, and only then the first request answered 429
    (``retry_after=0.6``), on a thread nobody awaits any more.

    The first run's list or watch (``first``) blocks until :meth:`play` answers it; the
    new run's requests record when they are asked and end the run. ``asked`` holds
    (what, monotonic time) in order; ``throttled_at`` when the 429 was raised.
    """

    RETRY_AFTER = 0.6

    def __init__(self) -> None:
        self.w = watching()
        self.asked: list[tuple[str, float]] = []
        self.answer = threading.Event()
        self.throttled_at = 0.0
        #: Set 0.05 s after the 429 is raised.
        self.answered = threading.Event()

    def _throttled(self, what: str) -> None:
        self.asked.append((what, time.monotonic()))
        self.answer.wait(10)
        self.throttled_at = time.monotonic()
        threading.Timer(0.05, self.answered.set).start()
        raise Throttled("429", retry_after=self.RETRY_AFTER)

    def throttled_list(self) -> tuple[list[str], str]:
        self._throttled("list")
        raise AssertionError("unreachable")

    def throttled_watch(self, rv: str) -> Iterator[tuple[str, dict[str, Any]]]:
        self._throttled("watch")
        yield ("unreachable", {})

    def later(self, what: str) -> Any:
        def ask(*_: Any) -> Any:
            self.asked.append((what, time.monotonic()))
            raise DependencyError("stop here")

        return ask

    def run(self, stop: asyncio.Event, list_fn: Any, watch_fn: Any) -> Any:
        return self.w.run(
            stop,
            name="pods a",
            list_fn=list_fn,
            watch_fn=watch_fn,
            on_sync=lambda items: None,
            on_event=lambda kind, obj: None,
        )

    def play(self, first: tuple[Any, Any], second: tuple[Any, Any]) -> tuple[str, float]:
        """Play the scenario; what the new run asked first, and how long after the 429."""

        async def scenario() -> None:
            one = asyncio.create_task(self.run(asyncio.Event(), *first))
            while not self.asked:
                await asyncio.sleep(0.01)
            one.cancel()
            again = asyncio.Event()
            two = asyncio.create_task(self.run(again, *second))
            await asyncio.sleep(0.1)  # the new run is past its own wait, asking
            self.answer.set()
            while len(self.asked) < 2:
                await asyncio.sleep(0.01)
            again.set()
            await asyncio.gather(one, two, return_exceptions=True)

        drive(self.w, scenario)
        what, at = self.asked[1]
        return what, at - self.throttled_at


def test_a_429_answered_after_its_run_was_cancelled_still_holds_the_watch() -> None:
    """The cancelled run's watch is answered 429 while the new run lists: the new run's
    watch still waits out the Retry-After."""
    r = Relay()

    def slow_list() -> tuple[list[str], str]:  # answered just after the 429
        r.answered.wait(10)
        return [], "1"

    first = (lambda: ([], "1"), r.throttled_watch)
    what, after = r.play(first, (slow_list, r.later("watch again")))
    assert what == "watch again"
    assert after >= Relay.RETRY_AFTER, after


def test_a_new_runs_list_waits_for_the_cancelled_runs_list_to_be_answered() -> None:
    """The cancelled run's list is in flight when the new run would list: the new run
    asks only after that list's answer, a 429, and after its Retry-After (the CI
    failure: a list 0.52 s after a 429 asking for 1 s)."""
    r = Relay()
    what, after = r.play((r.throttled_list, r.later("-")), (r.later("list again"), r.later("-")))
    assert what == "list again"
    assert after >= Relay.RETRY_AFTER, after


def test_a_new_runs_watch_waits_for_the_cancelled_runs_watch_to_open() -> None:
    """The same for a watch request: while a cancelled run's watch is not answered yet
    the new run asks nothing, and the 429 that answers it holds the new run's list."""
    r = Relay()
    first = (lambda: ([], "1"), r.throttled_watch)
    what, after = r.play(first, (r.later("list again"), r.later("-")))
    assert what == "list again"
    assert after >= Relay.RETRY_AFTER, after


def test_an_open_stream_does_not_keep_its_watch_from_asking() -> None:
    """A stream that opened (the client's ``opened`` hook: track) releases the asking
    lock while it goes on streaming: a new run of the same watch lists at once."""
    w = watching()
    streaming = threading.Event()
    done = threading.Event()
    listed: list[float] = []

    def open_watch(rv: str) -> Iterator[tuple[str, dict[str, Any]]]:
        w.track(object(), True)
        streaming.set()
        done.wait(10)
        yield from ()

    def later_list() -> tuple[list[str], str]:
        listed.append(time.monotonic())
        raise DependencyError("stop here")

    async def scenario() -> None:
        first = asyncio.create_task(
            w.run(
                asyncio.Event(),
                name="pods a",
                list_fn=lambda: ([], "1"),
                watch_fn=open_watch,
                on_sync=lambda items: None,
                on_event=lambda kind, obj: None,
            )
        )
        await asyncio.to_thread(streaming.wait, 10)
        first.cancel()
        again = asyncio.Event()
        started = time.monotonic()
        second = asyncio.create_task(
            w.run(
                again,
                name="pods a",
                list_fn=later_list,
                watch_fn=lambda rv: iter(()),
                on_sync=lambda items: None,
                on_event=lambda kind, obj: None,
            )
        )
        while not listed:
            await asyncio.sleep(0.01)
        assert listed[0] - started < 1.0
        again.set()
        done.set()
        await asyncio.gather(first, second, return_exceptions=True)

    try:
        drive(w, scenario)
    finally:
        done.set()
    assert listed
