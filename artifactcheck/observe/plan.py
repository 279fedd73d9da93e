"""Which files of an instance to fetch, and with which hashes: the plan of an observation.

Every file of the expected release is a candidate, and every file the served manifest
references; a sample of them when sampling is on, the same for every sibling of a
version. Siblings serve the same manifest, so each plan is drawn once per run
(:class:`Plans`) instead of once per instance. A reference by absolute URL is a file on
the CDN when it is under the CDN's base URL, and is never fetched otherwise
(:func:`cdn_references`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from artifactcheck.discover.sample import entry_points, sample_paths
from artifactcheck.fetch import urls
from artifactcheck.manifests import algorithms_needed
from artifactcheck.manifests.limits import ManifestLimits, normalise_path
from artifactcheck.model.errors import ArtifactCheckError
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Manifest

MEMO_LIMIT = 256  # distinct served manifests (and samples) remembered per Observer


def cdn_references(
    manifest: Manifest | None, cdn: str | None, limits: ManifestLimits
) -> tuple[dict[str, str], list[str]]:
    """The served manifest's absolute references, as files on the CDN (path under the
    CDN base -> the reference as written), and the ones never fetched."""
    on_cdn: dict[str, str] = {}
    unsafe: list[str] = []
    for raw, _why in manifest.rejected if manifest is not None else ():
        relative = _on_cdn(raw, cdn, limits)
        if relative is None:
            unsafe.append(raw)
        else:
            on_cdn.setdefault(relative, raw)
    return on_cdn, unsafe


def _on_cdn(raw: str, cdn: str | None, limits: ManifestLimits) -> str | None:
    """The path under the CDN's base URL of an absolute reference, or None.

    A build whose public path is the CDN (webpack ``publicPath:
    'https://cdn.example/app/'``) lists its files by their CDN URL: browsers fetch
    them there, so that is where they are checked. A reference to any other place
    is never fetched (no SSRF) and is reported as not checked.
    """
    if not cdn:
        return None
    target = raw
    if raw.startswith("//"):  # protocol-relative: the CDN's scheme
        target = urlsplit(cdn).scheme + ":" + raw
    try:
        base = urls.base_directory(cdn)
        if not urls.is_under(base, target):
            return None
        below = urlsplit(target).path[len(urlsplit(base).path) :]
        relative = normalise_path(below, limits)
    except (ArtifactCheckError, ValueError):
        return None
    return relative


class Plans:
    """Each distinct plan drawn once: siblings of a version get the same one."""

    def __init__(self, spec: CheckSpec) -> None:
        self.spec = spec
        self._plans: dict[tuple[object, ...], tuple[object, list[str], list[str], bool]] = {}

    def plan(
        self,
        manifest: Manifest | None,
        manifest_key: object,
        expected: Manifest | None,
        version: str | None,
        skip: str | None,
        extra: frozenset[str] = frozenset(),
        *,
        seed: int,
    ) -> tuple[list[str], list[str], bool]:
        """Paths to fetch, hash algorithms, and whether the paths are a sample (memoised
        under ``manifest_key``; None: not memoised).

        Every file of the expected release is a candidate as well as every file the
        served manifest references: a file the served manifest does not mention (a
        favicon, an icon sprite) is still served to browsers and must be compared.
        ``skip`` is the served manifest itself, already fetched; ``extra`` the
        references that live on the CDN.
        """
        key = (manifest_key, id(expected), version, skip, extra, seed)
        memo = self._plans.get(key) if manifest_key is not None else None
        if memo is not None and memo[0] is expected:  # id() alone could be reused
            return memo[1], memo[2], memo[3]
        candidates: set[str] = set(extra)
        if manifest is not None:
            candidates.update(manifest.files)
        if expected is not None:
            candidates.update(expected.files)
        candidates.discard(skip or "")
        entries = entry_points(manifest, expected) & candidates
        paths = sample_paths(
            candidates,
            entries,
            self.spec.sampling.assets_per_instance,
            version=version,
            seed=seed,
        )
        algorithms = sorted(
            {"sha256"}
            | (algorithms_needed(manifest) if manifest else set())
            | (algorithms_needed(expected) if expected else set())  # an ngsw release: sha1
        )
        sampled = len(paths) < len(candidates)
        if manifest_key is not None:
            if len(self._plans) >= MEMO_LIMIT:
                self._plans.clear()
            self._plans[key] = (expected, paths, algorithms, sampled)
        return paths, algorithms, sampled
