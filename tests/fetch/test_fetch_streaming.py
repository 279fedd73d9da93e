"""Streaming: hashes computed while reading, caps, truncation and content encodings."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from rawserver import RawServer, serve_each

from artifactcheck_sim.web import (
    Body,
    Compressed,
    GzipBomb,
    Huge,
    Site,
    Truncated,
    WebFleet,
)

MB = 1024 * 1024


async def test_large_file_is_hashed_while_streaming(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], tmp_path: Path
) -> None:
    data = os.urandom(12 * MB + 123)  # above the sim's in-memory cache: streamed from disk
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "big.bin").write_bytes(data)
    base = fleet.add(Site(root=tmp_path), host())
    async with make_fetcher() as fetcher:
        got = await fetcher.get_asset(base, "assets/big.bin", algorithms=["sha1", "sha384", "md5"])
    assert got.ok, got.error
    assert got.size == len(data)
    assert got.body is None
    assert got.hashes == {
        "sha256": hashlib.sha256(data).hexdigest(),
        "sha1": hashlib.sha1(data).hexdigest(),
        "sha384": hashlib.sha384(data).hexdigest(),
        "md5": hashlib.md5(data).hexdigest(),
    }
    assert got.content_encoding is None
    assert fleet.server(base).paths == ["/assets/big.bin"]


async def test_unknown_algorithm_is_a_programming_error(make_fetcher) -> None:
    async with make_fetcher() as fetcher:
        with pytest.raises(ValueError):
            await fetcher.get_asset("http://127.0.0.1:9/", "a.js", algorithms=["sha257"])


async def test_document_keeps_its_body_and_evidence_headers(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], tmp_path: Path
) -> None:
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "manifest.json").write_bytes(b'{"a": 1}')
    site = Site(root=tmp_path, version="1.4.2", headers={"X-Cache": "HIT", "X-Internal": "no"})
    base = fleet.add(site, host())
    async with make_fetcher() as fetcher:
        manifest = await fetcher.get_document(base, "assets/manifest.json")
        version = await fetcher.get_document(base, "/version")
    assert manifest.body == b'{"a": 1}'
    assert manifest.sha256 == hashlib.sha256(b'{"a": 1}').hexdigest()
    headers = manifest.headers
    assert headers["etag"].startswith('"') and "-" in headers["etag"]  # nginx style
    assert headers["cache-control"] == "public, max-age=31536000, immutable"
    assert headers["server"].startswith("nginx")
    assert headers["x-cache"] == "HIT"
    assert {"last-modified", "date", "content-length", "content-type"} <= set(headers)
    assert "x-internal" not in headers and "connection" not in headers
    assert version.body == b'{"version": "1.4.2"}'
    assert version.headers["cache-control"] == "no-cache"
    received = fleet.server(base).received
    assert all(r.headers["accept-encoding"] == "identity" for r in received)


async def test_declared_length_over_the_cap_is_not_read(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(overrides={"/manifest.json": Huge(50 * MB)}), host())
    async with make_fetcher(http={"max_manifest_bytes": MB}) as fetcher:
        got = await fetcher.get_document(base, "manifest.json")
    assert got.error_kind == "too-large"
    assert got.status == 200 and got.body is None and not got.hashes
    assert "Content-Length 52428800" in (got.error or "")
    assert fetcher.stats.bytes_read == 0
    assert got.attempts == 1  # a cap is not a reason to retry


async def test_streamed_body_is_cut_at_the_cap(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    huge = Huge(50 * MB, declare_length=False)  # chunked: only counting can stop it
    base = fleet.add(Site(overrides={"/manifest.json": huge}), host())
    async with make_fetcher(http={"max_manifest_bytes": 2 * MB}) as fetcher:
        got = await fetcher.get_document(base, "manifest.json")
        read = fetcher.stats.bytes_read
    assert got.error_kind == "too-large" and got.body is None
    assert 2 * MB < read < 3 * MB
    await _closed(fleet, base)
    assert fleet.server(base).bytes_sent < 20 * MB  # the server was stopped mid-body


async def test_explicit_max_bytes_for_a_document(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(overrides={"/v": b"x" * 100}), host())
    async with make_fetcher() as fetcher:
        small = await fetcher.get_document(base, "v", max_bytes=99)
        exact = await fetcher.get_document(base, "v", max_bytes=100)
    assert small.error_kind == "too-large"
    assert exact.ok and exact.size == 100


async def test_asset_cap(make_fetcher, fleet: WebFleet, host: Callable[[], str]) -> None:
    base = fleet.add(Site(overrides={"/a.js": Huge(3 * MB, declare_length=False)}), host())
    async with make_fetcher(http={"max_body_bytes": MB}) as fetcher:
        got = await fetcher.get_asset(base, "a.js")
    assert got.error_kind == "too-large"


async def test_truncated_body(make_fetcher, fleet: WebFleet, host: Callable[[], str]) -> None:
    base = fleet.add(Site(overrides={"/a.js": Truncated(b"x" * 100_000, sent=1000)}), host())
    async with make_fetcher(retry={"attempts": 1}) as fetcher:
        got = await fetcher.get_asset(base, "a.js")
    assert got.error_kind == "truncated"
    assert not got.hashes and not got.ok
    assert "100000" in (got.error or "")


async def test_short_content_length_yields_the_declared_prefix(
    make_fetcher, host: Callable[[], str]
) -> None:
    """A Content-Length shorter than the bytes sent: the declared prefix is the body
    (RFC 9112 6.3), and the connection, with junk after the response, is never reused
    (the junk would be read as the start of the next answer). The server keeps the
    connection open and answers every request on it: only the client can close it."""
    body = b"0123456789" * 10
    wire = b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n" + body
    with RawServer(host(), serve_each(lambda conn, head: wire)) as server:
        async with make_fetcher(retry={"attempts": 1}) as fetcher:
            got = [await fetcher.get_asset(server.url, "a.js") for _ in range(2)]
    for g in got:  # the prefix, and the junk dropped with the connection
        assert g.ok and g.size == 40, g.error
        assert g.sha256 == hashlib.sha256(body[:40]).hexdigest()
    assert server.connections == 2


async def test_gzip_is_decoded_and_the_decoded_bytes_hashed(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], tmp_path: Path
) -> None:
    js = b"export const answer = 42;\n" * 5000
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "static.js").write_bytes(js)
    site = Site(
        root=tmp_path,
        gzip="always",  # compresses even though identity is asked for
        overrides={"/forced.js": Compressed(js), "/deflate.js": Compressed(js, "deflate")},
    )
    base = fleet.add(site, host())
    async with make_fetcher() as fetcher:
        results = [
            await fetcher.get_asset(base, p)
            for p in ("assets/static.js", "forced.js", "deflate.js")
        ]
    for got in results:
        assert got.ok, got.error
        assert got.sha256 == hashlib.sha256(js).hexdigest()
        assert got.size == len(js)
        assert int(got.headers["content-length"]) < len(js)
    assert [g.content_encoding for g in results] == ["gzip", "gzip", "deflate"]


async def test_raw_deflate_is_decoded(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    js = b"let x = 1;\n" * 1000
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)  # no zlib header
    raw = compressor.compress(js) + compressor.flush()
    body = Body(raw, headers={"Content-Encoding": "deflate"})
    base = fleet.add(Site(overrides={"/a.js": body}), host())
    async with make_fetcher() as fetcher:
        got = await fetcher.get_asset(base, "a.js")
    assert got.ok and got.sha256 == hashlib.sha256(js).hexdigest()


async def test_gzip_bomb_stops_at_the_cap_without_inflating_it(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(overrides={"/manifest.json": GzipBomb(256 * MB)}), host())
    async with make_fetcher(http={"max_manifest_bytes": MB}) as fetcher:
        tracemalloc.start()
        try:
            got = await fetcher.get_document(base, "manifest.json")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert got.error_kind == "too-large"
    assert "decoded gzip body" in (got.error or "")
    assert got.content_encoding == "gzip"
    assert peak < 16 * MB  # never the 256 MB it expands to


@pytest.mark.parametrize(
    ("encoding", "payload", "kind"),
    [
        ("br", b"\x1b\x00", "decode"),
        ("gzip", b"not gzip at all", "decode"),
        ("gzip", zlib.compress(b"x" * 1000)[:-10], "decode"),  # zlib header, not gzip
    ],
)
async def test_undecodable_bodies(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], encoding: str, payload: bytes, kind: str
) -> None:
    body = Body(payload, headers={"Content-Encoding": encoding})
    base = fleet.add(Site(overrides={"/a.js": body}), host())
    async with make_fetcher() as fetcher:
        got = await fetcher.get_asset(base, "a.js")
    assert got.error_kind == kind, got.error
    assert got.attempts == 1


async def test_gzip_stream_cut_short_is_truncated(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    whole = compressor.compress(os.urandom(10_000)) + compressor.flush()
    body = Body(whole[: len(whole) // 2], headers={"Content-Encoding": "gzip"})
    base = fleet.add(Site(overrides={"/a.js": body}), host())
    async with make_fetcher() as fetcher:
        got = await fetcher.get_asset(base, "a.js")
    assert got.error_kind == "truncated"


async def test_compressed_responses_when_identity_is_not_requested(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], tmp_path: Path
) -> None:
    js = b"console.log('hi');\n" * 2000
    (tmp_path / "a.js").write_bytes(js)
    base = fleet.add(Site(root=tmp_path, gzip="on"), host())
    async with make_fetcher(http={"identity_encoding": False}) as fetcher:
        got = await fetcher.get_asset(base, "a.js")
    assert got.content_encoding == "gzip"
    assert got.sha256 == hashlib.sha256(js).hexdigest()
    assert fleet.server(base).received[0].headers["accept-encoding"] == "gzip, deflate"


async def _closed(fleet: WebFleet, base: str) -> None:
    from fetch_support import eventually

    await eventually(lambda: fleet.server(base).connections_current == 0)
