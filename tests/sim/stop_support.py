"""Clients for the stop tests of the simulator's servers: connect as fast as they can
while a server stops, then see which connections the server left open."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable

REQUEST = b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n"


class Client:
    """One connection, plain or TLS (through memory buffers, so the socket stays this
    object's whatever happens: ``wrap_socket`` on a connection the server resets before
    the handshake raises, on CPython 3.11, with its new ``SSLSocket`` unclosed)."""

    def __init__(self, sock: socket.socket, tls: ssl.SSLContext | None) -> None:
        self.sock = sock
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = (
            None
            if tls is None
            else tls.wrap_bio(self.incoming, self.outgoing, server_hostname="127.0.0.1")
        )

    def send(self, request: bytes) -> None:
        """The TLS handshake first, where there is one, then ``request``."""
        if self.tls is None:
            self.sock.sendall(request)
            return
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.outgoing.read())
                data = self.sock.recv(65536)
                if not data:
                    raise ConnectionError("closed during the TLS handshake") from None
                self.incoming.write(data)
        self.tls.write(request)
        self.sock.sendall(self.outgoing.read())

    def ended_by(self, deadline: float) -> bool:
        """Whether the server ended the connection by ``deadline`` (monotonic): closed
        it or reset it, or, over TLS, sent its close_notify (asyncio then waits for
        ours before it closes the socket), reading past any answer it sent."""
        try:
            while True:
                self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
                data = self.sock.recv(65536)
                if not data:
                    return True
                if self.tls is not None and self._close_notify(data):
                    return True
        except TimeoutError:
            return False
        except OSError:
            return True

    def _close_notify(self, data: bytes) -> bool:
        assert self.tls is not None
        self.incoming.write(data)
        try:
            while self.tls.read(65536):  # b"" once the close_notify is read
                pass
        except ssl.SSLWantReadError:
            return False  # an answer read, no close_notify yet
        except ssl.SSLZeroReturnError:
            return True
        except ssl.SSLError:
            return True  # the session broke off: ended too
        return True


def hammer(
    port: int, stop: threading.Event, opened: list[Client], tls: ssl.SSLContext | None = None
) -> None:
    """Connect again and again (over TLS with ``tls``), a request on each, until told to
    stop; every connection made goes into ``opened``."""
    while not stop.is_set():
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            continue
        client = Client(sock, tls)
        opened.append(client)
        try:
            client.send(REQUEST)
        except OSError:
            pass


def left_open_by(
    stop_server: Callable[[], None], port: int, tls: ssl.SSLContext | None = None
) -> tuple[int, int]:
    """(left open, connected): four clients :func:`hammer` the server on ``port`` while
    ``stop_server`` stops it; then every connection has 3 s in all to be ended."""
    stop = threading.Event()
    opened: list[Client] = []
    clients = [
        threading.Thread(target=hammer, args=(port, stop, opened, tls), daemon=True)
        for _ in range(4)
    ]
    for client in clients:
        client.start()
    time.sleep(0.05)
    stop_server()
    stop.set()
    for client in clients:
        client.join(5)
    try:
        deadline = time.monotonic() + 3
        return sum(not c.ended_by(deadline) for c in opened), len(opened)
    finally:
        for c in opened:
            c.sock.close()
