"""A real logging HTTP proxy on loopback (fetch and controller tests): absolute-form GETs and
CONNECT tunnels.

What a corporate proxy does, and nothing more: it logs every request line it receives
(``requests``), forwards an absolute-form ``GET http://host:port/path`` to its origin
and relays the answer, and opens a tunnel for ``CONNECT host:port``. With
``refuse=True`` it answers every request with ``status`` (403: a policy denying the
destination; 407: credentials wanted) and connects nowhere.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType
from urllib.parse import urlsplit


class LoggingProxy:
    """``with LoggingProxy(host) as proxy:`` serves on ``proxy.url`` until the block ends."""

    def __init__(self, host: str, *, refuse: bool = False, status: int = 403) -> None:
        self.refuse = refuse
        self.status = status
        self.requests: list[str] = []  # request lines, in the order received
        self.heads: list[bytes] = []  # whole request heads, in the same order
        self._lock = threading.Lock()
        self._listener = socket.create_server((host, 0))
        self._listener.settimeout(0.2)
        self.url = f"http://{host}:{self._listener.getsockname()[1]}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> LoggingProxy:
        self._start(self._accept)
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        for thread in list(self._threads):
            thread.join(10)
        self._listener.close()

    def _start(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._start(self._serve, client)

    def _serve(self, client: socket.socket) -> None:
        client.settimeout(0.2)
        with client:
            buffer = b""
            while b"\r\n\r\n" not in buffer:
                chunk = self._recv(client)
                if not chunk:
                    return
                buffer += chunk
            head, _, rest = buffer.partition(b"\r\n\r\n")
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            with self._lock:
                self.requests.append(line)
                self.heads.append(head)
            method, target, _version = line.split(" ", 2)
            if self.refuse:
                client.sendall(b"HTTP/1.1 %d Refused\r\nContent-Length: 0\r\n\r\n" % self.status)
                return
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self._relay(client, upstream, rest)
                return
            parts = urlsplit(target)
            upstream = socket.create_connection((parts.hostname, parts.port or 80), timeout=5)
            origin_form = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            first = f"{method} {origin_form} HTTP/1.1".encode()
            # one request per connection: the origin closes after its answer
            headers = [
                h for h in head.split(b"\r\n")[1:] if not h.lower().startswith(b"connection:")
            ]
            request = b"\r\n".join([first, *headers, b"Connection: close"]) + b"\r\n\r\n"
            self._relay(client, upstream, request + rest)

    def _recv(self, sock: socket.socket) -> bytes | None:
        """Bytes from ``sock``; b"" at its close; None when the proxy stops."""
        while not self._stop.is_set():
            try:
                return sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return b""
        return b""

    def _relay(self, client: socket.socket, upstream: socket.socket, first: bytes) -> None:
        """Both directions until either side closes."""
        upstream.settimeout(0.2)
        with upstream:
            if first:
                upstream.sendall(first)
            done = threading.Event()

            def pump(src: socket.socket, dst: socket.socket) -> None:
                while not done.is_set():
                    data = self._recv(src)
                    if not data:
                        break
                    try:
                        dst.sendall(data)
                    except OSError:
                        break
                done.set()

            back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
            back.start()
            pump(client, upstream)
            back.join(10)
