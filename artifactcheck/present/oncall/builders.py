"""The views assembled: one instance investigated (:func:`build_investigation`) and the fleet
grouped by what it serves (:func:`build_fleet`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime

from artifactcheck.judge.order import natural
from artifactcheck.model.names import DEFAULT_CONDITION_TYPE
from artifactcheck.model.values import (
    Fetched,
    InstanceResult,
    Manifest,
    Report,
    Verdict,
)
from artifactcheck.present.oncall.assets import asset_rows, manifest_comparison
from artifactcheck.present.oncall.notes import (
    _dedupe,
    _fleet_notes,
    _instance_notes,
    _sampled_files,
)
from artifactcheck.present.oncall.pods import pod_view
from artifactcheck.present.oncall.siblings import siblings
from artifactcheck.present.oncall.signals import signal_rows
from artifactcheck.present.oncall.summary import summarise
from artifactcheck.present.oncall.view_models import (
    FleetGroup,
    FleetView,
    Investigation,
    PodEvent,
    TlsView,
)
from artifactcheck.present.oncall.words import _verb, noun_for


def build_investigation(
    report: Report,
    target: str,
    *,
    releases: Mapping[str, Manifest],
    cdn_assets: Mapping[str, Fetched] | None = None,
    tls: Sequence[TlsView] = (),
    events: Sequence[PodEvent] = (),
    events_note: str | None = None,
    condition_type: str = DEFAULT_CONDITION_TYPE,
    release_source: str | None = None,
    now: datetime,
) -> Investigation:
    """The investigation of instance ``target`` (its name) from a whole-fleet report.

    ``releases`` are the manifests the check loaded (expected and known versions),
    ``cdn_assets`` what the CDN answered per path; TLS views and pod Events are read by
    the caller, which does the I/O. ``now`` is a parameter so ages and clock times are
    reproducible.
    """
    result = next((r for r in report.results if r.instance.name == target), None)
    if result is None:
        raise ValueError(f"{target} is not in the report")
    rows = asset_rows(result, releases=releases, cdn_assets=cdn_assets or {})
    signals, agree = signal_rows(result)
    sib = siblings(report, result)
    notes = _dedupe(
        [*_fleet_notes(report, release_source=release_source), *_instance_notes(result)]
    )
    summary = summarise(result, rows, sib, notes, desired=report.desired_version, now=now)
    return Investigation(
        target=result.instance,
        url=result.instance.base_url,
        verdict=result.verdict,
        reason=result.reason,
        summary=summary,
        reported_version=result.reported_version,
        serves_version=result.serves_version,
        fingerprint=result.fingerprint,
        signals=signals,
        signals_agree=agree,
        siblings=sib,
        manifest=manifest_comparison(
            result, rows, releases=releases, release_source=release_source
        ),
        assets=rows,
        tls=tuple(tls),
        pod=pod_view(
            result.instance, condition_type=condition_type, events=events, events_note=events_note
        ),
        findings=result.findings,
        notes=notes,
        diffs=(),
        generated_at=now,
        elapsed=report.elapsed,
        requests=report.requests,
        counts={k: v for k, v in report.counts().items() if v},
        desired_version=report.desired_version,
        cdn=report.cdn,
        release_source=release_source,
    )


def build_fleet(report: Report, *, release_source: str | None, now: datetime) -> FleetView:
    """Instances grouped by (version, content, image), largest first, odd groups marked.

    Oddness is judged per reported version, against the majority of that version's
    instances: the whole point is that the version labels agree while the content does
    not. Headlines state each disagreement as a sentence ("2 of 14 pods of 1.4.2 serve
    different content") because a table of fingerprints does not jump out at 3 a.m.
    """
    results = report.results
    noun = noun_for(r.instance for r in results)
    by_version: dict[str | None, list[InstanceResult]] = defaultdict(list)
    for r in results:
        by_version[r.reported_version].append(r)
    top_content: dict[str | None, str | None] = {}
    top_image: dict[str | None, str | None] = {}
    headlines: list[str] = []
    for version, members in _largest_first(by_version):
        top_content[version], top_image[version], said = _version_headlines(
            version, members, noun, report
        )
        headlines.extend(said)
    headlines.extend(_fleet_headlines(report, by_version, noun))
    groups = _fleet_groups(report, top_content, top_image, by_version, noun)
    return FleetView(
        noun=noun,
        total=len(results),
        groups=tuple(groups),
        headlines=tuple(headlines),
        counts={k: v for k, v in report.counts().items() if v},
        notes=_dedupe(_fleet_notes(report, release_source=release_source)),
        generated_at=now,
        elapsed=report.elapsed,
        requests=report.requests,
        exit_code=report.exit_code,
        desired_version=report.desired_version,
        cdn=report.cdn,
        release_source=release_source,
        report=report,
    )


def _largest_first(
    by_version: Mapping[str | None, list[InstanceResult]],
) -> list[tuple[str | None, list[InstanceResult]]]:
    """Versions with the most instances first, then by name."""
    return sorted(by_version.items(), key=lambda kv: (-len(kv[1]), str(kv[0])))


def _version_headlines(
    version: str | None, members: Sequence[InstanceResult], noun: str, report: Report
) -> tuple[str | None, str | None, list[str]]:
    """The majority content and image of one version's instances, and the headlines
    saying where they disagree (or that all agree)."""
    label = f"of {version}" if version is not None else "reporting no version"
    headlines: list[str] = []
    observed = [r for r in members if r.fingerprint is not None]
    content = Counter(r.fingerprint for r in observed).most_common()
    top_content = _unique_top(content)
    if len(content) > 1:
        if top_content is None:
            headlines.append(f"{len(observed)} {noun} {label} disagree on content with no majority")
        else:
            odd = len(observed) - content[0][1]
            headlines.append(
                f"{odd} of {len(observed)} {noun} {label} "
                f"{_verb(odd, 'serves', 'serve')} different content"
            )
    elif len(observed) > 1:
        headlines.append(
            f"All {len(observed)} observed {noun} {label} serve the same content"
            + _sampled_files(report)
        )
    images = Counter(r.instance.image_id for r in members if r.instance.image_id).most_common()
    top_image = _unique_top(images)
    if len(images) > 1:
        with_image = sum(n for _, n in images)
        odd = with_image - images[0][1]
        headlines.append(
            f"{odd} of {with_image} {noun} {label} {_verb(odd, 'runs', 'run')} a different "
            "image digest"
        )
    unobserved = len(members) - len(observed)
    if unobserved:
        headlines.append(f"{unobserved} of {len(members)} {noun} {label} could not be observed")
    return top_content, top_image, headlines


def _fleet_headlines(
    report: Report, by_version: Mapping[str | None, list[InstanceResult]], noun: str
) -> list[str]:
    """The verdicts that are not consistent, and the versions reported, when several."""
    headlines = []
    results = report.results
    bad = {k: v for k, v in report.counts().items() if v and k != Verdict.CONSISTENT.value}
    if bad and results:
        said = ", ".join(f"{v} {k}" for k, v in bad.items())
        headlines.append(f"Verdicts of {len(results)} {noun}: {said}")
    if len(by_version) > 1:
        shown = ", ".join(f"{v or '(none)'} ({len(m)})" for v, m in _largest_first(by_version))
        desired = f"; desired {report.desired_version}" if report.desired_version else ""
        headlines.append(f"{len(by_version)} versions reported: {shown}{desired}")
    return headlines


def _fleet_groups(
    report: Report,
    top_content: Mapping[str | None, str | None],
    top_image: Mapping[str | None, str | None],
    by_version: Mapping[str | None, Sequence[InstanceResult]],
    noun: str,
) -> list[FleetGroup]:
    """One group per (version, content, image), largest first, odd ones marked."""
    keyed: dict[tuple[str | None, str | None, str | None], list[InstanceResult]] = defaultdict(list)
    for r in report.results:
        keyed[(r.reported_version, r.fingerprint, r.instance.image_id)].append(r)
    groups = []
    for (version, fp, image), members in keyed.items():
        odd, why = _oddity(version, fp, image, top_content, top_image, by_version, noun)
        starts = [m.instance.started_at for m in members if m.instance.started_at is not None]
        serves = Counter(m.serves_version for m in members if m.serves_version).most_common(1)
        groups.append(
            FleetGroup(
                version=version,
                fingerprint=fp,
                image_id=image,
                instances=tuple(sorted((m.instance.name for m in members), key=natural)),
                verdicts=dict(Counter(m.verdict.value for m in members).most_common()),
                serves_version=serves[0][0] if serves else None,
                nodes=tuple(sorted({m.instance.node for m in members if m.instance.node})),
                owners=tuple(sorted({m.instance.owner for m in members if m.instance.owner})),
                first_started=min(starts) if starts else None,
                last_started=max(starts) if starts else None,
                odd=odd,
                why=why,
            )
        )
    groups.sort(key=lambda g: (-g.count, g.odd, str(g.version), str(g.fingerprint)))
    return groups


def _unique_top(counted: Sequence[tuple[str | None, int]]) -> str | None:
    """The most common value when strictly more common than the next, else None."""
    if not counted:
        return None
    if len(counted) > 1 and counted[0][1] == counted[1][1]:
        return None
    return counted[0][0]


def _oddity(
    version: str | None,
    fp: str | None,
    image: str | None,
    top_content: Mapping[str | None, str | None],
    top_image: Mapping[str | None, str | None],
    by_version: Mapping[str | None, Sequence[InstanceResult]],
    noun: str,
) -> tuple[bool, str]:
    """Whether a group stands out among the instances reporting its version, and why."""
    members = by_version[version]
    label = version or "(no version)"
    if fp is None:
        return True, "could not be observed"
    fingerprints = {r.fingerprint for r in members if r.fingerprint is not None}
    if len(fingerprints) > 1:
        top = top_content[version]
        if top is None:
            return True, f"{noun} of {label} disagree with no majority"
        if fp != top:
            same = sum(1 for r in members if r.fingerprint == top)
            return True, f"content differs from {same} of {len(members)} {noun} of {label}"
    images = {r.instance.image_id for r in members if r.instance.image_id}
    if image is not None and len(images) > 1 and image != top_image[version]:
        return True, f"image digest differs from most {noun} of {label}"
    return False, ""
