"""Where the expected release for a version comes from, cached with a fallback.

A release source (files or URLs, concrete or a ``{version}`` template, a container
image) is a dependency like any other, and a cache outage must never become a full
outage. So manifests are cached per
version in a bounded LRU; when the source fails, the last known good copy is used and
the result says so (``stale``); with no copy at all the expectation is empty and the
verdict becomes ``inconclusive``, never ``mismatch``. Concurrent requests for one
version share one load (single flight), so a fleet of 1,000 instances of one version
costs one fetch of its manifest.

The expectation is only as honest as its source: a release manifest is used only for
the version it declares, the reported version is hostile input (checked against the
version grammar, escaped, kept inside the template's directory), and only a manifest
carrying content hashes can vouch for bytes (a names-only one is refused unless
explicitly allowed, and then every report says so).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.manifests import FORMAT_INFOS, parse_manifest
from artifactcheck.manifests.integrity import VOUCHING_ALGORITHMS
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.model.errors import (
    ArtifactCheckError,
    ConfigError,
    ExpectationUnavailable,
    ManifestError,
    ManifestFormatError,
)
from artifactcheck.model.records import replace
from artifactcheck.model.settings import CheckSpec, ReleaseImage
from artifactcheck.model.values import Expectation, Finding, Manifest, ManifestEntry
from artifactcheck.model.versions import version_problem

TEMPLATE_FIELD = "{version}"


class ReleaseWithdrawn(ExpectationUnavailable):
    """A version's release must not be used at all, not even its last known good copy.

    Raised by the guard for a version whose release changed under it (pins) when the
    pinned copy is not at hand: the copy cached before the change is the very thing
    in doubt, so the version's instances are ``inconclusive`` until the change is
    accepted (a stale fallback would judge them as if nothing had happened).
    """


class ReleaseAdmitter(Protocol):
    """Admits each release manifest loaded, with the bytes it was parsed from (pins and
    signatures: :mod:`artifactcheck.release.guard`); raises ExpectationUnavailable."""

    async def admit(
        self, version: str, manifest: Manifest, data: bytes, where: str
    ) -> Manifest: ...

    def findings(self) -> list[Finding]: ...


class ReleaseLoader(Protocol):
    """Loads the release manifest of one version, or raises an ArtifactCheckError."""

    description: str

    async def load(self, version: str) -> Manifest: ...


def _is_url(template: str) -> bool:
    return template.startswith(("http://", "https://"))


def is_template(source: str) -> bool:
    """A source naming ``{version}``; any other is a concrete file for the version it declares.

    A "template" without the placeholder could only ever name one file, so it is read as
    that file, and the version it declares decides which instances it is used for.
    """
    return TEMPLATE_FIELD in source


def expand(template: str, version: str) -> str:
    """The file or URL of ``version``'s manifest, never outside what the template names.

    The version is the instance's word, checked against the version grammar first; in a
    URL it is percent-escaped all the same (``1.0.0?a`` must not become a query), and a
    file must stay in the template's directory after resolution (``..`` or a symlink out
    of it is refused), so no reported version can pick a manifest the operator did not
    put there.
    """
    problem = version_problem(version)
    if problem is not None:
        raise ExpectationUnavailable(f"reported version {problem}")
    if _is_url(template):
        return template.replace(TEMPLATE_FIELD, quote(version, safe=""))
    where = template.replace(TEMPLATE_FIELD, version)
    anchor = _anchor(template)
    resolved = Path(where).resolve()
    if not resolved.is_relative_to(anchor) or resolved == anchor:
        raise ExpectationUnavailable(
            f"version {version!r} would read {resolved}, outside the template's directory {anchor}"
        )
    return where


def _anchor(template: str) -> Path:
    """The directory a file template's expansions must stay in: the part before ``{version}``."""
    prefix = template[: template.index(TEMPLATE_FIELD)]
    directory = prefix.rpartition("/")[0] if "/" in prefix else "."
    return Path(directory or "/").resolve()


