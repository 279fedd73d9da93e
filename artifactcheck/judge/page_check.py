"""What the entry pages say about an instance, whatever the release: Subresource
Integrity, and pages that cannot be read.

A browser refuses a script or stylesheet whose bytes do not match the ``integrity=`` of
the element that loads it (:mod:`artifactcheck.manifests.subresource` holds the rule),
so such a file breaks the page for every user: the instance is wrong with or without a
release. A page over a cap or undecodable is not read as a browser reads it, so the
files it loads are not known: the instance is not judged on them (``inconclusive``).
"""

from __future__ import annotations

from artifactcheck.judge.answers import few_names
from artifactcheck.manifests.subresource import IntegrityVerdict, check_integrity
from artifactcheck.model.values import Finding, FindingKind, Observation, Severity

__all__ = ["UNREADABLE_PAGE", "page_findings", "unreadable_reason"]

#: The message of an unreadable page's finding starts with this.
UNREADABLE_PAGE = "its pages could not be read as a browser reads them"


def page_findings(obs: Observation) -> list[Finding]:
    """Files whose bytes fail their page's ``integrity=``; pages that are unreadable."""
    out: list[Finding] = []
    for path, load in sorted(obs.page_loads.items()):
        got = obs.assets.get(path)
        if not load.integrity or got is None or not got.ok:
            continue
        codings = [got, *got.codings.values()] if got.codings else [got]
        if all(
            check_integrity(load.integrity, c.hashes) is not IntegrityVerdict.MISMATCH
            for c in codings
        ):
            continue
        where = "the CDN's" if path in obs.on_cdn else "its"
        out.append(
            Finding(
                FindingKind.INTEGRITY_FAILED,
                f"{path}: {where} bytes do not match the integrity= of page "
                f"{load.integrity_page} (browsers refuse to use it)",
                instance=obs.instance.name,
                path=path,
                expected=" ".join(f"{a}-{h}" for a, h in load.integrity),
                actual=got.sha256,
            )
        )
    if obs.page_problems:
        out.append(
            Finding(
                FindingKind.OBSERVATION_FAILED,
                f"{UNREADABLE_PAGE}: {few_names(list(obs.page_problems), 3)}",
                instance=obs.instance.name,
                severity=Severity.WARNING,
            )
        )
    return out


def unreadable_reason(obs: Observation) -> str | None:
    """The verdict's reason when the pages are unreadable, else None."""
    if not obs.page_problems:
        return None
    return f"{UNREADABLE_PAGE}: {few_names(list(obs.page_problems), 3)}"
