"""Pure comparison: observations against expectations, the CDN and siblings.

This is the heart of artifactcheck and it does no I/O and no logging, so every rule
can be pinned with a table of cases. The input is what was fetched (``Observation``),
the expected releases by version (``Expectation``), what the CDN answered for each
path, and the desired version; the output is one ``InstanceResult`` per instance and
the fleet-wide findings.

Three rules shape everything below, because each was once broken and produced a
verdict users trusted wrongly:

- "Could not observe" and "observed something wrong" are kept apart: a timeout or a
  5xx on an asset is never evidence of a mismatch, it can only make a verdict
  ``inconclusive``; a file that was not fetched (sampled out, on another host) is
  never called different, it is listed as not compared.
- A claim is never larger than the evidence: "serves release X" only when every file
  of X was compared byte for byte; otherwise "N of M files checked"; with a release
  source that carries no hashes, "file names only"; another release is named only when
  everything compared matches it and no other.
- A missing file is missing however the server dresses it up: 404/410, or the site's
  HTML page answered with 200 (``try_files $uri /index.html``).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from fnmatch import fnmatchcase

from artifactcheck.judge import prefix
from artifactcheck.judge.prefix import FALLBACK
from artifactcheck.judge.statuses import MISSING, NOT_HERE, REFUSED
from artifactcheck.manifests import verify_integrity
from artifactcheck.manifests.integrity import vouching_algorithms, vouching_hash
from artifactcheck.model.errors import ErrorKind
from artifactcheck.model.values import (
    CertInfo,
    Coverage,
    Expectation,
    Fetched,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Manifest,
    ManifestEntry,
    Observation,
    Severity,
    Verdict,
)
from artifactcheck.model.versions import version_problem

#: Entry pages are served by the origin, not the CDN: not required there by default.
DEFAULT_CDN_EXCLUDE: tuple[str, ...] = ("*.html", "*.htm")
SAMPLED_OUT = "sampled out"
NAMES_ONLY_NOTE = "file names only"
#: Next.js, SvelteKit, Astro static output: no manifest format, the release's list is all.
NO_MANIFEST_NOTE = "no served manifest: judged by the release's file list"


def cdn_paths(
    paths: Iterable[str],
    include: Sequence[str] = (),
    exclude: Sequence[str] = DEFAULT_CDN_EXCLUDE,
) -> list[str]:
    """The paths a CDN is required to hold: matching ``include`` (empty: all), not ``exclude``.

    Globs are matched case-sensitively against the whole path (``*`` crosses ``/``), the
    same on every platform, so the pipeline (deciding what to ask the CDN for) and the
    comparison (deciding what a CDN answer means) can never disagree.
    """
    return [
        p
        for p in paths
        if (not include or any(fnmatchcase(p, g) for g in include))
        and not any(fnmatchcase(p, g) for g in exclude)
    ]


@dataclass(frozen=True, slots=True)
class CdnView:
    """What the CDN answered for each path; ``error`` when it could not be reached.

    ``include``/``exclude`` are the globs of the files the CDN must hold (see
    :func:`cdn_paths`); a file outside them is not checked on the CDN at all.
    """

    base_url: str
    assets: Mapping[str, Fetched] = field(default_factory=dict)
    error: str | None = None
    tls: CertInfo | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_CDN_EXCLUDE


def version_key(version: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders ``9.0`` before ``10.0`` (numbers as numbers)."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part)
        for part in re.findall(r"\d+|[^\d.+_-]+", version)
    )


class HashIndex:
    """sha256 -> the known releases that contain those bytes, and each release's paths."""

    def __init__(self, releases: Mapping[str, Manifest]) -> None:
        self.by_hash: dict[str, set[str]] = defaultdict(set)
        self.paths: dict[str, frozenset[str]] = {}
        self.releases: Mapping[str, Manifest] = releases
        for version, manifest in releases.items():
            self.paths[version] = frozenset(manifest.files)
            for entry in manifest.files.values():
                vouched = vouching_hash(entry)  # sha256, or an ngsw.json's sha1
                if vouched:
                    self.by_hash[vouched[1]].add(version)

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


# --------------------------------------------------------------------------- answers


def _unobserved(got: Fetched) -> bool:
    """No usable answer: an error, a status that says nothing about the content, or a
    2xx whose body was not hashed."""
    if got.error is not None or got.status is None:
        return True
    if got.status in MISSING or got.status in REFUSED:
        return False
    return not (200 <= got.status < 300) or got.sha256 is None


# the one reading of "the fallback page", shared with the observer's prefix probes
_page_path = prefix.page_path
_fallback = prefix.is_fallback


def _why_unobserved(got: Fetched) -> str:
    return got.error or f"HTTP {got.status}"


