"""Memoisation for judging a fleet again: not judgement.

A controller judges its whole workload every cycle, and most observations are the same
objects as last time. What is reused is keyed by the identity (``id()``) of inputs that
are held alive beside the key, so an id is never another object's. Nothing in the pure
core imports this module (an import-linter contract says so): the core stays a function
of its inputs, and :func:`artifactcheck.judge.compare.compare_fleet` alone consults it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from artifactcheck.judge.answers import HashIndex
from artifactcheck.judge.cdn_check import CdnView
from artifactcheck.judge.coverage import SAMPLED_OUT
from artifactcheck.model.records import MutableRecord, field, field_names
from artifactcheck.model.values import (
    Expectation,
    InstanceResult,
    Manifest,
    Observation,
)


class SampledOutRows(MutableRecord):
    """The ``not_compared`` rows of sampled instances, one tuple per release and set of
    files compared, shared by every coverage that has them.

    A sampled instance's coverage lists each release file it did not compare, a
    (path, "sampled out") pair each; every instance that served the same manifest in
    the same sample has the same ones. Kept once per instance they grow with pods times
    release files, the largest thing a controller held, and building them cost a sort
    of the release per instance.
    """

    rows: dict[tuple[int, frozenset[str]], tuple[Manifest, tuple[tuple[str, str], ...]]] = field(
        default_factory=dict
    )

    def of(self, release: Manifest, compared: frozenset[str]) -> tuple[tuple[str, str], ...]:
        """The release's files outside ``compared``, in order, each "sampled out"."""
        key = (id(release), compared)
        hit = self.rows.get(key)
        if hit is None or hit[0] is not release:  # the release is held: its id is its own
            if len(self.rows) >= _SHARED_ROWS_LIMIT:
                self.rows.clear()
            rows = tuple((p, SAMPLED_OUT) for p in sorted(release.files) if p not in compared)
            hit = self.rows[key] = (release, rows)
        return hit[1]


_SHARED_ROWS_LIMIT = 256


#: The Observation fields other than ``instance``: a controller refreshes an
#: observation's instance (labels, conditions) with ``records.replace``, which keeps
#: every other field's object, so "the same observation" is an identity test per field.
_EVIDENCE_FIELDS = tuple(name for name in field_names(Observation) if name != "instance")


def same_evidence(a: Observation, b: Observation) -> bool:
    return a is b or (
        a.instance == b.instance and all(getattr(a, f) is getattr(b, f) for f in _EVIDENCE_FIELDS)
    )


def expectation_key(exp: Expectation | None) -> tuple[object, ...] | None:
    return None if exp is None else (exp.version, id(exp.manifest), exp.stale, exp.error)


class Judged(MutableRecord):
    obs: Observation
    manifest: Manifest | None  # held, so the id() in ``key`` cannot be reused
    index: HashIndex
    cdn: CdnView | None
    key: tuple[object, ...]
    result: InstanceResult


class JudgeCache(MutableRecord):
    """What the last comparisons found, per instance, with the inputs each came from.

    A controller compares its whole workload every cycle, but between two cycles only
    a few observations change (a new pod, a sample re-observed). An instance whose
    observation, expectation, fleet findings (image, consensus), release index, CDN
    view and TLS findings are all the same as last time gets the same result:
    :func:`judge_instance` is a pure function of exactly those. So :func:`compare_fleet`
    with a cache judges only what changed and gives the results a fresh comparison
    would (tests/core/test_compare_incremental.py compares both).
    """

    entries: dict[str, Judged] = field(default_factory=dict)
    index: HashIndex | None = None
    index_key: tuple[tuple[str, int], ...] = ()
    index_manifests: tuple[Manifest, ...] = ()  # held, so the ids in ``index_key`` stay theirs
    judged: int = 0  # instances judged afresh by the last comparison (the rest reused)
    rows: SampledOutRows = field(default_factory=SampledOutRows)

    def forget(self, keep: Iterable[str]) -> None:
        """Drop the instances not in ``keep`` (pods gone)."""
        kept = set(keep)
        for name in [n for n in self.entries if n not in kept]:
            del self.entries[name]

    def reused(
        self, obs: Observation, key: tuple[object, ...], index: HashIndex, cdn: CdnView | None
    ) -> InstanceResult | None:
        """The last result for this instance if every input is the same (counted in
        ``judged`` otherwise, as an instance to judge afresh)."""
        hit = self.entries.get(obs.instance.name)
        if (
            hit is not None
            and hit.index is index
            and hit.cdn is cdn
            and hit.key == key
            and same_evidence(hit.obs, obs)
        ):
            return hit.result
        self.judged += 1
        return None

    def keep(
        self,
        obs: Observation,
        expectation: Expectation | None,
        key: tuple[object, ...],
        index: HashIndex,
        cdn: CdnView | None,
        result: InstanceResult,
    ) -> None:
        """Remember a fresh result with the inputs it came from (the manifest held, so
        the id() in ``key`` stays its own)."""
        manifest = expectation.manifest if expectation is not None else None
        self.entries[obs.instance.name] = Judged(
            obs=obs, manifest=manifest, index=index, cdn=cdn, key=key, result=result
        )

    def index_for(self, releases: Mapping[str, Manifest]) -> HashIndex:
        """The hash index of these releases, rebuilt only when one of them changed."""
        key = tuple(sorted((v, id(m)) for v, m in releases.items()))
        if self.index is None or key != self.index_key:
            self.index = HashIndex(releases)
            self.index_key = key
            self.index_manifests = tuple(releases.values())
        return self.index
