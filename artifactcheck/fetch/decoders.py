"""Undoing content codings (gzip, deflate, br) in bounded pieces, under a cap.

Every decoder here yields at most :data:`PIECE` bytes at a time, so the byte cap on a
body is checked on the decoded bytes piece by piece: a gzip bomb stops at the cap, it
is never inflated whole. A response may stack codings (``gzip, br``); more than
:data:`MAX_CONTENT_CODINGS` of them is a protocol error of that response.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator
from typing import Any, Final, Protocol

from artifactcheck.model.errors import ErrorKind

__all__ = [
    "ACCEPTED_CODINGS",
    "MAX_CONTENT_CODINGS",
    "PIECE",
    "CodingChainTooLong",
    "DecodeError",
    "Decoder",
    "accepted_encodings",
    "decoder_for",
    "beyond_stored",
]

PIECE: Final = 256 * 1024  # largest decoded piece held at once


class DecodeError(Exception):
    """A compressed body could not be decoded, or uses an encoding we cannot decode."""

    kind = ErrorKind.DECODE


class CodingChainTooLong(DecodeError):
    """More stacked content codings than any real server sends: a protocol violation."""

    kind = ErrorKind.PROTOCOL


#: Content codings a caller may ask for by name (``get_asset(accept_encoding=...)``).
ACCEPTED_CODINGS = frozenset({"identity", "gzip", "deflate", "br"})

#: Content codings accepted in one response, as urllib3 2.6 does after CVE-2025-66418:
#: each coding is one more decoder in the chain, and a header listing thousands of them
#: would cost a decoder (and a stack frame per piece) each.
MAX_CONTENT_CODINGS: Final = 5


class Decoder(Protocol):
    """Undoes one Content-Encoding in bounded pieces, so the cap is checked between them."""

    def feed(self, data: bytes) -> Iterator[bytes]: ...
    def flush(self) -> Iterator[bytes]: ...
    @property
    def complete(self) -> bool: ...


class _Identity:
    """No content coding: bytes pass through unchanged."""

    complete = True

    def feed(self, data: bytes) -> Iterator[bytes]:
        yield data

    def flush(self) -> Iterator[bytes]:
        return iter(())


_IDENTITY: Final = _Identity()  # it keeps no state: one serves every body


class _Zlib:
    """gzip / deflate, inflated at most ``PIECE`` bytes at a time (bomb-safe)."""

    def __init__(self, encoding: str) -> None:
        self._gzip = encoding in ("gzip", "x-gzip")
        self._raw_fallback = not self._gzip  # "deflate" is zlib-wrapped, or raw in the wild
        self._started = False
        self._d = self._new()

    def _new(self, wbits: int | None = None) -> Any:
        if wbits is None:
            wbits = 16 + zlib.MAX_WBITS if self._gzip else zlib.MAX_WBITS
        return zlib.decompressobj(wbits)

    @property
    def complete(self) -> bool:
        return bool(self._d.eof)

    def feed(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = self._d.decompress(data, PIECE)
            except zlib.error as exc:
                if self._raw_fallback and not self._started:
                    self._raw_fallback = False
                    self._d = self._new(-zlib.MAX_WBITS)
                    continue
                raise DecodeError(f"invalid compressed data: {exc}") from exc
            self._started = True
            if out:
                yield out
            data = self._d.unconsumed_tail
            if self._d.eof:
                rest = self._d.unused_data
                if self._gzip and rest.strip(b"\0"):  # another gzip member follows
                    self._d = self._new()
                    data = rest
                    continue
                return
            if not data and len(out) < PIECE:
                return

    def flush(self) -> Iterator[bytes]:
        yield from self.feed(b"")


class _Brotli:  # pragma: no cover - brotli is optional and not installed in CI
    """br, only with a brotli module that can bound its output (max_output_length)."""

    def __init__(self) -> None:
        import brotli

        self._d = brotli.Decompressor()
        self._error = brotli.error

    @property
    def complete(self) -> bool:
        return bool(self._d.is_finished())

    def feed(self, data: bytes) -> Iterator[bytes]:
        try:
            out = self._d.process(data, max_output_length=PIECE)
            while True:
                if out:
                    yield out
                if len(out) < PIECE and self._d.can_accept_more_data():
                    return
                out = self._d.process(b"", max_output_length=PIECE)
        except self._error as exc:
            raise DecodeError(f"invalid brotli data: {exc}") from exc

    def flush(self) -> Iterator[bytes]:
        return iter(())


def _brotli_usable() -> bool:
    """True when brotli can bound its output; without that a br bomb cannot be capped."""
    try:
        import brotli
    except ImportError:
        return False
    return hasattr(brotli.Decompressor, "can_accept_more_data")


_BROTLI = _brotli_usable()


class _Chain:
    """Several content codings, undone last-applied first."""

    def __init__(self, decoders: list[Decoder]) -> None:
        self._decoders = decoders

    @property
    def complete(self) -> bool:
        return all(d.complete for d in self._decoders)

    def _through(self, pieces: Iterable[bytes], index: int) -> Iterator[bytes]:
        if index == len(self._decoders):
            yield from pieces
            return
        decoder = self._decoders[index]
        for piece in pieces:
            yield from self._through(decoder.feed(piece), index + 1)

    def feed(self, data: bytes) -> Iterator[bytes]:
        return self._through([data], 0)

    def flush(self) -> Iterator[bytes]:
        for index, decoder in enumerate(self._decoders):
            yield from self._through(decoder.flush(), index + 1)


_SAME_CODING: Final = {"x-gzip": "gzip"}


def beyond_stored(content_encoding: str | None, stored: str) -> str | None:
    """The codings to undo to reach a file's stored bytes, when its label starts with
    the coding the file is stored in (``""``: none); None when it does not.

    A server that labels a precompressed file with its own coding (Apache configured as
    the Rails guides show: ``x.css.gz`` with ``Content-Encoding: gzip``, whatever the
    client accepts) sends the file as stored. Its bytes are judged as the file the build
    wrote (a release hashes ``x.css.gz`` as it lies on disk), not as decoded content
    that no release lists under that name; a coding applied on top of it in transit
    (``gzip, br``: the stored gzip, then br) is still undone.
    """
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    codings = [_SAME_CODING.get(c, c) for c in codings if c != "identity"]
    if not codings or codings[0] != stored:
        return None
    return ", ".join(codings[1:])


def decoder_for(content_encoding: str | None) -> tuple[Decoder, str | None]:
    """A decoder for a Content-Encoding header and the encoding to report (None: identity)."""
    if not content_encoding:  # no header, most responses: nothing to parse
        return _IDENTITY, None
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    if len(codings) > MAX_CONTENT_CODINGS:
        raise CodingChainTooLong(
            f"Content-Encoding lists {len(codings)} codings, more than the"
            f" {MAX_CONTENT_CODINGS} accepted"
        )
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return _IDENTITY, None
    decoders: list[Decoder] = []
    for coding in reversed(codings):
        if coding in ("gzip", "x-gzip", "deflate"):
            decoders.append(_Zlib(coding))
        elif coding == "br" and _BROTLI:  # pragma: no cover - optional dependency
            decoders.append(_Brotli())
        else:
            raise DecodeError(f"unsupported Content-Encoding {coding!r}")
    decoder: Decoder = decoders[0] if len(decoders) == 1 else _Chain(decoders)
    return decoder, ", ".join(codings)


def accepted_encodings(identity_only: bool) -> str:
    """The Accept-Encoding a request sends: only codings we can decode under a cap."""
    if identity_only:
        return "identity"
    return "gzip, deflate, br" if _BROTLI else "gzip, deflate"
