"""Informer-style watches: list once, then watch; relist on 410 Gone; back off.

Every watch (the ArtifactChecks, each check's pods and pins store, the
ReleaseAcceptances) runs on the asynchronous Kubernetes client, its requests and its
stream on the task that follows it: no thread per watch, and a 429's hold is a value
kept by the watch's name.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from artifactcheck.clients.kube import Throttled, WatchExpired
from artifactcheck.clients.kube_http import KubeHttp
from artifactcheck.control.context import Context, sleep_unless_stopped
from artifactcheck.fetch.retry import retry_wait
from artifactcheck.model.errors import ArtifactCheckError

__all__ = ["RETRY_AFTER_CAP", "Watching"]

_Listed = TypeVar("_Listed")

#: The longest Retry-After a watch waits for: the Kubernetes client already cuts a
#: 429's to this (artifactcheck.clients.kube), the rule here only restates it.
RETRY_AFTER_CAP = 60.0


class Watching:
    """The watches of one controller: their client, their backoff, their holds."""

    def __init__(self, ctx: Context) -> None:
        self.settings = ctx.settings
        self.rng = ctx.rng
        self.metrics = ctx.metrics
        self.log = ctx.log
        #: When each watch (by name) may ask again after a 429: the server's ask binds
        #: the watch, not one run of its loop, so a check started again (leadership
        #: regained, spec rebuilt) waits out its predecessor's Retry-After too.
        self._held_until: dict[str, float] = {}
        self._ctx = ctx

    @property
    def kube(self) -> KubeHttp:
        """The controller's asynchronous client (:attr:`Context.kube`), which the watches
        share with the writes."""
        return self._ctx.kube

    async def close(self) -> None:
        """Close the controller's client (after every task that uses it ended)."""
        await self._ctx.close_kube()

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
        list_fn: Callable[[], Awaitable[tuple[list[_Listed], str]]],
        watch_fn: Callable[[str], AsyncIterator[tuple[str, dict[str, Any]]]],
        on_sync: Callable[[list[_Listed]], None],
        on_event: Callable[[str, dict[str, Any]], None],
    ) -> None:
        """List, then watch from the list's resourceVersion; relist on 410; back off.

        A watch that breaks (cut mid-stream, a 5xx, a 429) resumes from the last
        resourceVersion it delivered, as client-go's reflector does, instead of listing
        everything again: under a loaded API server, relisting every pod at every cut
        is the load that makes it worse. Only a 410 (or a failed list) lists again.
        The backoff grows with the failures since the last successful list.

        The requests and the stream are on this task: a request is awaited by the run
        that made it, so a run cancelled meanwhile (leadership lost, spec rebuilt)
        cancels its request with it and no answer can come to a run that is gone. A
        429's hold is kept by name all the same, so a run started again waits out its
        predecessor's.
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

    def _hold(self, name: str, retry_after: float) -> None:
        now = time.monotonic()
        # the holds that passed go (a deleted check's would stay for ever otherwise)
        held = {k: t for k, t in self._held_until.items() if t > now}
        held[name] = max(held.get(name, 0.0), now + min(retry_after, RETRY_AFTER_CAP))
        self._held_until = held

    async def _held(self, name: str, stop: asyncio.Event) -> bool:
        """Wait out a 429's Retry-After that a previous run of watch ``name`` got;
        whether ``stop`` was set meanwhile."""
        until = self._held_until.get(name)
        if until is not None and (left := until - time.monotonic()) > 0:
            await sleep_unless_stopped(stop, left)
        return stop.is_set()