def unvouched(manifest: Manifest) -> list[str]:
    """Files of a release manifest without a hash the comparison can check bytes against."""
    return [
        path
        for path, entry in manifest.files.items()
        if not any(entry.hashes.get(a) for a in VOUCHING_ALGORITHMS)
    ]


def names_only_problem(manifest: Manifest, where: str) -> str | None:
    """Why this manifest cannot vouch for bytes, or None when every file carries a hash."""
    missing = unvouched(manifest)
    if not missing:
        return None
    return (
        f"{where}: a {manifest.format} manifest with no content hash for {len(missing)} of "
        f"{len(manifest.files)} files (e.g. {missing[0]}), so it cannot vouch for the bytes "
        "served; write a release manifest with `artifactcheck manifest build DIST --version V` "
        "(or accept a comparison of file names only: --allow-names-only, or "
        "allow_names_only: true)"
    )


def _parse_release(data: bytes, where: str, limits: ManifestLimits) -> Manifest:
    try:
        return parse_manifest(data, limits=limits, source=where, path_hint=where)
    except ManifestError as exc:
        raise ExpectationUnavailable(_unusable(where, exc)) from exc


#: The way out for a build tool's file that is no release manifest (Nuxt's
#: ``builds/latest.json``, Rsbuild's ``manifest.json``, Encore's ``entrypoints.json``).
WAY_OUT = (
    "write a release manifest from the build's output directory with "
    "`artifactcheck manifest build DIST --version V`"
)


def _unusable(where: str, exc: ManifestError) -> str:
    """Why a release file cannot be used; for a document of no known format (not one
    over a cap), with the command that writes one that can."""
    said = f"{where}: not a usable release manifest: {exc}"
    return f"{said}; {WAY_OUT}" if isinstance(exc, ManifestFormatError) else said


async def read_release_bytes(where: str, fetcher: Fetcher | None) -> bytes:
    """The bytes at a release file or URL (signature envelopes too); see :func:`_read`."""
    return await _read(where, fetcher)


async def _read(where: str, fetcher: Fetcher | None) -> bytes:
    """The bytes of one release manifest file or URL, or ExpectationUnavailable saying why."""
    if _is_url(where):
        if fetcher is None:
            raise ExpectationUnavailable(f"{where}: no HTTP client")
        base, _, name = where.rpartition("/")
        # "": the source's own host, never the site name sent to instances
        got = await fetcher.get_document(base + "/", name, host_header="")
        if got.error is not None:
            raise ExpectationUnavailable(f"{where}: {got.error}")
        if not got.ok or got.body is None:
            raise ExpectationUnavailable(f"{where}: HTTP {got.status}")
        return got.body
    try:
        return await asyncio.to_thread(Path(where).read_bytes)
    except OSError as exc:
        raise ExpectationUnavailable(f"{where}: {exc.strerror or exc}") from exc


@dataclass(kw_only=True, eq=False)
class _Vouching:
    """What every release-manifest source holds the bytes it reads to, declared once.

    A file template, a ConfigMap and a list of files or URLs are the same kind of
    evidence, so each parses under the same caps, vouches by the same rule (the version
    declared, content hashes unless names-only is allowed) and hands the result to the
    same guard (pins, signatures).
    """

    limits: ManifestLimits
    allow_names_only: bool = False
    guard: ReleaseAdmitter | None = None

    def vouched(self, data: bytes, where: str, version: str) -> tuple[Manifest, bool]:
        """The manifest parsed from ``data``, if it can stand for ``version``
        (see :func:`_vouch`); and whether it is a names-only one (allowed)."""
        manifest = _parse_release(data, where, self.limits)
        return manifest, _vouch(manifest, version, where, allow_names_only=self.allow_names_only)

    async def admitted(self, version: str, manifest: Manifest, data: bytes, where: str) -> Manifest:
        """The manifest as the guard admits it, with the bytes it was parsed from."""
        if self.guard is not None:
            return await self.guard.admit(version, manifest, data, where)
        return manifest


