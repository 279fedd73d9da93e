"""A stopping fake API server leaves no connection open: none it served, and none it
accepted as it stopped.

asyncio makes the transport of an accepted connection a turn after the accept; one
whose turn comes after the listening server closed finds asyncio's server gone (an
``AssertionError`` in ``Server._attach``, swallowed) and keeps its socket open, served by
no one: its client waits out its read timeout, and the socket is found unclosed when
collected (a ``ResourceWarning`` in some later test). These clients connect as fast as
they can while the server stops, and every connection must end within seconds.
"""

from __future__ import annotations

import socket
import threading
import time

from artifactcheck_sim.apiserver import FakeApiServer


def _hammer(port: int, stop: threading.Event, opened: list[socket.socket]) -> None:
    """Connect again and again, a request on each, until the server is gone."""
    while not stop.is_set():
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            continue
        opened.append(sock)
        try:
            sock.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        except OSError:
            pass


def _ended(sock: socket.socket, within: float) -> bool:
    """Whether the server closed ``sock`` (EOF or reset) within ``within`` seconds,
    reading past any answer it sent."""
    sock.settimeout(within)
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except TimeoutError:
        return False
    except OSError:
        return True
    return False


def test_no_connection_outlives_a_stopping_server() -> None:
    for _ in range(5):
        server = FakeApiServer(host="127.0.0.1", port=0, namespaces=("shop",)).start()
        stop = threading.Event()
        opened: list[socket.socket] = []
        clients = [
            threading.Thread(target=_hammer, args=(server.port, stop, opened), daemon=True)
            for _ in range(4)
        ]
        for client in clients:
            client.start()
        time.sleep(0.05)
        server.stop()
        stop.set()
        for client in clients:
            client.join(5)
        try:
            open_after = [s.getsockname() for s in opened if not _ended(s, within=3)]
            assert open_after == [], f"{len(open_after)} of {len(opened)} connections left open"
        finally:
            for sock in opened:
                sock.close()
