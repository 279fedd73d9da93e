"""``/healthz``, ``/readyz``, ``/metrics`` and the verdict API on an asyncio server.

It runs its own event loop in its own thread, so a busy or blocked controller loop is
visible as a failing liveness probe instead of hiding it; liveness checks a heartbeat
the controller's loop updates. A server may serve only some of the endpoints (the
others answer 404): the probe port and the metrics port are usually exposed to
different clients (kubelet, Prometheus).

The port is reachable from inside the cluster, so a client is hostile until its request
is read, and every connection is bounded in bytes (request line, headers, body) and in
*total* time (:class:`Deadlines`): its request line and headers within 5 s, its body
within 10 s, its answer computed within 75 s and written within 10 s. A deadline per
read would let a client that trickles one byte every few seconds hold its connection
forever; with a thread per connection, a few hundred such clients held every thread and
``/healthz`` answered 503 (docs/reliability.md, "Slow and hostile clients"). Here a
waiting connection costs a coroutine, not a thread; the probes are answered on this loop
at once, ``/metrics`` and the verdict API in threads of their own, bounded
(:data:`METRICS_THREADS`, :data:`API_THREADS`). At most :data:`MAX_CONNECTIONS` are open;
a new one beyond that closes the oldest connection still sending its head (the one
closest to its deadline anyway), so a flood of slow clients cannot shut out a probe that
sends its request at once.

Why by hand on asyncio streams rather than on a server library: the one request per
connection this server reads needs little HTTP (headers parsed by the standard
library's ``http.client.parse_headers``, a ``Content-Length`` body, ``Connection:
close``), and the rule it exists for, a deadline for the whole head, is one neither
``http.server`` (a timeout per read) nor aiohttp's server (whose settings name a
keep-alive timeout, no deadline for a head in progress) offers; nor does it add a
dependency to the product.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import http
import http.client
import io
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from artifactcheck.control.forward import FORWARDED_BY

#: Longest request line accepted (method, path and query): 414 beyond.
MAX_REQUEST_LINE = 4096
#: All header lines together: 431 beyond.
MAX_HEADER_BYTES = 16 * 1024
#: Header lines at most (http.client's own limit): 431 beyond.
MAX_HEADER_LINES = 100
#: A request body (the Flagger webhook's JSON payload): 413 beyond.
MAX_BODY_BYTES = 64 * 1024
#: Seconds a client has for its whole request line and headers, however it sends them.
HEAD_DEADLINE = 5.0
#: Seconds a client has for its whole body.
BODY_DEADLINE = 10.0
#: Seconds an endpoint has to compute its answer: above the verdict API's own longest
#: wait (a fresh check of at most 60 s, plus 5 s, plus a forward's 2 s of margin).
ANSWER_DEADLINE = 75.0
#: Seconds a client has to take the whole answer.
WRITE_DEADLINE = 10.0
#: Connections open at once; a new one beyond closes the oldest still sending its head.
MAX_CONNECTIONS = 512
#: Verdict API requests in threads at once (the API itself serves 16 and answers the
#: rest 429; a thread refusing one is short-lived); more are answered 429 here.
API_THREADS = 64
#: /metrics expositions in threads at once; more are answered 503 at once.
METRICS_THREADS = 2

#: The reasons of the errors the server itself sends (stable across Python versions,
#: whose status phrases change).
_REASONS = {
    400: "BadRequest",
    405: "MethodNotAllowed",
    408: "RequestTimeout",
    411: "LengthRequired",
    413: "BodyTooLarge",
    414: "RequestLineTooLong",
    431: "HeadersTooLarge",
    500: "InternalError",
    501: "NotImplemented",
    503: "TooManyConnections",
    505: "HTTPVersionNotSupported",
}

_T = TypeVar("_T")
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Deadlines:
    """Seconds each part of one connection may take, whatever the client does; their
    sum bounds how long any connection stays open."""

    head: float = HEAD_DEADLINE
    body: float = BODY_DEADLINE
    answer: float = ANSWER_DEADLINE
    write: float = WRITE_DEADLINE


@dataclass(frozen=True, slots=True)
class ApiRequest:
    """One request for the verdict API, as the server read it."""

    method: str
    path: str
    query: str
    body: bytes | None
    #: The header that marks a request another replica forwarded (None: not forwarded).
    forwarded_by: str | None = None


class Api(Protocol):
    """What the server asks of the verdict API (artifactcheck/control/api.py)."""

    def serves(self, path: str) -> bool:
        """Whether ``path`` is one of the API's."""

    def handle(self, request: ApiRequest) -> tuple[int, bytes, dict[str, str]]:
        """(status, JSON body, extra headers) for one request."""


