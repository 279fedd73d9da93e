"""The served manifest of an instance: probing the well-known names, parsing once.

The second step of an observation (:class:`~artifactcheck.observe.instance.Observer`):
the manifest the instance serves, at the configured name or the first well-known one
that answers a build manifest, remembered per prefix so siblings try that name first.
Siblings serve the same manifest bytes, so each distinct document is parsed once per
run and one copy of its body is kept (else parsing grows with instances x entries, a
large run's CPU, and memory with the fleet).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import unquote, urlsplit

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.judge.statuses import NOT_HERE
from artifactcheck.manifests import WELL_KNOWN_PATHS, parse_manifest
from artifactcheck.manifests.limits import ManifestLimits, normalise_path
from artifactcheck.model.errors import ErrorKind, ManifestError
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Fetched, Instance, Manifest, Observation
from artifactcheck.observe.failures import unobservable
from artifactcheck.observe.plan import MEMO_LIMIT

#: How an instance that does not answer is observed (with the certificate it presented).
Unreachable = Callable[[Instance, str, Fetched], Awaitable[Observation]]


@dataclass(slots=True)
class Served:
    """What probing the manifest names found: the manifest, or why there is none."""

    path: str = ""  # as the release's files are named (see release_path)
    manifest: Manifest | None = None
    fetch: Fetched | None = None
    error: str | None = None
    not_here: dict[str, Fetched] = field(default_factory=dict)  # probed names not served
    not_manifests: list[str] = field(default_factory=list)  # served, but no build manifest
    location: str = ""  # where it was found, relative to the target's URL

    @property
    def key(self) -> object:
        """What the plan of this manifest is memoised under (None: not memoised)."""
        if self.manifest is not None and self.fetch is not None and self.fetch.sha256:
            return self.fetch.sha256
        if self.manifest is None:
            return ("no-manifest", self.path)
        return None

    @property
    def as_file(self) -> str | None:
        """The served manifest's answer is its observation as a file (a hostile one is
        not asked for twice); one that is "not here" is reused like any probe's."""
        if self.fetch is not None and self.fetch.status not in NOT_HERE:
            return self.path
        return None

    def nothing_found(self) -> str:
        """What each well-known name answered; the names answering a page that is not
        a build manifest (a login page, the SPA's index.html) are one clause, not nine."""
        tried = [f"{p} answers HTTP {f.status}" for p, f in self.not_here.items()]
        if self.not_manifests:
            tried.append(f"{_few(self.not_manifests)} answer a page that is not a build manifest")
        return "no served manifest at any well-known name: " + "; ".join(tried)


def site_path(base_url: str) -> str:
    """Where the target's URL sits on its origin, as a directory without slashes
    (``https://shop/app/`` -> ``app``, the origin's root -> ``""``): a host-absolute
    reference in a served manifest resolves against the origin, not against it."""
    return unquote(urlsplit(base_url).path).strip("/")


def release_path(location: str, prefix: str) -> str:
    """A served manifest's path as the release's files are named (below ``prefix``);
    one outside the prefix, from the target's root with a leading ``/`` (never a
    release path)."""
    return location[len(prefix) :] if location.startswith(prefix) else "/" + location


def _joined(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p.strip("/"))


