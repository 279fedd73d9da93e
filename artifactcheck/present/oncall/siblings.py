"""The target's siblings: which of them do the same, and where and when they run."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from artifactcheck.judge.compare import serves_content
from artifactcheck.judge.order import natural
from artifactcheck.model.values import (
    InstanceResult,
    Report,
)
from artifactcheck.present.oncall.view_models import Siblings
from artifactcheck.present.oncall.words import clock, join_words, noun_for


def _does_the_same(target: InstanceResult, other: InstanceResult) -> bool:
    """Whether ``other`` serves what ``target`` serves: same version, same fingerprint.

    Unobserved instances have no fingerprint; they 'do the same' when equally unobserved.
    """
    if target.fingerprint is None:
        return other.fingerprint is None and other.verdict is target.verdict
    return (
        other.reported_version == target.reported_version
        and other.fingerprint == target.fingerprint
    )


def siblings(report: Report, target: InstanceResult) -> Siblings:
    """Who else does what the target does, where they run and when they started.

    One bad pod is a curiosity; three of twenty on one node, all started after the
    same minute, is a stale image cache or a bad rebuild, and tells on-call where to
    look next. Image digests are compared only among instances of the same version.
    """
    results = report.results
    # answers alike are no content alike: siblings sharing 404s serve nothing the same
    content = target.observation is not None and serves_content(target.observation)
    same = [r for r in results if _does_the_same(target, r)]
    rest = [r for r in results if not _does_the_same(target, r)]
    version = target.reported_version
    same_version = [r for r in results if version is not None and r.reported_version == version]
    with_image = [r for r in same_version if r.instance.image_id]
    images = Counter(r.instance.image_id for r in with_image)
    majority = images.most_common(1)[0][0] if images else None
    image_same = sum(1 for r in with_image if r.instance.image_id == target.instance.image_id)
    starts = [r.instance.started_at for r in same]
    known_starts = [s for s in starts if s is not None]
    all_known = len(known_starts) == len(starts) and bool(known_starts)
    others = [r.instance.started_at for r in rest if r.instance.started_at is not None]
    return Siblings(
        noun=noun_for(r.instance for r in results),
        total=len(results),
        same=tuple(sorted((r.instance.name for r in same), key=natural)),
        same_version=len(same_version),
        same_version_same_content=sum(
            1 for r in same_version if r.fingerprint == target.fingerprint
        )
        if content
        else 0,
        image_total=len(with_image),
        image_same=image_same if target.instance.image_id else 0,
        majority_image=majority,
        nodes=tuple(sorted({r.instance.node for r in same if r.instance.node})),
        first_started=min(known_starts) if all_known else None,
        last_started=max(known_starts) if all_known else None,
        others_last_started=max(others) if others else None,
        content_served=content,
    )


def _where_and_when(sib: Siblings, now: datetime, *, group_of: int) -> str:
    """The ", all on node X, all started after 12:04" tail, saying only what is known."""
    parts = []
    every = "all " if group_of > 1 else ""
    if sib.nodes and len(sib.nodes) == 1:
        parts.append(f"{every}on node {sib.nodes[0]}")
    elif sib.nodes and len(sib.nodes) <= 3:
        parts.append(f"on nodes {join_words(list(sib.nodes))}")
    if sib.first_started is not None and sib.last_started is not None:
        first, last = clock(sib.first_started, now), clock(sib.last_started, now)
        when = f"started {first}" if first == last else f"started between {first} and {last}"
        if group_of > 1 and first == last:
            when = f"all {when}"
        if sib.others_last_started is not None and sib.others_last_started < sib.first_started:
            when += ", after every other one"
        parts.append(when)
    return (", " + ", ".join(parts)) if parts else ""
