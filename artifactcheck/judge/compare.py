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

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime

from artifactcheck.judge import prefix
from artifactcheck.judge.answers import HashIndex, documents, is_off_host, page_shas, short
from artifactcheck.judge.cache import (
    JudgeCache,
    SampledOutRows,
    expectation_key,
)
from artifactcheck.judge.cdn_check import (
    DEFAULT_CDN_EXCLUDE,
    CdnCheck,
    CdnView,
    against_cdn,
    cdn_paths,
    located_on_cdn,
)
from artifactcheck.judge.codings import coding_views
from artifactcheck.judge.consensus import (
    Agreement,
    consensus_agreement,
    consensus_findings,
    consensus_groups,
    image_findings,
    serves_content,
    without_release,
)
from artifactcheck.judge.coverage import (
    SAMPLED_OUT,
    coverage_findings,
    release_coverage,
    served_coverage,
)
from artifactcheck.judge.ladder import (
    CONTENT_KINDS,
    NO_VERSION_HINT,
    Case,
    choose_verdict,
    is_verified,
    names_only_verdict,
    verdict_findings,
)
from artifactcheck.judge.order import version_key
from artifactcheck.judge.page_check import page_findings
from artifactcheck.judge.prefix import FALLBACK
from artifactcheck.judge.release_check import (
    NAMES_ONLY_NOTE,
    ReleaseCheck,
    against_release,
    integrity_findings,
)
from artifactcheck.judge.served_check import (
    NO_MANIFEST_NOTE,
    failed_fetches,
    manifest_absent,
    observed_fingerprint,
    reported_version,
    served_manifest_findings,
    signal_findings,
    tls_findings,
    unfetched,
)
from artifactcheck.model.errors import ErrorKind
from artifactcheck.model.records import replace
from artifactcheck.model.values import (
    Expectation,
    Finding,
    FindingKind,
    InstanceResult,
    Manifest,
    Observation,
    Severity,
    Verdict,
)
from artifactcheck.model.versions import version_problem

#: What other packages and the tests import from here: the judge's one front door.
__all__ = [
    "CONTENT_KINDS",
    "Agreement",
    "CdnView",
    "DEFAULT_CDN_EXCLUDE",
    "FALLBACK",
    "HashIndex",
    "JudgeCache",
    "NAMES_ONLY_NOTE",
    "NO_MANIFEST_NOTE",
    "NO_VERSION_HINT",
    "SAMPLED_OUT",
    "SampledOutRows",
    "cdn_paths",
    "compare_fleet",
    "consensus_agreement",
    "consensus_findings",
    "image_findings",
    "is_off_host",
    "judge_instance",
    "observed_fingerprint",
    "reported_version",
    "serves_content",
    "tls_findings",
    "version_key",
]


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
    findings = signal_findings(obs.instance, obs.endpoint_version)
    if obs.tls is not None and now is not None:
        findings += tls_findings(
            obs.tls, now=now, warn_days=tls_warn_days, instance=obs.instance.name
        )
    findings += served_manifest_findings(obs)
    findings += integrity_findings(obs)
    findings += page_findings(obs)
    findings += failed_fetches(obs, failed)
    return findings