def json_error(status: int, reason: str, message: str) -> bytes:
    """The body of every error this server sends: JSON, with a machine-readable reason."""
    return json.dumps({"status": status, "reason": reason, "message": message}).encode() + b"\n"


@dataclass(frozen=True, slots=True)
class _Answer:
    """What is sent back: status, body, content type, extra headers."""

    status: int
    body: bytes
    ctype: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


class _Refused(Exception):
    """A request this server answers with an error of its own, before any endpoint."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.answer = _error(status, message)


def _error(
    status: int, message: str, *, reason: str | None = None, retry_after: bool = False
) -> _Answer:
    reason = reason or _REASONS.get(status) or http.HTTPStatus(status).phrase.title()
    reason = reason.replace(" ", "")
    headers = (("Retry-After", "1"),) if retry_after else ()
    return _Answer(status, json_error(status, reason, message), headers=headers)


@dataclass(frozen=True, slots=True)
class _Head:
    """A request line and headers that parsed."""

    method: str
    target: str
    headers: Any  # http.client.HTTPMessage


def _encode(answer: _Answer) -> bytes:
    """The answer as HTTP/1.0 bytes: one request per connection, then close."""
    try:
        phrase = http.HTTPStatus(answer.status).phrase
    except ValueError:
        phrase = "Status"
    lines = [
        f"HTTP/1.0 {answer.status} {phrase}",
        f"Date: {email.utils.formatdate(usegmt=True)}",
        f"Content-Type: {answer.ctype}",
        f"Content-Length: {len(answer.body)}",
        "Cache-Control: no-store",
        *(f"{name}: {value}" for name, value in answer.headers),
        "Connection: close",
    ]
    return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + answer.body


async def _read_head(reader: asyncio.StreamReader) -> _Head:
    """The request line and headers, bounded in bytes (the caller bounds the time)."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise _Refused(414, "request line too long") from None
    if len(line) > MAX_REQUEST_LINE:
        raise _Refused(414, "request line too long")
    words = line.decode("latin-1").split()
    if len(words) != 3:
        raise _Refused(400, f"bad request line {line[:80]!r}")
    method, target, version = words
    if not version.startswith("HTTP/"):
        raise _Refused(400, f"bad request version {version[:20]!r}")
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise _Refused(505, f"HTTP version {version[:20]!r} is not supported")
    block, lines = b"", 0
    while True:
        try:
            header = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError:
            raise _Refused(431, "request header block too large") from None
        if header in (b"\r\n", b"\n"):
            break
        block += header
        lines += 1
        if len(block) > MAX_HEADER_BYTES or lines > MAX_HEADER_LINES:
            raise _Refused(431, "request header block too large")
    try:
        headers = http.client.parse_headers(io.BytesIO(block + b"\r\n"))
    except http.client.HTTPException as exc:
        raise _Refused(400, f"bad headers: {exc}") from None
    if method not in ("GET", "POST"):
        raise _Refused(501, f"method {method[:20]!r} is not served")
    return _Head(method, target, headers)


