"""The verdict ladder: from the findings already made, the first rule that applies.

The rules run from the strongest evidence (content that is wrong: ``mismatch``) to
"could not judge" (``inconclusive``), and the reason never claims more than was compared.
Choosing a verdict makes no finding; the one finding that follows from a verdict (drift
from the desired version) is made by :func:`verdict_findings`, after the choice.
"""

from __future__ import annotations

from collections.abc import Sequence

from artifactcheck.judge import prefix
from artifactcheck.judge.answers import few_names
from artifactcheck.judge.cdn_check import CdnCheck
from artifactcheck.judge.consensus import Agreement, nothing_compared
from artifactcheck.judge.coverage import SharedRows
from artifactcheck.judge.page_check import unreadable_reason
from artifactcheck.judge.release_check import NAMES_ONLY_NOTE, ReleaseCheck
from artifactcheck.judge.served_check import NO_MANIFEST_NOTE, manifest_absent, manifest_fell_back
from artifactcheck.model.records import MutableRecord
from artifactcheck.model.values import (
    Coverage,
    Expectation,
    Finding,
    FindingKind,
    Manifest,
    Observation,
    Severity,
    Verdict,
)
from artifactcheck.model.verdicts import MAY_BE_RIGHT

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


class Case(MutableRecord):
    """Everything judged about one instance, from which the verdict is read."""

    obs: Observation
    version: str | None
    findings: list[Finding]
    failed: list[str]
    expectation: Expectation | None
    invalid_version: str | None = None
    release: Manifest | None = None
    release_check: ReleaseCheck | None = None
    cdn_check: CdnCheck | None = None
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
    agreement: Agreement | None = None  # consensus: what its siblings share with it
    desired: str | None = None
    shared_rows: SharedRows | None = None  # coverage rows shared between instances

    def add(
        self,
        kind: FindingKind,
        message: str,
        *,
        path: str | None = None,
        expected: str | None = None,
        actual: str | None = None,
        severity: Severity = Severity.ERROR,
    ) -> None:
        """A finding about this instance, made by one of the judging steps."""
        self.findings.append(
            Finding(
                kind,
                message,
                instance=self.obs.instance.name,
                path=path,
                expected=expected,
                actual=actual,
                severity=severity,
            )
        )

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


def _claim(case: Case) -> str:
    """What a clean result may claim, never more than was compared."""
    cov = case.coverage
    assert cov is not None  # judged against a release: every file is accounted for
    names = f" ({NAMES_ONLY_NOTE}: the release source has no hashes; bytes not verified)"
    suffix = names if case.names_only else ""
    if manifest_absent(case.obs):  # a mode, not a failure: said in every clean claim
        suffix += f" ({NO_MANIFEST_NOTE})"
    if case.obs.layout.detected:  # where the user looks, not only among the findings
        suffix += f" (under {prefix.shown_prefix(case.obs.layout.prefix)}, detected)"
    if cov.complete:
        if case.names_only:
            return f"file names match release {case.version}{suffix}"
        return f"serves release {case.version}{suffix}"
    return (
        f"{cov.compared} of {cov.total} files of release {case.version} checked, "
        f"no difference found{suffix}"
    )


def _content_reason(case: Case, content: Sequence[Finding]) -> str:
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
                few_names(sorted(check.missing))
            )
    if case.partial_of is not None:
        return f"reports {reported} but content differs: " + _partial(case)
    if case.serves:
        return f"reports {reported} but " + _serves_other(case, files)
    if case.mix_of is not None and case.release_check is not None:
        other = len(case.release_check.differing)
        what = (
            f"serves a mix: {other} file(s) are release {case.mix_of}'s, "
            f"the rest release {reported}'s"
        )
    elif len(case.candidates) > 1:
        what = f"content differs (it matches each of releases {', '.join(case.candidates)})"
    else:
        what = "content differs"
    return f"reports {reported} but {what}: {few_names(files)}"


#: How to give an instance a version to be judged against (it reported none).
NO_VERSION_HINT = (
    "give one with the target (URL=VERSION), a version label or annotation, "
    "or a version endpoint (--version-endpoint PATH#POINTER)"
)