@dataclass(eq=False)
class TemplateSource(_Vouching):
    """A release manifest file or URL template; ``{version}`` in it is replaced.

    The expansion must declare the version it was expanded for, or declare none (only
    the native format carries a version, and ``manifest build`` always writes one): a
    file named after a version vouches for that version only because of its name, which
    is the operator's choice, not the instance's.
    """

    template: str
    fetcher: Fetcher | None = field(kw_only=True)
    names_only: bool = field(default=False, init=False)
    description: str = field(init=False)

    def __post_init__(self) -> None:
        self.description = self.template

    async def load(self, version: str) -> Manifest:
        """Read and parse the manifest for one version."""
        where = expand(self.template, version)
        data = await _read(where, self.fetcher)
        manifest, hashless = self.vouched(data, where, version)
        if hashless:
            self.names_only = True
        return await self.admitted(version, manifest, data, where)


def _vouch(manifest: Manifest, version: str, where: str, *, allow_names_only: bool) -> bool:
    """Refuse a manifest found under ``version``'s name that cannot stand for it.

    It must declare that version or none (the name it was found under is the operator's
    choice, never the instance's), and carry content hashes unless names-only was
    allowed explicitly. Returns True when it is a names-only manifest (allowed).
    """
    if manifest.version is not None and manifest.version != version:
        raise ExpectationUnavailable(
            f"{where}: declares version {manifest.version}, not {version}; "
            "a release manifest is used only for the version it declares"
        )
    problem = names_only_problem(manifest, where)
    if problem is None:
        return False
    if not allow_names_only:
        raise ExpectationUnavailable(problem)
    return True


def vouched_release(data: bytes, version: str, where: str, spec: CheckSpec) -> Manifest:
    """``version``'s release manifest from the bytes a source read at ``where``, parsed
    under the spec's caps and vouched by the rule every source keeps (:func:`_vouch`);
    ExpectationUnavailable saying why not. For a source with no guard (pins, keys)."""
    manifest = _parse_release(data, where, limits_of(spec))
    _vouch(manifest, version, where, allow_names_only=spec.allow_names_only)
    return manifest


class ConfigMapReader(Protocol):
    """Reads release-manifest ConfigMaps (injected: the Kubernetes client is discovery's).

    ``release`` (a coroutine: it may list) returns ``(where, bytes, revision)`` or raises
    an ArtifactCheckError; ``revision`` answers from a watched cache without a request:
    ``""`` for no such release, None when it cannot tell.
    """

    description: str

    async def release(self, version: str) -> tuple[str, bytes, str]: ...

    def revision(self, version: str) -> str | None: ...

    def close(self, timeout: float = 0.0) -> None: ...


@dataclass(eq=False)
class ConfigMapSource(_Vouching):
    """Release manifests in ConfigMaps, one per version, under the same rules as files.

    The ConfigMap's version label plays the file name's part in a template: the manifest
    in it must declare that version or none, and must carry content hashes unless
    names-only is allowed. A ConfigMap edited after a manifest was cached is noticed
    (:meth:`changed`), so the next check uses the new manifest instead of the cached one.
    """

    reader: ConfigMapReader
    names_only: bool = field(default=False, init=False)
    description: str = field(init=False)
    _revisions: dict[str, str] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.description = self.reader.description

    async def load(self, version: str) -> Manifest:
        """Read, parse and vouch for the manifest of the ConfigMap labelled ``version``."""
        problem = version_problem(version)
        if problem is not None:
            raise ExpectationUnavailable(f"reported version {problem}")
        try:
            where, data, revision = await self.reader.release(version)
        except ExpectationUnavailable:
            raise
        except ArtifactCheckError as exc:  # API server down, RBAC: no expectation, no verdict
            raise ExpectationUnavailable(f"{self.description}: {exc}") from exc
        manifest, hashless = self.vouched(data, where, version)
        if hashless:
            self.names_only = True
        self._revisions[version] = revision
        return await self.admitted(version, manifest, data, where)

    def changed(self, version: str) -> bool:
        """True when the watched ConfigMap of ``version`` is no longer the one loaded."""
        now = self.reader.revision(version)
        loaded = self._revisions.get(version)
        return now is not None and loaded is not None and now != loaded

    def close(self) -> None:
        """Stop watching."""
        self.reader.close()