def _few(paths: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


class ServedManifests:
    """Finds and parses the served manifests of the instances one Observer observes."""

    def __init__(
        self,
        *,
        spec: CheckSpec,
        fetcher: Fetcher,
        limits: ManifestLimits,
        unreachable: Unreachable,
    ) -> None:
        self.spec = spec
        self.fetcher = fetcher
        self.limits = limits
        self._unreachable = unreachable
        self._found: dict[str, str] = {}  # the manifest name found under each prefix
        # keys hold the body's sha256; values the result or the error
        self._parsed: dict[tuple[str, ...], Manifest | ManifestError] = {}
        self._bodies: dict[str, bytes] = {}  # sha256 -> one copy of a served manifest

    async def served(
        self, instance: Instance, prefix: str, *, answered: bool
    ) -> Served | Observation:
        """The served manifest under ``prefix``, probing the well-known names unless
        configured; an Observation when the instance could not be observed.

        Fetched as the instance's URL plus ``prefix + name``: the instance's URL stays
        the base every redirect must stay under, so a login redirect from a wrong
        prefix is followed (and read as "not here"), as it is from the target itself.
        """
        configured = bool(self.spec.manifest_path)
        found = Served()
        for location in self._candidates(prefix):
            path = release_path(location, prefix)
            got = self._shared_body(
                await self.fetcher.get_document(
                    instance.base_url, location, host_header=self.spec.http.host_header
                )
            )
            if got.error is not None:
                stopped = await self._failed_probe(instance, path, got, answered=answered)
                if stopped is not None:
                    return stopped
                found.path, found.fetch, found.error = path, got, got.error
                return found  # hostile content
            answered = True
            if got.status in NOT_HERE:
                # 403 as well as 404: nginx denies dot-paths (.vite/), S3 answers 403
                # for any missing key; either way this name is not the manifest
                found.not_here[path] = got
                if configured:
                    found.path, found.fetch = path, got
                    asked = urlsplit(got.url).path or "/" + location
                    found.error = f"served manifest {asked} answers HTTP {got.status}"
                    return found
                continue
            if not got.ok or got.body is None:
                # 5xx, 429, 401...: the instance could not be observed, which is never
                # evidence of a mismatch
                return unobservable(instance, path, got, f"HTTP {got.status}")
            try:
                found.manifest = self._parse(got, location, site_path(instance.base_url), prefix)
                self._found[prefix] = path
                found.path, found.fetch, found.location = path, got, location
            except ManifestError as exc:
                if not configured and self.spec.manifest_format == "auto":
                    found.not_manifests.append(path)
                    continue  # e.g. a PWA manifest.json: try the next well-known name
                found.path, found.fetch, found.error = path, got, str(exc)
            return found
        if not configured:
            found.error = found.nothing_found()
        return found

    async def _failed_probe(
        self, instance: Instance, path: str, got: Fetched, *, answered: bool
    ) -> Observation | None:
        """The observation a failed manifest fetch ends with; None for a manifest too
        large (hostile content, judged as the served manifest's error)."""
        if got.unreachable:
            if not answered:
                return await self._unreachable(instance, path, got)
            # it answered a moment ago: trouble, not absence
            return unobservable(
                instance, path, got, f"{got.error} (after answering other requests)"
            )
        if got.error_kind != ErrorKind.TOO_LARGE:
            return unobservable(instance, path, got, got.error or "")
        return None

    def _candidates(self, prefix: str) -> list[str]:
        """Where to look, relative to the target's URL: the configured manifest path
        (from the target's root when it starts with ``/``, else under the prefix), or
        each well-known name under the prefix, the one siblings served first."""
        configured = self.spec.manifest_path
        if configured:
            path = normalise_path(configured)
            return [path if configured.startswith("/") else prefix + path]
        paths = list(WELL_KNOWN_PATHS)
        known = self._found.get(prefix)
        if known in paths:
            paths.remove(known)
            paths.insert(0, known)
        return [prefix + p for p in paths]

    def moved(self, instance: Instance, served: Served, prefix: str) -> Served | None:
        """The manifest ``served`` found, read again for the release's files under
        ``prefix`` (detected after it was found): the same document at the same place,
        its paths made relative to the new prefix. A manifest's own location is never
        looked for again under a prefix learned from it, where it is not. None when
        no manifest was found: then it is looked for under ``prefix``."""
        got = served.fetch
        if served.manifest is None or got is None or got.body is None:
            return None
        try:
            manifest = self._parse(got, served.location, site_path(instance.base_url), prefix)
        except ManifestError:
            return None
        path = release_path(served.location, prefix)
        return Served(path=path, manifest=manifest, fetch=got, location=served.location)

    def _shared_body(self, got: Fetched) -> Fetched:
        """``got`` holding the run's one copy of its body: observations keep their
        manifest fetch, and a copy per instance would grow memory with the fleet."""
        sha = got.sha256
        if got.body is None or sha is None:
            return got
        shared = self._bodies.get(sha)
        if shared is None:
            if len(self._bodies) >= MEMO_LIMIT:
                self._bodies.clear()
            shared = self._bodies[sha] = got.body
        return got if shared is got.body else replace(got, body=shared)

    def _parse(self, got: Fetched, location: str, site: str, prefix: str) -> Manifest:
        """The served manifest at ``location`` (relative to the target's URL, whose path
        on its origin is ``site``), its paths relative to the target's URL plus
        ``prefix``; parsed once per distinct body and place; ManifestError if unusable."""
        assert got.body is not None
        key = (got.sha256 or "", location, site, prefix)
        cached = self._parsed.get(key) if key[0] else None
        if cached is None:
            try:
                cached = parse_manifest(
                    got.body,
                    format=self.spec.manifest_format,
                    path_hint=location,
                    location="/" + _joined(site, location),
                    limits=self.limits,
                    source=got.url,
                    mount=_joined(site, prefix),
                )
            except ManifestError as exc:
                cached = exc
            if key[0]:
                if len(self._parsed) >= MEMO_LIMIT:  # a controller's Observer lives long
                    self._parsed.clear()
                self._parsed[key] = cached
        if isinstance(cached, ManifestError):
            raise cached.with_traceback(None)
        return cached if cached.source == got.url else replace(cached, source=got.url)