def _serves_other(case: Case, files: Sequence[str]) -> str:
    """Another release served whole: its files named as its, and apart from them the
    files the instance lacks (a release's file answering 404 is not the other's)."""
    check = case.release_check
    missing = sorted(set(check.missing)) if check is not None else []
    theirs = [p for p in files if p not in missing]
    said = f"serves {case.serves}'s content" + (f": {few_names(theirs)}" if theirs else "")
    if not missing:
        return said
    return f"{said}; {len(missing)} file(s) it lacks (404 or the fallback page): " + few_names(
        missing
    )


def _partial(case: Case) -> str:
    """What an instance matching another release, short of all its files, serves."""
    check = case.release_check
    missing = set(check.missing) if check is not None else set()
    absent = [p for p in case.partial_gaps if p in missing]
    unseen = [p for p in case.partial_gaps if p not in missing]
    parts = []
    if absent:
        parts.append(f"{len(absent)} fall back or are missing: {few_names(absent)}")
    if unseen:
        parts.append(f"{len(unseen)} were not compared: {few_names(unseen)}")
    return (
        f"every file compared is release {case.partial_of}'s, but {len(case.partial_gaps)} of "
        f"its files are not shown served ({'; '.join(parts)})"
    )


def choose_verdict(case: Case) -> tuple[Verdict, str]:
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
    unreadable = unreadable_reason(case.obs)
    if unreadable is not None:  # what its pages load is unknown: never judged clean
        return Verdict.INCONCLUSIVE, unreadable
    if FindingKind.SIGNAL_CONFLICT in kinds:
        conflict = next(f for f in case.findings if f.kind is FindingKind.SIGNAL_CONFLICT)
        return Verdict.SIGNAL_CONFLICT, conflict.message
    if cdn is not None and cdn.missing:
        return Verdict.CDN_MISSING, f"missing on the CDN: {few_names(sorted(set(cdn.missing)))}"
    if cdn is not None and cdn.differs:
        return Verdict.CDN_MISMATCH, f"differs on the CDN: {few_names(sorted(set(cdn.differs)))}"
    if case.expectation_missing:
        why = case.expectation.error if case.expectation is not None else None
        return Verdict.INCONCLUSIVE, f"no expected release for {case.version}: {why}"
    if case.failed:
        return Verdict.INCONCLUSIVE, f"{len(case.failed)} file(s) could not be fetched"
    if FindingKind.NO_CONSENSUS in kinds:
        files = sorted({f.path or "" for f in case.findings if f.kind is FindingKind.NO_CONSENSUS})
        return Verdict.INCONCLUSIVE, f"siblings disagree with no majority: {few_names(files)}"
    if cdn is not None and cdn.unchecked:
        return Verdict.INCONCLUSIVE, f"the CDN could not be checked: {cdn.why_unchecked}"
    if case.version is None:  # before "nothing fetched": without a version, nothing is
        return Verdict.INCONCLUSIVE, f"no reported version to judge against: {NO_VERSION_HINT}"
    if not case.obs.assets and case.obs.manifest_fetch is None:
        return Verdict.INCONCLUSIVE, _nothing_fetched(case, "nothing was fetched to judge by")
    if not case.consensus and case.coverage is not None and case.coverage.compared == 0:
        return Verdict.INCONCLUSIVE, f"no file of release {case.version} could be compared"
    if not _anything_served(case.obs):
        return Verdict.INCONCLUSIVE, _nothing_served(case)
    if case.consensus and (case.peers or 0) < 2:
        return (
            Verdict.INCONCLUSIVE,
            f"no release source and no sibling reports {case.version}: consensus needs "
            "at least two instances",
        )
    if case.consensus and (case.agreement is None or not case.agreement.compared):
        return Verdict.INCONCLUSIVE, nothing_compared(case.agreement)
    siblings = (case.peers or 1) - 1
    if case.consensus and case.agreement is not None and not case.agreement.agreeing:
        return Verdict.INCONCLUSIVE, (
            f"agrees with none of its {siblings} sibling(s) on {case.version}: each "
            "serves other bytes for, or lacks, a file it serves"
        )
    desired = case.desired
    if desired is not None and case.version != desired:
        claim = "" if case.consensus else f" ({_claim(case)})"
        return Verdict.DRIFT, f"consistent with {case.version}, desired is {desired}{claim}"
    if case.consensus and case.agreement is not None:
        agree = case.agreement.agreeing
        of = "its" if agree == siblings else f"{agree} of its"
        absent = case.agreement.absent_everywhere
        gaps = (  # what none of them serves was not compared: said, never agreed on
            f" ({len(absent)} file(s) answer 404 or the fallback page on every instance, "
            f"not compared: {few_names(list(absent), 3)})"
            if absent
            else ""
        )
        return (
            Verdict.CONSISTENT,
            f"agrees with {of} {siblings} sibling(s) on {case.version}{gaps}",
        )
    return Verdict.CONSISTENT, _claim(case)


