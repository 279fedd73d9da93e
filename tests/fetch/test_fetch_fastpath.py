"""The lean request path gives what the full path gives: same URLs, bytes, headers.

The Fetcher parses each base URL once (``urls.Base``), routes a joined URL by
appending to the base's request target, writes request heads itself and reads
responses without httpx objects; every one of these shortcuts is checked here against
the code it replaces (``urls.join``, ``httpx.URL``, ``httpx.Request``, ``httpx.Headers``).
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Any

import httpx
import pytest
from rawserver import RawConn, RawServer, response

from artifactcheck.fetch import response as reading
from artifactcheck.fetch import urls
from artifactcheck.fetch.error_kinds import HeaderRefused
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.http1 import RawHeaders, header_block
from artifactcheck.fetch.routes import BaseRoute as _BaseUrl
from artifactcheck.fetch.routes import Route as _Route
from artifactcheck.manifests.limits import normalise_path
from artifactcheck.model.errors import ArtifactCheckError
from artifactcheck.model.settings import HttpSettings, RetrySettings

BASES = [
    "http://10.0.0.1/",
    "http://10.0.0.1",
    "http://10.0.0.1:8080/app",
    "http://10.0.0.1:8080/app/",
    "https://Example.COM:443/a/b/?q=1#f",
    "http://[::1]:81/x/",
    "http://h/a/../b/",
    "http://h/a/./b/",
    "http://h/%2e%2e/",
    "http://h/app;v=1/",
    "http://bücher.example/dir/",
    "http://h/../",
]
PATHS = [
    "index.html",
    "assets/app-1.js",
    "a b.js",
    "ünï/cödé.js",
    "a%20b.js",
    "x/./y.js",
    "x//y.js",
    "x\\y.js",
    "q.js?v=1",
    "f.js#frag",
    "'()*+,;=:@~!$&.js",
    "%2e%2e/x",
    "..;/x",
    "../x",
    "/abs.js",
    "//evil.example/x",
    "http://evil.example/x",
    "a/%2E%2E/%2e%2e/b",
    "[x].js",
    "a|b^c`d{e}.js",
    "\x00",
    "",
]


def _slow(base: str, path: str) -> str | None:
    try:
        return urls.join(base, normalise_path(path))
    except (ArtifactCheckError, ValueError):
        return None


def _fast(base: str, path: str) -> str | None:
    try:
        relative = normalise_path(path)
        return urls.parse_base(base).join(relative)
    except (ArtifactCheckError, ValueError):
        return None


@pytest.mark.parametrize(("base", "path"), list(itertools.product(BASES, PATHS)))
def test_base_join_is_join(base: str, path: str) -> None:
    assert _fast(base, path) == _slow(base, path)


@pytest.mark.parametrize(("base", "path"), list(itertools.product(BASES, PATHS)))
def test_a_joined_url_is_routed_as_httpx_routes_it(base: str, path: str) -> None:
    url = _fast(base, path)
    if url is None:
        return
    parsed = urls.parse_base(base)
    route = _BaseUrl(parsed, _Route.of(parsed.directory)).route_of(url)
    assert route == _Route.of(url)
    request = httpx.Request("GET", url)
    assert route.target == request.url.raw_path
    assert route.netloc == request.headers["host"].encode()


async def _wire(fetcher_kw: dict[str, Any], call: dict[str, Any]) -> list[bytes]:
    """The request bytes the Fetcher writes: on the lean path, then through httpx."""

    def handler(conn: RawConn) -> None:
        while conn.read_request() is not None:
            conn.send(response(200, b"ok"))

    with RawServer("127.0.0.1", handler) as server:
        for lean in (True, False):
            async with Fetcher(http=HttpSettings(**fetcher_kw), retry=RetrySettings()) as f:
                if not lean:
                    f._wire.lean = None  # the httpx.Request path, as for an injected transport
                result = await f.get_asset(server.url, "a b/c.js", **call)
            assert result.ok, result.error
        heads = server.received.split(b"\r\n\r\n")
    return heads[:2]


@pytest.mark.parametrize(
    ("fetcher_kw", "call"),
    [
        ({}, {}),
        ({}, {"accept_encoding": "gzip"}),
        ({"host_header": "site.example"}, {}),
        ({}, {"host_header": "other.example:8443"}),
        ({"headers": {"X-Token": "t", "Accept": "text/plain"}}, {}),
        ({"headers": {"Host": "cfg.example"}}, {}),
        ({"identity_encoding": True}, {"accept_encoding": "br"}),
    ],
)
async def test_the_lean_path_writes_the_bytes_httpx_writes(
    fetcher_kw: dict[str, Any], call: dict[str, Any]
) -> None:
    lean, full = await _wire(fetcher_kw, call)
    assert lean == full


def test_header_block_refuses_what_the_transport_refuses() -> None:
    assert header_block([(b"a", b"1"), (b"b", b"2")]) == b"a: 1\r\nb: 2\r\n"
    for raw in ([(b"x y", b"1")], [(b"x", b"a\r\nb")], [(b"x", b"\x00")]):
        with pytest.raises(HeaderRefused, match="not sent"):
            header_block(raw)


@pytest.mark.parametrize(
    "raw",
    [
        [(b"Content-Type", b"text/html"), (b"ETag", b'"1"'), (b"etag", b'"2"')],
        [(b"Server", "nginx/ü".encode()), (b"Via", b"1.1 a")],
        [(b"Server", b"\xff\xfe"), (b"X-Cache", b"HIT")],
        [(b"Transfer-Encoding", b"gzip, chunked"), (b"Content-Length", b"5, 5")],
        [],
    ],
)
def test_raw_headers_read_as_httpx_headers(raw: list[tuple[bytes, bytes]]) -> None:
    lean, full = RawHeaders(raw), httpx.Headers(raw)
    assert lean.multi_items() == full.multi_items()
    for key in ("content-type", "ETag", "server", "transfer-encoding", "missing"):
        assert lean.get(key) == full.get(key)
        assert lean.get_list(key) == full.get_list(key)
        assert lean.get_list(key, split_commas=True) == full.get_list(key, split_commas=True)


class _Pieces(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    async def __aiter__(self) -> Any:
        for piece in self.pieces:
            yield piece


@pytest.mark.parametrize("cap", [10 * 2**20, 3 * 2**20 + 5])
async def test_large_bodies_hashed_on_the_thread_hash_alike(cap: int) -> None:
    """Past OFFLOAD_AFTER, pieces are hashed on the hashing thread: same digests, same
    cap, in order."""
    pieces = [bytes([i]) * (256 * 1024 + i) for i in range(20)]
    data = b"".join(pieces)
    resp = httpx.Response(200, stream=_Pieces(pieces))
    stats = reading.FetchStats()
    got = await reading.read(
        resp, "http://h/x", cap=cap, algorithms=("sha256", "md5"), keep_body=False, stats=stats
    )
    if len(data) > cap:
        assert got.error_kind == "too-large" and not got.hashes
    else:
        assert got.error is None and got.size == len(data)
        assert got.hashes == {
            "sha256": hashlib.sha256(data).hexdigest(),
            "md5": hashlib.md5(data).hexdigest(),
        }
