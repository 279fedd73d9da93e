"""The CDN check: what the CDN answered for each file, against the release (or the instance).

A CDN that answers 403/404/410, or the site's HTML page, for a file it must hold is
missing it; other bytes differ. The release's hash, when there is one, says which side
is right; without one, a difference is said without blaming either side.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase

from artifactcheck.judge.answers import (
    cdn_release_path,
    few_names,
    short,
    unobserved,
    warn_files,
    why_unobserved,
)
from artifactcheck.judge.prefix import FALLBACK, is_fallback
from artifactcheck.judge.statuses import NOT_HERE
from artifactcheck.model.records import MutableRecord, Record, field
from artifactcheck.model.values import (
    CertInfo,
    Fetched,
    Finding,
    FindingKind,
    Manifest,
    Observation,
)

#: Entry pages are served by the origin, not the CDN: not required there by default.
DEFAULT_CDN_EXCLUDE: tuple[str, ...] = ("*.html", "*.htm")


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


class CdnView(Record):
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


class CdnCheck(MutableRecord):
    """What the CDN answered, judged against the release (or the instance)."""

    findings: list[Finding] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    differs: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    compared: set[str] = field(default_factory=set)  # release files checked on the CDN
    why_unchecked: str | None = None


class _CdnAnswers(Record):
    """One instance's files as the CDN answered them, judged into ``check``."""

    check: CdnCheck
    instance: str
    version: str | None
    pages: frozenset[str]  # what the site's fallback answers with

    def judge(
        self, path: str, on_cdn: Fetched, *, shown: str, want: str | None, served: str | None
    ) -> None:
        """Judge one CDN answer; ``want`` is the release's hash, ``served`` the instance's."""
        check = self.check
        if unobserved(on_cdn):
            check.unchecked.append(path)
            check.why_unchecked = check.why_unchecked or why_unobserved(on_cdn)
            return
        reference = want or served
        fell_back = on_cdn.sha256 != reference and is_fallback(on_cdn, path, self.pages)
        if on_cdn.status in NOT_HERE or fell_back:
            fallback = on_cdn.status not in NOT_HERE
            answer = FALLBACK if fallback else (f"answers {on_cdn.status}")
            kind = FindingKind.FALLBACK_PAGE if fallback else FindingKind.CDN_MISSING
            actual = answer if fallback else str(on_cdn.status)
            self._finding(
                kind, f"{shown} is missing on the CDN: it {answer}", path, reference, actual
            )
            check.missing.append(path)
            return
        if reference is None or on_cdn.sha256 == reference:
            return
        got = on_cdn.sha256
        assert got is not None  # unobserved() refused a 2xx without a digest
        if want is not None:
            message = (
                f"{shown} on the CDN differs from release {self.version}: the release has "
                f"{short(want)}, the CDN serves {short(got)}"
            )
        else:
            message = (
                f"{shown} differs between the CDN and the instance (no release hash to tell "
                f"which is right): the instance serves {short(reference)}, the CDN {short(got)}"
            )
        self._finding(FindingKind.CDN_DIFFERS, message, path, want, got)
        check.differs.append(path)

    def _finding(
        self, kind: FindingKind, message: str, path: str, expected: str | None, actual: str
    ) -> None:
        self.check.findings.append(
            Finding(
                kind, message, instance=self.instance, path=path, expected=expected, actual=actual
            )
        )


def against_cdn(
    obs: Observation,
    cdn: CdnView,
    release: Manifest | None,
    version: str | None,
    pages: frozenset[str],
) -> CdnCheck:
    """The CDN must hold the release's bytes for every file it is meant to serve.

    Compared with the release's hash when there is one (so the message can say which
    side is right), else with what the instance served. Files outside the CDN globs are
    not asked about; files the served manifest references on the CDN by absolute URL
    were fetched there and are judged as the CDN's answers.
    """
    check = CdnCheck()
    answers = _CdnAnswers(check, obs.instance.name, version, pages)
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
            want = entry.hashes.get("sha256") if entry is not None else None
            answers.judge(path, on_cdn, shown=path, want=want, served=obs.assets[path].sha256)
    return check


def located_on_cdn(
    obs: Observation,
    check: CdnCheck,
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
    answers = _CdnAnswers(check, obs.instance.name, version, pages)
    for path, raw in sorted(obs.on_cdn.items()):
        got = obs.assets.get(path)
        if got is None:
            continue
        matched = cdn_release_path(path, release) if release is not None else None
        if release is not None and matched is None:
            unmatched.append(raw)
        want = release.files[matched].hashes.get("sha256") if release and matched else None
        answers.judge(path, got, shown=raw, want=want, served=None)
        if matched is not None and path not in check.unchecked:
            check.compared.add(matched)
    return warn_files(
        FindingKind.NOT_COMPARED,
        f"{len(unmatched)} file(s) the served manifest references on the CDN match no "
        f"file of release {version}, so were not compared: {few_names(unmatched)}",
        obs,
        unmatched,
    )
