"""Bodies hashed already in this run: a byte-for-byte copy of one is not hashed again.

A fleet's instances serve copies of one build: the same manifest, entry page and
sampled assets, byte for byte, from every instance of a version. Hashing each copy
again was the largest single cost of a small GET after the socket's own work (the
profiles in docs/benchmarks.md, "Copies hashed once"). So the digests of a small body
are kept together with the body itself, under the path it was served at and its size;
a later body there is compared with the kept one byte for byte (``==`` on two ``bytes``,
one ``memcmp``), and the digests are reused only when every byte is equal.

Nothing but the bytes is trusted. No header (an ``ETag``, ``Last-Modified`` or the
``Content-Length``) and no cheaper checksum decides: a hostile or drifted instance can
match any of those with other bytes, and the digest reported for its file would then
be another file's. A body that differs anywhere is hashed as it always was, and takes
the slot (the newest variant of a path is the one kept).

Bounded: only bodies taken whole with their head (at most ``OFFLOAD_AFTER``, see
:mod:`artifactcheck.fetch.response`) and at least :data:`MIN_SIZE` (below it hashing
costs no more than looking up), at most :data:`HELD_BYTES` of them held in all, the
least recently used dropped first. One per :class:`~artifactcheck.fetch.wire.Wire`
(a run's Fetcher, or a controller's for its lifetime), used on its event loop only.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

__all__ = ["HELD_BYTES", "MIN_SIZE", "KnownBodies"]

#: Bytes of bodies held at most: a fleet's sample is a few files per version.
HELD_BYTES: Final = 8 * 1024 * 1024
#: Bodies smaller than this are simply hashed.
MIN_SIZE: Final = 4096

_Key = tuple[str, tuple[str, ...], int]


def _path(url: str) -> str:
    """What follows the authority of ``url`` (path and query): copies are found across
    instances, so the host is not part of the key."""
    start = url.find("://")
    slash = url.find("/", start + 3 if start >= 0 else 0)
    return url[slash:] if slash >= 0 else "/"


class KnownBodies:
    """Digests of bodies seen, reused for an exact copy (see the module's docstring)."""

    __slots__ = ("_entries", "_held", "limit")

    def __init__(self, limit: int = HELD_BYTES) -> None:
        self._entries: OrderedDict[_Key, tuple[bytes, dict[str, str]]] = OrderedDict()
        self._held = 0
        self.limit = limit

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def held(self) -> int:
        """Bytes of bodies held now."""
        return self._held

    def digests(self, url: str, algorithms: tuple[str, ...], body: bytes) -> dict[str, str] | None:
        """The digests of ``body`` by ``algorithms`` if an equal body was kept for this
        path (a new dict), else None: then the caller hashes it and :meth:`keep` s it."""
        if len(body) < MIN_SIZE:
            return None
        key = (_path(url), algorithms, len(body))
        entry = self._entries.get(key)
        if entry is None or entry[0] != body:  # every byte compared, nothing else trusted
            return None
        self._entries.move_to_end(key)
        return dict(entry[1])

    def keep(
        self, url: str, algorithms: tuple[str, ...], body: bytes, digests: dict[str, str]
    ) -> None:
        """Keep ``body`` (immutable bytes) with the ``digests`` just computed from it."""
        size = len(body)
        if size < MIN_SIZE or size > self.limit:
            return
        key = (_path(url), algorithms, size)
        old = self._entries.pop(key, None)
        if old is not None:
            self._held -= len(old[0])
        self._entries[key] = (body, dict(digests))
        self._held += size
        while self._held > self.limit:
            _, (dropped, _) = self._entries.popitem(last=False)
            self._held -= len(dropped)
