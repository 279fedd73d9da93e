"""Sampling: which instances to check, and which of their files to fetch.

Pure and deterministic for a given seed. Instances: newest first (new pods are where a
bad rebuild shows up first), then spread round-robin over nodes and owners so one
node's stale image cache cannot hide. Files: entry points always, then K others chosen
per *version*, not per instance, so siblings of one version fetch the same files and
can be compared with each other.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from .models import Instance, Manifest

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def sample_instances(instances: Sequence[Instance], n: int | None) -> list[Instance]:
    """All instances, or n of them: newest first, spread over nodes and owners."""
    if n is None or n >= len(instances):
        return list(instances)
    buckets: dict[tuple[str | None, str | None], list[Instance]] = defaultdict(list)
    for inst in sorted(instances, key=lambda i: (i.started_at or _EPOCH, i.name), reverse=True):
        buckets[(inst.node, inst.owner)].append(inst)
    order = sorted(buckets, key=lambda k: buckets[k][0].started_at or _EPOCH, reverse=True)
    picked: list[Instance] = []
    while len(picked) < n:
        for key in order:
            if buckets[key] and len(picked) < n:
                picked.append(buckets[key].pop(0))
    return picked


def sample_paths(
    candidates: Iterable[str],
    entries: Iterable[str],
    k: int | None,
    *,
    version: str | None,
    seed: int | None,
) -> list[str]:
    """Entry points plus k other paths (all when k is None), stable per version and seed."""
    entry_set = set(entries)
    rest = sorted(set(candidates) - entry_set)
    if k is not None and k < len(rest):
        key = f"{seed}:{version}".encode()
        rng = random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))
        rest = sorted(rng.sample(rest, k))
    return sorted(entry_set) + rest


def entry_points(*manifests: Manifest | None) -> set[str]:
    """Paths flagged as entry points in any of the given manifests."""
    out: set[str] = set()
    for m in manifests:
        if m is not None:
            out.update(p for p, e in m.files.items() if e.entry)
    return out
