"""Where the expected release for a version comes from, cached with a fallback.

A release source (a file or URL with a ``{version}`` template, a container image) is a
dependency like any other, and the lesson of the cache outage in DESIGN section 1 is
that a cache outage must never become a full outage. So manifests are cached per
version in a bounded LRU; when the source fails, the last known good copy is used and
the result says so (``stale``); with no copy at all the expectation is empty and the
verdict becomes ``inconclusive``, never ``mismatch``. Concurrent requests for one
version share one load (single flight), so a fleet of 1,000 instances of one version
costs one fetch of its manifest.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from .errors import ArtifactCheckError, ConfigError, ExpectationUnavailable, ManifestError
from .fetch import Fetcher
from .manifests import parse_manifest
from .manifests.limits import ManifestLimits
from .models import Expectation, Manifest
from .settings import CheckSpec


class ReleaseSource(Protocol):
    """Loads the release manifest of one version, or raises an ArtifactCheckError."""

    description: str

    async def load(self, version: str) -> Manifest: ...


def _is_url(template: str) -> bool:
    return template.startswith(("http://", "https://"))


class TemplateSource:
    """A release manifest file or URL; ``{version}`` in it is replaced."""

    def __init__(self, template: str, *, fetcher: Fetcher | None, limits: ManifestLimits) -> None:
        self.template = template
        self.fetcher = fetcher
        self.limits = limits
        self.description = template

    async def load(self, version: str) -> Manifest:
        """Read and parse the manifest for one version."""
        where = self.template.replace("{version}", version)
        if _is_url(where):
            if self.fetcher is None:
                raise ExpectationUnavailable(f"{where}: no HTTP client")
            base, _, name = where.rpartition("/")
            # "": the source's own host, never the site name sent to instances
            got = await self.fetcher.get_document(base + "/", name, host_header="")
            if got.error is not None:
                raise ExpectationUnavailable(f"{where}: {got.error}")
            if not got.ok or got.body is None:
                raise ExpectationUnavailable(f"{where}: HTTP {got.status}")
            data = got.body
        else:
            try:
                data = await asyncio.to_thread(Path(where).read_bytes)
            except OSError as exc:
                raise ExpectationUnavailable(f"{where}: {exc.strerror or exc}") from exc
        manifest = parse_manifest(data, limits=self.limits, source=where, version=version)
        if manifest.version is not None and manifest.version != version:
            raise ExpectationUnavailable(
                f"{where}: declares version {manifest.version}, expected {version}"
            )
        return manifest


class CallableSource:
    """Adapts a plain coroutine function (e.g. reading a container image) to a source."""

    def __init__(self, load: Callable[[str], Awaitable[Manifest]], *, description: str) -> None:
        self._load = load
        self.description = description

    async def load(self, version: str) -> Manifest:
        """Delegate to the wrapped coroutine function."""
        return await self._load(version)


class Expectations:
    """Expected releases by version: bounded LRU, single flight, last known good."""

    def __init__(
        self,
        source: ReleaseSource,
        *,
        max_versions: int = 32,
        refresh_after: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.max_versions = max_versions
        self.refresh_after = refresh_after
        self.clock = clock
        self._cache: OrderedDict[str, tuple[Manifest, float]] = OrderedDict()
        self._inflight: dict[str, asyncio.Future[Expectation]] = {}
        self.loads = 0
        self.failures = 0

    def known(self) -> dict[str, Manifest]:
        """Every cached release manifest, by version."""
        return {v: m for v, (m, _) in self._cache.items()}

    def _remember(self, version: str, manifest: Manifest) -> None:
        self._cache[version] = (manifest, self.clock())
        self._cache.move_to_end(version)
        while len(self._cache) > self.max_versions:
            self._cache.popitem(last=False)

    async def get(self, version: str) -> Expectation:
        """The expectation for one version, loading it at most once at a time."""
        cached = self._cache.get(version)
        if cached is not None:
            self._cache.move_to_end(version)
            fresh = self.refresh_after is None or self.clock() - cached[1] < self.refresh_after
            if fresh:
                return Expectation(version=version, manifest=cached[0])
        pending = self._inflight.get(version)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Expectation] = asyncio.get_running_loop().create_future()
        self._inflight[version] = future
        try:
            result = await self._load(version)
            future.set_result(result)
            return result
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._inflight[version]

    async def _load(self, version: str) -> Expectation:
        self.loads += 1
        try:
            manifest = await self.source.load(version)
        except ArtifactCheckError as exc:
            self.failures += 1
            cached = self._cache.get(version)
            if cached is not None:
                return Expectation(version=version, manifest=cached[0], stale=True, error=str(exc))
            return Expectation(version=version, manifest=None, error=str(exc))
        self._remember(version, manifest)
        return Expectation(version=version, manifest=manifest)


def build_expectations(
    spec: CheckSpec,
    fetcher: Fetcher,
    *,
    limits: ManifestLimits,
    read_image: Callable[[str, str, str], Manifest] | None = None,
) -> Expectations | None:
    """The release source configured in the spec, or None for consensus mode.

    ``read_image(image, site_path, version)`` reads a release image (blocking; run in a
    thread); it is injected because reading images is the discovery layer's business.
    """
    if spec.release_manifest:
        source = TemplateSource(spec.release_manifest[-1], fetcher=fetcher, limits=limits)
        return Expectations(source, max_versions=spec.cache_versions)
    if spec.release_image and read_image is not None:
        template, site, reader = spec.release_image, spec.release_image_path, read_image

        async def from_image(version: str) -> Manifest:
            image = template.replace("{version}", version)
            try:
                return await asyncio.to_thread(reader, image, site, version)
            except (ArtifactCheckError, ManifestError, ConfigError) as exc:
                raise ExpectationUnavailable(f"image {image}: {exc}") from exc

        image_source = CallableSource(from_image, description=f"image {template}:{site}")
        return Expectations(image_source, max_versions=spec.cache_versions)
    return None
