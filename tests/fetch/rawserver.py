"""A raw-socket HTTP server for byte-level adversaries: it sends exactly what a test says.

The sim fleet speaks correct HTTP; the faults that matter at the edge (forged responses
between requests, conflicting framing, huge numbers, header injection) need a peer that
writes arbitrary bytes and records exactly what it received. Each accepted connection is
served by ``handler(conn)`` in its own thread; :class:`RawConn` reads requests (heads
only: the client sends GETs) and records their bytes.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Self


class RawConn:
    """One accepted connection as the handler sees it."""

    def __init__(self, server: RawServer, sock: socket.socket, index: int) -> None:
        self.server = server
        self.sock = sock
        self.index = index  # 0 for the first connection the server accepted
        self._buffer = b""

    def read_request(self, timeout: float = 5.0) -> bytes | None:
        """The next request head (up to the blank line), None when the client closed."""
        self.sock.settimeout(timeout)
        while b"\r\n\r\n" not in self._buffer:
            try:
                data = self.sock.recv(65536)
            except (TimeoutError, OSError):
                return None
            if not data:
                return None
            self._buffer += data
            self.server.received += data
        head, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
        self.server.requests.append(head)
        return head

    @staticmethod
    def target(head: bytes) -> str:
        """The request-target of a request head."""
        return head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """True when the client closed (or reset) the connection within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
                self.server.received += data
        except TimeoutError:
            return False
        except OSError:
            return True


def response(
    status: int = 200,
    body: bytes = b"",
    *,
    headers: dict[str, str] | None = None,
    reason: str = "OK",
    length: bool = True,
) -> bytes:
    """A response's exact bytes (Content-Length added unless ``length`` is False)."""
    lines = [f"HTTP/1.1 {status} {reason}"]
    all_headers = dict(headers or {})
    if length:
        all_headers.setdefault("Content-Length", str(len(body)))
    lines += [f"{name}: {value}" for name, value in all_headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class RawServer:
    """``with RawServer(host, handler) as server:``; ``server.url`` is its base URL."""

    def __init__(self, host: str, handler: Callable[[RawConn], None]) -> None:
        self._listener = socket.create_server((host, 0))
        self.host = host
        self.port = self._listener.getsockname()[1]
        self.url = f"http://{host}:{self.port}/"
        self._handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.received = b""
        self.errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []
        self._stop = False
        self._accepter = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> Self:
        # before the thread starts: a server left at once must not race its first call
        self._listener.settimeout(0.05)
        self._accepter.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._accepter.join(5)
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(5)
        for sock in self._socks:
            sock.close()
        if self.errors and exc[0] is None:
            raise AssertionError(f"server handler failed: {self.errors!r}")

    def _accept(self) -> None:
        while not self._stop:
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            index = self.connections
            self.connections += 1
            self._socks.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock, index), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket, index: int) -> None:
        try:
            self._handler(RawConn(self, sock, index))
        except OSError:
            pass  # the client went away: that is its right
        except BaseException as exc:  # noqa: BLE001 - reported to the test at exit
            self.errors.append(exc)
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            time.sleep(0)


def serve_each(answer: Callable[[RawConn, bytes], bytes | None]) -> Callable[[RawConn], None]:
    """A handler that answers every request on a connection with ``answer(conn, head)``
    (None: close the connection)."""

    def handler(conn: RawConn) -> None:
        while (head := conn.read_request()) is not None:
            data = answer(conn, head)
            if data is None:
                return
            conn.send(data)

    return handler


@contextlib.contextmanager
def full_backlog(address: str) -> Iterator[int]:
    """The port of a listener on ``address`` that never accepts, its queue already
    full: a new connection's SYN is dropped (Linux) and the connect hangs."""
    listener = socket.socket()
    fillers: list[socket.socket] = []
    try:
        listener.bind((address, 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(8):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect((address, port))
            except BlockingIOError:
                pass
            fillers.append(s)
        yield port
    finally:
        for s in fillers:
            s.close()
        listener.close()