def verdict_findings(case: Case, verdict: Verdict) -> list[Finding]:
    """The finding a verdict stands on when no finding made it: drift (every file
    right, the version not the desired one) is said as a finding too, for the gate and
    the report, once the ladder has chosen it."""
    if verdict is not Verdict.DRIFT:
        return []
    return [
        Finding(
            FindingKind.DRIFT,
            f"consistent with {case.version}, but the desired version is {case.desired}",
            instance=case.obs.instance.name,
            expected=case.desired,
            actual=case.version,
            severity=Severity.WARNING,
        )
    ]


def is_verified(case: Case, verdict: Verdict) -> bool:
    """The instance's own bytes were compared with something that vouches for them and
    found right: a readiness gate may open on this, and a quarantine be undone.

    A CDN verdict with no release to compare with is not verified: the instance and
    the CDN differ, and nobody can tell which one holds the wrong bytes.
    """
    if verdict not in MAY_BE_RIGHT or case.failed or case.names_only:
        return False
    if case.consensus:  # the bytes of at least one file shared with an agreeing sibling
        agreement = case.agreement
        return (case.peers or 0) >= 2 and agreement is not None and agreement.agreeing > 0
    return case.release is not None and case.coverage is not None and case.coverage.compared > 0


def names_only_verdict(case: Case, verdict: Verdict, reason: str) -> tuple[Verdict, str]:
    """With a release source that vouches for names only, never ``consistent``."""
    if case.names_only and verdict is Verdict.CONSISTENT:
        # names agree, and nobody vouched for the bytes: release 2's bytes under release
        # 1's hashed names look exactly like this, so it is never "consistent" (exit 0)
        verdict = Verdict.INCONCLUSIVE
    if case.names_only and NAMES_ONLY_NOTE not in reason:  # every result says so
        reason += f" ({NAMES_ONLY_NOTE})"
    return verdict, reason


def _anything_served(obs: Observation) -> bool:
    """Some content was served to judge by: a file answered 2xx, or a served manifest was
    read. Siblings whose manifest path all answer the same 403 page agree on nothing:
    the error page's bytes are not the content (found on nginx denying dotfiles)."""
    return obs.manifest is not None or any(f.ok for f in obs.assets.values())


def _nothing_served(case: Case) -> str:
    obs = case.obs
    if case.consensus and obs.assets:  # files were asked for, and none was served
        return nothing_compared(case.agreement)
    got = obs.manifest_fetch
    if got is not None and manifest_fell_back(obs):
        why = prefix.FALLBACK.removeprefix("answers ")
    elif got is None or got.ok:
        return _nothing_fetched(case, "nothing was fetched to judge by")
    else:
        why = got.error or f"HTTP {got.status}"
    at = obs.manifest_path or "the manifest"
    return _nothing_fetched(case, f"nothing was fetched to judge by: {at} answers {why}")


#: What to give when there is no release and no served manifest names the files.
NO_SOURCE_HINT = (
    "no release was given and no build manifest it serves names its files; give "
    "--release-manifest FILE (made by `artifactcheck manifest build DIST --version V`), "
    "or --manifest-path PATH where it serves its build manifest"
)


def _nothing_fetched(case: Case, head: str) -> str:
    """Nothing to judge by; without a release, also what to give."""
    if not case.consensus or case.obs.manifest is not None:
        return head
    return f"{head}: {NO_SOURCE_HINT}" if ":" not in head else f"{head}; {NO_SOURCE_HINT}"
