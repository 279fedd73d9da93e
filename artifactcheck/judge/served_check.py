"""What is judged about an instance before any release: its version signals, its served
manifest, its certificate, and the files that could not be fetched.

These need no expectation, so they hold in consensus mode as much as against a release.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta

from artifactcheck.judge.answers import (
    few_names,
    is_off_host,
    unobserved,
    warn_files,
    why_unobserved,
)
from artifactcheck.judge.prefix import FALLBACK, is_fallback
from artifactcheck.judge.statuses import NOT_HERE
from artifactcheck.model.values import (
    CertInfo,
    Finding,
    FindingKind,
    Instance,
    Observation,
    Severity,
)

#: Next.js, SvelteKit, Astro static output: no manifest format, the release's list is all.
NO_MANIFEST_NOTE = "no served manifest: judged by the release's file list"


def signal_findings(instance: Instance, endpoint_version: str | None) -> list[Finding]:
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


def manifest_absent(obs: Observation) -> bool:
    """The served manifest was looked for and is not there (404/403/410, or no name)."""
    if obs.manifest is not None:
        return False
    if obs.manifest_fetch is None:
        return obs.manifest_error is not None
    return obs.manifest_fetch.status in NOT_HERE or manifest_fell_back(obs)


def manifest_fell_back(obs: Observation) -> bool:
    """The manifest's path answered the site's HTML page (an SPA's ``try_files``,
    lighttpd's ``error-handler-404``): no manifest there, as a 404 says, never an
    unusable one (a wrong ``--manifest-path`` is no evidence against the content)."""
    got = obs.manifest_fetch
    return got is not None and obs.manifest is None and is_fallback(got, obs.manifest_path, ())


def served_manifest_findings(obs: Observation) -> list[Finding]:
    """The served manifest: unusable (evidence), missing (a finding, never silent), or
    references that were not fetched (off-host: not compared; traversal: evidence)."""
    name = obs.instance.name
    findings: list[Finding] = []
    if manifest_absent(obs):
        status = obs.manifest_fetch.status if obs.manifest_fetch is not None else None
        if manifest_fell_back(obs):  # the site's page where the manifest was asked for
            detail, said = "", f"served manifest {obs.manifest_path} {FALLBACK}"
        elif status is not None:
            detail = f" ({obs.manifest_error})" if obs.manifest_error else ""
            said = f"served manifest {obs.manifest_path} answers {status}"
        else:  # what the names probed answered, or why the one found is not read: one line
            detail, said = "", obs.manifest_error or "no served manifest"
        findings.append(
            Finding(
                FindingKind.MANIFEST_MISSING,
                f"{said}: judged by the release's file list{detail}",
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
                f"were not fetched, so not compared: {few_names(elsewhere)}",
                instance=name,
                path=elsewhere[0],
                severity=Severity.WARNING,
            )
        )
    return findings


def unfetched(obs: Observation) -> list[str]:
    return sorted(p for p, f in obs.assets.items() if unobserved(f))


def failed_fetches(obs: Observation, failed: Sequence[str]) -> list[Finding]:
    if not failed:
        return []
    first = obs.assets[failed[0]]
    return warn_files(
        FindingKind.OBSERVATION_FAILED,
        f"{len(failed)} file(s) could not be fetched: {few_names(failed)} "
        f"({why_unobserved(first)})",
        obs,
        failed,
    )


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
