"""A file stored compressed, labelled with its own coding, is hashed as stored.

Apache configured as the Rails guide shows sends ``x.css.gz`` with ``Content-Encoding:
gzip`` even to a client that accepts only identity: the bytes are the file the build
wrote, and a release hashes them as they lie on disk. Only a label that names exactly
the coding the file's name says it is stored in is left undone; any other label is
decoded as before (``x.css`` sent gzip-encoded, a ``.gz`` sent ``gzip, gzip``).
Exact bytes from a raw-socket server.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Callable

import pytest
from rawserver import RawServer, response, serve_each

from artifactcheck.fetch.decoders import beyond_stored
from artifactcheck.judge.codings import stored_coding

CSS = b"body { color: #333 }\n" * 20
STORED = gzip.compress(CSS, mtime=0)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: (path asked for, Content-Encoding sent, body sent) -> the bytes hashed
CASES = [
    ("x.css.gz", "gzip", STORED, STORED),  # the Rails + Apache case: as stored
    ("x.css.gz", "x-gzip", STORED, STORED),
    ("x.css.GZ", "GZIP", STORED, STORED),
    ("x.css.zst", "zstd", b"(zstd frame)", b"(zstd frame)"),  # no decoder needed
    ("x.css.br", "br", b"(brotli stream)", b"(brotli stream)"),
    ("x.css.gz", None, STORED, STORED),  # nginx: application/gzip, no label
    ("x.css", "gzip", STORED, CSS),  # a coding of the content: decoded
    ("x.css.gz", "gzip, gzip", gzip.compress(STORED, mtime=0), STORED),  # a layer on top
    ("x.css.gz", "identity, gzip", STORED, STORED),
    ("x.css.br", "gzip", STORED, CSS),  # another coding than the stored one: decoded
]


@pytest.mark.parametrize(("path", "label", "body", "hashed"), CASES)
async def test_what_is_hashed(
    make_fetcher, host: Callable[[], str], path: str, label: str | None, body: bytes, hashed: bytes
) -> None:
    headers = {"Content-Encoding": label} if label else {}
    wire = response(200, body, headers=headers)
    with RawServer(host(), serve_each(lambda conn, head: wire)) as server:
        async with make_fetcher() as f:
            got = await f.get_asset(server.url, path)
    assert got.ok, got.error
    assert got.sha256 == sha(hashed), (path, label)
    assert got.size == len(hashed)


def test_stored_codings_by_name() -> None:
    assert [stored_coding(p) for p in ("a/x.css.gz", "x.js.br", "x.zst", "x.css", "gz")] == [
        "gzip",
        "br",
        "zstd",
        None,
        None,
    ]
    assert stored_coding("x.css.gz?v=1") == "gzip"
    assert beyond_stored("gzip", "gzip") == "" and beyond_stored(" x-gzip ", "gzip") == ""
    assert beyond_stored("gzip, br", "gzip") == "br"
    assert beyond_stored("br, gzip", "gzip") is None and beyond_stored(None, "gzip") is None


async def test_paths_asked_again_are_read_as_the_first_time(
    make_fetcher, host: Callable[[], str]
) -> None:
    """A Fetcher asks the same few paths of every instance: the second and later asks of
    a path (from the Fetcher's memo of normalised paths) are read exactly as the first,
    a stored ``.gz`` as stored, its sibling decoded, and an unsafe path refused each
    time, never remembered as a usable one."""
    wire = response(200, STORED, headers={"Content-Encoding": "gzip"})
    with (
        RawServer(host(), serve_each(lambda conn, head: wire)) as one,
        RawServer(host(), serve_each(lambda conn, head: wire)) as two,
    ):
        async with make_fetcher() as f:
            got = [
                await f.get_asset(server.url, path)
                for _ in range(2)
                for server in (one, two)
                for path in ("x.css.gz", "x.css", "a/../../x.css.gz")
            ]
    for i in range(0, 12, 3):
        stored, decoded, unsafe = got[i : i + 3]
        assert stored.ok and stored.sha256 == sha(STORED), stored.error
        assert decoded.ok and decoded.sha256 == sha(CSS), decoded.error
        assert unsafe.error_kind == "unsafe" and unsafe.attempts == 0, unsafe
    assert [g.path for g in got[:3]] == ["x.css.gz", "x.css", "a/../../x.css.gz"]
    assert len(one.requests) == len(two.requests) == 4  # never the unsafe one