@dataclass(eq=False)
class ReleaseSet(_Vouching):
    """Several release manifests: concrete ones by the version they declare, then a template.

    A concrete manifest is a release's own description, so it says which version it is
    for; it is never applied to another (a 1.0.0 manifest judging a 1.1.0 instance would
    call every changed file "different"). Local files are read when the set is built, so
    a missing or unusable one is a configuration error before any request; URLs are read
    on first use, once each (a release does not change after it is published).
    """

    fetcher: Fetcher | None = field(kw_only=True)
    local: dict[str, Manifest] = field(default_factory=dict, init=False)  # version -> manifest
    urls: list[str] = field(default_factory=list, init=False)
    template: TemplateSource | None = field(default=None, init=False)
    description: str = field(default="", init=False)
    _hashless: bool = field(default=False, init=False)  # a local one has no content hashes
    _bytes: dict[str, bytes] = field(default_factory=dict, init=False)  # url -> bytes parsed
    _from_urls: dict[str, Manifest] = field(default_factory=dict, init=False)  # once read
    _url_errors: dict[str, str] = field(default_factory=dict, init=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    def add(self, where: str) -> None:
        """One ``release.manifests`` entry: a template, a URL read on first use, or a
        local file read and checked now (see :func:`plan_release_manifests`)."""
        if is_template(where):
            if self.template is not None:  # also refused by the settings model
                raise ConfigError(
                    f"{self.template.template} and {where} are both '{{version}}' templates; "
                    "give at most one",
                    field="release.manifests",
                )
            _check_template(where)
            self.template = TemplateSource(
                where,
                fetcher=self.fetcher,
                limits=self.limits,
                allow_names_only=self.allow_names_only,
                guard=self.guard,
            )
        elif _is_url(where):
            self.urls.append(where)
        else:
            manifest, hashless = _local_release(where, self.limits, self)
            self._hashless = self._hashless or hashless
            self.local[str(manifest.version)] = manifest
        parts = [m.source or v for v, m in self.local.items()] + self.urls
        if self.template is not None:
            parts.append(self.template.template)
        self.description = ", ".join(parts)

    @property
    def names_only(self) -> bool:
        """True once a manifest without content hashes was used (allowed explicitly)."""
        return self._hashless or (self.template is not None and self.template.names_only)

    async def _read_urls(self) -> None:
        async with self._lock:
            pending = [u for u in self.urls if u not in self._from_urls]
            for url in pending:
                try:
                    data = await _read(url, self.fetcher)
                    manifest = _parse_release(data, url, self.limits)
                    if self.guard is not None:
                        self._bytes[url] = data
                    if manifest.version is None:
                        raise ExpectationUnavailable(
                            f"{url}: declares no version, so it cannot be matched to an "
                            "instance; use a native manifest (`artifactcheck manifest build "
                            "--version V`) or a '{version}' template" + _declare_hint(manifest)
                        )
                    problem = names_only_problem(manifest, url)
                    if problem is not None and not self.allow_names_only:
                        raise ExpectationUnavailable(problem)
                except ArtifactCheckError as exc:
                    self._url_errors[url] = str(exc)
                    continue
                self._url_errors.pop(url, None)
                self._from_urls[url] = manifest

    def _declaring(self, version: str) -> list[Manifest]:
        found = [m for v, m in self.local.items() if v == version]
        found += [m for m in self._from_urls.values() if m.version == version]
        return found

    async def load(self, version: str) -> Manifest:
        """The manifest declaring ``version``, else the template's, else why there is none."""
        problem = version_problem(version)
        if problem is not None:
            raise ExpectationUnavailable(f"reported version {problem}")
        found = self._declaring(version)
        if not found and self.urls:
            await self._read_urls()
            found = self._declaring(version)
        if len(found) > 1:
            raise ExpectationUnavailable(
                f"release manifests {', '.join(str(m.source) for m in found)} all declare "
                f"version {version}; give one"
            )
        if found:
            if unvouched(found[0]):
                self._hashless = True
            if self.guard is not None:
                return await self._admit(found[0], version)
            return found[0]
        if self.template is not None:
            return await self.template.load(version)
        declared = [f"{m.source} declares {v}" for v, m in sorted(self.local.items())]
        declared += [f"{u} declares {m.version}" for u, m in self._from_urls.items()]
        declared += [f"{u} could not be read ({why})" for u, why in self._url_errors.items()]
        raise ExpectationUnavailable(
            f"no release manifest declares version {version} ({'; '.join(declared)}); "
            "a release manifest is used only for the version it declares"
        )

    async def _admit(self, manifest: Manifest, version: str) -> Manifest:
        """A concrete manifest through the guard, with the bytes it stands for: a URL's
        as read, a local file's read again now and parsed from those very bytes."""
        assert self.guard is not None and manifest.source is not None
        where = manifest.source
        data = self._bytes.get(where)
        if data is None:
            data = await _read(where, None)
            manifest = _parse_release(data, where, self.limits)
            if manifest.version != version:
                raise ExpectationUnavailable(
                    f"{where}: now declares version {manifest.version}, not {version}"
                )
        return await self.admitted(version, manifest, data, where)


def plan_release_manifests(
    spec: CheckSpec,
    *,
    fetcher: Fetcher | None,
    limits: ManifestLimits,
    guard: ReleaseAdmitter | None = None,
) -> ReleaseSet | None:
    """The release manifests of the spec, local files read and checked now.

    Everything that can be known without a request is checked here, so a typo is a
    configuration error (exit 2) before any instance is fetched: a local file that is not
    there or is not a release manifest, one without content hashes, one declaring no
    version or the same version as another, a template whose directory does not exist.
    """
    if spec.release is None or not spec.release.manifests:
        return None
    releases = ReleaseSet(
        fetcher=fetcher, limits=limits, allow_names_only=spec.allow_names_only, guard=guard
    )
    for where in spec.release.manifests:
        releases.add(where)
    return releases


def _check_template(where: str) -> None:
    """A ``{version}`` template: in the path only, and a local one's directory exists."""
    if _is_url(where) and TEMPLATE_FIELD in where.split("://", 1)[1].split("/", 1)[0]:
        # the instance's word would choose the host the manifest is read from
        raise ConfigError(
            f"{where}: '{{version}}' may be in the path, not in the host",
            field="release.manifests",
        )
    if not _is_url(where) and not _anchor(where).is_dir():
        raise ConfigError(
            f"{where}: directory {_anchor(where)} does not exist", field="release.manifests"
        )


def _local_release(where: str, limits: ManifestLimits, into: ReleaseSet) -> tuple[Manifest, bool]:
    """A local release manifest, read and checked now; and whether it is hashless."""
    manifest = _read_local(where, limits)
    problem = names_only_problem(manifest, where)
    if problem is not None and not into.allow_names_only:
        raise ConfigError(problem, field="release.manifests")
    if manifest.version is None:
        raise ConfigError(
            f"{where}: a {manifest.format} manifest declares no version, so it cannot be "
            "matched to an instance; write a native one (`artifactcheck manifest build "
            "DIST --version V`) or name the file with a '{version}' template"
            + _declare_hint(manifest),
            field="release.manifests",
        )
    other = into.local.get(manifest.version)
    if other is not None:
        raise ConfigError(
            f"{other.source} and {where} both declare version {manifest.version}; "
            "give one manifest per release",
            field="release.manifests",
        )
    return manifest, problem is not None


def _declare_hint(manifest: Manifest) -> str:
    """How this format can declare its version itself, as its reader says (ngsw.json:
    its appData)."""
    info = FORMAT_INFOS.get(manifest.format)
    return info.version_hint if info is not None else ""


def _read_local(where: str, limits: ManifestLimits) -> Manifest:
    path = Path(where)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{where}: cannot read: {exc.strerror or exc}", field="release.manifests"
        ) from exc
    try:
        return parse_manifest(data, limits=limits, source=where, path_hint=where)
    except ManifestError as exc:
        raise ConfigError(_unusable(where, exc), field="release.manifests") from exc


