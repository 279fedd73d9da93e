"""Pure comparison: observations against expectations, the CDN and siblings.

This is the heart of artifactcheck and it does no I/O and no logging, so every rule
can be pinned with a table of cases. The input is what was fetched (``Observation``),
the expected releases by version (``Expectation``), what the CDN answered for each
path, and the desired version; the output is one ``InstanceResult`` per instance and
the fleet-wide findings.

"Could not observe" and "observed something wrong" are kept apart: a timeout on an
asset is never evidence of a mismatch, it can only make a verdict ``inconclusive``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .manifests import verify_integrity
from .models import (
    CertInfo,
    Expectation,
    Fetched,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Manifest,
    Observation,
    Severity,
    Verdict,
)

MISSING_STATUSES = frozenset({404, 410})
CDN_MISSING_STATUSES = frozenset({403, 404, 410})


@dataclass(frozen=True, slots=True)
class CdnView:
    """What the CDN answered for each path; ``error`` when it could not be reached."""

    base_url: str
    assets: Mapping[str, Fetched] = field(default_factory=dict)
    error: str | None = None
    tls: CertInfo | None = None


class HashIndex:
    """sha256 -> the known releases (and paths) that contain those bytes."""

    def __init__(self, releases: Mapping[str, Manifest]) -> None:
        self.by_hash: dict[str, set[str]] = defaultdict(set)
        self.versions = tuple(releases)
        for version, manifest in releases.items():
            for entry in manifest.files.values():
                sha = entry.hashes.get("sha256")
                if sha:
                    self.by_hash[sha].add(version)

    def release_of(self, hashes: Iterable[str], *, exclude: str | None) -> str | None:
        """The single other release that contains every given hash, if exactly one does."""
        candidates: set[str] | None = None
        for sha in hashes:
            found = self.by_hash.get(sha, set()) - {exclude}
            candidates = found if candidates is None else candidates & found
            if not candidates:
                return None
        if not candidates:
            return None
        if len(candidates) == 1:
            return next(iter(candidates))
        return sorted(candidates)[-1]


def _unobserved(got: Fetched) -> bool:
    """No usable answer: an error, or a status that says nothing about the content."""
    if got.error is not None or got.status is None:
        return True
    return not (200 <= got.status < 300) and got.status not in MISSING_STATUSES


def _names(paths: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _against_release(
    obs: Observation, release: Manifest, version: str
) -> tuple[list[Finding], list[str]]:
    """Findings from comparing served content with one release; also differing hashes."""
    name = obs.instance.name
    findings: list[Finding] = []
    differing_hashes: list[str] = []
    fetched: dict[str, Fetched] = dict(obs.assets)
    if obs.manifest_fetch is not None and obs.manifest_fetch.status is not None:
        fetched.setdefault(obs.manifest_path, obs.manifest_fetch)
    for path in sorted(fetched):
        got = fetched[path]
        expected = release.files.get(path)
        if got.error is not None or got.status is None:
            continue
        if got.status in MISSING_STATUSES:
            if expected is not None:
                findings.append(
                    Finding(
                        FindingKind.FILE_MISSING,
                        f"{path} is in release {version} but the instance answers {got.status}",
                        instance=name,
                        path=path,
                        expected=expected.hashes.get("sha256"),
                        actual=str(got.status),
                    )
                )
            elif path in (obs.manifest.files if obs.manifest else {}):
                findings.append(
                    Finding(
                        FindingKind.FILE_MISSING,
                        f"{path} is listed by the served manifest but answers {got.status}",
                        instance=name,
                        path=path,
                        actual=str(got.status),
                    )
                )
            continue
        if not got.ok or got.sha256 is None:
            continue
        if expected is None:
            if path == obs.manifest_path:
                continue  # a release manifest cannot list itself (e.g. a served artifactcheck.json)
            findings.append(
                Finding(
                    FindingKind.FILE_UNEXPECTED,
                    f"{path} is served but is not part of release {version}",
                    instance=name,
                    path=path,
                    actual=got.sha256,
                )
            )
            differing_hashes.append(got.sha256)
            continue
        want = expected.hashes.get("sha256")
        if want is not None and want != got.sha256:
            size_note = ""
            if expected.size is not None and got.size is not None and expected.size == got.size:
                size_note = " (same size)"
            findings.append(
                Finding(
                    FindingKind.CONTENT_DIFFERS,
                    f"{path} differs from release {version}{size_note}",
                    instance=name,
                    path=path,
                    expected=want,
                    actual=got.sha256,
                )
            )
            differing_hashes.append(got.sha256)
    if obs.manifest is not None:
        unexpected = sorted(
            p for p in obs.manifest.files if p not in release.files and p not in fetched
        )
        if unexpected:
            findings.append(
                Finding(
                    FindingKind.FILE_UNEXPECTED,
                    f"served manifest lists {len(unexpected)} file(s) not in release "
                    f"{version}: {_names(unexpected)}",
                    instance=name,
                    path=unexpected[0],
                )
            )
    return findings, differing_hashes


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


def _against_cdn(obs: Observation, cdn: CdnView) -> tuple[list[Finding], list[str]]:
    """Every asset the instance served must exist on the CDN with the same bytes."""
    findings: list[Finding] = []
    unchecked: list[str] = []
    for path, got in sorted(obs.assets.items()):
        if not got.ok:
            continue
        on_cdn = cdn.assets.get(path)
        if on_cdn is None:
            continue
        if on_cdn.error is not None or on_cdn.status is None:
            unchecked.append(path)
        elif on_cdn.status in CDN_MISSING_STATUSES:
            findings.append(
                Finding(
                    FindingKind.CDN_MISSING,
                    f"{path} is served by the instance but the CDN answers {on_cdn.status}",
                    instance=obs.instance.name,
                    path=path,
                    expected=got.sha256,
                    actual=str(on_cdn.status),
                )
            )
        elif not on_cdn.ok:
            unchecked.append(path)
        elif on_cdn.sha256 != got.sha256:
            findings.append(
                Finding(
                    FindingKind.CDN_DIFFERS,
                    f"{path} on the CDN differs from what the instance serves",
                    instance=obs.instance.name,
                    path=path,
                    expected=got.sha256,
                    actual=on_cdn.sha256,
                )
            )
    return findings, unchecked


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


CONTENT_KINDS = frozenset(
    {
        FindingKind.CONTENT_DIFFERS,
        FindingKind.FILE_MISSING,
        FindingKind.FILE_UNEXPECTED,
        FindingKind.INTEGRITY_FAILED,
        FindingKind.MANIFEST_INVALID,
        FindingKind.MINORITY_CONTENT,
        FindingKind.UNSAFE_REFERENCE,
    }
)


def reported_version(obs: Observation) -> str | None:
    """The version the instance is judged against: its first signal, else /version."""
    return obs.instance.reported_version or obs.endpoint_version


def observed_fingerprint(obs: Observation) -> str | None:
    """A short digest of what was served (manifest bytes and sampled asset hashes)."""
    import hashlib

    parts = []
    if obs.manifest_fetch is not None and obs.manifest_fetch.sha256:
        parts.append(f"{obs.manifest_path}={obs.manifest_fetch.sha256}")
    for path in sorted(obs.assets):
        got = obs.assets[path]
        parts.append(f"{path}={got.sha256 if got.ok else got.status}")
    if not parts:
        return None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


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
) -> InstanceResult:
    """The verdict for one instance from its observation and what it should serve."""
    inst = obs.instance
    version = reported_version(obs)
    fp = observed_fingerprint(obs)

    def result(
        verdict: Verdict, reason: str, findings: list[Finding], serves: str | None = None
    ) -> InstanceResult:
        return InstanceResult(
            instance=inst,
            verdict=verdict,
            reason=reason,
            findings=tuple(findings),
            reported_version=version,
            serves_version=serves,
            fingerprint=fp,
            observation=obs,
        )

    if obs.error is not None:
        verdict = Verdict.INCONCLUSIVE if obs.error_kind == "status" else Verdict.UNREACHABLE
        unseen = [Finding(FindingKind.UNREACHABLE, obs.error, instance=inst.name)]
        if obs.tls is not None and now is not None:  # e.g. it failed verification: expired
            unseen += tls_findings(obs.tls, now=now, warn_days=tls_warn_days, instance=inst.name)
        return result(verdict, f"could not be observed: {obs.error}", unseen)

    findings: list[Finding] = list(extra)
    findings += _signals(inst, obs.endpoint_version)
    if obs.tls is not None and now is not None:
        findings += tls_findings(obs.tls, now=now, warn_days=tls_warn_days, instance=inst.name)
    if obs.manifest_error is not None:
        findings.append(
            Finding(
                FindingKind.MANIFEST_INVALID,
                f"served manifest {obs.manifest_path} is unusable: {obs.manifest_error}",
                instance=inst.name,
                path=obs.manifest_path,
            )
        )
    for raw in obs.unsafe_paths:
        findings.append(
            Finding(
                FindingKind.UNSAFE_REFERENCE,
                f"served manifest refers outside the instance: {raw!r} (not fetched)",
                instance=inst.name,
                path=raw,
                severity=Severity.WARNING,
            )
        )
    findings += _integrity(obs)

    failed = sorted(p for p, f in obs.assets.items() if _unobserved(f))
    if failed:
        first = obs.assets[failed[0]]
        findings.append(
            Finding(
                FindingKind.OBSERVATION_FAILED,
                f"{len(failed)} file(s) could not be fetched: {_names(failed)} "
                f"({first.error or f'HTTP {first.status}'})",
                instance=inst.name,
                path=failed[0],
                severity=Severity.WARNING,
            )
        )

    serves: str | None = None
    expectation_missing = False
    if version is None:
        findings.append(
            Finding(
                FindingKind.NO_VERSION,
                "the instance reports no version",
                instance=inst.name,
                severity=Severity.WARNING,
            )
        )
    elif expectation is not None:
        if expectation.manifest is None:
            expectation_missing = True
            findings.append(
                Finding(
                    FindingKind.EXPECTATION_UNAVAILABLE,
                    f"release {version} is unknown: {expectation.error or 'no manifest'}",
                    instance=inst.name,
                    severity=Severity.WARNING,
                )
            )
        else:
            if expectation.stale:
                findings.append(
                    Finding(
                        FindingKind.EXPECTATION_STALE,
                        f"release {version} from the last known good copy ({expectation.error})",
                        instance=inst.name,
                        severity=Severity.INFO,
                    )
                )
            release_findings, differing = _against_release(obs, expectation.manifest, version)
            findings += release_findings
            if differing:
                serves = index.release_of(differing, exclude=version)
                if serves is not None:
                    findings.append(
                        Finding(
                            FindingKind.SERVES_OTHER_RELEASE,
                            f"reports {version}, serves {serves}",
                            instance=inst.name,
                            expected=version,
                            actual=serves,
                        )
                    )

    cdn_findings: list[Finding] = []
    cdn_unchecked: list[str] = []
    if cdn is not None:
        if cdn.error is not None:
            cdn_unchecked = sorted(p for p, f in obs.assets.items() if f.ok)
        else:
            cdn_findings, cdn_unchecked = _against_cdn(obs, cdn)
        findings += cdn_findings
        if cdn_unchecked:
            why = cdn.error or next(
                (cdn.assets[p].error or f"status {cdn.assets[p].status}")
                for p in cdn_unchecked
                if p in cdn.assets
            )
            findings.append(
                Finding(
                    FindingKind.OBSERVATION_FAILED,
                    f"CDN could not be checked for {len(cdn_unchecked)} file(s): {why}",
                    instance=inst.name,
                    path=cdn_unchecked[0],
                    severity=Severity.WARNING,
                )
            )

    kinds = {f.kind for f in findings}
    content = [f for f in findings if f.kind in CONTENT_KINDS]
    if content:
        files = sorted({f.path for f in content if f.path})
        what = f"serves {serves}'s content" if serves else "content differs"
        reason = f"reports {version or '(no version)'} but {what}: {_names(files)}"
        return result(Verdict.MISMATCH, reason, findings, serves)
    if FindingKind.SIGNAL_CONFLICT in kinds:
        conflict = next(f for f in findings if f.kind is FindingKind.SIGNAL_CONFLICT)
        return result(Verdict.SIGNAL_CONFLICT, conflict.message, findings)
    if FindingKind.CDN_MISSING in kinds:
        files = sorted({f.path or "" for f in cdn_findings if f.kind is FindingKind.CDN_MISSING})
        return result(Verdict.CDN_MISSING, f"missing on the CDN: {_names(files)}", findings)
    if FindingKind.CDN_DIFFERS in kinds:
        files = sorted({f.path or "" for f in cdn_findings})
        return result(Verdict.CDN_MISMATCH, f"differs on the CDN: {_names(files)}", findings)
    if expectation_missing:
        why_missing = expectation.error if expectation is not None else None
        return result(
            Verdict.INCONCLUSIVE, f"no expected release for {version}: {why_missing}", findings
        )
    if failed:
        return result(Verdict.INCONCLUSIVE, f"{len(failed)} file(s) could not be fetched", findings)
    if FindingKind.NO_CONSENSUS in kinds:
        files = sorted({f.path or "" for f in findings if f.kind is FindingKind.NO_CONSENSUS})
        return result(
            Verdict.INCONCLUSIVE, f"siblings disagree with no majority: {_names(files)}", findings
        )
    if cdn_unchecked:
        return result(
            Verdict.INCONCLUSIVE,
            f"the CDN could not be checked: {cdn.error if cdn else ''}".rstrip(": "),
            findings,
        )
    if not obs.assets and obs.manifest_fetch is None:
        return result(Verdict.INCONCLUSIVE, "nothing was fetched to judge by", findings)
    if version is None:
        return result(Verdict.INCONCLUSIVE, "no reported version to judge against", findings)
    if desired_version is not None and version != desired_version:
        findings.append(
            Finding(
                FindingKind.DRIFT,
                f"consistent with {version}, but the desired version is {desired_version}",
                instance=inst.name,
                expected=desired_version,
                actual=version,
                severity=Severity.WARNING,
            )
        )
        return result(Verdict.DRIFT, f"serves {version}, desired is {desired_version}", findings)
    if expectation is None:
        return result(Verdict.CONSISTENT, f"agrees with its siblings on {version}", findings)
    return result(Verdict.CONSISTENT, f"serves release {version}", findings)


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


def consensus_findings(observations: Sequence[Observation]) -> dict[str, list[Finding]]:
    """Siblings reporting the same version must serve the same bytes; minorities are suspect.

    For each version and path, the strict majority hash among the instances that fetched
    the path is taken as the truth; an instance holding another hash gets a
    ``minority-content`` finding. Without a strict majority (a tie), every instance gets
    a warning instead: the disagreement is real but nobody can be blamed.
    """
    out: dict[str, list[Finding]] = defaultdict(list)
    groups: dict[str, list[Observation]] = defaultdict(list)
    for obs in observations:
        version = reported_version(obs)
        if obs.error is None and version is not None:
            groups[version].append(obs)
    for version, members in groups.items():
        by_path: dict[str, dict[str, str]] = defaultdict(dict)
        for obs in members:
            docs = dict(obs.assets)
            if obs.manifest_fetch is not None:
                docs.setdefault(obs.manifest_path, obs.manifest_fetch)
            for path, got in docs.items():
                if got.ok and got.sha256:
                    by_path[path][obs.instance.name] = got.sha256
        for path in sorted(by_path):
            held = by_path[path]
            if len(set(held.values())) <= 1:
                continue
            (top, top_count), *rest = Counter(held.values()).most_common()
            if top_count * 2 > len(held):
                for name, sha in held.items():
                    if sha != top:
                        out[name].append(
                            Finding(
                                FindingKind.MINORITY_CONTENT,
                                f"{path} differs from {top_count} of {len(held)} siblings "
                                f"reporting {version}",
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


def compare_fleet(
    observations: Sequence[Observation],
    *,
    expectations: Mapping[str, Expectation] | None,
    known_releases: Mapping[str, Manifest] | None = None,
    cdn: CdnView | None = None,
    desired_version: str | None = None,
    now: datetime | None = None,
    tls_warn_days: float = 14.0,
) -> list[InstanceResult]:
    """Judge every instance; ``expectations=None`` means consensus mode (no release source)."""
    releases = dict(known_releases or {})
    for loaded_version, exp in (expectations or {}).items():
        if exp.manifest is not None:
            releases.setdefault(loaded_version, exp.manifest)
    index = HashIndex(releases)
    extra: dict[str, list[Finding]] = defaultdict(list)
    for name, found in image_findings([o.instance for o in observations]).items():
        extra[name] += found
    if expectations is None:
        for name, found in consensus_findings(observations).items():
            extra[name] += found
    results = []
    for obs in observations:
        version = reported_version(obs)
        expectation = None
        if expectations is not None and version is not None:
            expectation = expectations.get(version) or Expectation(
                version=version, manifest=None, error="not loaded"
            )
        results.append(
            judge_instance(
                obs,
                expectation=expectation,
                index=index,
                cdn=cdn,
                desired_version=desired_version,
                extra=extra.get(obs.instance.name, ()),
                now=now,
                tls_warn_days=tls_warn_days,
            )
        )
    return results