def _judge_release(case: Case, index: HashIndex) -> None:
    """Compare with the expected release, when there is one; name another it matches."""
    exp, version = case.expectation, case.version
    if exp is None or version is None or case.invalid_version is not None:
        return
    if exp.manifest is None:
        case.add(
            FindingKind.EXPECTATION_UNAVAILABLE,
            f"release {version} is unknown: {exp.error or 'no manifest'}",
            severity=Severity.WARNING,
        )
        return
    case.release = exp.manifest
    if exp.stale:
        case.add(
            FindingKind.EXPECTATION_STALE,
            f"release {version} from the last known good copy ({exp.error})",
            severity=Severity.INFO,
        )
    pages = page_shas(case.obs, exp.manifest)
    check = against_release(
        case.obs, exp.manifest, version, pages, index.hashes_of(version, exp.manifest)
    )
    case.release_check = check
    case.findings += check.findings
    if check.names_only:
        case.add(
            FindingKind.NAMES_ONLY,
            f"release {version} carries no content hash for {len(check.names_only)} "
            "file(s): their names were compared, not their bytes",
            path=check.names_only[0],
            severity=Severity.WARNING,
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
            case.add(
                FindingKind.SERVES_OTHER_RELEASE,
                f"reports {version}, serves {case.serves}",
                expected=version,
                actual=case.serves,
            )


def _not_shown(obs: Observation, other: Manifest, check: ReleaseCheck) -> list[str]:
    """The files of ``other`` the instance was not seen serving with ``other``'s bytes:
    absent (404, the fallback page), other bytes, or never fetched."""
    docs = documents(obs)
    pages = page_shas(obs, other)
    gaps = []
    for path, entry in sorted(other.files.items()):
        got = docs.get(path)
        want = entry.hashes.get("sha256")
        if got is None or path in check.missing or not prefix.is_found(got, path, pages):
            gaps.append(path)
        elif want is not None and got.sha256 != want:
            gaps.append(path)
    return gaps


def _judge_layout(case: Case) -> None:
    """Where the release's files were looked for: a detected prefix is said; none of
    them found there is the wrong place (inconclusive, naming the prefix to use), not
    a mismatch, unless what is served there is another build of the same layout."""
    layout = case.obs.layout
    if layout.detected:
        case.add(
            FindingKind.LAYOUT,
            prefix.detected_message(layout),
            path=prefix.shown_prefix(layout.prefix),
            severity=Severity.WARNING,
        )
    check, release = case.release_check, case.release
    if check is None or release is None:
        return
    absent = [p for p in check.missing if p in release.files]
    found = [p for p in check.compared if p in release.files and p not in check.missing]
    if found or not absent or (len(absent) < 2 and layout.found_at is None):
        return  # one file absent is evidence about that file, not about where all are
    if case.obs.manifest_error is not None and not manifest_absent(case.obs):
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
    case.add(
        FindingKind.LAYOUT,
        case.misplaced,
        path=prefix.shown_prefix(layout.prefix),
        expected=prefix.shown_prefix(layout.found_at) if layout.found_at is not None else None,
        severity=Severity.WARNING,
    )


def _one_answer(
    obs: Observation, release: Manifest, index: HashIndex
) -> tuple[str, int | None] | None:
    """The one body every release file asked for answered, the entry page among them,
    where the release holds different files and no known release holds that body:
    (its sha256, its size); None otherwise.

    Caddy answers a request for a site it does not serve (an instance reached by IP, its
    site named by host) with 200 and an empty body, whatever the path; a parked or
    catch-all page does the same. That is no build of the site, so it is never read as
    the release's files holding other bytes.
    """
    answers = [(p, f) for p, f in documents(obs).items() if p in release.files]
    if len(answers) < 2 or not any(prefix.page_path(p) for p, _ in answers):
        return None
    bodies = {f.sha256 if f.ok else None for _, f in answers}  # a 404 among them: judged
    wanted = {release.files[p].hashes.get("sha256") for p, _ in answers}
    sha = bodies.pop() if len(bodies) == 1 else None
    if sha is None or len(wanted) < 2 or sha in wanted or sha in index.by_hash:
        return None  # another release's page standing in for every file is the site's
    return sha, answers[0][1].size


def _judge_one_answer(case: Case, index: HashIndex) -> None:
    """Every file answering the same body that is none of them: the target is not the
    site (a wrong Host header or base URL), inconclusive naming both, not a mismatch."""
    check, release = case.release_check, case.release
    if check is None or release is None or case.misplaced is not None:
        return
    one = _one_answer(case.obs, release, index)
    if one is None:
        return
    sha, size = one
    case.misplaced = (
        f"every file of release {case.version} asked for answers the same {size}-byte body "
        f"({short(sha)}), the entry page included: not the site's content; a wrong Host "
        "header (--host-header NAME) or base URL?"
    )
    own = {id(f) for f in check.findings}
    kept = next((f for f in check.findings if f.kind in CONTENT_KINDS), None)
    case.misplaced_file = kept
    case.findings = [
        f for f in case.findings if f is kept or not (id(f) in own and f.kind in CONTENT_KINDS)
    ]
    case.serves, case.partial_of, case.mix_of, case.candidates = None, None, None, ()
    case.findings = [f for f in case.findings if f.kind is not FindingKind.SERVES_OTHER_RELEASE]
    case.add(FindingKind.LAYOUT, case.misplaced, severity=Severity.WARNING)


def _judge_cdn(case: Case, cdn: CdnView | None) -> None:
    """The CDN's answers: for what the instance served, and for what its manifest
    references on the CDN (fetched there, whether or not the CDN view has it)."""
    if (cdn is None and not case.obs.on_cdn) or case.misplaced is not None:
        return  # misplaced: what the CDN must hold is unknown until the prefix is right
    pages = page_shas(case.obs, case.release)
    if cdn is not None:  # the CDN's own entry page is what its fallback answers with
        pages |= {
            f.sha256 for p, f in cdn.assets.items() if prefix.page_path(p) and f.ok and f.sha256
        }
        check = against_cdn(case.obs, cdn, case.release, case.version, pages)
    else:
        check = CdnCheck()
    located = located_on_cdn(case.obs, check, case.release, case.version, pages)
    case.cdn_check = check
    case.findings += located
    case.findings += check.findings
    if check.unchecked:
        case.add(
            FindingKind.OBSERVATION_FAILED,
            f"CDN could not be checked for {len(check.unchecked)} file(s): {check.why_unchecked}",
            path=check.unchecked[0],
            severity=Severity.WARNING,
        )


def _judge_coverage(case: Case) -> None:
    if case.release is not None and case.release_check is not None:
        on_cdn = case.cdn_check.compared if case.cdn_check is not None else set()
        case.coverage = release_coverage(
            case.obs, case.release, case.release_check, on_cdn, case.shared_rows
        )
        case.findings += coverage_findings(case.obs, case.version or "", case.coverage)
    else:
        case.coverage = served_coverage(case.obs)


def _judge_version(case: Case) -> None:
    """No version reported, or one no release may be looked up for."""
    version = case.version
    if version is None:
        case.add(
            FindingKind.NO_VERSION,
            "the instance reports no version",
            severity=Severity.WARNING,
        )
        return
    case.invalid_version = version_problem(version)
    if case.invalid_version is not None:
        case.add(
            FindingKind.INVALID_VERSION,
            f"the reported version {case.invalid_version}: no release is looked up for it",
            actual=version[:200] if version else None,
        )


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
    agreement: Agreement | None = None,
) -> InstanceResult:
    """The verdict for one instance from its observation and what it should serve.

    ``expectation=None`` is consensus mode: ``peers`` is how many observed instances
    (this one included) report the same version; fewer than two is no consensus;
    ``agreement`` what the others share with it (:func:`consensus_agreement`); without
    one, nothing was compared with a sibling and the instance is never ``consistent``.
    ``shared_rows`` lets instances judged together share equal coverage rows.
    """
    version = reported_version(obs)
    if obs.error is not None:
        return _not_observed(obs, version, now, tls_warn_days)
    failed = unfetched(obs)
    case = Case(
        obs=obs,
        version=version,
        findings=list(extra) + _about_the_instance(obs, failed, now, tls_warn_days),
        failed=failed,
        expectation=expectation,
        peers=peers,
        agreement=agreement,
        desired=desired_version,
        shared_rows=shared_rows,
    )
    if case.consensus:
        case.findings = without_release(case.findings, obs)
    _judge_version(case)
    _judge_release(case, index)
    _judge_layout(case)
    _judge_one_answer(case, index)
    _judge_cdn(case, cdn)
    _judge_coverage(case)
    verdict, reason = choose_verdict(case)
    case.findings += verdict_findings(case, verdict)
    verdict, reason = names_only_verdict(case, verdict, reason)
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
        content_verified=is_verified(case, verdict),
        unconfirmed=_unfetched_gaps(case) if verdict is Verdict.MISMATCH else (),
    )