class CallableSource:
    """Adapts a plain coroutine function (e.g. reading a container image) to a source."""

    def __init__(self, load: Callable[[str], Awaitable[Manifest]], *, description: str) -> None:
        self._load = load
        self.description = description

    async def load(self, version: str) -> Manifest:
        """Delegate to the wrapped coroutine function."""
        return await self._load(version)


def share_entries(manifest: Manifest, previous: Manifest) -> Manifest:
    """``manifest`` with each entry equal to ``previous``'s entry for the same path
    replaced by that entry (and its path string): equal values, held once.

    Consecutive releases of an app rebuild a few hashed files and leave the rest
    unchanged, so a cache of N versions otherwise holds N copies of most entries.
    Entries are frozen and compared by value, so sharing changes no result. When
    nothing is shared, the manifest is returned as it is.
    """
    before = previous.files
    if not before or manifest is previous:
        return manifest
    files: dict[str, ManifestEntry] = {}
    shared = 0
    for path, entry in manifest.files.items():
        prior = before.get(path)
        if prior is not None and prior == entry:
            files[prior.path if prior.path == path else path] = prior  # the held string
            shared += 1
        else:
            files[path] = entry
    return replace(manifest, files=files) if shared else manifest


@dataclass(eq=False)
class Expectations:
    """Expected releases by version: bounded LRU, single flight, last known good."""

    source: ReleaseLoader
    max_versions: int = field(default=32, kw_only=True)
    refresh_after: float | None = field(default=None, kw_only=True)
    clock: Callable[[], float] = field(default=time.monotonic, kw_only=True)
    guard: ReleaseAdmitter | None = field(default=None, kw_only=True)
    loads: int = field(default=0, init=False)
    failures: int = field(default=0, init=False)
    _cache: OrderedDict[str, tuple[Manifest, float]] = field(
        default_factory=OrderedDict, init=False
    )
    _inflight: dict[str, asyncio.Future[Expectation]] = field(default_factory=dict, init=False)

    def trust_findings(self) -> list[Finding]:
        """Releases found changed (pins) or untrusted (keys) so far, one per version."""
        return self.guard.findings() if self.guard is not None else []

    def known(self) -> dict[str, Manifest]:
        """Every cached release manifest, by version."""
        return {v: m for v, (m, _) in self._cache.items()}

    def preload(self, manifests: Mapping[str, Manifest]) -> None:
        """Cache manifests already read (concrete local files), so every release given
        can name what a mismatching instance serves without being asked for first."""
        for version, manifest in manifests.items():
            self._remember(version, manifest)

    def _remember(self, version: str, manifest: Manifest) -> Manifest:
        """Cache a manifest, holding its unchanged entries once (see :func:`share_entries`);
        the manifest as cached (equal to the one given)."""
        cached = self._cache.get(version)
        if cached is None and self._cache:
            cached = next(reversed(self._cache.values()))  # the most recently used version
        if cached is not None:
            manifest = share_entries(manifest, cached[0])
        self._cache[version] = (manifest, self.clock())
        self._cache.move_to_end(version)
        while len(self._cache) > self.max_versions:
            self._cache.popitem(last=False)
        return manifest

    @property
    def names_only(self) -> bool:
        """True when a release manifest without content hashes was used (explicitly allowed):
        the verdicts then rest on file names, and the report must say so."""
        return bool(getattr(self.source, "names_only", False))

    async def get(self, version: str) -> Expectation:
        """The expectation for one version, loading it at most once at a time.

        A reported version that fails the version grammar is never looked up (nor
        cached): the expectation carries the reason, and the instance is judged on it.
        """
        problem = version_problem(version)
        if problem is not None:
            return Expectation(version=version, manifest=None, error=f"reported version {problem}")
        cached = self._cache.get(version)
        if cached is not None:
            self._cache.move_to_end(version)
            fresh = self.refresh_after is None or self.clock() - cached[1] < self.refresh_after
            changed = getattr(self.source, "changed", None)
            if fresh and not (callable(changed) and changed(version)):
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

    def close(self) -> None:
        """Release what the source holds open (a ConfigMap watch); safe to call twice."""
        close = getattr(self.source, "close", None)
        if callable(close):
            close()

    async def _load(self, version: str) -> Expectation:
        self.loads += 1
        try:
            manifest = await self.source.load(version)
        except ArtifactCheckError as exc:
            self.failures += 1
            if isinstance(exc, ReleaseWithdrawn):  # no last known good: it is in doubt
                self._cache.pop(version, None)
                return Expectation(version=version, manifest=None, error=str(exc))
            cached = self._cache.get(version)
            if cached is not None:
                return Expectation(version=version, manifest=cached[0], stale=True, error=str(exc))
            return Expectation(version=version, manifest=None, error=str(exc))
        manifest = self._remember(version, manifest)
        return Expectation(version=version, manifest=manifest)


