"""``--diff``'s expected bytes: taken only from a source whose answer has the expected
sha256 (observe/evidence.py), whatever the sources before it serve."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from artifactcheck.model.settings import CheckSpec
from artifactcheck.observe.evidence import expected_bytes, recording_fetcher

RIGHT = b"console.log('1.4.1');\n"
#: What each sibling serves at /main.js: one changed, one right.
SERVED = {"/changed/main.js": b"console.log('tampered');\n", "/right/main.js": RIGHT}


class _Files(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        body = SERVED.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_only_bytes_with_the_expected_sha256_are_used(server: str) -> None:
    spec = CheckSpec.model_validate({"targets": [{"url": f"{server}/right/"}]})
    sources = [("sibling web-1", f"{server}/changed/"), ("sibling web-2", f"{server}/right/")]

    async def fetch() -> tuple[bytes | None, str | None, list[str]]:
        fetcher, _ = recording_fetcher(spec)
        async with fetcher:
            return await expected_bytes(
                fetcher, sources, "main.js", hashlib.sha256(RIGHT).hexdigest(), host_header=None
            )

    body, used, tried = asyncio.run(fetch())
    assert (body, used) == (RIGHT, "sibling web-2")
    changed = hashlib.sha256(SERVED["/changed/main.js"]).hexdigest()
    assert tried == [f"sibling web-1: {changed}"]  # tried, and why it was not used
