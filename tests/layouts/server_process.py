"""Starting and ending a real server process the tests run (nginx, Apache httpd, Caddy,
lighttpd, Varnish): one rule for all of them.

A server is started when every address it was configured with accepts a connection, or
it has failed (exited, or not listening by the deadline): then it is ended and the test
fails with what the server said (``why``, read only then, as the log may not exist
before). It is ended by its own PID, the one the test started: terminated, killed if it
does not exit in time.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterable


def wait_listening(
    proc: subprocess.Popen[bytes],
    addresses: Iterable[tuple[str, int]],
    *,
    name: str,
    why: Callable[[], str],
    seconds: float = 20,
) -> None:
    """Return once every ``(host, port)`` accepts a connection; else end ``proc`` and
    fail naming ``name`` and ``why()``."""
    deadline = time.monotonic() + seconds
    for host, port in addresses:
        while True:
            try:
                socket.create_connection((host, port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    said = why()
                    end(proc)
                    raise AssertionError(f"{name} did not start: {said}") from None
                time.sleep(0.05)


def end(proc: subprocess.Popen[bytes] | None, *, seconds: float = 10) -> None:
    """End a server this test started, by its PID; its stderr pipe is closed."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    if proc.stderr is not None:
        proc.stderr.close()
