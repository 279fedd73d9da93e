"""Observing the CDN: what it serves for the files the instances served.

Browsers load most files from the CDN, not from the instances: a file missing or
different there breaks the site however consistent the fleet is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from artifactcheck.fetch import urls
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.judge.compare import DEFAULT_CDN_EXCLUDE, CdnView, cdn_paths
from artifactcheck.judge.statuses import NOT_HERE as CDN_MISSING_STATUSES
from artifactcheck.model.values import Fetched, Observation
from artifactcheck.observe.instance import Observer


async def observe_cdn(
    fetcher: Fetcher,
    cdn: str,
    observations: Sequence[Observation],
    *,
    observer: Observer | None = None,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
) -> CdnView:
    """Fetch each distinct asset the instances served from the CDN, once.

    Only paths the include/exclude globs select are asked for (by default, the
    observer's spec's; without either, every path but HTML). Answers that already came
    from the CDN (references by the CDN's own URL) are reused, not fetched again.
    """
    if include is None:
        include = observer.spec.cdn_include if observer is not None else ()
    if exclude is None:
        exclude = observer.spec.cdn_exclude if observer is not None else DEFAULT_CDN_EXCLUDE
    assets, paths = _wanted(cdn, observations, include, exclude)

    async def one(path: str) -> None:
        # "": the CDN's own host, never the site name sent to instances reached by IP
        assets[path] = await fetcher.get_asset(cdn, path, host_header="")

    async with asyncio.TaskGroup() as tg:
        for path in paths:
            tg.create_task(one(path))
    error = None
    if assets and all(f.unreachable for f in assets.values()):
        first = next(iter(assets.values()))
        error = f"CDN {cdn} unreachable: {first.error}"
    else:
        error = await _misplaced(fetcher, cdn, {p: assets[p] for p in paths}, observations)
    cert = await observer.certificate(cdn, own_name=True) if observer is not None else None
    return CdnView(
        base_url=cdn,
        assets=dict(sorted(assets.items())),
        error=error,
        tls=cert,
        include=tuple(include),
        exclude=tuple(exclude),
    )


def _wanted(
    cdn: str,
    observations: Sequence[Observation],
    include: Sequence[str],
    exclude: Sequence[str],
) -> tuple[dict[str, Fetched], list[str]]:
    """The CDN answers already in hand (references by the CDN's own URL), and the
    paths still to ask it for."""
    base = urls.base_directory(cdn)
    assets: dict[str, Fetched] = {}
    wanted: set[str] = set()
    for o in observations:
        if o.layout.tried:  # none of its release's files found where looked: unknown
            continue  # what the CDN must hold (the verdict names the prefix to use)
        for path, got in o.assets.items():
            if not got.ok or not cdn_paths([path], include, exclude):
                continue
            if urls.is_under(base, got.url):
                assets.setdefault(path, got)
            else:
                wanted.add(path)
    return assets, sorted(wanted - set(assets))


#: How many of the missing files are asked for again under a candidate prefix.
_PROBES = 2


async def _misplaced(
    fetcher: Fetcher,
    cdn: str,
    asked: dict[str, Fetched],
    observations: Sequence[Observation],
) -> str | None:
    """Why the CDN cannot be judged when it was given without the instances' prefix.

    ``--cdn https://cdn/`` for files the CDN serves under ``/static/`` (Django's
    STATIC_URL on a CDN) makes every file "missing": the user's mistake, never a
    deployment's. When every file asked for is missing and the first few are found
    under the prefix the instances serve them under, the CDN is not judged and the
    reason names the URL to give. A CDN that really lacks them everywhere is still
    ``cdn-missing``: the probes must find the files, not merely fail to.
    """
    if len(asked) < 2 or any(f.status not in CDN_MISSING_STATUSES for f in asked.values()):
        return None
    prefixes = sorted({o.layout.prefix for o in observations if o.layout.prefix})
    probes = sorted(asked)[:_PROBES]
    for prefix in prefixes:
        found = [await fetcher.get_asset(cdn, prefix + path, host_header="") for path in probes]
        if all(f.ok for f in found):
            where = urls.base_directory(cdn) + prefix
            return (
                f"none of the {len(asked)} files asked of the CDN {cdn} is there, but they "
                f"are served under {prefix}: give --cdn {where}"
            )
    return None
