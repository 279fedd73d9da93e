"""Content hashes that manifests carry, and checking served bytes against them.

Several formats promise the bytes of each file, not only its name: SRI strings
(webpack-assets-manifest, Sprockets, Propshaft), SHA-1 hex (Angular's ``ngsw.json``),
SHA-256 hex (the native format, Sprockets' ``digest``) and Django's 12-hex MD5 prefix.
Readers normalise all of them to ``algorithm -> lowercase hex`` here, so that
:func:`verify_integrity` can check served bytes even without a release manifest,
with one rule for every format.

The fetcher hashes while streaming; :func:`algorithms_needed` tells it which hashlib
algorithms to run so it never buffers a body to hash it twice.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import re
from collections.abc import Mapping
from typing import Any, TypeGuard

from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.model.errors import ManifestLimitError
from artifactcheck.model.values import Manifest, ManifestEntry

#: The hashes a release manifest may vouch for a file's bytes with, in the order they
#: are preferred: sha256 (native, SRI, Sprockets), then the SHA-1 of Angular's
#: ``ngsw.json``, which its service worker itself enforces (it refuses a file whose
#: SHA-1 differs). The comparison checks served bytes in exactly these (judge/compare.py
#: via :func:`vouching_hash`); any other hash would be compared by name only, the false
#: ``consistent`` this rule exists to prevent, so Django's MD5 name prefix vouches for
#: nothing.
VOUCHING_ALGORITHMS: tuple[str, ...] = ("sha256", "sha1")

#: Django's name hash: the first 12 hex digits of the MD5 of the file as written.
MD5_PREFIX = "md5-prefix"

#: SRI algorithms browsers accept, with their digest sizes in bytes.
SRI_ALGORITHMS: Mapping[str, int] = {"sha256": 32, "sha384": 48, "sha512": 64}

#: Declared-hash name -> the hashlib algorithm that must be computed to check it.
_HASHLIB_NAME: Mapping[str, str] = {
    "sha1": "sha1",
    "sha256": "sha256",
    "sha384": "sha384",
    "sha512": "sha512",
    "md5": "md5",
    MD5_PREFIX: "md5",
}


@functools.cache
def _hex() -> re.Pattern[str]:
    """Hex digits only, compiled on first use: only the readers of formats with hex
    digests (Django, Sprockets, ngsw) ask, never a run that reads native manifests."""
    return re.compile(r"[0-9a-fA-F]+\Z")


@functools.cache
def _b64() -> re.Pattern[str]:
    """Either base64 alphabet, compiled on first use: only an SRI value (an
    ``integrity=`` attribute, a manifest's ``integrity``) is base64."""
    return re.compile(r"[A-Za-z0-9+/_-]+={0,2}\Z")


def is_hex(value: Any, length: int) -> TypeGuard[str]:
    """True for a string of exactly ``length`` hex digits (no 0x, no underscores)."""
    return isinstance(value, str) and len(value) == length and bool(_hex().match(value))


def parse_sri(value: Any, limits: ManifestLimits) -> dict[str, str]:
    """Hex digests from an SRI string like ``"sha256-B64 sha384-B64"``.

    Parsed as browsers do: tokens of unknown algorithms, bad base64 or the wrong
    digest length are ignored, ``?options`` are dropped, and both base64 alphabets
    are accepted. An algorithm listed twice with different digests means "either",
    which one hex value cannot say, so that algorithm is left out rather than guessed.
    Anything that is not a string (``null``, ``""`` for asset modules) yields nothing.
    """
    if not isinstance(value, str):
        return {}
    if len(value) > limits.max_string:
        raise ManifestLimitError(f"integrity longer than the cap of {limits.max_string} characters")
    out: dict[str, str] = {}
    ambiguous: set[str] = set()
    for token in value.split():
        algo, sep, rest = token.partition("-")
        algo = algo.lower()
        if not sep or algo not in SRI_ALGORITHMS:
            continue
        digest = _b64decode(rest.split("?", 1)[0])
        if digest is None or len(digest) != SRI_ALGORITHMS[algo]:
            continue
        if out.setdefault(algo, digest.hex()) != digest.hex():
            ambiguous.add(algo)
    for algo in ambiguous:
        del out[algo]
    return out


def _b64decode(text: str) -> bytes | None:
    if not _b64().match(text):
        return None
    body = text.rstrip("=").replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def verify_integrity(entry: ManifestEntry, computed: Mapping[str, str]) -> list[str]:
    """Declared algorithms whose hash disagrees with the served bytes' digests, sorted.

    ``computed`` maps hashlib names to the hex digests of the bytes actually served;
    declared algorithms that were not computed are skipped (not judged), so an empty
    list means "nothing computed disagrees", not "everything was checked".
    """
    bad: list[str] = []
    for algo, declared in sorted(entry.hashes.items()):
        name = _HASHLIB_NAME.get(algo)
        got = computed.get(name) if name else None
        if got is None:
            continue
        if algo == MD5_PREFIX:
            got = got[: len(declared)]
        if got.lower() != declared.lower():
            bad.append(algo)
    return bad


def vouching_hash(entry: ManifestEntry) -> tuple[str, str] | None:
    """The (algorithm, hex) a release entry vouches for its bytes with, or None."""
    for algo in VOUCHING_ALGORITHMS:
        value = entry.hashes.get(algo)
        if value:
            return algo, value
    return None


def vouching_algorithms(manifest: Manifest) -> tuple[str, ...]:
    """The vouching hashes a release's entries use, in preference order ("sha1" for
    an ngsw.json): what reports name as the hash compared."""
    used = {found[0] for e in manifest.files.values() if (found := vouching_hash(e))}
    return tuple(a for a in VOUCHING_ALGORITHMS if a in used)


def algorithms_needed(manifest: Manifest) -> set[str]:
    """The hashlib algorithms a fetcher must compute to check this manifest's hashes.

    Always a subset of ``hashlib.algorithms_guaranteed``, so ``hashlib.new`` cannot fail.
    """
    needed = {
        _HASHLIB_NAME[algo]
        for entry in manifest.files.values()
        for algo in entry.hashes
        if algo in _HASHLIB_NAME
    }
    return needed & hashlib.algorithms_guaranteed
