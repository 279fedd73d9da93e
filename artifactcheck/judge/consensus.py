"""Consensus without a release source: siblings reporting one version must serve the same bytes.

A strict majority is taken as the truth and a minority is evidence; a tie blames nobody
(a warning on each). Also the image digests siblings run, compared the same way.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from artifactcheck.judge.answers import documents
from artifactcheck.judge.served import reported_version
from artifactcheck.model.values import (
    Finding,
    FindingKind,
    Instance,
    Observation,
    Severity,
)
from artifactcheck.model.versions import version_problem


def consensus_groups(observations: Sequence[Observation]) -> dict[str, list[Observation]]:
    """Observed instances by the (valid) version they report."""
    groups: dict[str, list[Observation]] = defaultdict(list)
    for obs in observations:
        version = reported_version(obs)
        if obs.error is None and version is not None and version_problem(version) is None:
            groups[version].append(obs)
    return groups


def consensus_findings(observations: Sequence[Observation]) -> dict[str, list[Finding]]:
    """Siblings reporting the same version must serve the same bytes; minorities are suspect.

    For each version and path, the strict majority hash among the instances that fetched
    the path is taken as the truth; an instance holding another hash gets a
    ``minority-content`` finding. Without a strict majority (a tie), every instance gets
    a warning instead: the disagreement is real but nobody can be blamed.
    """
    out: dict[str, list[Finding]] = defaultdict(list)
    for version, members in consensus_groups(observations).items():
        by_path: dict[str, dict[str, str]] = defaultdict(dict)
        for obs in members:
            for path, got in documents(obs).items():
                if got.ok and got.sha256:
                    by_path[path][obs.instance.name] = got.sha256
        for path in sorted(by_path):
            held = by_path[path]
            if len(set(held.values())) <= 1:
                continue
            (top, top_count), *_rest = Counter(held.values()).most_common()
            if top_count * 2 > len(held):
                for name, sha in held.items():
                    if sha != top:
                        out[name].append(
                            Finding(
                                FindingKind.MINORITY_CONTENT,
                                f"{path} differs from {top_count} of its "
                                f"{len(held) - 1} siblings reporting {version}",
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


def consensus_agreement(observations: Sequence[Observation]) -> dict[str, int]:
    """For each instance, how many siblings reporting its version agree with it: they
    hold the same bytes on every path both fetched, and share at least one.

    "Agrees with its N siblings" counts these, not every instance of the version: of
    three instances where one is the minority, each of the other two agrees with one.
    """
    out: dict[str, int] = {}
    for members in consensus_groups(observations).values():
        held = {
            o.instance.name: {p: g.sha256 for p, g in documents(o).items() if g.ok and g.sha256}
            for o in members
        }
        same: dict[tuple[str, str], set[str]] = defaultdict(set)
        fetched: dict[str, set[str]] = defaultdict(set)
        for name, docs in held.items():
            for path, sha in docs.items():
                same[(path, sha)].add(name)
                fetched[path].add(name)
        for name, docs in held.items():
            agree: set[str] = set()
            differ: set[str] = set()
            for item in docs.items():
                agree |= same[item]
                differ |= fetched[item[0]] - same[item]
            out[name] = len(agree - differ - {name})
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
