"""An asyncio event loop in a daemon thread, for servers that synchronous code drives.

Why: the fake API server and the web fleet are asyncio servers, but the tests, the
demo and the official kubernetes client that talk to them are synchronous. Each runs
its loop in a thread of its own and hands coroutines to it; this is that thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable
from typing import Any, Protocol, TypeVar

__all__ = ["LoopThread", "stop_accepting"]

T = TypeVar("T")


class LoopThread:
    """Start, call into and stop one background event loop.

    ``drain``: at stop, cancel the tasks still pending and wait for the default
    executor, so nothing outlives the loop (the API server's watches); without it the
    loop only closes its async generators, so stopping stays brief.
    """

    def __init__(self, name: str, *, join_timeout: float, drain: bool) -> None:
        self.name = name
        self._join_timeout = join_timeout
        self._drain = drain
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        """Run a new loop in a new thread; returns once the loop is running."""
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        thread = threading.Thread(target=self._run, args=(loop, ready), name=self.name, daemon=True)
        thread.start()
        ready.wait()
        self.loop, self._thread = loop, thread

    def _run(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        try:
            loop.run_forever()
        finally:
            if self._drain:
                self._drain_and_close(loop)
            else:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

    @staticmethod
    def _drain_and_close(loop: asyncio.AbstractEventLoop) -> None:
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            # A connection accepted as the server closed, or one whose graceful close
            # waits for a peer that stopped reading, still holds its socket: dropped, as a
            # real server's exit drops it. The loop's own table of its transports (a weak
            # one, private to asyncio's selector loops) is the only list of them all.
            for transport in list(getattr(loop, "_transports", {}).values()):
                transport.abort()
            loop.run_until_complete(asyncio.sleep(0))  # their sockets close on this turn
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coro`` on the loop from another thread and wait for its result."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self, closing: Coroutine[Any, Any, Any], timeout: float) -> None:
        """Run ``closing`` on the loop, then stop the loop and join the thread.
        Idempotent (``closing`` is closed unrun when there is no loop)."""
        loop, thread = self.loop, self._thread
        if loop is None or thread is None:
            closing.close()
            return
        try:
            self.call(closing, timeout)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=self._join_timeout)
            self.loop = self._thread = None


class _Listening(Protocol):
    def fileno(self) -> int: ...


async def stop_accepting(listeners: Iterable[_Listening], turns: int) -> None:
    """Stop accepting on ``listeners`` (sockets, or asyncio's ``Server.sockets``), then
    let ``turns`` turns of the loop pass, before a server that stops closes them.

    asyncio makes an accepted connection's transport a turn after the accept (and a
    stream server's handler a turn or two after that). One whose turn comes after the
    server closed finds asyncio's server gone (an ``AssertionError`` in
    ``Server._attach``, swallowed) and keeps its socket open with no one to serve or
    close it: its client waits out its own timeout instead of seeing the server go.
    """
    loop = asyncio.get_running_loop()
    for listener in listeners:
        loop.remove_reader(listener.fileno())
    for _ in range(turns):
        await asyncio.sleep(0)
