"""Informer-style watches: list once, then watch; relist on 410 Gone; back off.

Every watch (the ArtifactChecks, each check's pods) runs in a thread of its own pool
and is tracked while its response is open, so shutdown can abort them all at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from artifactcheck.clients.kube import Throttled, WatchExpired, abort_stream
from artifactcheck.clients.kube_http import KubeHttp
from artifactcheck.control.context import Context, sleep_unless_stopped
from artifactcheck.fetch.retry import retry_wait
from artifactcheck.model.errors import ArtifactCheckError

__all__ = ["RETRY_AFTER_CAP", "Watching"]

_Listed = TypeVar("_Listed")
_Asked = TypeVar("_Asked")

#: The longest Retry-After a watch waits for: the Kubernetes client already cuts a
#: 429's to this (artifactcheck.clients.kube), the rule here only restates it.
RETRY_AFTER_CAP = 60.0


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _release(held: list[threading.Lock] | None) -> None:
    """Release the asking lock in ``held`` unless it was released already."""
    try:
        lock = held.pop() if held is not None else None
    except IndexError:  # released already (list.pop is atomic: one release only)
        return
    if lock is not None:
        lock.release()


class Watching:
    """The watches of one controller: their threads, their open streams, their backoff."""

    def __init__(self, ctx: Context) -> None:
        self.settings = ctx.settings
        self.rng = ctx.rng
        self.metrics = ctx.metrics
        self.log = ctx.log
        self._stopping = ctx.stopping
        #: Open watch responses, aborted at shutdown so their threads end at once.
        self._streams: set[Any] = set()
        self._streams_guard = threading.Lock()
        #: Watches block a thread each for as long as they stream; they get their own
        #: pool so that many checks (one pod watch each) never starve the default
        #: executor that status writes and actions run in.
        self.pool = ThreadPoolExecutor(max_workers=1024, thread_name_prefix="watch")
        #: When each watch (by name) may ask again after a 429: the server's ask binds
        #: the watch, not one run of its loop, so a check started again (leadership
        #: regained, spec rebuilt) waits out its predecessor's Retry-After too.
        self._held_until: dict[str, float] = {}
        self._held_guard = threading.Lock()
        #: One request of each watch (by name) in flight at a time, until its answer's
        #: status is known: a cancelled run's request may still be answered 429 after
        #: the run started in its place has looked for a hold, and that run must not
        #: be asking meanwhile (client-go's reflector, one goroutine per watch, cannot).
        self._asking_locks: dict[str, threading.Lock] = {}
        #: The asking lock a watch request of this thread holds until its stream opens
        #: (``_opening.held``: a one-item list, emptied when the lock is released).
        self._opening = threading.local()
        self._api = ctx.api
        self._kube: KubeHttp | None = None

    @property
    def kube(self) -> KubeHttp:
        """The asynchronous client the watches on it share (one connection pool), made
        from the controller's API client configuration at first use; closed by
        :meth:`close`."""
        if self._kube is None:
            self._kube = KubeHttp.like(self._api)
        return self._kube

    def track(self, response: Any, is_open: bool) -> None:
        """The ``opened`` hook of a watch: remember an open response, forget a closed one
        (one opened after shutdown began is aborted at once). An open stream's status
        is known, so its watch may ask again (:meth:`_streaming`)."""
        if is_open:
            _release(getattr(self._opening, "held", None))
        with self._streams_guard:
            if is_open:
                self._streams.add(response)
            else:
                self._streams.discard(response)
        if is_open and self._stopping.is_set():
            abort_stream(response)

    def abort(self) -> None:
        """Abort every open watch response, so its thread ends now."""
        with self._streams_guard:
            streams = list(self._streams)
        for response in streams:
            abort_stream(response)

    async def close(self) -> None:
        """End the watch threads (after :meth:`abort`)."""
        await asyncio.to_thread(self.pool.shutdown, wait=True, cancel_futures=True)
        if self._kube is not None:
            await self._kube.aclose()

    def wait_after(self, failures: int, exc: ArtifactCheckError) -> float:
        """Seconds before the next try after ``failures`` failed ones in a row (from 1):
        full jitter, but never sooner than a 429's Retry-After asks."""
        return retry_wait(
            failures - 1,
            base=self.settings.backoff_base,
            cap=self.settings.backoff_max,
            rng=self.rng,
            retry_after=exc.retry_after if isinstance(exc, Throttled) else None,
            retry_after_cap=RETRY_AFTER_CAP,
        )

    async def run(
        self,
        stop: asyncio.Event,
        *,
        name: str,
        list_fn: Callable[[], tuple[list[_Listed], str]],
        watch_fn: Callable[[str], Iterator[tuple[str, dict[str, Any]]]],
        on_sync: Callable[[list[_Listed]], None],
        on_event: Callable[[str, dict[str, Any]], None],
    ) -> None:
        """List, then watch from the list's resourceVersion; relist on 410; back off.

        A watch that breaks (cut mid-stream, a 5xx, a 429) resumes from the last
        resourceVersion it delivered, as client-go's reflector does, instead of listing
        everything again: under a loaded API server, relisting every pod at every cut
        is the load that makes it worse. Only a 410 (or a failed list) lists again.
        The backoff grows with the failures since the last successful list.
        """
        failures = 0
        rv: str | None = None
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            if await self._held(name, stop):
                return
            delivered: list[str] = []  # the last resourceVersion the watch delivered
            try:
                if rv is None:
                    items, rv = await asyncio.to_thread(self._asking, name, list_fn)
                    on_sync(items)
                    failures = 0
                queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
                current: str = rv or ""

                def pump(
                    start: str = current,
                    queue: asyncio.Queue[Any] = queue,
                    delivered: list[str] = delivered,
                ) -> str:
                    last = start
                    try:
                        for kind, obj in self._streaming(name, watch_fn, start):
                            last = obj.get("metadata", {}).get("resourceVersion") or last
                            delivered[:] = [last]
                            loop.call_soon_threadsafe(queue.put_nowait, (kind, obj))
                            if self._stopping.is_set():
                                break
                    finally:
                        loop.call_soon_threadsafe(queue.put_nowait, None)
                    return last

                pumping = loop.run_in_executor(self.pool, pump)
                # a run cancelled meanwhile never awaits it: its error is retrieved
                # here, not logged by asyncio as "never retrieved"
                pumping.add_done_callback(_retrieved)
                while (item := await queue.get()) is not None:
                    if item[0] != "BOOKMARK":
                        on_event(*item)
                rv = await pumping
            except WatchExpired:
                self.log.info("watch of %s expired (410 Gone); relisting", name)
                rv = None
            except ArtifactCheckError as exc:
                self.metrics.api_errors.labels(name).inc()
                failures += 1
                delay = self.wait_after(failures, exc)
                self.log.warning("watch of %s failed: %s; retrying in %.2fs", name, exc, delay)
                # resume after what was delivered; a failed list (or a watch that
                # delivered nothing since the list) starts from the list's version
                rv = delivered[0] if delivered else rv
                await sleep_unless_stopped(stop, delay)

    async def run_async(
        self,
        stop: asyncio.Event,
        *,
        name: str,
        list_fn: Callable[[], Awaitable[tuple[list[_Listed], str]]],
        watch_fn: Callable[[str], AsyncIterator[tuple[str, dict[str, Any]]]],
        on_sync: Callable[[list[_Listed]], None],
        on_event: Callable[[str, dict[str, Any]], None],
    ) -> None:
        """:meth:`run` for a watch on the asynchronous client: the same list, resume,
        relist and backoff, with the requests and the stream on this task.

        No thread, no asking lock: a request is awaited by the run that made it, so a
        run cancelled meanwhile (leadership lost, spec rebuilt) cancels its request
        with it and no answer can come to a run that is gone. A 429's hold is kept by
        name all the same, so a run started again waits out its predecessor's.
        """
        failures = 0
        rv: str | None = None
        while not stop.is_set():
            if await self._held(name, stop):
                return
            delivered: list[str] = []  # the last resourceVersion the watch delivered
            try:
                if rv is None:
                    items, rv = await list_fn()
                    on_sync(items)
                    failures = 0
                rv = await self._follow(stop, watch_fn(rv or ""), rv or "", delivered, on_event)
                if rv is None:  # stopped
                    return
            except WatchExpired:
                self.log.info("watch of %s expired (410 Gone); relisting", name)
                rv = None
            except ArtifactCheckError as exc:
                if isinstance(exc, Throttled):
                    self._hold(name, exc.retry_after)
                self.metrics.api_errors.labels(name).inc()
                failures += 1
                delay = self.wait_after(failures, exc)
                self.log.warning("watch of %s failed: %s; retrying in %.2fs", name, exc, delay)
                rv = delivered[0] if delivered else rv
                await sleep_unless_stopped(stop, delay)

    async def _follow(
        self,
        stop: asyncio.Event,
        events: AsyncIterator[tuple[str, dict[str, Any]]],
        start: str,
        delivered: list[str],
        on_event: Callable[[str, dict[str, Any]], None],
    ) -> str | None:
        """Deliver one watch stream's events until the server ends it (the last
        resourceVersion delivered) or ``stop`` is set (None); closed either way."""

        async def deliver() -> str:
            last = start
            async with contextlib.aclosing(events):  # type: ignore[type-var]
                async for kind, obj in events:
                    last = obj.get("metadata", {}).get("resourceVersion") or last
                    delivered[:] = [last]
                    if kind != "BOOKMARK":
                        on_event(kind, obj)
            return last

        streaming = asyncio.ensure_future(deliver())
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({streaming, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not streaming.done():
                streaming.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await streaming
        return streaming.result() if not streaming.cancelled() else None

    def _asking(self, name: str, fn: Callable[..., _Asked], *args: Any) -> _Asked:
        """``fn(*args)``, a request of watch ``name``, on its thread: first the request
        of ``name`` still in flight is answered and the rest of a 429's hold waited out,
        and a 429 it gets holds the watch at once.

        All of this happens here, on the thread, not in the loop that awaits it: a run
        cancelled while its request was in flight (leadership lost, spec rebuilt) never
        sees the answer, and the run started in its place must neither ask before that
        answer is in nor miss the hold it brings. Client-go's reflector has one
        goroutine per watch; here a cancelled run's thread can outlive it, so the
        asking lock and the hold bind the name.
        """
        lock = self._acquire(name)
        try:
            self._wait_hold(name)
            return fn(*args)
        except Throttled as exc:
            self._hold(name, exc.retry_after)
            raise
        finally:
            if lock is not None:
                lock.release()

    def _streaming(
        self, name: str, watch_fn: Callable[[str], Iterator[_Asked]], start: str
    ) -> Iterator[_Asked]:
        """:meth:`_asking` for a watch, whose request is made as it is iterated: the
        asking lock is held until the stream opens (:meth:`track`) or the request
        fails, not while the stream lasts."""
        lock = self._acquire(name)
        held = self._opening.held = [lock] if lock is not None else []
        try:
            self._wait_hold(name)
            yield from watch_fn(start)
        except Throttled as exc:
            self._hold(name, exc.retry_after)
            raise
        finally:
            _release(held)  # this request's own, whichever thread closes the generator

    def _acquire(self, name: str) -> threading.Lock | None:
        """Watch ``name``'s asking lock, acquired; None at shutdown (a request then
        ends at once anyway, its stream aborted)."""
        with self._held_guard:
            lock = self._asking_locks.setdefault(name, threading.Lock())
        while not lock.acquire(timeout=0.1):
            if self._stopping.is_set():
                return None
        return lock

    def _wait_hold(self, name: str) -> None:
        """On a request's thread: the rest of watch ``name``'s hold (or until shutdown)."""
        with self._held_guard:
            until = self._held_until.get(name, 0.0)
        if (left := until - time.monotonic()) > 0:
            self._stopping.wait(left)

    def _hold(self, name: str, retry_after: float) -> None:
        now = time.monotonic()
        with self._held_guard:
            # the holds that passed go (a deleted check's would stay for ever otherwise)
            held = {k: t for k, t in self._held_until.items() if t > now}
            held[name] = max(held.get(name, 0.0), now + min(retry_after, RETRY_AFTER_CAP))
            self._held_until = held

    async def _held(self, name: str, stop: asyncio.Event) -> bool:
        """Wait out a 429's Retry-After that a previous run of watch ``name`` got;
        whether ``stop`` was set meanwhile."""
        with self._held_guard:
            until = self._held_until.get(name)
        if until is not None and (left := until - time.monotonic()) > 0:
            await sleep_unless_stopped(stop, left)
        return stop.is_set()