def _unfetched_gaps(case: Case) -> tuple[str, ...]:
    """The other release's files that stand between "partial" and "serves X" only
    because nobody asked for them (no served manifest lists them, the reported
    release does not hold them): the pipeline's one confirmation round fetches them."""
    if case.partial_of is None:
        return ()
    docs = documents(case.obs)
    return tuple(p for p in case.partial_gaps if p not in docs)


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
    agreements: dict[str, Agreement] = {}
    if expectations is None:
        for view in coding_views(observations):  # siblings agree in every coding or not
            for name, found in consensus_findings(view).items():
                extra[name] += [f for f in found if f not in extra[name]]
            for name, seen in consensus_agreement(view).items():
                kept = agreements.get(name)  # the least agreement over the codings
                if kept is None or seen.agreeing < kept.agreeing:
                    agreements[name] = seen
        sizes = {v: len(m) for v, m in consensus_groups(observations).items()}
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
        agreement = agreements.get(name) if expectations is None else None
        key: tuple[object, ...] = ()
        if cache is not None:
            # the only use of ``now``: a certificate's expiry findings
            tls = None
            if obs.tls is not None and now is not None:
                tls = tuple(tls_findings(obs.tls, now=now, warn_days=tls_warn_days, instance=name))
            key = (expectation_key(expectation), desired_version, tls_warn_days)
            key += (peers, agreement, fleet, tls)
            hit = cache.reused(obs, key, index, cdn)
            if hit is not None:
                results.append(hit)
                continue
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
            agreement=agreement,
        )
        if cache is not None:
            cache.keep(obs, expectation, key, index, cdn, result)
        results.append(result)
    return results
