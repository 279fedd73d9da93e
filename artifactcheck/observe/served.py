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
from urllib.parse import unquote, urlsplit

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.judge.prefix import is_fallback
from artifactcheck.judge.statuses import NOT_HERE
from artifactcheck.manifests import WELL_KNOWN_PATHS, formats_for_name, parse_manifest
from artifactcheck.manifests.limits import ManifestLimits, normalise_path
from artifactcheck.model.errors import (
    ErrorKind,
    ManifestError,
    ManifestLimitError,
    UnsafeReferenceError,
)
from artifactcheck.model.records import MutableRecord, field, replace
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import Fetched, Instance, Manifest, Observation
from artifactcheck.observe.failures import unobservable
from artifactcheck.observe.plan import MEMO_LIMIT

#: Errors that make a served manifest evidence against the instance (it is hostile),
#: where any other reading error only says it is no build manifest artifactcheck reads.
_HOSTILE = (ManifestLimitError, UnsafeReferenceError)

#: How an instance that does not answer is observed (with the certificate it presented).
Unreachable = Callable[[Instance, str, Fetched], Awaitable[Observation]]


class Served(MutableRecord):
    """What probing the manifest names found: the manifest, or why there is none."""

    path: str = ""  # as the release's files are named (see manifest_release_path)
    manifest: Manifest | None = None
    fetch: Fetched | None = None
    error: str | None = None
    # probed names not served, and files that are no build manifest artifactcheck reads:
    # their answers are reused as the files' own when the plan asks for them
    answered: dict[str, Fetched] = field(default_factory=dict)
    not_here: list[str] = field(default_factory=list)  # probed names answering 404/403/410
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

    def lacking(self) -> list[str]:
        """The names probed that are not served: 404/403/410, or a page standing in for
        them (HTML); a JSON document that is no build manifest (a PWA's manifest.json)
        is served, whatever it is."""
        pages = [
            p
            for p in self.not_manifests
            if self.answered[p].headers.get("content-type", "").startswith("text/html")
        ]
        return self.not_here + pages

    def nothing_found(self) -> str:
        """What the names probed answered, in one line: the names by status, a few
        of each, then the ones answering a page that is not a build manifest."""
        by_status: dict[int | None, list[str]] = {}
        for path in self.not_here:
            by_status.setdefault(self.answered[path].status, []).append(path)
        tried = [f"{_few(paths)} answer HTTP {status}" for status, paths in by_status.items()]
        if self.not_manifests:
            tried.append(f"{_few(self.not_manifests)} answer a page that is not a build manifest")
        return "no served manifest: " + "; ".join(tried)


def release_manifest_names(release: Manifest) -> list[str]:
    """The files of a release named as a build manifest is (``manifest.json``,
    ``.sprockets-manifest-<hex>.json``, ``.vite/manifest.json``...), well-known or not."""
    return [p for p in release.files if p.endswith(".json") and formats_for_name(p)]


def site_path(base_url: str) -> str:
    """Where the target's URL sits on its origin, as a directory without slashes
    (``https://shop/app/`` -> ``app``, the origin's root -> ``""``): a host-absolute
    reference in a served manifest resolves against the origin, not against it."""
    return unquote(urlsplit(base_url).path).strip("/")


def manifest_release_path(location: str, prefix: str) -> str:
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
        self._names: dict[int, tuple[Manifest, list[str]]] = {}  # a release's manifest names

    async def served(
        self,
        instance: Instance,
        prefix: str,
        *,
        answered: bool,
        names: Sequence[str] | None = None,
    ) -> Served | Observation:
        """The served manifest under ``prefix``, probing the well-known names unless
        configured; an Observation when the instance could not be observed.

        Fetched as the instance's URL plus ``prefix + name``: the instance's URL stays
        the base every redirect must stay under, so a login redirect from a wrong
        prefix is followed (and read as "not here"), as it is from the target itself.
        """
        configured = bool(self.spec.manifest_path)
        found = Served()
        candidates = [prefix + n for n in names] if names else self._candidates(prefix)
        for location in candidates:
            path = manifest_release_path(location, prefix)
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
                found.answered[path] = got
                found.not_here.append(path)
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
                if self.spec.manifest_format != "auto" or isinstance(exc, _HOSTILE):
                    found.path, found.fetch, found.error = path, got, str(exc)
                    return found  # what the user said is a manifest, or a hostile one
                # no build manifest artifactcheck reads (a PWA manifest.json, Rsbuild's
                # output.manifest): a file like any other, never a finding against content
                found.answered[path] = got
                found.not_manifests.append(path)
                if configured:
                    asked = urlsplit(got.url).path or "/" + location
                    found.path, found.location = path, location
                    if is_fallback(got, location, ()):
                        # the site's page standing in for it (try_files): absent, as a
                        # 404 says, and the judge says so from the answer kept here
                        found.fetch = got
                    found.error = (
                        f"served manifest {asked} is not a build manifest artifactcheck "
                        f"reads ({exc})"
                    )
                    return found
                continue  # try the next well-known name
            return found
        if not configured:
            found.error = found.nothing_found()
        return found

    async def from_release(
        self, instance: Instance, prefix: str, release: Manifest, served: Served
    ) -> Served | Observation:
        """The served manifest found by the names the release lists (Sprockets 3/4's
        ``.sprockets-manifest-<hex>.json``), after none of the well-known names held one;
        ``served`` (with no error) when the release lists no build manifest at all, so a
        site without one carries no warning about it."""
        names = [p for p in self._release_names(release) if p not in served.answered]
        probed = served
        if names:
            found = await self.served(instance, prefix, answered=True, names=names)
            if isinstance(found, Observation) or found.fetch is not None:
                return found  # a manifest, a hostile one, or an instance gone quiet
            found.not_here += served.not_here  # the release's own names said first
            found.not_manifests += served.not_manifests
            found.answered = {**served.answered, **found.answered}
            found.error = found.nothing_found()
            probed = found
        if not any(p in release.files for p in probed.lacking()):
            probed.error = None  # the release has no manifest this instance lacks
        return probed

    def _release_names(self, release: Manifest) -> list[str]:
        """:func:`release_manifest_names`, once per release and run (a walk over every
        file of the release, else once per instance)."""
        memo = self._names.get(id(release))
        if memo is None or memo[0] is not release:  # id() alone could be reused
            if len(self._names) >= MEMO_LIMIT:
                self._names.clear()
            memo = self._names[id(release)] = (release, release_manifest_names(release))
        return memo[1]

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
        if known is not None:  # a well-known name, or one a release listed
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
        path = manifest_release_path(served.location, prefix)
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