async def _read_body(reader: asyncio.StreamReader, head: _Head) -> bytes:
    """The body of a POST: a ``Content-Length`` and at most :data:`MAX_BODY_BYTES`."""
    if head.headers.get("Transfer-Encoding"):
        raise _Refused(411, "send a Content-Length, not a chunked body")
    length = head.headers.get("Content-Length")
    if length is None or not length.isdigit():
        raise _Refused(411, "a Content-Length is required")
    if int(length) > MAX_BODY_BYTES:
        raise _Refused(413, f"the body may have at most {MAX_BODY_BYTES} bytes")
    return await reader.readexactly(int(length))


class HealthServer:
    """Serves probes, metrics and the verdict API; ``live``/``ready`` are callables
    returning (ok, text).

    An endpoint whose callable (or ``api``) is None is not served (404). The socket is
    bound here, so :attr:`port` is known before :meth:`start`.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        live: Callable[[], tuple[bool, str]] | None,
        ready: Callable[[], tuple[bool, str]] | None,
        metrics: Callable[[], tuple[bytes, str]] | None,
        api: Api | None = None,
        deadlines: Deadlines = Deadlines(),  # noqa: B008 - a frozen value
    ) -> None:
        self.live, self.ready, self.metrics, self.api = live, ready, metrics, api
        self.deadlines = deadlines
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.create_server((host, port), family=family, backlog=512)
        self.thread = threading.Thread(target=self._run, name="health", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._started = threading.Event()
        #: Open connections, oldest first; the value: whether it is still sending its head.
        self._connections: dict[asyncio.Task[None], bool] = {}
        self._threads = {"api": 0, "metrics": 0}

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self.socket.getsockname()[1])

    @property
    def connections(self) -> int:
        """Connections open now."""
        return len(self._connections)

    def start(self) -> HealthServer:
        """Serve in a background thread."""
        self.thread.start()
        self._started.wait(timeout=10)
        return self

    def stop(self) -> None:
        """Stop serving (open connections are closed) and join the thread."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop ended already
                loop.call_soon_threadsafe(stopping.set)
            self.thread.join(timeout=5)
        self.socket.close()

    # -- the server's own loop ---------------------------------------------------------

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(
            self._accepted, sock=self.socket, limit=MAX_HEADER_BYTES
        )
        self._started.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._connections) >= MAX_CONNECTIONS and not self._evict_slowest():
            await self._send(writer, _error(503, "too many connections", retry_after=True))
            return
        self._connections[task] = True
        try:
            await self._connection(reader, writer, task)
        finally:
            del self._connections[task]

    def _evict_slowest(self) -> bool:
        """Close the oldest connection still sending its head; False if there is none."""
        for task, in_head in self._connections.items():
            if in_head:
                self._connections[task] = False
                task.cancel()
                return True
        return False

    async def _connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, task: asyncio.Task[None]
    ) -> None:
        """One request, each part within its deadline (:class:`Deadlines`)."""
        try:
            try:
                async with asyncio.timeout(self.deadlines.head):
                    head = await _read_head(reader)
                self._connections[task] = False
                body = None
                if head.method == "POST" and self._serves_api(head):
                    async with asyncio.timeout(self.deadlines.body):
                        body = await _read_body(reader, head)
                answer = await self._answer_within(head, body)
            except _Refused as refused:
                answer = refused.answer
            except TimeoutError:
                answer = _error(408, "the request was not sent in time")
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.transport.abort()  # the client went away
                return
            except Exception:  # an endpoint's bug: this request's 500, never the server's end
                _LOG.exception("the HTTP server's endpoint failed")
                answer = _error(500, "internal error")
            await self._send(writer, answer)
        except asyncio.CancelledError:
            writer.transport.abort()  # evicted, or the server stops
            raise

    async def _send(self, writer: asyncio.StreamWriter, answer: _Answer) -> None:
        """Write the answer within its deadline, then close (abort if it does not go)."""
        try:
            async with asyncio.timeout(self.deadlines.write):
                writer.write(_encode(answer))
                await writer.drain()
                writer.close()
                await writer.wait_closed()
        except (TimeoutError, ConnectionError, OSError):
            writer.transport.abort()

    # -- the endpoints -------------------------------------------------------------------

    def _serves_api(self, head: _Head) -> bool:
        return self.api is not None and self.api.serves(self._path(head)[0])

    @staticmethod
    def _path(head: _Head) -> tuple[str, str]:
        path, _, query = head.target.partition("?")
        return path.rstrip("/"), query

    async def _answer_within(self, head: _Head, body: bytes | None) -> _Answer:
        """The endpoint's answer, or a 503 when it takes longer than its deadline (its
        thread, if any, still counts against the bound until it ends)."""
        try:
            async with asyncio.timeout(self.deadlines.answer):
                return await self._answer(head, body)
        except TimeoutError:
            return _error(
                503, "the answer took too long", reason="ControllerBusy", retry_after=True
            )

    async def _answer(self, head: _Head, body: bytes | None) -> _Answer:
        path, query = self._path(head)
        if self.api is not None and self.api.serves(path):
            request = ApiRequest(head.method, path, query, body, head.headers.get(FORWARDED_BY))
            api = self.api
            got = await self._in_thread("api", API_THREADS, lambda: api.handle(request))
            if got is None:
                return _error(
                    429, "too many verdict requests", reason="TooManyRequests", retry_after=True
                )
            status, data, headers = got
            return _Answer(status, data, headers=tuple(headers.items()))
        if head.method != "GET":
            return _Answer(404, json_error(404, "NotFound", "not found"))
        if path == "/healthz" and self.live is not None:
            ok, text = self.live()
            return _Answer(200 if ok else 503, text.encode(), "text/plain")
        if path == "/readyz" and self.ready is not None:
            ok, text = self.ready()
            return _Answer(200 if ok else 503, text.encode(), "text/plain")
        if path == "/metrics" and self.metrics is not None:
            got_metrics = await self._in_thread("metrics", METRICS_THREADS, self.metrics)
            if got_metrics is None:
                return _error(503, "too many scrapes at once", reason="Busy", retry_after=True)
            return _Answer(200, got_metrics[0], got_metrics[1])
        return _Answer(404, json_error(404, "NotFound", "not found"))

    async def _in_thread(self, kind: str, bound: int, call: Callable[[], _T]) -> _T | None:
        """``call()`` in a daemon thread (None when ``bound`` of ``kind`` run already).

        Daemon threads, not an executor: a verdict request may wait a minute for the
        controller's loop or for the leader, and must not hold the process at exit.
        """
        if self._threads[kind] >= bound:
            return None
        loop = asyncio.get_running_loop()
        done: asyncio.Future[_T] = loop.create_future()

        def finished(outcome: Callable[[], None]) -> None:
            self._threads[kind] -= 1  # counted until the thread ends, not the request
            if not done.done():
                outcome()

        def run() -> None:
            try:
                result = call()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting coroutine
                err = exc
                fn: Callable[[], None] = lambda: done.set_exception(err)  # noqa: E731
            else:
                fn = lambda: done.set_result(result)  # noqa: E731
            with contextlib.suppress(RuntimeError):  # the server's loop has ended
                loop.call_soon_threadsafe(finished, fn)

        self._threads[kind] += 1
        threading.Thread(target=run, name=f"health-{kind}", daemon=True).start()
        return await done


class Heartbeat:
    """Liveness: the event loop beats; a stale beat means the loop is stuck."""

    def __init__(self, *, max_age: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age = max_age
        self.clock = clock
        self.last = clock()

    def beat(self) -> None:
        """Record that the loop is alive."""
        self.last = self.clock()

    def check(self) -> tuple[bool, str]:
        """(alive, text) for /healthz."""
        age = self.clock() - self.last
        return (age <= self.max_age, f"loop heartbeat {age:.1f}s ago\n")
