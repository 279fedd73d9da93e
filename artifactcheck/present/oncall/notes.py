"""Notes under the views: what the check could not see (a sample, files not compared)."""

from __future__ import annotations

from collections.abc import Iterable

from artifactcheck.model.values import (
    FindingKind,
    InstanceResult,
    Report,
    Verdict,
)


def _sampled_files(report: Report) -> str:
    """ " in the files sampled (...)" when only some files of each instance were fetched:
    agreement on a sample is not agreement on the content."""
    sample = report.sample
    if sample is None or sample.assets_per_instance is None:
        return ""
    return (
        f" in the files sampled ({sample.assets_per_instance} per instance besides entry "
        f"points, seed {sample.seed})"
    )


#: How a fleet-wide finding is introduced among the notes (the rest are not notes).
_FLEET_NOTE = {
    FindingKind.OBSERVATION_FAILED: "could not check",
    FindingKind.EXPECTATION_UNAVAILABLE: "could not check against the release",
    FindingKind.EXPECTATION_STALE: "checked against an old copy",
    FindingKind.SUSPECT_EXPECTATION: "the expectation itself is suspect",
    FindingKind.RELEASE_CHANGED: "the release itself changed",
    FindingKind.RELEASE_UNTRUSTED: "could not trust the release",
}


def _fleet_notes(report: Report, *, release_source: str | None) -> list[str]:
    """'could not check' notes from the run's fleet-wide findings and configuration.

    A missing CDN or release source is said, not silently skipped: a quiet check that
    checked nothing is how a tired human is misled.
    """
    notes: list[str] = []
    sample = report.sample
    if sample is not None and sample.instances_checked < sample.instances_total:
        notes.append(
            f"could not check every instance: {sample.instances_checked} of "
            f"{sample.instances_total} sampled (seed {sample.seed}; repeat with --seed)"
        )
    if sample is not None and sample.assets_per_instance is not None:
        notes.append(
            f"could not check every file: {sample.assets_per_instance} per instance besides "
            f"entry points were sampled (seed {sample.seed}; repeat with --seed)"
        )
    if report.cdn is None:
        notes.append("could not check the CDN: none configured (give --cdn)")
    if release_source is None:
        notes.append(
            "could not check against a release: no release source configured, so "
            "instances are compared with their siblings only (consensus)"
        )
    notes += [
        f"{_FLEET_NOTE[f.kind]}: {f.message}" for f in report.findings if f.kind in _FLEET_NOTE
    ]
    return notes


def _instance_notes(result: InstanceResult) -> list[str]:
    """'could not check' notes about the target itself (files, endpoint, reachability)."""
    notes = []
    for f in result.findings:
        if f.kind is FindingKind.OBSERVATION_FAILED:
            notes.append(f"could not check: {f.message}")
    obs = result.observation
    if obs is not None and obs.endpoint_error:
        notes.append(f"could not check the version endpoint: {obs.endpoint_error}")
    if result.verdict is Verdict.UNREACHABLE:
        notes.append(f"could not check the instance at all: {result.reason}")
    return notes


def _dedupe(items: Iterable[str]) -> tuple[str, ...]:
    """Keep the first of each note, in order (a fleet note can repeat per instance)."""
    return tuple(dict.fromkeys(items))
