"""The HTTP server's own answers (artifactcheck/control/health.py), byte by byte: what
it refuses before any endpoint sees a request, and an endpoint's bug kept to one 500."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from gate_support import raw

from artifactcheck.control.api import MAX_WAIT
from artifactcheck.control.forward import CONNECT_TIMEOUT, READ_MARGIN
from artifactcheck.control.health import ApiRequest, Deadlines, HealthServer


class _Api:
    """A verdict API that answers 200, or fails as a bug would (``/verdicts/bug``)."""

    def serves(self, path: str) -> bool:
        return path.startswith("/verdicts")

    def handle(self, request: ApiRequest) -> tuple[int, bytes, dict[str, str]]:
        if request.path == "/verdicts/bug":
            raise RuntimeError("a bug")
        return 200, b'{"ok": true}\n', {}


@pytest.fixture
def port() -> Iterator[int]:
    server = HealthServer(
        host="127.0.0.1",
        port=0,
        live=lambda: (True, "ok\n"),
        ready=lambda: (False, "not yet\n"),
        metrics=None,
        api=_Api(),
    ).start()
    try:
        yield server.port
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("sent", "status", "reason"),
    [
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200, None),
        (b"GET /readyz HTTP/1.0\r\n\r\n", 503, None),
        (b"GET /metrics HTTP/1.0\r\n\r\n", 404, "NotFound"),
        (b"GET /verdicts/x HTTP/1.0\r\n\r\n", 200, None),
        (b"POST /verdicts/x HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}", 200, None),
        (b"GET /healthz HTTP/2.0\r\n\r\n", 505, "HTTPVersionNotSupported"),
        (b"GET /healthz FTP/1.0\r\n\r\n", 400, "BadRequest"),
        (b"garbage\r\n\r\n", 400, "BadRequest"),
        (b"PUT /healthz HTTP/1.1\r\n\r\n", 501, "NotImplemented"),
        (b"POST /verdicts/x HTTP/1.1\r\n\r\n", 411, "LengthRequired"),
        (b"POST /verdicts/x HTTP/1.1\r\nContent-Length: x\r\n\r\n", 411, "LengthRequired"),
        (
            b"POST /verdicts/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            411,
            "LengthRequired",
        ),
        (b"POST /verdicts/x HTTP/1.1\r\nContent-Length: 70000\r\n\r\n", 413, "BodyTooLarge"),
        (b"POST /healthz HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 404, "NotFound"),
        (b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\n\r\n", 414, "RequestLineTooLong"),
        (b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n", 414, "RequestLineTooLong"),
        (
            b"GET /healthz HTTP/1.1\r\n"
            + b"".join(b"X-%d: 1\r\n" % i for i in range(101))
            + b"\r\n",
            431,
            "HeadersTooLarge",
        ),
        (b"GET /verdicts/bug HTTP/1.0\r\n\r\n", 500, "InternalError"),
    ],
)
def test_the_servers_own_answers(port: int, sent: bytes, status: int, reason: str | None) -> None:
    answer = raw(port, sent)
    assert answer.startswith(f"HTTP/1.0 {status} "), answer[:120]
    assert "\r\nConnection: close\r\n" in answer and "\r\nCache-Control: no-store\r\n" in answer
    if reason is not None:
        assert f'"reason": "{reason}"' in answer, answer
    # whatever the last request did, the next probe is answered
    assert raw(port, b"GET /healthz HTTP/1.0\r\n\r\n").startswith("HTTP/1.0 200")


def test_the_answer_deadline_covers_the_apis_longest_wait() -> None:
    """A verdict request may wait MAX_WAIT for a fresh check, plus 5 s for the loop, plus
    the forward's connect and margin: the server's answer deadline leaves it that time."""
    longest = MAX_WAIT + 5.0 + CONNECT_TIMEOUT + READ_MARGIN
    assert Deadlines().answer > longest


def test_an_answer_past_its_deadline_is_a_503_and_the_server_goes_on() -> None:
    release = threading.Event()

    class Slow(_Api):
        def handle(self, request: ApiRequest) -> tuple[int, bytes, dict[str, str]]:
            release.wait(timeout=10)
            return 200, b"{}\n", {}

    server = HealthServer(
        host="127.0.0.1",
        port=0,
        live=lambda: (True, "ok\n"),
        ready=None,
        metrics=None,
        api=Slow(),
        deadlines=Deadlines(answer=0.5),
    ).start()
    try:
        t0 = time.monotonic()
        answer = raw(server.port, b"GET /verdicts/x HTTP/1.0\r\n\r\n")
        took = time.monotonic() - t0
        assert answer.startswith("HTTP/1.0 503 ") and '"reason": "ControllerBusy"' in answer
        assert 0.4 <= took < 2.0, took
        assert raw(server.port, b"GET /healthz HTTP/1.0\r\n\r\n").startswith("HTTP/1.0 200")
    finally:
        release.set()
        server.stop()
