"""Sampling: which instances to check, and which of their files to fetch.

Pure and deterministic for a given seed, so a run that found something can be
replayed with ``--seed``. The seed itself varies from run to run by default
(:func:`draw_seed`): a fixed sample would check the same files on every CI run and
never reach the one drifted chunk. Instances: the newest always (new pods are where a
bad rebuild shows up first), then spread round-robin over nodes and owners, in an
order the seed shuffles, so one node's stale image cache cannot hide. Files: entry
points always, then K others chosen per *version*, not per instance, so siblings of
one version fetch the same files and can be compared with each other.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from artifactcheck.model.values import Instance, Manifest

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def draw_seed() -> int:
    """A fresh seed from the operating system, for runs given none (printed, replayable)."""
    return random.SystemRandom().randrange(1, 2**31)


def sample_instances(
    instances: Sequence[Instance], n: int | None, *, seed: int | None = None
) -> list[Instance]:
    """All instances, or n of them: the newest, then others spread over nodes and owners.

    Without a seed the order is fixed (newest first, then by name); with one, instances
    and buckets that tie are shuffled by it, so repeated runs cover the whole fleet.
    """
    if n is None or n >= len(instances):
        return list(instances)
    if n <= 0:
        return []
    rng = random.Random(seed) if seed is not None else None
    pool = sorted(instances, key=lambda i: i.name)
    if rng is not None:
        rng.shuffle(pool)
    newest = max(pool, key=lambda i: i.started_at or _EPOCH)  # first of the newest on ties
    picked = [newest]
    buckets: dict[tuple[str | None, str | None], list[Instance]] = defaultdict(list)
    rest = [i for i in pool if i is not newest]
    if rng is None:
        rest.sort(key=lambda i: (i.started_at or _EPOCH, i.name), reverse=True)
    for inst in rest:
        buckets[(inst.node, inst.owner)].append(inst)
    order = list(buckets)
    if rng is None:
        order.sort(key=lambda k: buckets[k][0].started_at or _EPOCH, reverse=True)
    # the newest instance's own bucket waits its turn: the others are spread first
    home = (newest.node, newest.owner)
    if home in buckets and len(order) > 1:
        order.remove(home)
        order.append(home)
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
