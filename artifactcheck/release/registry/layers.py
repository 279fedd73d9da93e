"""Layer blobs as streams: counted, capped, hashed, decompressed by their first bytes.

Nothing is held whole: a blob is read chunk by chunk through its size and digest check
(its files count only once :meth:`BlobReader.finish` verified it), and every byte
downloaded or decompressed is charged to the image's budget, because a small gzip can
inflate to terabytes.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import httpx

from artifactcheck.model.errors import ExpectationUnavailable
from artifactcheck.release.registry.manifest import Descriptor
from artifactcheck.release.registry.session import Session, http_reason

CHUNK = 256 * 1024


class BlobReader:
    """A file-like view of a blob response: counts, caps and hashes the bytes it passes.

    Its digest is checked when the blob has been read to the end (:meth:`finish`):
    nothing read from it counts until then.
    """

    def __init__(self, response: httpx.Response, desc: Descriptor, budget: Budget) -> None:
        self._chunks: Iterator[bytes] = response.iter_bytes(CHUNK)
        self._buf = b""
        self._pos = 0  # bytes of _buf already returned (no copying per small read)
        self.desc = desc
        self.budget = budget
        self.hash = hashlib.sha256()
        self.size = 0
        self.eof = False

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes (``-1``: up to one chunk, never the whole blob)."""
        if n < 0:
            n = CHUNK
        while not self.eof and len(self._buf) - self._pos < n:
            self.budget.session.time_left()
            try:
                chunk = next(self._chunks)
            except StopIteration:
                self.eof = True
                break
            except httpx.HTTPError as exc:
                raise ExpectationUnavailable(
                    f"{self.budget.session.where}: reading blob {self.desc.digest}: "
                    f"{http_reason(exc)}"
                ) from exc
            self.size += len(chunk)
            if self.size > self.desc.size:
                raise ExpectationUnavailable(
                    f"blob {self.desc.digest}: more than the {self.desc.size} bytes its "
                    "descriptor declares"
                )
            self.budget.download(len(chunk))
            self.hash.update(chunk)
            self._buf = self._buf[self._pos :] + chunk
            self._pos = 0
        out = self._buf[self._pos : self._pos + n]
        self._pos += len(out)
        return out

    def finish(self) -> None:
        """Read to the end and verify size and digest: the layer's files count after this."""
        while self.read(CHUNK):
            pass
        if self.size != self.desc.size:
            raise ExpectationUnavailable(
                f"blob {self.desc.digest}: {self.size} bytes, its descriptor declares "
                f"{self.desc.size}"
            )
        got = "sha256:" + self.hash.hexdigest()
        if got != self.desc.digest:
            raise ExpectationUnavailable(
                f"blob {self.desc.digest}: content hashes to {got} (refused)"
            )


class Unpacked:
    """Counts decompressed bytes against the cap (a small gzip can inflate to terabytes)."""

    def __init__(self, inner: IO[bytes] | Any, budget: Budget) -> None:
        self.inner = inner
        self.budget = budget

    def read(self, n: int = -1) -> bytes:
        try:
            data: bytes = self.inner.read(n)
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile, zlib.error, truncation
            raise ExpectationUnavailable(f"layer does not decompress: {exc}") from exc
        self.budget.unpack(len(data))
        return data


@dataclass
class Budget:
    session: Session
    downloaded: int = 0
    unpacked: int = 0
    members: int = 0

    def download(self, n: int) -> None:
        self.downloaded += n
        cap = self.session.options.limits.max_download_bytes
        if self.downloaded > cap:
            raise ExpectationUnavailable(f"image over the cap of {cap} downloaded bytes")

    def unpack(self, n: int) -> None:
        self.unpacked += n
        cap = self.session.options.limits.max_unpacked_bytes
        if self.unpacked > cap:
            raise ExpectationUnavailable(f"image over the cap of {cap} decompressed bytes")

    def member(self) -> None:
        self.members += 1
        cap = self.session.options.limits.max_members
        if self.members > cap:
            raise ExpectationUnavailable(f"image over the cap of {cap} tar members")


def decompressed(blob: BlobReader, media_type: str, budget: Budget) -> Unpacked:
    """The layer's tar stream, by its first bytes (media types are sometimes wrong)."""
    head = blob.read(4)
    rest = _Prefixed(head, blob)
    if head[:2] == b"\x1f\x8b":
        return Unpacked(gzip.GzipFile(fileobj=rest, mode="rb"), budget)  # type: ignore[call-overload]
    if head == b"\x28\xb5\x2f\xfd":
        try:
            zstandard: Any = importlib.import_module("zstandard")
        except ImportError as exc:
            raise ExpectationUnavailable(
                f"layer {blob.desc.digest} is zstd-compressed ({media_type or 'zstd'}) and "
                "the zstandard package is not installed (pip install zstandard)"
            ) from exc
        return Unpacked(zstandard.ZstdDecompressor().stream_reader(rest), budget)
    return Unpacked(rest, budget)


class _Prefixed:
    """Bytes already read, then the rest of a stream."""

    def __init__(self, head: bytes, rest: BlobReader) -> None:
        self.head = head
        self.rest = rest

    def read(self, n: int = -1) -> bytes:
        if self.head:
            if n < 0:
                out, self.head = self.head, b""
                return out
            out, self.head = self.head[:n], self.head[n:]
            return out
        return self.rest.read(n)
