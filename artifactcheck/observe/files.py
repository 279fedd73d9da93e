"""Fetching an instance's files: every planned path, in every compared coding.

The last step of an observation (:class:`~artifactcheck.observe.instance.Observer`),
apart from the others because its concern is the run's connections, not what the
instance serves: how many of one instance's files are asked for at once (one
kept-alive connection each when many instances are in flight, wide for a pod waiting
out of traffic), which host name each request carries, and that every coding's
answer for a path is kept (:mod:`artifactcheck.judge.codings` judges each).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Mapping, Sequence

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.judge.codings import canonical_codings, kept_answer
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Fetched

#: Set while a ``first`` observation runs (Observer.observe): its files go wide.
FIRST: contextvars.ContextVar[bool] = contextvars.ContextVar("first", default=False)

Job = tuple[str, str, str, str, str]  # (coding, base URL, release path, path fetched, query)


class Files:
    """Fetches files of the instances one Observer observes, through the run's fetcher."""

    def __init__(self, *, spec: CheckSpec, fetcher: Fetcher) -> None:
        self.spec = spec
        self.fetcher = fetcher
        #: instances under observation now: they share the request slots (see parallelism)
        self.active = 0

    @property
    def encodings(self) -> tuple[str, ...]:
        """The content codings every asset is fetched in and compared, identity first
        then by name: the order of ``--compare-encoding`` never changes a verdict."""
        return canonical_codings(self.spec.http.compare_encodings)

    @property
    def parallelism(self) -> int:
        """Assets fetched at once for one instance: max_per_host for a lone new pod,
        one when max_connections instances are in flight (one kept-alive connection
        each, instead of max_per_host new ones, each a TCP/TLS handshake)."""
        http = self.spec.http
        return max(1, min(http.max_per_host, http.max_connections // max(1, self.active)))

    async def get(
        self, coding: str, base: str, path: str, algorithms: Sequence[str], query: str = ""
    ) -> Fetched:
        """One file in one coding (``query``: a page's, kept in the request)."""
        # "": the CDN's own host, never the site name sent to instances reached by IP
        host = "" if base == self.spec.cdn else self.spec.http.host_header
        # identity: the configured Accept-Encoding; another coding is asked for by name
        # (browsers receive it, and a stale precompressed file differs only there)
        return await self.fetcher.get_asset(
            base,
            path,
            algorithms=algorithms,
            host_header=host,
            accept_encoding=None if coding == "identity" else coding,
            query=query,
        )

    async def fetch_all(
        self,
        base_url: str,
        paths: Sequence[str],
        algorithms: Sequence[str],
        *,
        on_cdn: Mapping[str, str] | None = None,
        prefix: str = "",
        queries: Mapping[str, str] | None = None,
    ) -> dict[str, Fetched]:
        """Every planned path, in every compared coding, each coding's answer kept.

        A path whose bytes depend on the coding asked for carries every coding's answer
        (:func:`~artifactcheck.judge.codings.kept_answer`), so a stale ``.gz`` is judged
        beside a correct uncompressed file, and a replaced plain file beside a stale
        ``.gz``, whichever order the codings were given in.
        """
        located = on_cdn or {}
        asked = queries or {}
        encodings = self.encodings
        jobs: list[Job] = []
        for coding in encodings:
            for path in paths:
                query = asked.get(path, "")
                if path in located and self.spec.cdn:
                    jobs.append((coding, self.spec.cdn, path, path, query))
                else:  # the release's path, under the prefix it is served at
                    jobs.append((coding, base_url, path, prefix + path, query))
        results = await self._run_jobs(jobs, algorithms)
        out = {path: kept_answer({c: results[(c, path)] for c in encodings}) for path in paths}
        return dict(sorted(out.items()))

    async def _run_jobs(
        self, jobs: Sequence[Job], algorithms: Sequence[str]
    ) -> dict[tuple[str, str], Fetched]:
        """Fetch each (coding, base, path, path fetched), at most ``parallelism`` at
        once; each answer is kept under (coding, path)."""
        results: dict[tuple[str, str], Fetched] = {}

        async def one(job: Job) -> None:
            coding, base, path, fetched, query = job
            results[(coding, path)] = await self.get(coding, base, fetched, algorithms, query)

        wide = self.spec.http.max_per_host if FIRST.get() else self.parallelism
        width = min(wide, len(jobs))
        if width <= 1:  # many instances in flight: one kept-alive connection each
            for job in jobs:
                await one(job)
            return results
        slots = asyncio.Semaphore(width)

        async def bounded(job: Job) -> None:
            async with slots:
                await one(job)

        async with asyncio.TaskGroup() as tg:
            for job in jobs:
                tg.create_task(bounded(job))
        return results
