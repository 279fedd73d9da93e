"""The plain-language summary at the top of an investigation: what is wrong, in one paragraph."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from artifactcheck.model.values import (
    FindingKind,
    InstanceResult,
    Verdict,
)
from artifactcheck.model.verdicts import CDN_WRONG, VERDICTS
from artifactcheck.present.oncall.assets import _mixed_with
from artifactcheck.present.oncall.siblings import _where_and_when
from artifactcheck.present.oncall.view_models import AssetRow, Siblings
from artifactcheck.present.oncall.words import file_names, join_words, plural


def _cdn_clause(changed: Sequence[AssetRow], others_missing: Sequence[AssetRow]) -> str:
    """One clause: what the CDN has of the differing files, and which other files it lacks."""
    said = []
    states = {r.cdn_state for r in changed}
    if changed and states <= {"differs", "missing"}:
        said.append({1: "does not have it", 2: "has neither"}.get(len(changed), "has none of them"))
        origins = {r.expected_from for r in changed}
        if len(origins) == 1 and all(
            r.cdn_sha256 is not None and r.cdn_sha256 == r.expected_sha256 for r in changed
        ):
            said[-1] += f" (it has {next(iter(origins))}'s bytes)"
    elif changed and states == {"same"}:
        said.append("serves the same bytes")
    if others_missing:
        statuses = sorted({r.cdn_status for r in others_missing if r.cdn_status})
        said.append(
            f"answers {'/'.join(map(str, statuses))} for "
            f"{file_names([r.path for r in others_missing])}"
        )
    return f"the CDN {' and '.join(said)}" if said else ""


def _siblings_clause(sib: Siblings, target: InstanceResult, now: datetime) -> str:
    """The summary's 'N of M do the same' clause: the scale of the problem first."""
    n = len(sib.same)
    if sib.total <= 1:
        return "no siblings were checked to compare with"
    where = _where_and_when(sib, now, group_of=n)
    if target.verdict is Verdict.CONSISTENT:
        return f"{n} of {sib.total} {sib.noun} serve the same content{where}"
    if n == 1:
        return f"it is the only one of {sib.total} {sib.noun} doing so{where}"
    others = [name for name in sib.same if name != target.instance.name]
    names = f" ({join_words(others[:5])}{' and more' if len(others) > 5 else ''})"
    return f"{n} of {sib.total} {sib.noun} do the same{names}{where}"


def summarise(
    result: InstanceResult,
    rows: Sequence[AssetRow],
    sib: Siblings,
    notes: Sequence[str],
    *,
    desired: str | None,
    now: datetime,
) -> str:
    """The one paragraph an on-call engineer reads first, in plain language.

    Built from the verdict and the rows, never from free text, so each clause is
    testable: who, what it claims, what it serves (and whose bytes those are), what the
    CDN has, how many siblings do the same, where and since when. Names are base names
    when unambiguous; what could not be checked is pointed to, not hidden.
    """
    clauses = _verdict_clauses(result, rows, desired=desired)
    sib_clause = _siblings_clause(sib, result, now)
    if sib_clause:
        clauses.append(sib_clause)
    text = "; ".join(c for c in clauses if c) + "."
    if any(n.startswith("could not check") for n in notes):
        text += " Could not check everything: see the notes below."
    return text


def _verdict_clauses(
    result: InstanceResult, rows: Sequence[AssetRow], *, desired: str | None
) -> list[str]:
    """The summary's clauses about the instance itself: what it claims and serves."""
    name = result.instance.name
    v = result.reported_version
    verdict = result.verdict
    if verdict is Verdict.UNREACHABLE:
        reason = result.reason.removeprefix("could not be observed: ")
        return [f"{name} could not be reached: {reason}"]
    if verdict is Verdict.MISMATCH:
        return _mismatch_clauses(result, rows)
    if verdict is Verdict.SIGNAL_CONFLICT:
        conflict = next(
            (f.message for f in result.findings if f.kind is FindingKind.SIGNAL_CONFLICT),
            result.reason,
        )
        return [f"{name}'s {conflict}"]
    if verdict is Verdict.DRIFT:
        return [f"{name} serves release {v} as it reports, but the desired version is {desired}"]
    if verdict in CDN_WRONG:
        return _cdn_verdict_clauses(result, rows)
    if verdict is not Verdict.CONSISTENT:  # no clause of its own (inconclusive): its words
        meaning = VERDICTS[verdict].meaning
        return [f"{name} reports {v or '(no version)'} but {meaning}: {result.reason}"]
    same = sum(1 for r in rows if r.state == "same")
    how = f"release {v}" if result.reason.startswith("serves release") else "its siblings"
    return [f"{name} reports {v} and serves {how} ({plural(same, 'file')} verified)"]


def _cdn_missing(rows: Sequence[AssetRow]) -> list[AssetRow]:
    """Files the CDN lacks, among those the instance serves as expected."""
    return [r for r in rows if r.cdn_state == "missing" and r.state != "differs"]


def _mismatch_clauses(result: InstanceResult, rows: Sequence[AssetRow]) -> list[str]:
    """What a mismatching instance serves instead, whose bytes those are, and the CDN."""
    v = result.reported_version
    changed = [r for r in rows if r.state == "differs"]
    missing = [r for r in rows if r.state == "missing"]
    added = [r for r in rows if r.state == "unexpected"]
    head = f"{result.instance.name} reports {v or '(no version)'} but serves "
    mixed = _mixed_with(changed)
    if result.serves_version and changed:
        head += f"{result.serves_version}'s {file_names([r.path for r in changed])}"
    elif changed and mixed is not None:
        # the differing files are another release's, the others this one's: a mix,
        # so the instance as a whole is not said to serve that release
        head += (
            f"{mixed}'s {file_names([r.path for r in changed])} "
            f"mixed with release {v}'s other files"
        )
    elif changed:
        head += (
            f"different bytes for {file_names([r.path for r in changed])} "
            "(matching no known release)"
        )
    else:
        head += "different content"
    extra = []
    if missing:
        extra.append(f"answers {missing[0].status} for {file_names([r.path for r in missing])}")
    if added:
        extra.append(f"serves {plural(len(added), 'file')} the release lacks")
    clauses = [head + (f", and {join_words(extra)}" if extra else "")]
    cdn = _cdn_clause(changed, _cdn_missing(rows))
    if cdn:
        clauses.append(cdn)
    return clauses


def _cdn_verdict_clauses(result: InstanceResult, rows: Sequence[AssetRow]) -> list[str]:
    """An instance right for its version whose CDN lacks files or serves other bytes."""
    v = result.reported_version
    clauses = [f"{result.instance.name} reports {v} and serves release {v}"]
    cdn_missing = _cdn_missing(rows)
    if cdn_missing:
        clauses.append(_cdn_clause([], cdn_missing))
    differs = [r for r in rows if r.cdn_state == "differs"]
    if differs:
        clauses.append(f"the CDN serves other bytes for {file_names([r.path for r in differs])}")
    return clauses