def _names(paths: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _warn_files(
    kind: FindingKind, message: str, obs: Observation, paths: Sequence[str]
) -> list[Finding]:
    """One warning about several files of an instance (none without files), at the first."""
    if not paths:
        return []
    return [
        Finding(kind, message, instance=obs.instance.name, path=paths[0], severity=Severity.WARNING)
    ]


def _short(sha: str) -> str:
    return sha[:12]


def _documents(obs: Observation) -> dict[str, Fetched]:
    """Every answer to judge: the assets, and the served manifest as a file."""
    docs: dict[str, Fetched] = {p: f for p, f in obs.assets.items() if p not in obs.on_cdn}
    if obs.manifest_fetch is not None and obs.manifest_fetch.status is not None:
        docs.setdefault(obs.manifest_path, obs.manifest_fetch)
    return docs


def _pages(obs: Observation, release: Manifest | None) -> frozenset[str]:
    """sha256 of the site's HTML entry pages: what an SPA fallback answers with."""
    return prefix.page_hashes(obs.assets, release)


def _release_path(path: str, release: Manifest) -> str | None:
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


# --------------------------------------------------------------------------- steps


@dataclass(slots=True)
class _ReleaseCheck:
    """What comparing the instance's answers with one release found."""

    findings: list[Finding] = field(default_factory=list)
    compared: set[str] = field(default_factory=set)  # release files judged
    bad: list[str] = field(default_factory=list)  # files with evidence against them
    missing: list[str] = field(default_factory=list)  # 404/410 or the fallback page
    served_hashes: list[str] = field(default_factory=list)  # every 200 compared
    differing: dict[str, str] = field(default_factory=dict)  # path -> sha of other bytes
    names_only: list[str] = field(default_factory=list)  # release has no hash for them
    refused: dict[str, str] = field(default_factory=dict)  # path -> why not compared


@dataclass(slots=True)
class _CdnCheck:
    """What the CDN answered, judged against the release (or the instance)."""

    findings: list[Finding] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    differs: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    compared: set[str] = field(default_factory=set)  # release files checked on the CDN
    why_unchecked: str | None = None


def _against_release(
    obs: Observation, release: Manifest, version: str, pages: frozenset[str]
) -> _ReleaseCheck:
    """Each answer from the instance against the release's file of the same path."""
    against = _Against(
        obs=obs,
        release=release,
        version=version,
        pages=pages,
        listed=obs.manifest.files if obs.manifest is not None else {},
        check=_ReleaseCheck(),
        algorithm=(vouching_algorithms(release) or ("sha256",))[0],
    )
    docs = _documents(obs)
    for path in sorted(docs):
        against.answer(path, docs[path])
    against.listed_not_released(docs)
    return against.check


@dataclass(frozen=True, slots=True)
class _Against:
    """One instance's answers judged against one release, into ``check``."""

    obs: Observation
    release: Manifest
    version: str
    pages: frozenset[str]
    listed: Mapping[str, ManifestEntry]  # what the served manifest lists
    check: _ReleaseCheck
    algorithm: str = "sha256"  # the release's hash, for files it lacks ("sha1": ngsw.json)

    def answer(self, path: str, got: Fetched) -> None:
        """Judge one answer: refused, missing, the release's bytes, the fallback page,
        a file the release lacks, or other bytes."""
        check = self.check
        expected = self.release.files.get(path)
        known = expected is not None or path in self.listed
        if _unobserved(got):
            return
        if got.status in REFUSED:
            if known:
                check.refused[path] = f"the instance refuses it (HTTP {got.status})"
            return
        vouched = vouching_hash(expected) if expected is not None else None
        # the served bytes in the release's own hash (sha1 for an ngsw.json release), so
        # they can be looked up among the known releases' hashes
        sha = got.hashes.get(vouched[0] if vouched is not None else self.algorithm)
        want = vouched[1] if vouched is not None else None
        if got.status not in MISSING and want is not None and want == sha:
            check.compared.add(path)
            check.served_hashes.append(want)
            return
        if got.status in MISSING or _fallback(got, path, self.pages):
            self._missing(path, got, expected)
            return
        if sha is None:  # the release's hash was not computed: its bytes vouch for nothing
            sha, want = got.sha256, None
        assert sha is not None  # _unobserved() refused a 2xx without a digest
        if expected is None:
            if path != self.obs.manifest_path:  # a release manifest cannot list itself
                self._unexpected(path, sha)
            return
        check.compared.add(path)
        check.served_hashes.append(sha)
        if want is None:
            check.names_only.append(path)
        else:
            self._differs(path, got, expected, want, sha)

    def _missing(self, path: str, got: Fetched, expected: ManifestEntry | None) -> None:
        """404/410, or the fallback page: missing however the server dresses it up."""
        if got.status in MISSING:
            why, kind = f"answers {got.status}", FindingKind.FILE_MISSING
            # the served manifest answering 404 is judged as the served manifest
            reported = expected is not None or (
                path in self.listed and path != self.obs.manifest_path
            )
        else:
            why, kind = FALLBACK, FindingKind.FALLBACK_PAGE
            reported = expected is not None or path in self.listed
        if expected is not None:
            self.check.compared.add(path)
        if not reported:
            return
        where = f"is in release {self.version}" if expected else "is listed by the served manifest"
        self.check.findings.append(
            Finding(
                kind,
                f"{path} {where} but the instance {why}",
                instance=self.obs.instance.name,
                path=path,
                expected=expected.hashes.get("sha256") if expected else None,
                actual=why,
            )
        )
        self.check.missing.append(path)
        self.check.bad.append(path)

    def _unexpected(self, path: str, sha: str) -> None:
        self.check.served_hashes.append(sha)
        what = f"{path} is served but is not part of release {self.version}"
        self._other_bytes(FindingKind.FILE_UNEXPECTED, what, path, None, sha)

    def _differs(
        self, path: str, got: Fetched, expected: ManifestEntry, want: str, sha: str
    ) -> None:
        same_size = expected.size is not None and expected.size == got.size
        what = f"{path} differs from release {self.version}"
        if "sha256" not in expected.hashes:  # e.g. an ngsw.json release: say which hash
            what += f" ({next((a for a, v in expected.hashes.items() if v == want), 'sha1')})"
        if got.content_encoding not in (None, "identity"):  # e.g. a stale precompressed .gz
            what += f" when served {got.content_encoding}-encoded (its bytes once decoded)"
        what += " (same size)" if same_size else ""
        self._other_bytes(FindingKind.CONTENT_DIFFERS, what, path, want, sha)

    def _other_bytes(
        self, kind: FindingKind, message: str, path: str, want: str | None, sha: str
    ) -> None:
        """Evidence against a file: the instance serves bytes the release does not."""
        self.check.findings.append(
            Finding(
                kind, message, instance=self.obs.instance.name, path=path, expected=want, actual=sha
            )
        )
        self.check.bad.append(path)
        self.check.differing[path] = sha

    def listed_not_released(self, docs: Mapping[str, Fetched]) -> None:
        """Files the served manifest lists that the release lacks (and not fetched)."""
        unexpected = sorted(p for p in self.listed if p not in self.release.files and p not in docs)
        unexpected = [p for p in unexpected if p not in self.obs.on_cdn]
        if unexpected:
            self.check.findings.append(
                Finding(
                    FindingKind.FILE_UNEXPECTED,
                    f"served manifest lists {len(unexpected)} file(s) not in release "
                    f"{self.version}: {_names(unexpected)}",
                    instance=self.obs.instance.name,
                    path=unexpected[0],
                )
            )
            self.check.bad.append(unexpected[0])


def _integrity(obs: Observation) -> list[Finding]:
    """Served bytes against the hashes the served manifest itself declares (SRI, SHA-1)."""
    if obs.manifest is None:
        return []
    findings = []
    for path, got in sorted(obs.assets.items()):
        entry = obs.manifest.files.get(path)
        if entry is None or not entry.hashes or not got.ok:
            continue
        bad = verify_integrity(entry, got.hashes)
        if bad:
            findings.append(
                Finding(
                    FindingKind.INTEGRITY_FAILED,
                    f"{path} does not match its own manifest's {', '.join(bad)} "
                    f"({obs.manifest.format})",
                    instance=obs.instance.name,
                    path=path,
                    expected=", ".join(f"{a}:{entry.hashes[a]}" for a in bad),
                    actual=got.sha256,
                )
            )
    return findings


def _cdn_answer(
    check: _CdnCheck,
    *,
    instance: str,
    path: str,
    shown: str,
    on_cdn: Fetched,
    want: str | None,
    version: str | None,
    served: str | None,
    pages: frozenset[str],
) -> None:
    """Judge one CDN answer; ``want`` is the release's hash, ``served`` the instance's."""
    if _unobserved(on_cdn):
        check.unchecked.append(path)
        check.why_unchecked = check.why_unchecked or _why_unobserved(on_cdn)
        return
    reference = want or served
    if on_cdn.status in NOT_HERE or (on_cdn.sha256 != reference and _fallback(on_cdn, path, pages)):
        fallback = on_cdn.status not in NOT_HERE
        answer = FALLBACK if fallback else (f"answers {on_cdn.status}")
        check.findings.append(
            Finding(
                FindingKind.FALLBACK_PAGE if fallback else FindingKind.CDN_MISSING,
                f"{shown} is missing on the CDN: it {answer}",
                instance=instance,
                path=path,
                expected=reference,
                actual=answer if fallback else str(on_cdn.status),
            )
        )
        check.missing.append(path)
        return
    if reference is None or on_cdn.sha256 == reference:
        return
    got = on_cdn.sha256
    assert got is not None  # _unobserved() refused a 2xx without a digest
    if want is not None:
        message = (
            f"{shown} on the CDN differs from release {version}: expected (release) "
            f"{_short(want)}, the CDN serves {_short(got)}"
        )
    else:
        message = (
            f"{shown} differs between the CDN and the instance (no release hash to tell "
            f"which is right): the instance serves {_short(reference)}, the CDN {_short(got)}"
        )
    check.findings.append(
        Finding(
            FindingKind.CDN_DIFFERS,
            message,
            instance=instance,
            path=path,
            expected=want,
            actual=on_cdn.sha256,
        )
    )
    check.differs.append(path)


def _against_cdn(
    obs: Observation,
    cdn: CdnView,
    release: Manifest | None,
    version: str | None,
    pages: frozenset[str],
) -> _CdnCheck:
    """The CDN must hold the release's bytes for every file it is meant to serve.

    Compared with the release's hash when there is one (so the message can say which
    side is right), else with what the instance served. Files outside the CDN globs are
    not asked about; files the served manifest references on the CDN by absolute URL
    were fetched there and are judged as the CDN's answers.
    """
    check = _CdnCheck()
    name = obs.instance.name
    served = sorted(p for p, f in obs.assets.items() if f.ok and p not in obs.on_cdn)
    required = cdn_paths(served, cdn.include, cdn.exclude)
    if cdn.error is not None:
        check.unchecked = required
        check.why_unchecked = cdn.error
    else:
        for path in required:
            on_cdn = cdn.assets.get(path)
            if on_cdn is None:
                continue  # not asked: the pipeline decides what the CDN is asked for
            entry = release.files.get(path) if release is not None else None
            _cdn_answer(
                check,
                instance=name,
                path=path,
                shown=path,
                on_cdn=on_cdn,
                want=entry.hashes.get("sha256") if entry is not None else None,
                version=version,
                served=obs.assets[path].sha256,
                pages=pages,
            )
    return check


def _located_on_cdn(
    obs: Observation,
    check: _CdnCheck,
    release: Manifest | None,
    version: str | None,
    pages: frozenset[str],
) -> list[Finding]:
    """Files the served manifest references on the CDN (absolute URLs), fetched there.

    Each is the release's file with the longest matching path suffix (the CDN adds a
    prefix); one that matches no release file is reported as not compared rather than
    as unexpected, because only the path mapping, not the bytes, failed.
    """
    unmatched: list[str] = []
    for path, raw in sorted(obs.on_cdn.items()):
        got = obs.assets.get(path)
        if got is None:
            continue
        matched = _release_path(path, release) if release is not None else None
        if release is not None and matched is None:
            unmatched.append(raw)
        want = release.files[matched].hashes.get("sha256") if release and matched else None
        _cdn_answer(
            check,
            instance=obs.instance.name,
            path=path,
            shown=raw,
            on_cdn=got,
            want=want,
            version=version,
            served=None,
            pages=pages,
        )
        if matched is not None and path not in check.unchecked:
            check.compared.add(matched)
    return _warn_files(
        FindingKind.NOT_COMPARED,
        f"{len(unmatched)} file(s) the served manifest references on the CDN match no "
        f"file of release {version}, so were not compared: {_names(unmatched)}",
        obs,
        unmatched,
    )


def _signals(instance: Instance, endpoint_version: str | None) -> list[Finding]:
    values = {s.source: s.value for s in instance.signals}
    if endpoint_version is not None:
        values.setdefault("endpoint", endpoint_version)
    if len(set(values.values())) <= 1:
        return []
    said = ", ".join(f"{src} says {val}" for src, val in values.items())
    return [
        Finding(
            FindingKind.SIGNAL_CONFLICT,
            f"version signals disagree: {said}",
            instance=instance.name,
            severity=Severity.ERROR,
        )
    ]


#: Instance-side evidence that its content is wrong: the verdict is ``mismatch``.
CONTENT_KINDS = frozenset(
    {
        FindingKind.CONTENT_DIFFERS,
        FindingKind.FILE_MISSING,
        FindingKind.FILE_UNEXPECTED,
        FindingKind.INTEGRITY_FAILED,
        FindingKind.MANIFEST_INVALID,
        FindingKind.MINORITY_CONTENT,
        FindingKind.UNSAFE_REFERENCE,
        FindingKind.FALLBACK_PAGE,
    }
)


def reported_version(obs: Observation) -> str | None:
    """The version the instance is judged against: its first signal, else /version."""
    return obs.instance.reported_version or obs.endpoint_version


def observed_fingerprint(obs: Observation) -> str | None:
    """A short digest of what was served (manifest bytes and sampled asset hashes)."""
    parts = []
    if obs.manifest_fetch is not None and obs.manifest_fetch.sha256:
        parts.append(f"{obs.manifest_path}={obs.manifest_fetch.sha256}")
    for path in sorted(obs.assets):
        got = obs.assets[path]
        parts.append(f"{path}={got.sha256 if got.ok else got.status}")
    if not parts:
        return None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _manifest_absent(obs: Observation) -> bool:
    """The served manifest was looked for and is not there (404/403/410, or no name)."""
    if obs.manifest is not None:
        return False
    if obs.manifest_fetch is None:
        return obs.manifest_error is not None
    return obs.manifest_fetch.status in NOT_HERE


def _served_manifest(obs: Observation) -> list[Finding]:
    """The served manifest: unusable (evidence), missing (a finding, never silent), or
    references that were not fetched (off-host: not compared; traversal: evidence)."""
    name = obs.instance.name
    findings: list[Finding] = []
    if _manifest_absent(obs):
        status = obs.manifest_fetch.status if obs.manifest_fetch is not None else None
        what = f"answers {status}" if status is not None else "was not found"
        detail = f" ({obs.manifest_error})" if obs.manifest_error else ""
        head = (
            f"served manifest {obs.manifest_path} {what}"
            if obs.manifest_path
            else "the instance serves no manifest at any well-known name"
        )
        findings.append(
            Finding(
                FindingKind.MANIFEST_MISSING,
                f"{head}: judged by the release's file list{detail}",
                instance=name,
                path=obs.manifest_path or None,
                actual=str(status) if status is not None else None,
                severity=Severity.WARNING,
            )
        )
    elif obs.manifest_error is not None:
        findings.append(
            Finding(
                FindingKind.MANIFEST_INVALID,
                f"served manifest {obs.manifest_path} is unusable: {obs.manifest_error}",
                instance=name,
                path=obs.manifest_path,
            )
        )
    elsewhere = [raw for raw in obs.unsafe_paths if is_off_host(raw)]
    for raw in obs.unsafe_paths:
        if not is_off_host(raw):
            findings.append(
                Finding(
                    FindingKind.UNSAFE_REFERENCE,
                    f"served manifest refers outside the instance: {raw!r} (not fetched)",
                    instance=name,
                    path=raw,
                    severity=Severity.WARNING,
                )
            )
    if elsewhere:
        findings.append(
            Finding(
                FindingKind.NOT_COMPARED,
                f"{len(elsewhere)} file(s) the served manifest references on another host "
                f"were not fetched, so not compared: {_names(elsewhere)}",
                instance=name,
                path=elsewhere[0],
                severity=Severity.WARNING,
            )
        )
    return findings


def _unfetched(obs: Observation) -> list[str]:
    return sorted(p for p, f in obs.assets.items() if _unobserved(f))


def _failed_fetches(obs: Observation, failed: Sequence[str]) -> list[Finding]:
    if not failed:
        return []
    first = obs.assets[failed[0]]
    return _warn_files(
        FindingKind.OBSERVATION_FAILED,
        f"{len(failed)} file(s) could not be fetched: {_names(failed)} ({_why_unobserved(first)})",
        obs,
        failed,
    )


def _not_compared_why(obs: Observation, path: str) -> str:
    """Why a release file the instance was not asked for was not compared."""
    got = obs.assets.get(path)
    if got is not None and _unobserved(got):
        return f"could not be fetched ({_why_unobserved(got)})"
    if obs.sampled:
        return SAMPLED_OUT
    if _manifest_absent(obs):
        return "the served manifest is missing"
    if obs.manifest is not None and path not in obs.manifest.files:
        return "not referenced by the served manifest (not fetched)"
    return "not fetched"


@dataclass(slots=True)
class SampledOutRows:
    """The ``not_compared`` rows of sampled instances, one tuple per release and set of
    files compared, shared by every coverage that has them.

    A sampled instance's coverage lists each release file it did not compare, ~500
    (path, "sampled out") pairs per instance; every instance that served the same
    manifest in the same sample has the same ones. Kept once per instance they were
    the largest thing a controller held (55 MB of 2,000 pods' coverages, by
    tracemalloc), and building them cost a sort of the release per instance.
    """

    rows: dict[tuple[int, frozenset[str]], tuple[Manifest, tuple[tuple[str, str], ...]]] = field(
        default_factory=dict
    )

    def of(self, release: Manifest, compared: frozenset[str]) -> tuple[tuple[str, str], ...]:
        """The release's files outside ``compared``, in order, each "sampled out"."""
        key = (id(release), compared)
        hit = self.rows.get(key)
        if hit is None or hit[0] is not release:  # the release is held: its id is its own
            if len(self.rows) >= _SHARED_ROWS_LIMIT:
                self.rows.clear()
            rows = tuple((p, SAMPLED_OUT) for p in sorted(release.files) if p not in compared)
            hit = self.rows[key] = (release, rows)
        return hit[1]


_SHARED_ROWS_LIMIT = 256


def _release_coverage(
    obs: Observation,
    release: Manifest,
    check: _ReleaseCheck,
    on_cdn: set[str],
    shared: SampledOutRows | None = None,
) -> Coverage:
    """Every file of the release: compared, or not compared with the reason."""
    files = release.files
    compared = frozenset(p for p in check.compared | on_cdn if p in files)
    if shared is not None and _all_sampled_out(obs, check, compared, files):
        not_compared = shared.of(release, compared)
    else:
        not_compared = tuple(
            (path, check.refused.get(path) or _not_compared_why(obs, path))
            for path in sorted(files)
            if path not in compared
        )
    return Coverage(
        compared=len(compared),
        total=len(release.files),
        not_compared=not_compared,
        encodings=obs.encodings,
        hashes=vouching_algorithms(release) or ("sha256",),
    )


def _all_sampled_out(
    obs: Observation, check: _ReleaseCheck, compared: frozenset[str], files: Mapping[str, object]
) -> bool:
    """Whether every release file not compared was sampled out: the instance was
    sampled, no file was refused, and none it was asked for failed to arrive
    (:func:`_not_compared_why` then says "sampled out" for each)."""
    if not obs.sampled or check.refused:
        return False
    return not any(
        p in files and p not in compared and _unobserved(f) for p, f in obs.assets.items()
    )


def _served_coverage(obs: Observation) -> Coverage:
    """Without a release: the files the instance was asked for and its manifest lists."""
    docs = _documents(obs)
    wanted = set(docs) | set(obs.manifest.files if obs.manifest else ())
    judged = {p for p, f in docs.items() if not _unobserved(f)}
    return Coverage(
        compared=len(judged),
        total=len(wanted),
        not_compared=tuple(
            (p, _not_compared_why(obs, p)) for p in sorted(wanted) if p not in judged
        ),
        encodings=obs.encodings,
    )


def _coverage_findings(obs: Observation, version: str, coverage: Coverage) -> list[Finding]:
    """Say what was not compared: a sample (info) or anything else (warning)."""
    findings = []
    sampled = [p for p, why in coverage.not_compared if why == SAMPLED_OUT]
    other = [(p, why) for p, why in coverage.not_compared if why != SAMPLED_OUT]
    if sampled:
        findings.append(
            Finding(
                FindingKind.SAMPLED,
                f"{coverage.compared} of {coverage.total} files of release {version} "
                f"checked (a sample); {len(sampled)} sampled out",
                instance=obs.instance.name,
                severity=Severity.INFO,
            )
        )
    if other:
        findings.append(
            Finding(
                FindingKind.NOT_COMPARED,
                f"{len(other)} file(s) of release {version} not compared: "
                f"{_names([p for p, _ in other])} ({other[0][1]})",
                instance=obs.instance.name,
                path=other[0][0],
                severity=Severity.WARNING,
            )
        )
    return findings


# --------------------------------------------------------------------------- verdict


@dataclass(slots=True)
class _Case:
    """Everything judged about one instance, from which the verdict is read."""

    obs: Observation
    version: str | None
    findings: list[Finding]
    failed: list[str]
    expectation: Expectation | None
    invalid_version: str | None = None
    release: Manifest | None = None
    release_check: _ReleaseCheck | None = None
    cdn_check: _CdnCheck | None = None
    coverage: Coverage | None = None
    serves: str | None = None
    candidates: tuple[str, ...] = ()
    mix_of: str | None = None  # the one other release the differing files all come from
    #: the one other release everything compared matches, whose files were not all
    #: compared (or some fell back): named, never claimed as what the instance serves
    partial_of: str | None = None
    partial_gaps: tuple[str, ...] = ()  # that release's files not shown to be served
    misplaced: str | None = None  # nothing of the release where it was looked for: why
    misplaced_file: Finding | None = None  # the absent file kept as evidence for the gate
    peers: int | None = None  # consensus: observed instances reporting this version
    agreeing: int | None = None  # consensus: siblings holding the same bytes
    desired: str | None = None
    shared_rows: SampledOutRows | None = None  # coverage rows shared between instances

    def kinds(self) -> set[FindingKind]:
        return {f.kind for f in self.findings}

    @property
    def consensus(self) -> bool:
        return self.expectation is None

    @property
    def expectation_missing(self) -> bool:
        return self.expectation is not None and self.release is None

    @property
    def names_only(self) -> bool:
        return self.release_check is not None and bool(self.release_check.names_only)


def _claim(case: _Case) -> str:
    """What a clean result may claim, never more than was compared."""
    cov = case.coverage
    assert cov is not None  # judged against a release: every file is accounted for
    names = f" ({NAMES_ONLY_NOTE}: the release source has no hashes; bytes not verified)"
    suffix = names if case.names_only else ""
    if _manifest_absent(case.obs):  # a mode, not a failure: said in every clean claim
        suffix += f" ({NO_MANIFEST_NOTE})"
    if case.obs.layout.detected:  # where the user looks, not only among the findings
        suffix += f" (under {prefix.shown(case.obs.layout.prefix)}, detected)"
    if cov.complete:
        if case.names_only:
            return f"file names match release {case.version}{suffix}"
        return f"serves release {case.version}{suffix}"
    return (
        f"{cov.compared} of {cov.total} files of release {case.version} checked, "
        f"no difference found{suffix}"
    )


def _content_reason(case: _Case, content: Sequence[Finding]) -> str:
    files = sorted({f.path for f in content if f.path})
    reported = case.version or "(no version)"
    check = case.release_check
    if check is not None and check.missing and len(check.missing) == len(check.bad):
        if not check.served_hashes:
            return (
                f"reports {reported} but all {len(check.missing)} files are missing "
                "(404 or the fallback page): wrong base URL?"
            )
        if not case.serves:
            return f"reports {reported} but {len(check.missing)} file(s) are missing: " + (
                _names(sorted(check.missing))
            )
    if case.partial_of is not None:
        return f"reports {reported} but content differs: " + _partial(case)
    if case.serves:
        what = f"serves {case.serves}'s content"
    elif case.mix_of is not None and case.release_check is not None:
        other = len(case.release_check.differing)
        what = (
            f"serves a mix: {other} file(s) are release {case.mix_of}'s, "
            f"the rest release {reported}'s"
        )
    elif len(case.candidates) > 1:
        what = f"content differs (it matches each of releases {', '.join(case.candidates)})"
    else:
        what = "content differs"
    return f"reports {reported} but {what}: {_names(files)}"


#: How to give an instance a version to be judged against (it reported none).
NO_VERSION_HINT = (
    "give one with the target (URL=VERSION), a version label or annotation, "
    "or a version endpoint (--version-endpoint PATH#POINTER)"
)


def _partial(case: _Case) -> str:
    """What an instance matching another release, short of all its files, serves."""
    check = case.release_check
    missing = set(check.missing) if check is not None else set()
    absent = [p for p in case.partial_gaps if p in missing]
    unseen = [p for p in case.partial_gaps if p not in missing]
    parts = []
    if absent:
        parts.append(f"{len(absent)} fall back or are missing: {_names(absent)}")
    if unseen:
        parts.append(f"{len(unseen)} were not compared: {_names(unseen)}")
    return (
        f"every file compared is release {case.partial_of}'s, but {len(case.partial_gaps)} of "
        f"its files are not shown served ({'; '.join(parts)})"
    )


def _verdict(case: _Case) -> tuple[Verdict, str]:
    """The first rule that applies, from the strongest evidence to "could not judge"."""
    kinds = case.kinds()
    cdn = case.cdn_check
    on_cdn = {id(f) for f in cdn.findings} if cdn is not None else set()
    content = [
        f
        for f in case.findings
        if f.kind in CONTENT_KINDS and id(f) not in on_cdn and f is not case.misplaced_file
    ]
    if case.invalid_version is not None:  # hostile input judges nothing: never exit 1
        return Verdict.INCONCLUSIVE, f"reports an invalid version: {case.invalid_version}"
    if case.misplaced is not None and not content:
        return Verdict.INCONCLUSIVE, case.misplaced
    if content:
        return Verdict.MISMATCH, _content_reason(case, content)
    if FindingKind.SIGNAL_CONFLICT in kinds:
        conflict = next(f for f in case.findings if f.kind is FindingKind.SIGNAL_CONFLICT)
        return Verdict.SIGNAL_CONFLICT, conflict.message
    if cdn is not None and cdn.missing:
        return Verdict.CDN_MISSING, f"missing on the CDN: {_names(sorted(set(cdn.missing)))}"
    if cdn is not None and cdn.differs:
        return Verdict.CDN_MISMATCH, f"differs on the CDN: {_names(sorted(set(cdn.differs)))}"
    if case.expectation_missing:
        why = case.expectation.error if case.expectation is not None else None
        return Verdict.INCONCLUSIVE, f"no expected release for {case.version}: {why}"
    if case.failed:
        return Verdict.INCONCLUSIVE, f"{len(case.failed)} file(s) could not be fetched"
    if FindingKind.NO_CONSENSUS in kinds:
        files = sorted({f.path or "" for f in case.findings if f.kind is FindingKind.NO_CONSENSUS})
        return Verdict.INCONCLUSIVE, f"siblings disagree with no majority: {_names(files)}"
    if cdn is not None and cdn.unchecked:
        return Verdict.INCONCLUSIVE, f"the CDN could not be checked: {cdn.why_unchecked}"
    if case.version is None:  # before "nothing fetched": without a version, nothing is
        return Verdict.INCONCLUSIVE, f"no reported version to judge against: {NO_VERSION_HINT}"
    if not case.obs.assets and case.obs.manifest_fetch is None:
        return Verdict.INCONCLUSIVE, "nothing was fetched to judge by"
    if case.coverage is not None and case.coverage.compared == 0:
        return Verdict.INCONCLUSIVE, f"no file of release {case.version} could be compared"
    if not _anything_served(case.obs):
        return Verdict.INCONCLUSIVE, _nothing_served(case.obs)
    if case.consensus and (case.peers or 0) < 2:
        return (
            Verdict.INCONCLUSIVE,
            f"no release source and no sibling reports {case.version}: consensus needs "
            "at least two instances",
        )
    desired = case.desired
    if desired is not None and case.version != desired:
        case.findings.append(
            Finding(
                FindingKind.DRIFT,
                f"consistent with {case.version}, but the desired version is {desired}",
                instance=case.obs.instance.name,
                expected=desired,
                actual=case.version,
                severity=Severity.WARNING,
            )
        )
        claim = "" if case.consensus else f" ({_claim(case)})"
        return Verdict.DRIFT, f"consistent with {case.version}, desired is {desired}{claim}"
    if case.consensus:
        siblings = (case.peers or 1) - 1
        agree = siblings if case.agreeing is None else case.agreeing
        of = "its" if agree == siblings else f"{agree} of its"
        return Verdict.CONSISTENT, f"agrees with {of} {siblings} sibling(s) on {case.version}"
    return Verdict.CONSISTENT, _claim(case)


#: Verdicts under which the instance's own bytes may still be right.
_MAY_BE_RIGHT = frozenset(
    {Verdict.CONSISTENT, Verdict.DRIFT, Verdict.CDN_MISSING, Verdict.CDN_MISMATCH}
)


def _verified(case: _Case, verdict: Verdict) -> bool:
    """The instance's own bytes were compared with something that vouches for them and
    found right: a readiness gate may open on this, and a quarantine be undone.

    A CDN verdict with no release to compare with is not verified: the instance and
    the CDN differ, and nobody can tell which one holds the wrong bytes.
    """
    if verdict not in _MAY_BE_RIGHT or case.failed or case.names_only:
        return False
    if case.consensus:
        return (case.peers or 0) >= 2
    return case.release is not None and case.coverage is not None and case.coverage.compared > 0


# --------------------------------------------------------------------------- judge


def _not_observed(
    obs: Observation, version: str | None, now: datetime | None, tls_warn_days: float
) -> InstanceResult:
    """An instance that could not be observed: unreachable, or inconclusive if it answered."""
    inst = obs.instance
    error = obs.error or ""
    inconclusive = obs.error_kind is not None and ErrorKind(obs.error_kind).inconclusive
    kind = (
        FindingKind.CHECK_FAILED
        if obs.error_kind == ErrorKind.CHECK_FAILED
        else FindingKind.UNREACHABLE
    )
    unseen = [Finding(kind, error, instance=inst.name)]
    if obs.tls is not None and now is not None:  # e.g. it failed verification: expired
        unseen += tls_findings(obs.tls, now=now, warn_days=tls_warn_days, instance=inst.name)
    return InstanceResult(
        instance=inst,
        verdict=Verdict.INCONCLUSIVE if inconclusive else Verdict.UNREACHABLE,
        reason=f"could not be observed: {error}",
        findings=tuple(unseen),
        reported_version=version,
        fingerprint=observed_fingerprint(obs),
        observation=obs,
        content_verified=False,
    )


def _about_the_instance(
    obs: Observation, failed: Sequence[str], now: datetime | None, tls_warn_days: float
) -> list[Finding]:
    """Findings that need no expectation: signals, TLS, the served manifest, integrity."""
    findings = _signals(obs.instance, obs.endpoint_version)
    if obs.tls is not None and now is not None:
        findings += tls_findings(
            obs.tls, now=now, warn_days=tls_warn_days, instance=obs.instance.name
        )
    findings += _served_manifest(obs)
    findings += _integrity(obs)
    findings += _failed_fetches(obs, failed)
    return findings


def _judge_release(case: _Case, index: HashIndex) -> None:
    """Compare with the expected release, when there is one; name another it matches."""
    exp, version, name = case.expectation, case.version, case.obs.instance.name
    if exp is None or version is None or case.invalid_version is not None:
        return
    if exp.manifest is None:
        case.findings.append(
            Finding(
                FindingKind.EXPECTATION_UNAVAILABLE,
                f"release {version} is unknown: {exp.error or 'no manifest'}",
                instance=name,
                severity=Severity.WARNING,
            )
        )
        return
    case.release = exp.manifest
    if exp.stale:
        case.findings.append(
            Finding(
                FindingKind.EXPECTATION_STALE,
                f"release {version} from the last known good copy ({exp.error})",
                instance=name,
                severity=Severity.INFO,
            )
        )
    check = _against_release(case.obs, exp.manifest, version, _pages(case.obs, exp.manifest))
    case.release_check = check
    case.findings += check.findings
    if check.names_only:
        case.findings.append(
            Finding(
                FindingKind.NAMES_ONLY,
                f"release {version} carries no content hash for {len(check.names_only)} "
                "file(s): their names were compared, not their bytes",
                instance=name,
                path=check.names_only[0],
                severity=Severity.WARNING,
            )
        )
    if check.bad:
        case.candidates = index.releases_of(
            check.served_hashes, exclude=version, missing=check.missing
        )
        # all that was served is one other release's, its missing files aside: that
        # release with files absent, named as such (never "serves" it, never "a mix")
        loose = case.candidates
        if not loose and check.missing and check.differing:
            loose = index.releases_of(check.served_hashes, exclude=version)
        if len(loose) == 1:
            gaps = _not_shown(case.obs, index.releases[loose[0]], check)
            if gaps:  # "serves X" only when every file of X was compared and is X's
                case.partial_of, case.partial_gaps = loose[0], tuple(gaps)
            else:
                case.serves = loose[0]
        if case.serves is None and case.partial_of is None and check.differing:
            case.mix_of = index.release_of(check.differing.values(), exclude=version)
        if case.serves is not None:
            case.findings.append(
                Finding(
                    FindingKind.SERVES_OTHER_RELEASE,
                    f"reports {version}, serves {case.serves}",
                    instance=name,
                    expected=version,
                    actual=case.serves,
                )
            )


def _not_shown(obs: Observation, other: Manifest, check: _ReleaseCheck) -> list[str]:
    """The files of ``other`` the instance was not seen serving with ``other``'s bytes:
    absent (404, the fallback page), other bytes, or never fetched."""
    docs = _documents(obs)
    pages = _pages(obs, other)
    gaps = []
    for path, entry in sorted(other.files.items()):
        got = docs.get(path)
        want = entry.hashes.get("sha256")
        if got is None or path in check.missing or not prefix.is_found(got, path, pages):
            gaps.append(path)
        elif want is not None and got.sha256 != want:
            gaps.append(path)
    return gaps


def _judge_layout(case: _Case) -> None:
    """Where the release's files were looked for: a detected prefix is said; none of
    them found there is the wrong place (inconclusive, naming the prefix to use), not
    a mismatch, unless what is served there is another build of the same layout."""
    layout = case.obs.layout
    name = case.obs.instance.name
    if layout.detected:
        case.findings.append(
            Finding(
                FindingKind.LAYOUT,
                prefix.detected_message(layout),
                instance=name,
                path=prefix.shown(layout.prefix),
                severity=Severity.WARNING,
            )
        )
    check, release = case.release_check, case.release
    if check is None or release is None:
        return
    absent = [p for p in check.missing if p in release.files]
    found = [p for p in check.compared if p in release.files and p not in check.missing]
    if found or not absent or (len(absent) < 2 and layout.found_at is None):
        return  # one file absent is evidence about that file, not about where all are
    if case.obs.manifest_error is not None and not _manifest_absent(case.obs):
        return  # a served manifest that is hostile or unusable is evidence right here
    others = [p for p in check.differing if p not in release.files]
    listed_under = prefix.prefix_from_listing(others, release.files) if others else None
    if others and listed_under is None:
        return  # another build, served right here: its files are evidence
    if layout.found_at is None and listed_under is not None:
        layout = replace(layout, found_at=layout.prefix + listed_under)
    case.misplaced = prefix.wrong_place_reason(layout, case.version or "", len(absent))
    # one finding for the layout, not one per file of the release; the first absent
    # file stays, as the evidence that keeps a readiness gate from failing open on a
    # pod whose files cannot be found (a wrong prefix is no dependency being down)
    drop = {FindingKind.FILE_MISSING, FindingKind.FALLBACK_PAGE, FindingKind.FILE_UNEXPECTED}
    own = {id(f) for f in check.findings}
    kept = next((f for f in check.findings if f.path == absent[0] and f.kind in drop), None)
    case.misplaced_file = kept
    case.findings = [f for f in case.findings if f is kept or not (id(f) in own and f.kind in drop)]
    case.findings.append(
        Finding(
            FindingKind.LAYOUT,
            case.misplaced,
            instance=name,
            path=prefix.shown(layout.prefix),
            expected=prefix.shown(layout.found_at) if layout.found_at is not None else None,
            severity=Severity.WARNING,
        )
    )


def _judge_cdn(case: _Case, cdn: CdnView | None) -> None:
    """The CDN's answers: for what the instance served, and for what its manifest
    references on the CDN (fetched there, whether or not the CDN view has it)."""
    if (cdn is None and not case.obs.on_cdn) or case.misplaced is not None:
        return  # misplaced: what the CDN must hold is unknown until the prefix is right
    pages = _pages(case.obs, case.release)
    if cdn is not None:  # the CDN's own entry page is what its fallback answers with
        pages |= {f.sha256 for p, f in cdn.assets.items() if _page_path(p) and f.ok and f.sha256}
        check = _against_cdn(case.obs, cdn, case.release, case.version, pages)
    else:
        check = _CdnCheck()
    located = _located_on_cdn(case.obs, check, case.release, case.version, pages)
    case.cdn_check = check
    case.findings += located
    case.findings += check.findings
    if check.unchecked:
        case.findings.append(
            Finding(
                FindingKind.OBSERVATION_FAILED,
                f"CDN could not be checked for {len(check.unchecked)} file(s): "
                f"{check.why_unchecked}",
                instance=case.obs.instance.name,
                path=check.unchecked[0],
                severity=Severity.WARNING,
            )
        )


def _judge_coverage(case: _Case) -> None:
    if case.release is not None and case.release_check is not None:
        on_cdn = case.cdn_check.compared if case.cdn_check is not None else set()
        case.coverage = _release_coverage(
            case.obs, case.release, case.release_check, on_cdn, case.shared_rows
        )
        case.findings += _coverage_findings(case.obs, case.version or "", case.coverage)
    else:
        case.coverage = _served_coverage(case.obs)


def _judge_version(case: _Case) -> None:
    """No version reported, or one no release may be looked up for."""
    obs, version = case.obs, case.version
    if version is None:
        case.findings.append(
            Finding(
                FindingKind.NO_VERSION,
                "the instance reports no version",
                instance=obs.instance.name,
                severity=Severity.WARNING,
            )
        )
        return
    case.invalid_version = version_problem(version)
    if case.invalid_version is not None:
        case.findings.append(
            Finding(
                FindingKind.INVALID_VERSION,
                f"the reported version {case.invalid_version}: no release is looked up for it",
                instance=obs.instance.name,
                actual=version[:200] if version else None,
            )
        )


def _names_only(case: _Case, verdict: Verdict, reason: str) -> tuple[Verdict, str]:
    """With a release source that vouches for names only, never ``consistent``."""
    if case.names_only and verdict is Verdict.CONSISTENT:
        # names agree, and nobody vouched for the bytes: release 2's bytes under release
        # 1's hashed names look exactly like this, so it is never "consistent" (exit 0)
        verdict = Verdict.INCONCLUSIVE
    if case.names_only and NAMES_ONLY_NOTE not in reason:  # every result says so
        reason += f" ({NAMES_ONLY_NOTE})"
    return verdict, reason


def judge_instance(
    obs: Observation,
    *,
    expectation: Expectation | None,
    index: HashIndex,
    cdn: CdnView | None = None,
    desired_version: str | None = None,
    extra: Sequence[Finding] = (),
    now: datetime | None = None,
    tls_warn_days: float = 14.0,
    peers: int | None = None,
    shared_rows: SampledOutRows | None = None,
    agreeing: int | None = None,
) -> InstanceResult:
    """The verdict for one instance from its observation and what it should serve.

    ``expectation=None`` is consensus mode: ``peers`` is how many observed instances
    (this one included) report the same version; fewer than two is no consensus;
    ``agreeing`` how many of the others hold the same bytes (:func:`consensus_agreement`).
    ``shared_rows`` lets instances judged together share equal coverage rows.
    """
    version = reported_version(obs)
    if obs.error is not None:
        return _not_observed(obs, version, now, tls_warn_days)
    failed = _unfetched(obs)
    case = _Case(
        obs=obs,
        version=version,
        findings=list(extra) + _about_the_instance(obs, failed, now, tls_warn_days),
        failed=failed,
        expectation=expectation,
        peers=peers,
        agreeing=agreeing,
        desired=desired_version,
        shared_rows=shared_rows,
    )
    _judge_version(case)
    _judge_release(case, index)
    _judge_layout(case)
    _judge_cdn(case, cdn)
    _judge_coverage(case)
    verdict, reason = _names_only(case, *_verdict(case))
    return InstanceResult(
        instance=obs.instance,
        verdict=verdict,
        reason=reason,
        findings=tuple(case.findings),
        reported_version=version,
        serves_version=case.serves if verdict is Verdict.MISMATCH else None,
        fingerprint=observed_fingerprint(obs),
        observation=obs,
        coverage=case.coverage,
        content_verified=_verified(case, verdict),
        unconfirmed=_unfetched_gaps(case) if verdict is Verdict.MISMATCH else (),
    )


def _anything_served(obs: Observation) -> bool:
    """Some content was served to judge by: a file answered 2xx, or a served manifest was
    read. Siblings whose manifest path all answer the same 403 page agree on nothing:
    the error page's bytes are not the content (found on nginx denying dotfiles)."""
    return obs.manifest is not None or any(f.ok for f in obs.assets.values())


def _nothing_served(obs: Observation) -> str:
    got = obs.manifest_fetch
    if got is None or got.ok:
        return "nothing was fetched to judge by"
    why = got.error or f"HTTP {got.status}"
    return f"nothing was fetched to judge by: {obs.manifest_path or 'the manifest'} answers {why}"


def _unfetched_gaps(case: _Case) -> tuple[str, ...]:
    """The other release's files that stand between "partial" and "serves X" only
    because nobody asked for them (no served manifest lists them, the reported
    release does not hold them): the pipeline's one confirmation round fetches them."""
    if case.partial_of is None:
        return ()
    docs = _documents(case.obs)
    return tuple(p for p in case.partial_gaps if p not in docs)


def tls_findings(
    cert: CertInfo, *, now: datetime, warn_days: float, instance: str | None = None
) -> list[Finding]:
    """A warning when a certificate expires within ``warn_days`` (an error once expired)."""
    if cert.not_after >= now + timedelta(days=warn_days):
        return []
    expired = cert.not_after <= now
    return [
        Finding(
            FindingKind.TLS_EXPIRING,
            f"certificate of {cert.endpoint} ({cert.subject}) "
            f"{'expired' if expired else 'expires'} {cert.not_after:%Y-%m-%d %H:%M} UTC",
            instance=instance,
            actual=cert.not_after.isoformat(),
            severity=Severity.ERROR if expired else Severity.WARNING,
        )
    ]


def _consensus_groups(observations: Sequence[Observation]) -> dict[str, list[Observation]]:
    """Observed instances by the (valid) version they report."""
    groups: dict[str, list[Observation]] = defaultdict(list)
    for obs in observations:
        version = reported_version(obs)
        if obs.error is None and version is not None and version_problem(version) is None:
            groups[version].append(obs)
    return groups


def consensus_findings(observations: Sequence[Observation]) -> dict[str, list[Finding]]:
    """Siblings reporting the same version must serve the same bytes; minorities are suspect.

    For each version and path, the strict majority hash among the instances that fetched
    the path is taken as the truth; an instance holding another hash gets a
    ``minority-content`` finding. Without a strict majority (a tie), every instance gets
    a warning instead: the disagreement is real but nobody can be blamed.
    """
    out: dict[str, list[Finding]] = defaultdict(list)
    for version, members in _consensus_groups(observations).items():
        by_path: dict[str, dict[str, str]] = defaultdict(dict)
        for obs in members:
            for path, got in _documents(obs).items():
                if got.ok and got.sha256:
                    by_path[path][obs.instance.name] = got.sha256
        for path in sorted(by_path):
            held = by_path[path]
            if len(set(held.values())) <= 1:
                continue
            (top, top_count), *_rest = Counter(held.values()).most_common()
            if top_count * 2 > len(held):
                for name, sha in held.items():
                    if sha != top:
                        out[name].append(
                            Finding(
                                FindingKind.MINORITY_CONTENT,
                                f"{path} differs from {top_count} of its "
                                f"{len(held) - 1} siblings reporting {version}",
                                instance=name,
                                path=path,
                                expected=top,
                                actual=sha,
                            )
                        )
            else:
                for name in held:
                    out[name].append(
                        Finding(
                            FindingKind.NO_CONSENSUS,
                            f"siblings reporting {version} disagree on {path} with no majority",
                            instance=name,
                            path=path,
                            severity=Severity.WARNING,
                        )
                    )
    return out


def consensus_agreement(observations: Sequence[Observation]) -> dict[str, int]:
    """For each instance, how many siblings reporting its version agree with it: they
    hold the same bytes on every path both fetched, and share at least one.

    "Agrees with its N siblings" counts these, not every instance of the version: of
    three instances where one is the minority, each of the other two agrees with one.
    """
    out: dict[str, int] = {}
    for members in _consensus_groups(observations).values():
        held = {
            o.instance.name: {p: g.sha256 for p, g in _documents(o).items() if g.ok and g.sha256}
            for o in members
        }
        same: dict[tuple[str, str], set[str]] = defaultdict(set)
        fetched: dict[str, set[str]] = defaultdict(set)
        for name, docs in held.items():
            for path, sha in docs.items():
                same[(path, sha)].add(name)
                fetched[path].add(name)
        for name, docs in held.items():
            agree: set[str] = set()
            differ: set[str] = set()
            for item in docs.items():
                agree |= same[item]
                differ |= fetched[item[0]] - same[item]
            out[name] = len(agree - differ - {name})
    return out


def image_findings(instances: Sequence[Instance]) -> dict[str, list[Finding]]:
    """Instances of one version running different image digests than most siblings."""
    out: dict[str, list[Finding]] = defaultdict(list)
    groups: dict[str, list[Instance]] = defaultdict(list)
    for inst in instances:
        if inst.reported_version and inst.image_id:
            groups[inst.reported_version].append(inst)
    for version, members in groups.items():
        counts = Counter(i.image_id for i in members)
        if len(counts) <= 1:
            continue
        top, _ = counts.most_common(1)[0]
        for inst in members:
            if inst.image_id != top:
                out[inst.name].append(
                    Finding(
                        FindingKind.IMAGE_DIVERGES,
                        f"runs image {inst.image_id} while {counts[top]} of {len(members)} "
                        f"instances reporting {version} run {top}",
                        instance=inst.name,
                        expected=top,
                        actual=inst.image_id,
                        severity=Severity.WARNING,
                    )
                )
    return out


#: The Observation fields other than ``instance``: a controller refreshes an
#: observation's instance (labels, conditions) with ``dataclasses.replace``, which keeps
#: every other field's object, so "the same observation" is an identity test per field.
_EVIDENCE_FIELDS = tuple(f.name for f in fields(Observation) if f.name != "instance")


def _same_evidence(a: Observation, b: Observation) -> bool:
    return a is b or (
        a.instance == b.instance and all(getattr(a, f) is getattr(b, f) for f in _EVIDENCE_FIELDS)
    )


def _expectation_key(exp: Expectation | None) -> tuple[object, ...] | None:
    return None if exp is None else (exp.version, id(exp.manifest), exp.stale, exp.error)


@dataclass(slots=True)
class _Judged:
    obs: Observation
    manifest: Manifest | None  # held, so the id() in ``key`` cannot be reused
    index: HashIndex
    cdn: CdnView | None
    key: tuple[object, ...]
    result: InstanceResult


@dataclass
class JudgeCache:
    """What the last comparisons found, per instance, with the inputs each came from.

    A controller compares its whole workload every cycle, but between two cycles only
    a few observations change (a new pod, a sample re-observed). An instance whose
    observation, expectation, fleet findings (image, consensus), release index, CDN
    view and TLS findings are all the same as last time gets the same result:
    :func:`judge_instance` is a pure function of exactly those. So :func:`compare_fleet`
    with a cache judges only what changed and gives the results a fresh comparison
    would (tests/core/test_compare_incremental.py compares both).
    """

    entries: dict[str, _Judged] = field(default_factory=dict)
    index: HashIndex | None = None
    index_key: tuple[tuple[str, int], ...] = ()
    index_manifests: tuple[Manifest, ...] = ()  # held, so the ids in ``index_key`` stay theirs
    judged: int = 0  # instances judged afresh by the last comparison (the rest reused)
    rows: SampledOutRows = field(default_factory=SampledOutRows)

    def forget(self, keep: Iterable[str]) -> None:
        """Drop the instances not in ``keep`` (pods gone)."""
        kept = set(keep)
        for name in [n for n in self.entries if n not in kept]:
            del self.entries[name]

    def index_for(self, releases: Mapping[str, Manifest]) -> HashIndex:
        """The hash index of these releases, rebuilt only when one of them changed."""
        key = tuple(sorted((v, id(m)) for v, m in releases.items()))
        if self.index is None or key != self.index_key:
            self.index = HashIndex(releases)
            self.index_key = key
            self.index_manifests = tuple(releases.values())
        return self.index


def compare_fleet(
    observations: Sequence[Observation],
    *,
    expectations: Mapping[str, Expectation] | None,
    known_releases: Mapping[str, Manifest] | None = None,
    cdn: CdnView | None = None,
    desired_version: str | None = None,
    now: datetime | None = None,
    tls_warn_days: float = 14.0,
    cache: JudgeCache | None = None,
) -> list[InstanceResult]:
    """Judge every instance; ``expectations=None`` means consensus mode (no release source).

    With a ``cache`` (:class:`JudgeCache`), an instance whose inputs are unchanged
    since the cache's last comparison keeps its result instead of being judged again.
    """
    releases = dict(known_releases or {})
    for loaded_version, exp in (expectations or {}).items():
        if exp.manifest is not None:
            releases.setdefault(loaded_version, exp.manifest)
    index = cache.index_for(releases) if cache is not None else HashIndex(releases)
    extra: dict[str, list[Finding]] = defaultdict(list)
    for name, found in image_findings([o.instance for o in observations]).items():
        extra[name] += found
    sizes: dict[str, int] = {}
    agreement: dict[str, int] = {}
    if expectations is None:
        for name, found in consensus_findings(observations).items():
            extra[name] += found
        sizes = {v: len(m) for v, m in _consensus_groups(observations).items()}
        agreement = consensus_agreement(observations)
    results = []
    rows = cache.rows if cache is not None else SampledOutRows()
    if cache is not None:
        cache.judged = 0
    for obs in observations:
        version = reported_version(obs)
        expectation = None
        if expectations is not None and version is not None:
            # an invalid version is hostile input: it chooses nothing, not even a lookup
            expectation = None if version_problem(version) else expectations.get(version)
            expectation = expectation or Expectation(
                version=version, manifest=None, error="not loaded"
            )
        name = obs.instance.name
        fleet = tuple(extra.get(name, ()))
        peers = sizes.get(version or "", 0) if expectations is None else None
        agreeing = agreement.get(name) if expectations is None else None
        key: tuple[object, ...] = ()
        if cache is not None:
            key = (
                _expectation_key(expectation),
                desired_version,
                tls_warn_days,
                peers,
                agreeing,
                fleet,
                # the only use of ``now``: a certificate's expiry findings
                tuple(tls_findings(obs.tls, now=now, warn_days=tls_warn_days, instance=name))
                if obs.tls is not None and now is not None
                else None,
            )
            hit = cache.entries.get(name)
            if (
                hit is not None
                and hit.index is index
                and hit.cdn is cdn
                and hit.key == key
                and _same_evidence(hit.obs, obs)
            ):
                results.append(hit.result)
                continue
            cache.judged += 1
        result = judge_instance(
            obs,
            expectation=expectation,
            index=index,
            cdn=cdn,
            desired_version=desired_version,
            extra=fleet,
            now=now,
            tls_warn_days=tls_warn_days,
            peers=peers,
            shared_rows=rows,
            agreeing=agreeing,
        )
        if cache is not None:
            manifest = expectation.manifest if expectation is not None else None
            cache.entries[name] = _Judged(
                obs=obs, manifest=manifest, index=index, cdn=cdn, key=key, result=result
            )
        results.append(result)
    return results
