"""``/healthz``, ``/readyz``, ``/metrics`` and the verdict API on a standard-library server.

It runs in its own thread so a busy or blocked event loop is visible as a failing
liveness probe instead of hiding it; liveness checks a heartbeat the loop updates.
A server may serve only some of the endpoints (the others answer 404): the probe port
and the metrics port are usually exposed to different clients (kubelet, Prometheus).

The port is reachable from inside the cluster, so every request is bounded: its
request line, its headers and its body in bytes, its time on the socket, and the
connections served at once (a slow or flooding client gets a quick refusal, never a
thread per connection). The verdict API admits fewer requests at once than the server
has connections (artifactcheck/control/api.py), so a flood of API requests leaves room
for kubelet's probes.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from artifactcheck.control.forward import FORWARDED_BY

#: Longest request line accepted (method, path and query): 414 beyond.
MAX_REQUEST_LINE = 4096
#: All header lines together: 431 beyond.
MAX_HEADER_BYTES = 16 * 1024
#: A request body (the Flagger webhook's JSON payload): 413 beyond.
MAX_BODY_BYTES = 64 * 1024
#: Seconds a client may take to send its request (and to read the answer).
SOCKET_TIMEOUT = 10.0
#: Connections served at once; more are closed at once with a 503.
MAX_CONNECTIONS = 64


#: The reasons of the errors the server itself sends (stable across Python versions,
#: whose status phrases change).
_REASONS = {
    400: "BadRequest",
    405: "MethodNotAllowed",
    411: "LengthRequired",
    413: "BodyTooLarge",
    414: "RequestLineTooLong",
    431: "HeadersTooLarge",
    501: "NotImplemented",
    505: "HTTPVersionNotSupported",
}


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


class _Capped:
    """Reads header lines from a socket file, refusing once ``budget`` bytes are spent.

    ``http.client.parse_headers`` reads up to 100 lines of 64 KiB each; this caps the
    whole header block (http.server answers the LineTooLong it raises with a 431).
    """

    def __init__(self, raw: Any, budget: int) -> None:
        self.raw, self.budget = raw, budget

    def readline(self, size: int = -1) -> bytes:
        if self.budget <= 0:
            raise http.client.LineTooLong("request header block")
        want = self.budget + 1 if size is None or size < 0 else min(size, self.budget + 1)
        line: bytes = self.raw.readline(want)
        self.budget -= len(line)
        if self.budget < 0:
            raise http.client.LineTooLong("request header block")
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most ``MAX_CONNECTIONS`` of them."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            try:
                body = json_error(503, "TooManyConnections", "too many connections, retry later")
                request.settimeout(1.0)
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                    b"Retry-After: 1\r\nConnection: close\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class HealthServer:
    """Serves probes, metrics and the verdict API; ``live``/``ready`` are callables
    returning (ok, text).

    An endpoint whose callable (or ``api``) is None is not served (404).
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
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = SOCKET_TIMEOUT  # one request per connection (HTTP/1.0)

            def parse_request(self) -> bool:
                if len(getattr(self, "raw_requestline", b"")) > MAX_REQUEST_LINE:
                    self.requestline = ""
                    self.request_version = "HTTP/1.0"
                    self.close_connection = True
                    self.send_error(414, "request line too long")
                    return False
                real = self.rfile
                self.rfile = _Capped(real, MAX_HEADER_BYTES)  # type: ignore[assignment]
                try:
                    return super().parse_request()
                finally:
                    self.rfile = real

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                path, _, query = self.path.partition("?")
                path = path.rstrip("/")
                if outer.api is not None and outer.api.serves(path):
                    self._api(path, query, None)
                elif path == "/healthz" and outer.live is not None:
                    ok, text = outer.live()
                    self._send(200 if ok else 503, text.encode(), "text/plain")
                elif path == "/readyz" and outer.ready is not None:
                    ok, text = outer.ready()
                    self._send(200 if ok else 503, text.encode(), "text/plain")
                elif path == "/metrics" and outer.metrics is not None:
                    body, ctype = outer.metrics()
                    self._send(200, body, ctype)
                else:
                    self._send(404, json_error(404, "NotFound", "not found"), "application/json")

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                path, _, query = self.path.partition("?")
                path = path.rstrip("/")
                if outer.api is None or not outer.api.serves(path):
                    self.close_connection = True
                    self._send(404, json_error(404, "NotFound", "not found"), "application/json")
                    return
                body = self._body()
                if body is not None:
                    self._api(path, query, body)

            def _body(self) -> bytes | None:
                """The request body, bounded; None when an error was already sent."""
                self.close_connection = True  # one request per connection for bodies
                if self.headers.get("Transfer-Encoding"):
                    self.send_error(411, "send a Content-Length, not a chunked body")
                    return None
                length = self.headers.get("Content-Length")
                if length is None or not length.isdigit():
                    self.send_error(411, "a Content-Length is required")
                    return None
                if int(length) > MAX_BODY_BYTES:
                    self.send_error(413, f"the body may have at most {MAX_BODY_BYTES} bytes")
                    return None
                try:
                    data = self.rfile.read(int(length))
                except (TimeoutError, OSError):
                    return None
                if len(data) != int(length):
                    return None
                return data

            def _api(self, path: str, query: str, body: bytes | None) -> None:
                assert outer.api is not None
                forwarded_by = self.headers.get(FORWARDED_BY)
                request = ApiRequest(self.command, path, query, body, forwarded_by)
                status, data, headers = outer.api.handle(request)
                self._send(status, data, "application/json", headers)

            def send_error(
                self, code: int, message: str | None = None, explain: str | None = None
            ) -> None:
                """Every error as JSON with a reason (http.server's own ones too)."""
                self.close_connection = True
                text = message or explain or ""
                reason = _REASONS.get(code)
                if reason is None:
                    try:
                        reason = http.HTTPStatus(code).phrase.title().replace(" ", "")
                    except ValueError:
                        reason = "Error"
                self._send(code, json_error(code, reason, text), "application/json")

            def _send(
                self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None
            ) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("Cache-Control", "no-store")
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    if self.close_connection:
                        self.send_header("Connection", "close")
                    self.end_headers()
                    if getattr(self, "command", None) != "HEAD":
                        self.wfile.write(body)
                except OSError:  # the client went away or timed out
                    self.close_connection = True

            def log_message(self, format: str, *args: object) -> None:
                return  # probes every few seconds would drown the logs

        self.live, self.ready, self.metrics, self.api = live, ready, metrics, api
        self.server = _BoundedServer((host, port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="health", daemon=True)

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self.server.server_address[1])

    def start(self) -> HealthServer:
        """Serve in a background thread."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and join the thread."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


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