def limits_of(spec: CheckSpec) -> ManifestLimits:
    """Manifest caps from the HTTP settings: the same for served and expected manifests."""
    return ManifestLimits(
        max_bytes=spec.http.max_manifest_bytes, max_entries=spec.http.max_manifest_entries
    )


def manifest_expectations(
    spec: CheckSpec,
    fetcher: Fetcher | None,
    *,
    limits: ManifestLimits,
    guard: ReleaseAdmitter | None = None,
) -> Expectations | None:
    """The ``manifests`` kind: files, URLs and a template (see :func:`plan_release_manifests`;
    ConfigError for a source that cannot exist). Unguarded, the local files are cached now;
    guarded, each release is admitted when first used."""
    releases = plan_release_manifests(spec, fetcher=fetcher, limits=limits, guard=guard)
    if releases is None:
        return None
    expectations = Expectations(releases, max_versions=spec.cache_versions, guard=guard)
    if guard is None:
        expectations.preload(releases.local)
    return expectations


def configmap_expectations(
    spec: CheckSpec,
    configmaps: ConfigMapReader,
    *,
    limits: ManifestLimits,
    guard: ReleaseAdmitter | None = None,
) -> Expectations:
    """The ``config_maps`` kind, read through ``configmaps`` (listing or watching them is
    the caller's business)."""
    source = ConfigMapSource(
        configmaps, limits=limits, allow_names_only=spec.allow_names_only, guard=guard
    )
    return Expectations(source, max_versions=spec.cache_versions, guard=guard)


def image_expectations(
    image: ReleaseImage,
    read_image: Callable[[str, str, str], Manifest],
    *,
    max_versions: int,
) -> Expectations:
    """The ``image`` kind: ``read_image(image, site_path, version)`` reads a release image
    (blocking; run in a thread), injected because talking to a registry or the Docker
    engine is another layer's business."""
    template, site = image.reference, image.path

    async def from_image(version: str) -> Manifest:
        problem = version_problem(version)
        if problem is not None:  # an image reference is a lookup too
            raise ExpectationUnavailable(f"reported version {problem}")
        reference = template.replace(TEMPLATE_FIELD, version)
        try:
            return await asyncio.to_thread(read_image, reference, site, version)
        except (ArtifactCheckError, ManifestError, ConfigError) as exc:
            raise ExpectationUnavailable(f"image {reference}: {exc}") from exc

    return Expectations(
        CallableSource(from_image, description=image.describe()), max_versions=max_versions
    )
