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

from stop_support import left_open_by

from artifactcheck_sim.apiserver import FakeApiServer


def test_no_connection_outlives_a_stopping_server() -> None:
    for _ in range(5):
        server = FakeApiServer(host="127.0.0.1", port=0, namespaces=("shop",)).start()
        left, connected = left_open_by(server.stop, server.port)
        assert left == 0, f"{left} of {connected} connections left open"
