"""Coverage: every file of the release accounted for, compared or not compared with the reason.

A claim is never larger than the evidence, so the verdict's "serves release X" needs a
complete coverage and the reason for each file not compared ("sampled out", "could not
be fetched") is kept with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import itemgetter
from typing import Protocol

from artifactcheck.judge import prefix
from artifactcheck.judge.answers import documents, few_names, unobserved, why_unobserved
from artifactcheck.judge.release_check import ReleaseCheck
from artifactcheck.judge.served_check import manifest_absent
from artifactcheck.model.values import (
    Coverage,
    Fetched,
    Finding,
    FindingKind,
    Manifest,
    Observation,
    Severity,
)

SAMPLED_OUT = "sampled out"


class SharedRows(Protocol):
    """Where equal "sampled out" rows are kept once for every instance that has them
    (:class:`artifactcheck.judge.cache.SampledOutRows`): the core asks for rows, the
    memo decides whether they are shared."""

    def of(self, release: Manifest, compared: frozenset[str]) -> tuple[tuple[str, str], ...]:
        """The release's files outside ``compared``, in order, each "sampled out"."""
        ...


def _not_compared_why(obs: Observation, path: str) -> str:
    """Why a release file the instance was not asked for was not compared."""
    got = obs.assets.get(path)
    if got is not None and unobserved(got):
        return f"could not be fetched ({why_unobserved(got)})"
    if obs.sampled:
        return SAMPLED_OUT
    if manifest_absent(obs):
        return "the served manifest is missing"
    if obs.manifest is not None and path not in obs.manifest.files:
        return "not referenced by the served manifest (not fetched)"
    return "not fetched"


def release_coverage(
    obs: Observation,
    release: Manifest,
    check: ReleaseCheck,
    on_cdn: set[str],
    shared: SharedRows | None = None,
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
        hashes=check.hashes,
    )


def _all_sampled_out(
    obs: Observation, check: ReleaseCheck, compared: frozenset[str], files: Mapping[str, object]
) -> bool:
    """Whether every release file not compared was sampled out: the instance was
    sampled, no file was refused, and none it was asked for failed to arrive
    (:func:`_not_compared_why` then says "sampled out" for each)."""
    if not obs.sampled or check.refused:
        return False
    return not any(
        p in files and p not in compared and unobserved(f) for p, f in obs.assets.items()
    )


def served_coverage(obs: Observation) -> Coverage:
    """Without a release: the files the instance was asked for and its manifest lists.

    Compared means served: a 2xx body that is not the fallback page. A file answering
    404, 403 or the fallback page is counted, with that answer as the reason it was
    not compared, never as compared.
    """
    docs = documents(obs)
    wanted = set(docs) | set(obs.manifest.files if obs.manifest else ())
    pages = prefix.page_hashes(obs.assets, None)
    judged = {p for p, f in docs.items() if prefix.is_found(f, p, pages)}
    return Coverage(
        compared=len(judged),
        total=len(wanted),
        not_compared=tuple(
            (p, _not_served_why(docs.get(p), pages, p) or _not_compared_why(obs, p))
            for p in sorted(wanted)
            if p not in judged
        ),
        encodings=obs.encodings,
    )


def _not_served_why(got: Fetched | None, pages: frozenset[str], path: str) -> str | None:
    """A file that answered, but not with itself: what it answered."""
    if got is None or unobserved(got):
        return None
    if prefix.is_fallback(got, path, pages):
        return prefix.FALLBACK
    return f"answers {got.status}"


def coverage_findings(obs: Observation, version: str, coverage: Coverage) -> list[Finding]:
    """Say what was not compared: a sample (info) or anything else (warning)."""
    findings = []
    rows = coverage.not_compared
    # counted in C: a sampled instance's rows are hundreds of "sampled out", and walking
    # every one of them in Python twice per instance was judging's largest cost
    sampled = list(map(itemgetter(1), rows)).count(SAMPLED_OUT)
    other = [] if sampled == len(rows) else [(p, why) for p, why in rows if why != SAMPLED_OUT]
    if sampled:
        findings.append(
            Finding(
                FindingKind.SAMPLED,
                f"{coverage.compared} of {coverage.total} files of release {version} "
                f"checked (a sample); {sampled} sampled out",
                instance=obs.instance.name,
                severity=Severity.INFO,
            )
        )
    if other:
        findings.append(
            Finding(
                FindingKind.NOT_COMPARED,
                f"{len(other)} file(s) of release {version} not compared: "
                f"{few_names([p for p, _ in other])} ({other[0][1]})",
                instance=obs.instance.name,
                path=other[0][0],
                severity=Severity.WARNING,
            )
        )
    return findings
