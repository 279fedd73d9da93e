"""``/healthz``, ``/readyz`` and ``/metrics`` on a small standard-library HTTP server.

It runs in its own thread so a busy or blocked event loop is visible as a failing
liveness probe instead of hiding it; liveness checks a heartbeat the loop updates.
A server may serve only some of the endpoints (the others answer 404): the probe port
and the metrics port are usually exposed to different clients (kubelet, Prometheus).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class HealthServer:
    """Serves probes and metrics; ``live``/``ready`` are callables returning (ok, text).

    An endpoint whose callable is None is not served (404).
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        live: Callable[[], tuple[bool, str]] | None,
        ready: Callable[[], tuple[bool, str]] | None,
        metrics: Callable[[], tuple[bytes, str]] | None,
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                path = self.path.split("?", 1)[0].rstrip("/")
                if path == "/healthz" and outer.live is not None:
                    ok, text = outer.live()
                    self._send(200 if ok else 503, text.encode(), "text/plain")
                elif path == "/readyz" and outer.ready is not None:
                    ok, text = outer.ready()
                    self._send(200 if ok else 503, text.encode(), "text/plain")
                elif path == "/metrics" and outer.metrics is not None:
                    body, ctype = outer.metrics()
                    self._send(200, body, ctype)
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # probes every few seconds would drown the logs

        self.live, self.ready, self.metrics = live, ready, metrics
        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
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
