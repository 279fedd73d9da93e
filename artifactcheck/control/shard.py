"""Which ArtifactChecks one controller shard owns (see docs/scaling.md).

When one replica is not enough, N replicas (a StatefulSet, one per ordinal) each run
with ``--shard i --total-shards N`` and own a disjoint part of the ArtifactChecks, as
kube-state-metrics shards the objects it exports. The unit is the *check*, never the
pod: a check's verdict is a consensus over all of its pods (the majority version, the
outliers against it), so every pod of a check must be judged by one process. Pods
then follow their check for free, because a shard watches only the pods its own
checks select.

Ownership is a pure function of ``namespace/name`` (not the UID): it is the same for
every replica without any coordination, survives a delete-and-recreate (a GitOps
re-apply keeps a check on its shard, with its status history), and an operator can
compute it offline. The key is the first 8 bytes of the name's SHA-256, fed to Lamping
and Veach's jump consistent hash as kube-state-metrics does: going from N to N+1 shards
moves only ~1/(N+1) of the checks instead of nearly all of them, as ``hash % N`` would.
kube-state-metrics hashes random UIDs with FNV-1a; names are not random (``web-001``,
``web-002``...), and FNV-1a over such names measurably favoured one shard (65 of 200
sequential names on one shard of 4), so the key is mixed by SHA-256 instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from artifactcheck.model.errors import ConfigError

_MASK64 = (1 << 64) - 1
_JUMP_MULTIPLIER = 2862933555777941757
_ORDINAL = re.compile(r"-(\d+)$")


def key64(text: str) -> int:
    """A well-mixed 64-bit key for ``text``: the first 8 bytes of its SHA-256."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def jump_hash(key: int, buckets: int) -> int:
    """Jump consistent hash (Lamping & Veach, 2014): a bucket in ``range(buckets)``.

    Growing ``buckets`` by one moves a key only into the new bucket, and only with
    probability 1/buckets: resharding keeps most checks (and their state) where they are.
    """
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    key &= _MASK64
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * _JUMP_MULTIPLIER + 1) & _MASK64
        j = int((b + 1) * ((1 << 31) / ((key >> 33) + 1)))
    return b


def shard_of(namespace: str, name: str, total_shards: int) -> int:
    """The shard that owns the ArtifactCheck ``namespace/name`` among ``total_shards``."""
    return jump_hash(key64(f"{namespace}/{name}"), total_shards)


@dataclass(frozen=True, slots=True)
class Shard:
    """This replica's part: shard ``index`` of ``total`` (0 of 1 = everything)."""

    index: int = 0
    total: int = 1

    def __post_init__(self) -> None:
        if self.total < 1:
            raise ConfigError(f"--total-shards must be at least 1, not {self.total}")
        if not 0 <= self.index < self.total:
            raise ConfigError(
                f"--shard must be in 0..{self.total - 1} for --total-shards {self.total}, "
                f"not {self.index}"
            )

    @property
    def everything(self) -> bool:
        return self.total == 1

    def owns(self, namespace: str, name: str) -> bool:
        return self.everything or shard_of(namespace, name, self.total) == self.index

    def owns_object(self, obj: Mapping[str, Any]) -> bool:
        """Whether an ArtifactCheck object (as listed or watched) belongs to this shard.

        The namespace defaults as the controller's own key does ("default"), so an
        object and the key the controller files it under always agree.
        """
        meta = obj.get("metadata") or {}
        return self.owns(meta.get("namespace") or "default", meta.get("name") or "")

    def lease_name(self, base: str) -> str:
        """One Lease per shard: replicas of the same shard elect among themselves only.

        Unsharded keeps the historical name, so a single-replica deployment upgrading
        keeps its Lease.
        """
        return base if self.everything else f"{base}-shard-{self.index}-of-{self.total}"

    def filter_list(
        self, listed: tuple[list[dict[str, Any]], str]
    ) -> tuple[list[dict[str, Any]], str]:
        """A list's items this shard owns, with the list's resourceVersion unchanged."""
        items, rv = listed
        if self.everything:
            return listed
        return [obj for obj in items if self.owns_object(obj)], rv

    def filter_watch(
        self, events: Iterable[tuple[str, dict[str, Any]]]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """A watch's events for objects this shard owns; BOOKMARKs always pass (they
        carry the resourceVersion a resumed watch starts from)."""
        for kind, obj in events:
            if kind == "BOOKMARK" or self.owns_object(obj):
                yield kind, obj

    async def filter_watch_async(
        self, events: AsyncIterator[tuple[str, dict[str, Any]]]
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """:meth:`filter_watch` for a watch on the asynchronous client; closing this
        iterator closes ``events``."""
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for kind, obj in events:
                if kind == "BOOKMARK" or self.owns_object(obj):
                    yield kind, obj


def ordinal(pod_name: str) -> int:
    """A StatefulSet pod's ordinal from its name (``artifactcheck-3`` -> 3), for
    ``--shard auto`` on clusters without the ``apps.kubernetes.io/pod-index`` label."""
    match = _ORDINAL.search(pod_name)
    if match is None:
        raise ConfigError(
            f"--shard auto needs a StatefulSet pod name ending in -<ordinal>, not {pod_name!r}"
        )
    return int(match.group(1))


def parse_shard(value: str | int, pod_name: str) -> int:
    """``--shard``: a number, or ``auto`` for the StatefulSet ordinal of ``pod_name``."""
    if isinstance(value, int):
        return value
    text = value.strip()
    if text == "auto":
        return ordinal(pod_name)
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"--shard must be a number or 'auto', not {value!r}") from None
