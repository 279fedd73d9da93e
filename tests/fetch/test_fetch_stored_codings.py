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
