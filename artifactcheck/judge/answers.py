"""What one answer from an instance says, and the small helpers every judging step shares.

Kept apart from the steps so the release check, the CDN check, coverage and the verdict
read an answer the same way: "no usable answer" (:func:`unobserved`) is never evidence,
and "the fallback page" is the one reading in :mod:`artifactcheck.judge.prefix`. Also
the index of known releases by hash, which names another release an instance serves.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from artifactcheck.judge import prefix
from artifactcheck.judge.order import version_key
from artifactcheck.judge.statuses import MISSING, REFUSED
from artifactcheck.manifests.integrity import (
    VOUCHING_ALGORITHMS,
    vouching_algorithms,
    vouching_hash,
)
from artifactcheck.model.values import (
    Fetched,
    Finding,
    FindingKind,
    Manifest,
    Observation,
    Severity,
)


class HashIndex:
    """sha256 -> the known releases that contain those bytes, and each release's paths."""

    def __init__(self, releases: Mapping[str, Manifest]) -> None:
        self.by_hash: dict[str, set[str]] = defaultdict(set)
        self.paths: dict[str, frozenset[str]] = {}
        self.releases: Mapping[str, Manifest] = releases
        self._hashes: dict[str, tuple[str, ...]] = {}
        for version, manifest in releases.items():
            self.paths[version] = frozenset(manifest.files)
            used: set[str] = set()
            for entry in manifest.files.values():
                vouched = vouching_hash(entry)  # sha256, or an ngsw.json's sha1
                if vouched:
                    self.by_hash[vouched[1]].add(version)
                    used.add(vouched[0])
            self._hashes[version] = tuple(a for a in VOUCHING_ALGORITHMS if a in used)

    def hashes_of(self, version: str, release: Manifest) -> tuple[str, ...]:
        """The vouching hashes ``release`` uses, in preference order, sha256 when none.

        Read from the walk over the release that built the index, once per release
        rather than once per instance judged (a pass over every file of the release);
        worked out afresh for a release that is not the one indexed under ``version``.
        """
        if self.releases.get(version) is release:
            return self._hashes[version] or ("sha256",)
        return vouching_algorithms(release) or ("sha256",)

    def releases_of(
        self, hashes: Iterable[str], *, exclude: str | None, missing: Iterable[str] = ()
    ) -> tuple[str, ...]:
        """Every other release holding all the given hashes and none of the ``missing``
        paths, in version order; empty when no hash is given (nothing to match)."""
        candidates: set[str] | None = None
        for sha in hashes:
            found = self.by_hash.get(sha, set()) - {exclude}
            candidates = found if candidates is None else candidates & found
            if not candidates:
                return ()
        if not candidates:
            return ()
        gone = set(missing)
        return tuple(sorted((v for v in candidates if not gone & self.paths[v]), key=version_key))

    def release_of(
        self, hashes: Iterable[str], *, exclude: str | None, missing: Iterable[str] = ()
    ) -> str | None:
        """The other release that explains the content, only if exactly one does: naming
        one of several would be a guess presented as a fact."""
        found = self.releases_of(hashes, exclude=exclude, missing=missing)
        return found[0] if len(found) == 1 else None


def unobserved(got: Fetched) -> bool:
    """No usable answer: an error, a status that says nothing about the content, or a
    2xx whose body was not hashed."""
    if got.error is not None or got.status is None:
        return True
    if got.status in MISSING or got.status in REFUSED:
        return False
    return not (200 <= got.status < 300) or got.sha256 is None


def why_unobserved(got: Fetched) -> str:
    return got.error or f"HTTP {got.status}"


def few_names(paths: Sequence[str], limit: int = 5) -> str:
    """The first few paths and how many more: a reason stays one line however many failed."""
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def warn_files(
    kind: FindingKind, message: str, obs: Observation, paths: Sequence[str]
) -> list[Finding]:
    """One warning about several files of an instance (none without files), at the first."""
    if not paths:
        return []
    return [
        Finding(kind, message, instance=obs.instance.name, path=paths[0], severity=Severity.WARNING)
    ]


def short(sha: str | None, n: int = 12) -> str:
    """A hash prefix long enough to tell files apart on screen."""
    return sha[:n] if sha else "-"


def documents(obs: Observation) -> dict[str, Fetched]:
    """Every answer to judge: the assets, and the served manifest as a file."""
    docs: dict[str, Fetched] = {p: f for p, f in obs.assets.items() if p not in obs.on_cdn}
    if obs.manifest_fetch is not None and obs.manifest_fetch.status is not None:
        docs.setdefault(obs.manifest_path, obs.manifest_fetch)
    return docs


def page_shas(obs: Observation, release: Manifest | None) -> frozenset[str]:
    """sha256 of the site's HTML entry pages: what an SPA fallback answers with."""
    return prefix.page_hashes(obs.assets, release)


def cdn_release_path(path: str, release: Manifest) -> str | None:
    """The release file a path under the CDN base is, by the longest matching suffix
    (a CDN usually adds a prefix: ``app/480.js`` is the release's ``480.js``)."""
    if path in release.files:
        return path
    segments = path.split("/")
    for cut in range(1, len(segments)):
        suffix = "/".join(segments[cut:])
        if suffix in release.files:
            return suffix
    return None


def is_off_host(raw: str) -> bool:
    """An absolute URL (``https://cdn…/x.js``, ``//cdn…/x.js``): a file on another host."""
    return "://" in raw or raw.startswith("//")
