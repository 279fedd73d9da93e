"""Observing the previous releases: what the CDN and the instances serve of their files.

A previous release (``previous_versions``) comes from the same release source as the
current one. Every file of it the CDN globs select is asked of the CDN, the way the CDN
check asks (its own host name, its answers reused when the CDN check already asked for
the same path); with ``previous_on_instances``, each reachable instance is asked for a
sample of its files drawn like the current release's (the same sample for every
sibling, under the prefix the instance serves its files at). Judging is
:mod:`artifactcheck.judge.skew_check`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from artifactcheck.discover.sample import entry_points, sample_paths
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.judge.cdn_check import CdnView, cdn_paths
from artifactcheck.judge.skew_check import (
    judge_previous,
    loaded_by_pages,
    unavailable,
    why_unchecked,
)
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.skew import ON_CDN, PreviousServed
from artifactcheck.model.values import Expectation, Fetched, Manifest, Observation
from artifactcheck.observe.failures import describe
from artifactcheck.observe.files import Files
from artifactcheck.observe.instance import ReleaseLookup


async def observe_previous(
    spec: CheckSpec,
    *,
    fetcher: Fetcher,
    releases: ReleaseLookup,
    observations: Sequence[Observation],
    current: Sequence[Manifest],
    cdn_view: CdnView | None,
    seed: int | None,
) -> tuple[PreviousServed, ...]:
    """Each previous version's check on the CDN (with ``spec.cdn``) and on each reachable
    instance (with ``spec.previous_on_instances``); a version with no release is one
    check carrying the reason, never a finding against anyone."""
    out: list[PreviousServed] = []
    for version in spec.previous_versions:
        try:
            exp = await releases.get(version)
        except Exception as exc:  # noqa: BLE001 - a source's bug: that release is missing
            exp = Expectation(version=version, manifest=None, error=describe(exc))
        if exp.manifest is None:
            out.append(unavailable(version, exp.error or "no release manifest for it"))
            continue
        on = _Previous(spec, fetcher, version, exp.manifest, current)
        if spec.cdn:
            out.append(await on.cdn(spec.cdn, cdn_view))
        if spec.previous_on_instances:
            reachable = [o for o in observations if o.error is None]
            out += await asyncio.gather(*(on.instance(o, seed) for o in reachable))
    return tuple(out)


class _Previous:
    """One previous release, asked of each place."""

    def __init__(
        self,
        spec: CheckSpec,
        fetcher: Fetcher,
        version: str,
        release: Manifest,
        current: Sequence[Manifest],
    ) -> None:
        self.spec = spec
        self.fetcher = fetcher
        self.version = version
        self.release = release
        self.current = tuple(current)
        self.pages = release.page_hashes.union(*(m.page_hashes for m in current))

    async def cdn(self, cdn: str, cdn_view: CdnView | None) -> PreviousServed:
        """Every file the CDN globs select, asked of the CDN (answers in hand reused)."""
        files = loaded_by_pages(sorted(self.release.files))
        required = cdn_paths(files, self.spec.cdn_include, self.spec.cdn_exclude)
        known: Mapping[str, Fetched] = cdn_view.assets if cdn_view is not None else {}
        answers = {p: known[p] for p in required if p in known}

        async def one(path: str) -> None:
            answers[path] = await self.fetcher.get_asset(cdn, path, host_header="")

        async with asyncio.TaskGroup() as tg:
            for path in required:
                if path not in answers:
                    tg.create_task(one(path))
        checked = self._judge(answers, where=ON_CDN, base_url=cdn, required=required)
        down = why_unchecked(answers)
        if down is not None:
            return PreviousServed(
                version=self.version,
                where=ON_CDN,
                base_url=cdn,
                error=f"CDN {cdn} unreachable: {down}",
            )
        return checked

    async def instance(self, obs: Observation, seed: int | None) -> PreviousServed:
        """A sample of the release's files (all, unsampled), asked of one instance under
        the prefix its current files were found at."""
        files = loaded_by_pages(self.release.files)
        required = sample_paths(
            files,
            entry_points(self.release),
            self.spec.sampling.assets_per_instance,
            version=self.version,
            seed=seed,
        )
        have = {p: f for p, f in obs.assets.items() if p in required and p not in obs.on_cdn}
        base = obs.instance.base_url
        fetched = await Files(spec=self.spec, fetcher=self.fetcher).fetch_all(
            base, [p for p in required if p not in have], ["sha256"], prefix=obs.layout.prefix
        )
        return self._judge(
            {**have, **fetched},
            where=obs.instance.name,
            base_url=base,
            required=required,
            sampled=len(required) < len(files),
        )

    def _judge(
        self,
        answers: Mapping[str, Fetched],
        *,
        where: str,
        base_url: str,
        required: Sequence[str],
        sampled: bool = False,
    ) -> PreviousServed:
        return judge_previous(
            self.release,
            answers,
            version=self.version,
            where=where,
            base_url=base_url,
            required=required,
            current=self.current,
            pages=self.pages,
            sampled=sampled,
        )
