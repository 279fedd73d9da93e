"""Subresource Integrity: do an asset's bytes satisfy the page's ``integrity=`` value?

A browser refuses to run a script or apply a stylesheet whose bytes do not match the
``integrity=`` attribute of the element that loads it, so a mismatch breaks the page for
every user, whatever any release says. The rule is the SRI specification's ("Does
response match metadataList"): only the hashes of the strongest algorithm listed count
(sha512 over sha384 over sha256), and any one of them matching is enough. A value with
no hash a browser knows is not enforced by browsers, so it is ``unsupported`` here,
never a mismatch. Tokens are parsed by :func:`artifactcheck.manifests.page.parse_integrity`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum

__all__ = ["IntegrityVerdict", "check_integrity", "strongest_hashes"]

#: SRI algorithms from the weakest to the strongest.
_STRENGTH: tuple[str, ...] = ("sha256", "sha384", "sha512")


class IntegrityVerdict(StrEnum):
    """What the bytes' digests say about an ``integrity=`` value."""

    OK = "ok"  # a hash of the strongest algorithm listed matches: browsers run it
    MISMATCH = "mismatch"  # none matches: browsers refuse the asset
    UNSUPPORTED = "unsupported"  # no hash a browser knows: browsers do not check
    NOT_COMPUTED = "not-computed"  # the strongest algorithm's digest was not computed


def strongest_hashes(pairs: Sequence[tuple[str, str]]) -> tuple[str, tuple[str, ...]] | None:
    """The strongest algorithm listed and its hex digests; None when none is known."""
    known = [(algo, digest.lower()) for algo, digest in pairs if algo in _STRENGTH]
    if not known:
        return None
    best = max((algo for algo, _ in known), key=_STRENGTH.index)
    return best, tuple(digest for algo, digest in known if algo == best)


def check_integrity(
    pairs: Sequence[tuple[str, str]], digests: Mapping[str, str]
) -> IntegrityVerdict:
    """Judge the served bytes (``digests``: hashlib name -> hex) against ``pairs``
    (``(algorithm, hex)`` from the page's ``integrity=`` value)."""
    strongest = strongest_hashes(pairs)
    if strongest is None:
        return IntegrityVerdict.UNSUPPORTED
    algo, expected = strongest
    got = digests.get(algo)
    if got is None:
        return IntegrityVerdict.NOT_COMPUTED
    return IntegrityVerdict.OK if got.lower() in expected else IntegrityVerdict.MISMATCH
