"""Evidence headers: exactly what the server said, kept once however many responses say it.

A controller holds every pod's latest observation; siblings answer the same file with
the same ETag, Server, Content-Type and digest. The fetcher keeps one copy of each such
string (``headers.kept_once``), never a changed one, under a bounded table.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import httpx
import pytest
from rawserver import RawServer, response, serve_each

from artifactcheck.fetch import headers as headers_module
from artifactcheck.fetch.headers import evidence, kept_once


async def test_equal_evidence_from_two_servers_is_one_string_each(
    make_fetcher, host: Callable[[], str]
) -> None:
    def wire() -> bytes:  # built anew for each answer: equal bytes, distinct objects
        return response(
            200,
            b"console.log(1)",
            headers={
                "ETag": '"5f3c-62a1"',
                "Server": "nginx/1.22.1",
                "X-Cache": "HIT",
                "X-Not-Evidence": "dropped",
            },
        )

    with (
        RawServer(host(), serve_each(lambda conn, head: wire())) as one,
        RawServer(host(), serve_each(lambda conn, head: wire())) as two,
    ):
        async with make_fetcher() as f:
            a = await f.get_asset(one.url, "app.js")
            b = await f.get_asset(two.url, "app.js")
    assert a.ok and b.ok, (a.error, b.error)
    assert a.headers["etag"] == '"5f3c-62a1"' and a.headers["x-cache"] == "HIT"
    assert "x-not-evidence" not in a.headers
    for name in ("etag", "server", "x-cache"):
        assert a.headers[name] is b.headers[name], name
    assert a.sha256 == hashlib.sha256(b"console.log(1)").hexdigest()
    assert a.sha256 is b.sha256


def test_repeated_headers_are_joined_and_names_lowercased() -> None:
    class Raw:
        def multi_items(self) -> list[tuple[str, str]]:
            return [("Via", "1.1 edge-a"), ("VIA", "1.1 edge-b"), ("Age", "12")]

    assert evidence(Raw()) == {"via": "1.1 edge-a, 1.1 edge-b", "age": "12"}  # type: ignore[arg-type]


def test_the_table_is_bounded_and_values_unchanged(monkeypatch) -> None:
    monkeypatch.setattr(headers_module, "_KEPT", {})
    monkeypatch.setattr(headers_module, "_KEPT_LIMIT", 4)
    values = ["".join(["etag-", str(n)]) for n in range(10)]
    kept = [kept_once(v) for v in values]
    assert kept == values
    assert len(headers_module._KEPT) <= 4
    again = "".join(["etag-", "9"])
    assert kept_once(again) is kept[-1]


@pytest.mark.parametrize(
    ("head", "server"),
    [
        (b"HTTP/1.1 200 OK\r\nServer: nginx/\xc3\xbc\r\nX-Cache: HIT", "nginx/\u00fc"),  # utf-8
        (b"HTTP/1.1 200 OK\r\nServer: \xff\xfe\r\nX-Cache: HIT", "\u00ff\u00fe"),  # latin-1
        (b"HTTP/1.1 200 D\xc3\xa9j\xc3\xa0 vu\r\nServer: nginx\r\nX-Cache: HIT", "nginx"),
    ],
    ids=["utf-8 value", "latin-1 value", "non-ascii reason only"],
)
async def test_a_head_not_all_ascii_is_read_as_httpx_reads_it(
    make_fetcher, host: Callable[[], str], head: bytes, server: str
) -> None:
    """The lean transport decodes an all-ASCII head as ASCII without a second look; a
    head that is not is read as httpx reads it: utf-8, else latin-1, whole head alike."""
    wire = head + b"\r\nContent-Length: 2\r\n\r\nok"
    lines = [line.split(b":", 1) for line in head.split(b"\r\n")[1:]]
    expected = httpx.Headers([(name, value.strip()) for name, value in lines])
    with RawServer(host(), serve_each(lambda conn, request: wire)) as peer:
        async with make_fetcher() as f:
            got = await f.get_asset(peer.url, "app.js")
    assert got.ok, got.error
    assert got.headers["server"] == server == expected["server"]
    assert got.headers["x-cache"] == expected.get("x-cache", "HIT")
    assert got.sha256 == hashlib.sha256(b"ok").hexdigest()
