"""Every file of the target, side by side: what the release expects, what the instance served,
what the CDN answered.

Each answer is read with the judge's own rules (:mod:`artifactcheck.judge.statuses`,
:func:`artifactcheck.judge.prefix.is_fallback`), so the table never disagrees with the
verdict it explains.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace

from artifactcheck.judge.prefix import FALLBACK, is_fallback, page_hashes
from artifactcheck.judge.statuses import MISSING, NOT_HERE
from artifactcheck.model.values import (
    Fetched,
    FindingKind,
    InstanceResult,
    Manifest,
)
from artifactcheck.present.oncall.view_models import (
    AssetRow,
    Evidence,
    ManifestComparison,
    ReleaseMatch,
)

#: Served statuses that mean "this file is not there", on an instance or on the CDN.
#: Headers that tell a human where a response came from and how old it is.
_CACHE_STATUS = ("cache-status", "x-cache", "x-cache-status", "cf-cache-status")


def _evidence(headers: Mapping[str, str]) -> Evidence:
    """The evidence subset of kept headers; the cache status has four common names."""
    cache = next((headers[h] for h in _CACHE_STATUS if h in headers), None)
    return Evidence(
        etag=headers.get("etag"),
        age=headers.get("age"),
        cache_control=headers.get("cache-control"),
        cache_status=cache,
        server=headers.get("server"),
    )


def _release_index(releases: Mapping[str, Manifest]) -> dict[str, list[str]]:
    """sha256 -> ``version:path`` of every known release file with those bytes."""
    out: dict[str, list[str]] = defaultdict(list)
    for version in sorted(releases):
        for path, entry in sorted(releases[version].files.items()):
            sha = entry.hashes.get("sha256")
            if sha:
                out[sha].append(f"{version}:{path}")
    return out


def _cdn_state(
    row_sha: str | None,
    got: Fetched | None,
    *,
    path: str = "",
    pages: frozenset[str] = frozenset(),
    expected: str | None = None,
) -> tuple[str, int | None, str | None]:
    """The CDN's answer for a path, relative to the bytes the instance served.

    The judge's own rules (403 counts as missing, the S3 symptom; the site's page
    standing in for a file is missing too), so the table and the verdict never
    disagree; (state, status, error).
    """
    if got is None:
        return "not-checked", None, None
    if got.error is not None or got.status is None:
        return "error", got.status, got.error
    if got.status in NOT_HERE:
        return "missing", got.status, None
    if got.sha256 != (expected or row_sha) and is_fallback(got, path, pages):
        return "missing", got.status, FALLBACK
    if not got.ok:
        return "error", got.status, f"HTTP {got.status}"
    return ("same" if got.sha256 == row_sha else "differs"), got.status, None


def _asset_row(
    path: str,
    got: Fetched,
    *,
    release: Manifest | None,
    release_version: str | None,
    consensus: Mapping[str, str],
    index: Mapping[str, list[str]],
    cdn: Fetched | None,
    pages: frozenset[str] = frozenset(),
) -> AssetRow:
    """One file's row: its state against the release (or siblings) and the CDN.

    The expected hash comes from the release manifest when there is one, else from the
    siblings' majority (consensus findings), so consensus mode still shows a diffable row.
    """
    entry = release.files.get(path) if release is not None else None
    expected = entry.hashes.get("sha256") if entry is not None else consensus.get(path)
    expected_from = (
        f"release {release_version}"
        if entry is not None
        else ("siblings" if path in consensus else None)
    )
    fallback = is_fallback(got, path, pages) and got.sha256 != expected
    state = _asset_state(
        got, expected, fallback=fallback, unlisted=release is not None and entry is None
    )
    cdn_state, cdn_status, cdn_error = _cdn_state(
        got.sha256, cdn, path=path, pages=pages, expected=expected
    )
    served = got.ok and not fallback  # a fallback page is not this file's bytes
    why = FALLBACK if fallback else None
    return AssetRow(
        path=path,
        state=state,
        status=got.status,
        error=got.error or why or (f"HTTP {got.status}" if state == "error" else None),
        expected_sha256=expected,
        expected_from=expected_from,
        served_sha256=got.sha256 if served else None,
        size=got.size if served else None,
        expected_size=entry.size if entry is not None else None,
        matches=tuple(index.get(got.sha256 or "", ())) if served else (),
        cdn_state=cdn_state,
        cdn_status=cdn_status,
        cdn_sha256=cdn.sha256 if cdn is not None and cdn.ok else None,
        cdn_error=cdn_error,
        evidence=_evidence(got.headers),
        cdn_evidence=_evidence(cdn.headers) if cdn is not None and cdn.status else None,
        elapsed_ms=round(got.elapsed * 1000, 1),
        cdn_elapsed_ms=round(cdn.elapsed * 1000, 1) if cdn is not None else None,
        content_encoding=got.content_encoding,
    )


def _asset_state(got: Fetched, expected: str | None, *, fallback: bool, unlisted: bool) -> str:
    """same, differs, missing, error, unexpected (not in the release) or unchecked."""
    if got.error is not None or got.status is None:
        return "error"
    if got.status in MISSING or fallback:
        return "missing"
    if not got.ok or got.sha256 is None:
        return "error"
    if unlisted:
        return "unexpected"
    if expected is None:
        return "unchecked"
    return "same" if expected == got.sha256 else "differs"


_STATE_ORDER = {
    "differs": 0,
    "missing": 1,
    "unexpected": 2,
    "error": 3,
    "unchecked": 4,
    "same": 5,
    "not-fetched": 6,
}


def asset_rows(
    result: InstanceResult,
    *,
    releases: Mapping[str, Manifest],
    cdn_assets: Mapping[str, Fetched],
) -> tuple[AssetRow, ...]:
    """Every file of the target, problems first: expected, served and CDN side by side.

    Rows come from what was fetched (assets and the served manifest itself) plus the
    release's files that were not fetched, so nothing the release promises is silently
    absent from the table. Each served hash is looked up in every known release: "these
    bytes are 1.4.1's index-Bfu9pp8v.js" is the sentence that ends an incident.
    """
    obs = result.observation
    if obs is None:
        return ()
    version = result.reported_version
    release = releases.get(version) if version else None
    consensus = {
        f.path: f.expected
        for f in result.findings
        if f.kind is FindingKind.MINORITY_CONTENT and f.path and f.expected
    }
    index = _release_index(releases)
    pages = page_hashes(obs.assets, release)
    # an instance that could not be observed served nothing: its failed probe is no file
    fetched: dict[str, Fetched] = dict(obs.assets) if obs.error is None else {}
    if obs.manifest_fetch is not None and obs.manifest_path and obs.error is None:
        fetched.setdefault(obs.manifest_path, obs.manifest_fetch)
    rows = [
        replace(
            _asset_row(
                path,
                got,
                release=release,
                release_version=version,
                consensus=consensus,
                index=index,
                cdn=cdn_assets.get(path),
                pages=pages,
            ),
            loaded_by=load.loaded_by if (load := obs.page_loads.get(path)) else (),
        )
        for path, got in fetched.items()
    ]
    if release is not None:  # every file the release promises has a row
        for path in sorted(set(release.files) - set(fetched)):
            entry = release.files[path]
            rows.append(
                AssetRow(
                    path=path,
                    state="not-fetched",
                    expected_sha256=entry.hashes.get("sha256"),
                    expected_from=f"release {version}",
                    expected_size=entry.size,
                )
            )
    return tuple(sorted(rows, key=lambda r: (_STATE_ORDER.get(r.state, 9), r.path)))


def manifest_comparison(
    result: InstanceResult,
    rows: Sequence[AssetRow],
    *,
    releases: Mapping[str, Manifest],
    release_source: str | None,
) -> ManifestComparison:
    """Served files against the expected release, and which known release the bytes match.

    Formats that list every file (native) make an omission a removal; formats that list
    only chunks (Vite, webpack...) cannot, so the release files they do not mention are
    reported as "not compared" rather than guessed to be missing.
    """
    obs = result.observation
    version = result.reported_version
    release = releases.get(version) if version else None
    stale = any(f.kind is FindingKind.EXPECTATION_STALE for f in result.findings)
    unavailable = next(
        (f.message for f in result.findings if f.kind is FindingKind.EXPECTATION_UNAVAILABLE),
        None,
    )
    served = obs.manifest if obs is not None else None
    listed = set(served.files) if served is not None else set()
    by_state: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        by_state[r.state].append(r.path)
    added = set(by_state["unexpected"])
    removed = {r.path for r in rows if r.state == "missing" and r.expected_sha256}
    not_compared = set(by_state["not-fetched"])
    if release is not None and served is not None:
        added |= listed - set(release.files)
        if served.format == "native":  # a full listing: what it omits was removed
            removed |= not_compared
            not_compared = set()
    if obs is not None and obs.manifest_path and obs.error is None:
        not_compared.discard(obs.manifest_path)
    unobserved = obs is None or obs.error is not None
    return ManifestComparison(
        # the name probed when the connection failed was never served
        served_path="" if unobserved or obs is None else obs.manifest_path,
        served_format=served.format if served is not None else None,
        served_entries=len(served.files) if served is not None else None,
        served_error=obs.manifest_error if obs is not None else None,
        expected_version=version,
        expected_from=_expected_from(release, release_source, rows, version),
        expected_stale=stale,
        expected_error=unavailable,
        added=tuple(sorted(added)),
        removed=tuple(sorted(removed)),
        changed=tuple(sorted(by_state["differs"])),
        unchanged=len(by_state["same"]),
        not_compared=tuple(sorted(not_compared)),
        release_matches=_release_matches(releases, rows, version),
        # the release the differing files are from: the whole instance's when it serves
        # another release, else the one release all changed files come from (a mix)
        serves_version=result.serves_version
        or _mixed_with([r for r in rows if r.state == "differs"]),
    )


def _expected_from(
    release: Manifest | None,
    release_source: str | None,
    rows: Sequence[AssetRow],
    version: str | None,
) -> str | None:
    """Where the expectation came from: the release manifest, siblings, or nowhere."""
    if release is not None:
        return "release manifest"
    if release_source is None and any(r.expected_from == "siblings" for r in rows):
        return "siblings (consensus)"
    if release_source is None and version is not None:
        return "siblings (consensus)"
    return None


def _release_matches(
    releases: Mapping[str, Manifest], rows: Sequence[AssetRow], version: str | None
) -> tuple[ReleaseMatch, ...]:
    """How many observed files each known release has the bytes of, best match first."""
    observed = [r for r in rows if r.served_sha256]
    matches = []
    for v in sorted(releases):
        hashes = {e.hashes.get("sha256") for e in releases[v].files.values()}
        hits = sum(1 for r in observed if r.served_sha256 in hashes)
        if hits:
            matches.append(ReleaseMatch(version=v, matching=hits, total=len(observed)))
    matches.sort(key=lambda m: (-m.matching, m.version != version, m.version))
    return tuple(matches)


def _mixed_with(changed: Sequence[AssetRow]) -> str | None:
    """The one other release every differing file's bytes belong to, if exactly one."""
    common: set[str] | None = None
    for row in changed:
        versions = {m.split(":", 1)[0] for m in row.matches}
        common = versions if common is None else common & versions
    if not common or len(common) != 1:
        return None
    return next(iter(common))
