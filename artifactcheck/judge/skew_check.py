"""The previous release during the skew window: is each of its files still served?

Pages loaded before a rollout keep asking for the files of the release they came
from. Each file of that release must still be answered with its bytes where it is
asked for (the CDN, and with ``previous_on_instances`` each instance). A file the
current release lists under the same path (an unhashed ``favicon.ico``, an entry
page) cannot hold both releases' bytes at once: there the current release's bytes
are right too, and only its absence is a finding. Absent is 403/404/410 or the site's
fallback page, read exactly as the CDN check reads them (:mod:`artifactcheck.judge.prefix`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from artifactcheck.judge.answers import few_names, unobserved, why_unobserved
from artifactcheck.judge.codings import coding_answers
from artifactcheck.judge.prefix import is_fallback
from artifactcheck.judge.statuses import NOT_HERE
from artifactcheck.model.skew import ON_CDN, PreviousServed
from artifactcheck.model.values import Fetched, Finding, FindingKind, Manifest, Severity


def loaded_by_pages(paths: Iterable[str]) -> list[str]:
    """The paths a page may ask for: none under a dot-segment (``.vite/manifest.json``,
    ``assets/.manifest.json``: a build's own records, which servers deny and no page
    loads)."""
    return [p for p in paths if not any(part.startswith(".") for part in p.split("/"))]


def accepted_hashes(path: str, previous: Manifest, current: Iterable[Manifest]) -> frozenset[str]:
    """The sha256 values a file may have: the previous release's, and a current release's
    for the same path (one path holds one release's bytes at a time)."""
    found = set()
    for manifest in (previous, *current):
        entry = manifest.files.get(path)
        sha = entry.hashes.get("sha256") if entry is not None else None
        if sha:
            found.add(sha)
    return frozenset(found)


def judge_previous(
    release: Manifest,
    answers: Mapping[str, Fetched],
    *,
    version: str,
    where: str,
    base_url: str,
    required: Sequence[str],
    current: Sequence[Manifest] = (),
    pages: frozenset[str] = frozenset(),
    sampled: bool = False,
) -> PreviousServed:
    """What one place's ``answers`` say about the ``required`` files of ``release``.

    A file with no usable answer (an error, a 5xx) is unchecked, never missing; a release
    without a sha256 for a file (names only) can show it missing, never different.
    """
    found: dict[str, list[str]] = {"missing": [], "differs": [], "unchecked": []}
    for path in required:
        got = answers.get(path)
        if got is None:
            found["unchecked"].append(path)
            continue
        verdict = _one(path, got, accepted_hashes(path, release, current), pages)
        if verdict is not None:
            found[verdict].append(path)
    return PreviousServed(
        version=version,
        where=where,
        base_url=base_url,
        required=len(required),
        total=len(release.files),
        missing=tuple(found["missing"]),
        differs=tuple(found["differs"]),
        unchecked=tuple(found["unchecked"]),
        sampled=sampled,
    )


def _one(path: str, got: Fetched, accepted: frozenset[str], pages: frozenset[str]) -> str | None:
    """``missing``, ``differs``, ``unchecked`` or None (served right), over every coding
    compared: a stale ``.gz`` is a difference browsers receive."""
    worst: str | None = None
    for answer in coding_answers(got):
        if unobserved(answer):
            worst = worst or "unchecked"
            continue
        if answer.status in NOT_HERE:
            return "missing"
        if answer.sha256 in accepted:
            continue
        if is_fallback(answer, path, pages):
            return "missing"
        if accepted:
            worst = "differs"
    return worst


def unavailable(version: str, error: str) -> PreviousServed:
    """A previous release that could not be loaded: nothing of it can be checked."""
    return PreviousServed(version=version, where="release", error=error)


def previous_findings(checks: Sequence[PreviousServed]) -> list[Finding]:
    """One finding per place, version and kind, naming the first files and the version."""
    out: list[Finding] = []
    for check in checks:
        place = f"the CDN {check.base_url}" if check.where == ON_CDN else check.where
        instance = None if check.where == ON_CDN else check.where
        if check.error is not None:
            out.append(
                Finding(
                    FindingKind.EXPECTATION_UNAVAILABLE,
                    f"previous release {check.version} was not checked: {check.error}",
                    severity=Severity.WARNING,
                )
            )
            continue
        if check.missing:
            out.append(
                Finding(
                    FindingKind.SKEW_MISSING,
                    f"{place} no longer serves {len(check.missing)} file(s) of previous release "
                    f"{check.version} that open pages still ask for: {few_names(check.missing)}",
                    instance=instance,
                    path=check.missing[0],
                    expected=check.version,
                )
            )
        if check.differs:
            out.append(
                Finding(
                    FindingKind.SKEW_DIFFERS,
                    f"{place} serves other bytes for {len(check.differs)} file(s) of previous "
                    f"release {check.version}: {few_names(check.differs)}",
                    instance=instance,
                    path=check.differs[0],
                    expected=check.version,
                )
            )
        if check.unchecked:
            out.append(
                Finding(
                    FindingKind.NOT_COMPARED,
                    f"{place}: {len(check.unchecked)} file(s) of previous release "
                    f"{check.version} could not be checked: {few_names(check.unchecked)}",
                    instance=instance,
                    path=check.unchecked[0],
                    severity=Severity.WARNING,
                )
            )
    return out


def why_unchecked(answers: Mapping[str, Fetched]) -> str | None:
    """Why a place could not be checked at all: every answer is an unreachable one."""
    if answers and all(f.unreachable for f in answers.values()):
        return why_unobserved(next(iter(answers.values())))
    return None
