"""One check, end to end: discover -> sample -> fetch -> compare -> decide.

:func:`check_once` is shared by ``verify``, ``investigate``, ``demo`` and each cycle of
the controller. The I/O happens here and in the modules it calls (fetch, expect); the
judging is delegated to the pure :mod:`compare` and :mod:`decide`. Each instance is
observed under its own deadline inside a TaskGroup, with concurrency bounded by the
fetcher, so one instance that never answers cannot stall the run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from urllib.parse import urlsplit

from artifactcheck.discover.sample import draw_seed, entry_points, sample_instances, sample_paths
from artifactcheck.fetch import urls
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.judge.compare import (
    DEFAULT_CDN_EXCLUDE,
    CdnView,
    cdn_paths,
    compare_fleet,
    reported_version,
    tls_findings,
)
from artifactcheck.judge.decide import Decision, History, decide
from artifactcheck.manifests import WELL_KNOWN_PATHS, algorithms_needed, parse_manifest
from artifactcheck.manifests.limits import ManifestLimits, normalise_path
from artifactcheck.model.errors import ArtifactCheckError, ConfigError, ErrorKind, ManifestError
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import (
    Action,
    ActionKind,
    CertInfo,
    Expectation,
    Fetched,
    Finding,
    FindingKind,
    Instance,
    InstanceResult,
    Manifest,
    Observation,
    Report,
    SampleInfo,
    Severity,
    Verdict,
)
from artifactcheck.release.sources import ConfigMapReader, Expectations

log = logging.getLogger("artifactcheck")

#: Answers to a probed manifest name that mean "not here": S3-style origins answer 403
#: for any missing key and nginx's usual ``location ~ /\. { deny all; }`` for dot-paths.
NOT_HERE = frozenset({403, 404, 410})
#: ``Observation.error_kind`` of an instance whose check raised an unexpected exception.
CHECK_FAILED = ErrorKind.CHECK_FAILED
_MEMO_LIMIT = 256  # distinct served manifests (and samples) remembered per Observer


def limits_of(spec: CheckSpec) -> ManifestLimits:
    """Manifest caps from the HTTP settings."""
    return ManifestLimits(
        max_bytes=spec.http.max_manifest_bytes, max_entries=spec.http.max_manifest_entries
    )


def _pointer(doc: object, pointer: str) -> object:
    """Resolve an RFC 6901 JSON pointer, raising KeyError when it does not resolve."""
    if not pointer:
        return doc
    node = doc
    for raw in pointer.lstrip("/").split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node[token]
        elif isinstance(node, list):
            node = node[int(token)]
        else:
            raise KeyError(token)
    return node


class Observer:
    """Fetches what one instance serves, under the run's settings and caches."""

    def __init__(
        self,
        *,
        spec: CheckSpec,
        fetcher: Fetcher,
        expectations: Expectations | None,
        seed: int | None = None,
    ) -> None:
        self.spec = spec
        self.fetcher = fetcher
        self.expectations = expectations
        self.limits = limits_of(spec)
        # The sampling seed: the configured one, else the caller's, else a fresh one per
        # Observer, so repeated runs sample different files (and say which seed they used).
        # A long-lived owner (the controller) may assign a new one for each cycle.
        if spec.sampling.seed is not None:
            seed = spec.sampling.seed
        self.seed = seed if seed is not None else draw_seed()
        self.found_manifest_path: str | None = None  # learned from the first instance
        # Instances are observed a bounded number at a time, each to completion (see
        # observe); _active counts them, to share request slots between their assets.
        self._slots: asyncio.Semaphore | None = None
        self._active = 0
        self._certs: dict[str, asyncio.Task[CertInfo | None]] = {}
        # Siblings serve the same manifest bytes: each distinct document is parsed, and
        # its sample drawn, once per run (1,000 instances x 500 entries is seconds of
        # CPU otherwise). Keys hold the body's sha256; values the result or the error.
        self._parsed: dict[tuple[str, str], Manifest | ManifestError] = {}
        self._plans: dict[tuple[object, ...], tuple[object, list[str], list[str], bool]] = {}
        self._bodies: dict[str, bytes] = {}  # sha256 -> one copy of a served manifest

    @property
    def encodings(self) -> tuple[str, ...]:
        """The content codings every asset is fetched in and compared, identity first."""
        codings = list(self.spec.http.compare_encodings)
        return tuple(codings)

    async def aclose(self) -> None:
        """Nothing to close: every coding is asked for through the run's one fetcher."""

    def _shared_body(self, got: Fetched) -> Fetched:
        """``got`` holding the run's one copy of its body: observations keep their
        manifest fetch, and 5,000 pods serving one 80 KB manifest are 400 MB otherwise."""
        sha = got.sha256
        if got.body is None or sha is None:
            return got
        shared = self._bodies.get(sha)
        if shared is None:
            if len(self._bodies) >= _MEMO_LIMIT:
                self._bodies.clear()
            shared = self._bodies[sha] = got.body
        return got if shared is got.body else replace(got, body=shared)

    def _parse(self, got: Fetched, path: str) -> Manifest:
        """The served manifest, parsed once per distinct body; ManifestError if unusable."""
        assert got.body is not None
        key = (got.sha256 or "", path)
        cached = self._parsed.get(key) if key[0] else None
        if cached is None:
            try:
                cached = parse_manifest(
                    got.body,
                    format=self.spec.manifest_format,
                    path_hint=path,
                    location=path,
                    limits=self.limits,
                    source=got.url,
                )
            except ManifestError as exc:
                cached = exc
            if key[0]:
                if len(self._parsed) >= _MEMO_LIMIT:  # a controller's Observer lives long
                    self._parsed.clear()
                self._parsed[key] = cached
        if isinstance(cached, ManifestError):
            raise cached.with_traceback(None)
        return cached if cached.source == got.url else replace(cached, source=got.url)

    def _plan(
        self,
        manifest: Manifest | None,
        manifest_key: object,
        expected: Manifest | None,
        version: str | None,
        skip: str | None,
        extra: frozenset[str] = frozenset(),
    ) -> tuple[list[str], list[str], bool]:
        """Paths to fetch, hash algorithms, and whether the paths are a sample (memoised).

        Every file of the expected release is a candidate as well as every file the
        served manifest references: a file the served manifest does not mention (a
        favicon, an icon sprite) is still served to browsers and must be compared.
        ``skip`` is the served manifest itself, already fetched; ``extra`` the
        references that live on the CDN.
        """
        key = (manifest_key, id(expected), version, skip, extra, self.seed)
        memo = self._plans.get(key) if manifest_key is not None else None
        if memo is not None and memo[0] is expected:  # id() alone could be reused
            return memo[1], memo[2], memo[3]
        candidates: set[str] = set(extra)
        if manifest is not None:
            candidates.update(manifest.files)
        if expected is not None:
            candidates.update(expected.files)
        candidates.discard(skip or "")
        entries = entry_points(manifest, expected) & candidates
        paths = sample_paths(
            candidates,
            entries,
            self.spec.sampling.assets_per_instance,
            version=version,
            seed=self.seed,
        )
        algorithms = sorted({"sha256"} | (algorithms_needed(manifest) if manifest else set()))
        sampled = len(paths) < len(candidates)
        if manifest_key is not None:
            if len(self._plans) >= _MEMO_LIMIT:
                self._plans.clear()
            self._plans[key] = (expected, paths, algorithms, sampled)
        return paths, algorithms, sampled

    async def certificate(self, base_url: str, *, own_name: bool = False) -> CertInfo | None:
        """The certificate an https endpoint presents (read once per endpoint and run).

        It is read without verification on purpose: an expired or mismatched
        certificate is exactly what must be reported, not hidden behind an error.
        Instances are asked under the site's name (``http.host_header``); endpoints
        of their own (``own_name``: the CDN) under the name in their URL.
        """
        if not base_url.startswith("https://"):
            return None
        parts = urlsplit(base_url)
        server_name = None if own_name else self.spec.http.host_header
        key = f"{parts.hostname}:{parts.port or 443}/{server_name or ''}"
        task = self._certs.get(key)
        if task is None:
            task = asyncio.ensure_future(
                self._probe(parts.hostname or "", parts.port or 443, server_name)
            )
            self._certs[key] = task
        return await asyncio.shield(task)

    async def _probe(self, host: str, port: int, server_name: str | None) -> CertInfo | None:
        from artifactcheck.fetch.tls import probe_certificate

        try:
            return await probe_certificate(
                host,
                port,
                server_name=server_name,
                ssl_context=None,
                timeout=self.spec.http.connect_timeout,
                egress=self.fetcher.egress,  # no handshake with an address the policy refuses
            )
        except ArtifactCheckError as exc:
            log.debug("no certificate from %s:%s: %s", host, port, exc)
            return None

    def _candidates(self) -> list[str]:
        if self.spec.manifest_path:
            return [normalise_path(self.spec.manifest_path)]
        paths = list(WELL_KNOWN_PATHS)
        if self.found_manifest_path in paths:
            paths.remove(self.found_manifest_path)
            paths.insert(0, self.found_manifest_path)
        return paths

    @property
    def asset_parallelism(self) -> int:
        """Assets fetched at once for one instance: max_per_host for a lone new pod,
        one when max_connections instances are in flight (one kept-alive connection
        each, instead of max_per_host new ones, each a TCP/TLS handshake)."""
        http = self.spec.http
        return max(1, min(http.max_per_host, http.max_connections // max(1, self._active)))

    async def observe(self, instance: Instance) -> tuple[Observation, Expectation | None]:
        """Observe one instance within its deadline; never raises, except when cancelled.

        At most ``http.max_connections`` instances are observed at once, each to
        completion, and the deadline starts when its turn comes: started all at once,
        1,000 instances would share the fetcher's request slots breadth-first, so every
        one of them would finish late (or miss its deadline). Whatever an instance's
        answers make the code raise is that instance's failed check, never the run's:
        a sibling, or the controller's loop, must not die of one hostile response.
        """
        if self._slots is None:
            self._slots = asyncio.Semaphore(max(1, self.spec.http.max_connections))
        async with self._slots:
            self._active += 1
            started = time.perf_counter()
            try:
                return await self._observe_within_deadline(instance)
            except Exception as exc:  # noqa: BLE001 - one instance never ends the run
                log.warning("check of %s failed: %s", instance.name, describe(exc))
                failed = check_failed(instance, self.spec.manifest_path or "", exc)
                return replace(failed, elapsed=time.perf_counter() - started), None
            finally:
                self._active -= 1

    async def _observe_within_deadline(
        self, instance: Instance
    ) -> tuple[Observation, Expectation | None]:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.spec.http.instance_deadline):
                obs, expectation = await self._observe(instance)
        except TimeoutError:
            obs = Observation(
                instance=instance,
                manifest_path=self.spec.manifest_path or "",
                error=f"instance deadline of {self.spec.http.instance_deadline:g}s exceeded",
                error_kind=ErrorKind.TIMEOUT,
            )
            expectation = None
        return replace(obs, elapsed=time.perf_counter() - started), expectation

    async def _observe(self, instance: Instance) -> tuple[Observation, Expectation | None]:
        host = self.spec.http.host_header
        endpoint_version = endpoint_error = None
        answered = False  # an instance that answered anything is never "unreachable"
        if self.spec.version_endpoint is not None:
            ve = self.spec.version_endpoint
            got = await self.fetcher.get_document(instance.base_url, ve.path, host_header=host)
            if got.error is not None and got.unreachable:
                return await self._unreachable(instance, ve.path, got), None
            answered = got.status is not None
            endpoint_version, endpoint_error = _read_version(got, ve.path, ve.pointer)

        configured = bool(self.spec.manifest_path)
        manifest: Manifest | None = None
        manifest_fetch: Fetched | None = None
        manifest_error: str | None = None
        manifest_path = ""
        not_here: dict[str, Fetched] = {}  # probed names the instance does not serve
        not_manifests: list[str] = []  # served, but no build manifest (a PWA manifest.json)
        for path in self._candidates():
            got = self._shared_body(
                await self.fetcher.get_document(instance.base_url, path, host_header=host)
            )
            if got.error is not None:
                if got.unreachable:
                    if not answered:
                        return await self._unreachable(instance, path, got), None
                    # it answered a moment ago: trouble, not absence
                    why = f"{got.error} (after answering other requests)"
                    return _unobservable(instance, path, got, why), None
                if got.error_kind != ErrorKind.TOO_LARGE:
                    return _unobservable(instance, path, got, got.error), None
                manifest_path, manifest_fetch, manifest_error = path, got, got.error
                break  # hostile content
            answered = True
            if got.status in NOT_HERE:
                # 403 as well as 404: nginx denies dot-paths (.vite/), S3 answers 403
                # for any missing key; either way this name is not the manifest
                not_here[path] = got
                if configured:
                    manifest_path, manifest_fetch = path, got
                    manifest_error = f"served manifest {path} answers HTTP {got.status}"
                    break
                continue
            if not got.ok or got.body is None:
                # 5xx, 429, 401...: the instance could not be observed, which is never
                # evidence of a mismatch
                return _unobservable(instance, path, got, f"HTTP {got.status}"), None
            try:
                manifest = self._parse(got, path)
                self.found_manifest_path = path
                manifest_path, manifest_fetch = path, got
            except ManifestError as exc:
                if not configured and self.spec.manifest_format == "auto":
                    not_manifests.append(path)
                    continue  # e.g. a PWA manifest.json: try the next well-known name
                manifest_path, manifest_fetch, manifest_error = path, got, str(exc)
            break
        else:
            if not configured:
                tried = [f"{p} answers HTTP {f.status}" for p, f in not_here.items()]
                tried += [f"{p} is not a build manifest" for p in not_manifests]
                manifest_error = "no served manifest at any well-known name: " + "; ".join(tried)

        version = instance.reported_version or endpoint_version
        expectation = None
        if self.expectations is not None and version is not None:
            expectation = await self.expectations.get(version)
        expected = expectation.manifest if expectation is not None else None

        rejected = manifest.rejected if manifest is not None else ()
        on_cdn: dict[str, str] = {}  # path under the CDN base -> the reference as written
        unsafe: list[str] = []
        for raw, _why in rejected:
            relative = self._on_cdn(raw)
            if relative is None:
                unsafe.append(raw)
            else:
                on_cdn.setdefault(relative, raw)

        manifest_key: object = None
        if manifest is not None and manifest_fetch is not None and manifest_fetch.sha256:
            manifest_key = manifest_fetch.sha256
        elif manifest is None:
            manifest_key = ("no-manifest", manifest_path)
        # the served manifest's answer is its observation as a file (a hostile one is not
        # asked for twice); one that is "not here" is reused below like any probe's
        served = None
        if manifest_fetch is not None and manifest_fetch.status not in NOT_HERE:
            served = manifest_path
        paths, algorithms, sampled = self._plan(
            manifest, manifest_key, expected, version, served, frozenset(on_cdn)
        )
        reused = {p: not_here[p] for p in paths if p in not_here}  # the answer is in hand
        assets = await self._fetch_all(
            instance, [p for p in paths if p not in reused], algorithms, on_cdn=on_cdn
        )
        assets.update(reused)
        cert = await self.certificate(instance.base_url)
        return (
            Observation(
                instance=instance,
                tls=cert,
                manifest_path=manifest_path,
                manifest=manifest,
                manifest_fetch=manifest_fetch,
                manifest_error=manifest_error,
                assets=dict(sorted(assets.items())),
                unsafe_paths=tuple(unsafe),
                endpoint_version=endpoint_version,
                endpoint_error=endpoint_error,
                sampled=sampled,
                encodings=self.encodings,
                on_cdn=on_cdn,
            ),
            expectation,
        )

    def _on_cdn(self, raw: str) -> str | None:
        """The path under the CDN's base URL of an absolute reference, or None.

        A build whose public path is the CDN (webpack ``publicPath:
        'https://cdn.example/app/'``) lists its files by their CDN URL: browsers fetch
        them there, so that is where they are checked. A reference to any other place
        is never fetched (no SSRF) and is reported as not checked.
        """
        cdn = self.spec.cdn
        if not cdn:
            return None
        target = raw
        if raw.startswith("//"):  # protocol-relative: the CDN's scheme
            target = urlsplit(cdn).scheme + ":" + raw
        try:
            base = urls.base_directory(cdn)
            if not urls.is_under(base, target):
                return None
            below = urlsplit(target).path[len(urlsplit(base).path) :]
            relative = normalise_path(below, self.limits)
        except (ArtifactCheckError, ValueError):
            return None
        return relative

    async def _unreachable(self, instance: Instance, path: str, got: Fetched) -> Observation:
        """An unreachable instance; after a TLS failure, with the certificate it presented.

        An expired certificate fails verification, and its expiry is the one finding
        that matters most (an expired certificate is how the outage this tool exists
        for started), so it is read, unverified, to be reported and exported.
        """
        obs = _unreachable(instance, path, got)
        if got.error_kind == ErrorKind.TLS:
            obs = replace(obs, tls=await self.certificate(instance.base_url))
        return obs

    async def _get(self, coding: str, base: str, path: str, algorithms: Sequence[str]) -> Fetched:
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
        )

    async def _fetch_all(
        self,
        instance: Instance,
        paths: Sequence[str],
        algorithms: Sequence[str],
        *,
        on_cdn: Mapping[str, str] | None = None,
    ) -> dict[str, Fetched]:
        """Every planned path, in every compared coding; what differs between codings wins.

        A path whose bytes depend on the coding asked for is recorded with the answer
        that differs from the identity one (browsers get it), so a stale ``.gz`` is
        compared, not hidden behind a correct uncompressed file.
        """
        located = on_cdn or {}
        jobs: list[tuple[str, str, str]] = []  # (coding, base, path)
        for coding in self.encodings:
            for path in paths:
                base = self.spec.cdn if path in located and self.spec.cdn else instance.base_url
                jobs.append((coding, base, path))
        results: dict[tuple[str, str], Fetched] = {}

        async def one(job: tuple[str, str, str]) -> None:
            coding, base, path = job
            results[(coding, path)] = await self._get(coding, base, path, algorithms)

        width = min(self.asset_parallelism, len(jobs))
        if width <= 1:  # many instances in flight: one kept-alive connection each
            for job in jobs:
                await one(job)
        else:
            slots = asyncio.Semaphore(width)

            async def bounded(job: tuple[str, str, str]) -> None:
                async with slots:
                    await one(job)

            async with asyncio.TaskGroup() as tg:
                for job in jobs:
                    tg.create_task(bounded(job))
        out: dict[str, Fetched] = {}
        for path in paths:
            first = results[(self.encodings[0], path)]
            chosen = first
            if first.ok:  # a failure already makes the file unjudged: keep it in view
                for coding in self.encodings[1:]:
                    other = results[(coding, path)]
                    if _differs(first, other):
                        chosen = other
                        break
            out[path] = chosen
        return dict(sorted(out.items()))


def _differs(a: Fetched, b: Fetched) -> bool:
    """Two answers for one path that a client could tell apart (status, bytes, failure)."""
    return (a.status, a.sha256, a.error_kind) != (b.status, b.sha256, b.error_kind)


def describe(exc: BaseException) -> str:
    """``Type: message`` of an exception; of its first leaf for an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    if len(text) > 300:
        text = text[:300] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def check_failed(instance: Instance, path: str, exc: BaseException) -> Observation:
    """The observation of an instance whose check raised: judged inconclusive."""
    return Observation(
        instance=instance,
        manifest_path=path,
        error=f"the check failed: {describe(exc)}",
        error_kind=CHECK_FAILED,
    )


def _unreachable(instance: Instance, path: str, got: Fetched) -> Observation:
    return Observation(
        instance=instance,
        manifest_path=path,
        manifest_fetch=got,
        error=f"{got.url}: {got.error}",
        error_kind=got.error_kind,
    )


def _unobservable(instance: Instance, path: str, got: Fetched, why: str) -> Observation:
    return Observation(
        instance=instance,
        manifest_path=path,
        manifest_fetch=got,
        error=f"{got.url}: {why}",
        error_kind=ErrorKind.STATUS,
    )


def _read_version(got: Fetched, path: str, pointer: str) -> tuple[str | None, str | None]:
    """The version from a /version document, or why it could not be read.

    The reason names the endpoint and what was wrong with its answer (a status, no
    such JSON member, not JSON at all), so "reports no version" can be acted on.
    """
    if got.error is not None:
        return None, f"version endpoint {path}: {got.error}"
    if not got.ok or got.body is None:
        return None, f"version endpoint {path} answers HTTP {got.status}"
    text = got.body.decode("utf-8", errors="replace").strip()
    if not pointer:
        if not text:
            return None, f"version endpoint {path} answers an empty body"
        return text[:200], None
    try:
        doc = json.loads(text)
    except ValueError:
        return None, f"version endpoint {path} is not JSON (JSON pointer {pointer!r} given)"
    try:
        value = _pointer(doc, pointer)
    except (ValueError, KeyError, IndexError, TypeError):
        return None, f"version endpoint {path} has no JSON member at pointer {pointer!r}"
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        kind = "null" if value is None else type(value).__name__
        return None, f"version endpoint {path}: the value at {pointer!r} is {kind}, not a string"
    return str(value), None


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
    base = urls.base_directory(cdn)
    assets: dict[str, Fetched] = {}
    wanted: set[str] = set()
    for o in observations:
        for path, got in o.assets.items():
            if not got.ok or not cdn_paths([path], include, exclude):
                continue
            if urls.is_under(base, got.url):
                assets.setdefault(path, got)
            else:
                wanted.add(path)
    paths = sorted(wanted - set(assets))

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
    cert = await observer.certificate(cdn, own_name=True) if observer is not None else None
    return CdnView(
        base_url=cdn,
        assets=dict(sorted(assets.items())),
        error=error,
        tls=cert,
        include=tuple(include),
        exclude=tuple(exclude),
    )


@dataclass(frozen=True, slots=True)
class Judgement:
    """What comparing one set of observations produced (before policy decides)."""

    results: list[InstanceResult]
    findings: tuple[Finding, ...]  # fleet-wide: releases unavailable or stale, CDN trouble
    cdn: CdnView | None


async def judge(
    spec: CheckSpec,
    observations: Sequence[Observation],
    *,
    loaded: dict[str, Expectation],
    expectations: Expectations | None,
    fetcher: Fetcher,
    observer: Observer,
    started_at: datetime,
    known_versions: Sequence[str] = (),
) -> Judgement:
    """Load the releases still needed, observe the CDN, and compare: shared by ``verify``
    (one check) and the controller (each cycle, over its cached observations).

    ``loaded`` holds the expectations met while observing and is completed in place.
    """
    fleet: list[Finding] = []
    if expectations is not None:
        wanted = {reported_version(o) for o in observations} | set(known_versions)
        if spec.desired_version:
            wanted.add(spec.desired_version)
        for version in sorted(v for v in wanted if v is not None and v not in loaded):
            loaded[version] = await expectations.get(version)
        for exp in loaded.values():
            if exp.manifest is None:
                fleet.append(
                    Finding(
                        FindingKind.EXPECTATION_UNAVAILABLE,
                        f"release {exp.version} could not be loaded: {exp.error}",
                        severity=Severity.WARNING,
                    )
                )
            elif exp.stale:
                fleet.append(
                    Finding(
                        FindingKind.EXPECTATION_STALE,
                        f"release {exp.version}: source failed ({exp.error}); "
                        "using the last known good copy",
                        severity=Severity.WARNING,
                    )
                )
    cdn_view = None
    if spec.cdn:
        try:
            cdn_view = await observe_cdn(fetcher, spec.cdn, observations, observer=observer)
        except Exception as exc:  # noqa: BLE001 - a hostile CDN answer is not the run's end
            cdn_view = CdnView(base_url=spec.cdn, error=f"CDN check failed: {describe(exc)}")
        if cdn_view.error:
            fleet.append(
                Finding(FindingKind.OBSERVATION_FAILED, cdn_view.error, severity=Severity.ERROR)
            )
        if cdn_view.tls is not None:
            fleet += tls_findings(
                cdn_view.tls, now=started_at, warn_days=spec.http.tls_expiry_warning_days
            )

    def compare(group: Sequence[Observation]) -> list[InstanceResult]:
        return compare_fleet(
            group,
            expectations=loaded if expectations is not None else None,
            known_releases=expectations.known() if expectations is not None else {},
            cdn=cdn_view,
            desired_version=spec.desired_version,
            now=started_at,
            tls_warn_days=spec.http.tls_expiry_warning_days,
        )

    results = _compare_isolated(observations, compare)
    encodings = tuple(spec.http.compare_encodings)
    results = [
        replace(r, coverage=replace(r.coverage, encodings=encodings))
        if r.coverage is not None and r.observation is not None and r.observation.error is None
        else r
        for r in results
    ]
    return Judgement(results=results, findings=tuple(fleet), cdn=cdn_view)


def _compare_isolated(
    observations: Sequence[Observation],
    compare: Callable[[Sequence[Observation]], list[InstanceResult]],
) -> list[InstanceResult]:
    """Judge the fleet; an observation that makes judging raise is judged on its own.

    Judging is pure, but it reads what instances sent: if one observation makes it
    raise, that instance alone becomes ``inconclusive`` (check failed) and the fleet is
    judged again without its evidence, so its siblings still get their verdicts.
    """
    current = list(observations)
    for _ in range(len(current) + 1):
        try:
            return [_failed_result(r) for r in compare(current)]
        except Exception:  # noqa: BLE001 - one instance never ends the run
            culprit: tuple[int, Exception] | None = None
            for index, obs in enumerate(current):
                if obs.error_kind == CHECK_FAILED:
                    continue
                try:
                    compare([obs])
                except Exception as alone:  # noqa: BLE001
                    culprit = index, alone
                    break
            if culprit is None:  # only together: judge each alone, without fleet context
                return [_judge_alone(o, compare) for o in current]
            index, exc = culprit
            obs = current[index]
            log.warning("judging %s failed: %s", obs.instance.name, describe(exc))
            current[index] = replace(
                obs, error=f"the check failed: {describe(exc)}", error_kind=CHECK_FAILED
            )
    return [_judge_alone(o, compare) for o in current]  # pragma: no cover - bounded above


def _judge_alone(
    obs: Observation, compare: Callable[[Sequence[Observation]], list[InstanceResult]]
) -> InstanceResult:
    try:
        return _failed_result(compare([obs])[0])
    except Exception as exc:  # noqa: BLE001
        return _failed_result(
            InstanceResult(
                instance=obs.instance,
                verdict=Verdict.INCONCLUSIVE,
                reason="",
                observation=replace(
                    obs, error=f"the check failed: {describe(exc)}", error_kind=CHECK_FAILED
                ),
            )
        )


def _failed_result(result: InstanceResult) -> InstanceResult:
    """The result of an instance whose check raised: inconclusive, with the exception."""
    obs = result.observation
    if obs is None or obs.error_kind != CHECK_FAILED:
        return result
    why = obs.error or "the check failed"
    return replace(
        result,
        verdict=Verdict.INCONCLUSIVE,
        reason=why,
        findings=(
            Finding(FindingKind.CHECK_FAILED, why, instance=obs.instance.name),
            *(f for f in result.findings if f.kind is not FindingKind.UNREACHABLE),
        ),
        serves_version=None,
        coverage=None,
    )


async def check_once(
    spec: CheckSpec,
    *,
    instances: Sequence[Instance],
    fetcher: Fetcher,
    expectations: Expectations | None,
    history: History | None = None,
    known_versions: Sequence[str] = (),
    gate_mode: bool = False,
    on_result: Callable[[Observation], None] | None = None,
    now: Callable[[], float] = time.time,
) -> tuple[Report, Decision]:
    """Observe, compare and decide for one set of instances."""
    started_at = datetime.now(UTC)
    t0 = time.perf_counter()
    observer = Observer(spec=spec, fetcher=fetcher, expectations=expectations)
    chosen = sample_instances(instances, spec.sampling.instances, seed=observer.seed)
    observations: dict[str, Observation] = {}
    loaded: dict[str, Expectation] = {}

    async def one(instance: Instance) -> None:
        obs, exp = await observer.observe(instance)
        observations[instance.name] = obs
        if exp is not None:
            loaded[exp.version] = exp
        if on_result is not None:
            on_result(obs)

    try:
        async with asyncio.TaskGroup() as tg:
            for instance in chosen:
                tg.create_task(one(instance))
        ordered = [observations[i.name] for i in chosen]
        judged = await judge(
            spec,
            ordered,
            loaded=loaded,
            expectations=expectations,
            fetcher=fetcher,
            observer=observer,
            started_at=started_at,
            known_versions=known_versions,
        )
    finally:
        await observer.aclose()
    results, fleet = judged.results, judged.findings
    decision = decide(
        results, policy=spec.policy, history=history or History(), now=now(), gate_mode=gate_mode
    )
    stats = fetcher.stats
    report = Report(
        results=tuple(results),
        findings=tuple(fleet) + decision.findings,
        actions=decision.actions,
        started_at=started_at,
        elapsed=time.perf_counter() - t0,
        desired_version=spec.desired_version,
        cdn=spec.cdn,
        requests=stats.requests,
        retries=stats.retries,
        names_only=bool(expectations is not None and expectations.names_only),
        sample=SampleInfo(
            seed=observer.seed,
            instances_checked=len(chosen),
            instances_total=len(instances),
            assets_per_instance=spec.sampling.assets_per_instance,
        ),
    )
    return report, decision


def build_expectations(
    spec: CheckSpec,
    fetcher: Fetcher,
    *,
    configmaps: ConfigMapReader | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
) -> Expectations | None:
    """The release source configured in the spec, or None for consensus mode.

    A release image is read from its registry over the OCI distribution API when the
    reference names a registry host (or ``release_image_source: registry``), else
    through the local Docker engine. Release-manifest ConfigMaps are read with
    ``configmaps`` when given (the controller passes a watched reader on its own API
    client); otherwise, for one ``verify`` run, each load lists them once in the pods'
    namespace through ``kubeconfig``/``context``, never another namespace.
    """
    from artifactcheck.release.registry import (
        RegistryOptions,
        RegistryReader,
        default_docker_config,
        has_registry_host,
    )
    from artifactcheck.release.sources import build_expectations as build

    if spec.release_configmaps is not None and configmaps is None:
        from artifactcheck.clients.kube import load_api_client
        from artifactcheck.release.configmaps import ConfigMapReleases

        if spec.kubernetes is None:  # also refused by the settings model
            raise ConfigError(
                "release_configmaps reads the pods' namespace: give kubernetes",
                field="release_configmaps",
            )
        configmaps = ConfigMapReleases(
            namespace=spec.kubernetes.namespace,
            selector=spec.release_configmaps.selector,
            connect=lambda: load_api_client(kubeconfig, context),
            watch=False,
        )

    source = spec.release_image_source
    if source == "auto":
        named = bool(spec.release_image) and has_registry_host(spec.release_image or "")
        source = "registry" if named else "docker"
    read_image: Callable[[str, str, str], Manifest]
    if source == "registry":
        read_image = RegistryReader(
            RegistryOptions(
                docker_config=spec.registry_auth or default_docker_config(),
                ca_bundle=spec.registry_ca_bundle or spec.http.ca_bundle,
                insecure=frozenset(spec.registry_insecure),
            )
        )
    else:

        def read_image(image: str, site: str, version: str) -> Manifest:
            from artifactcheck.discover.docker import DockerEngine

            with DockerEngine() as engine:
                return engine.manifest_from_image(image, path=site, version=version)

    return build(
        spec, fetcher, limits=limits_of(spec), read_image=read_image, configmaps=configmaps
    )


async def discover_all(
    spec: CheckSpec, *, kubeconfig: str | None = None, context: str | None = None
) -> list[Instance]:
    """Every instance the spec selects: URLs, Docker containers, pods."""
    from artifactcheck.discover.static import instances_from_targets

    instances = instances_from_targets(spec.targets)
    if spec.docker is not None:
        from artifactcheck.discover.docker import DockerEngine

        engine = DockerEngine()
        try:
            instances += await asyncio.to_thread(engine.discover, spec.docker)
        finally:
            engine.close()
    if spec.kubernetes is not None:
        from artifactcheck.clients.kube import load_api_client
        from artifactcheck.discover.kube import discover_pods

        source = spec.kubernetes

        def pods() -> list[Instance]:
            api = load_api_client(kubeconfig, context)
            try:
                return discover_pods(
                    source, api_client=api, condition_type=spec.policy.condition_type
                )
            finally:
                api.close()  # type: ignore[no-untyped-call]

        instances += await asyncio.to_thread(pods)
    return instances


async def run_check(
    spec: CheckSpec,
    *,
    instances: Sequence[Instance] | None = None,
    on_discovered: Callable[[int], None] | None = None,
    on_result: Callable[[Observation], None] | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
) -> Report:
    """Discover, then check once with a fresh fetcher: what ``verify`` runs."""
    if instances is not None:
        chosen = list(instances)
    else:
        chosen = await discover_all(spec, kubeconfig=kubeconfig, context=context)
    if on_discovered is not None:
        on_discovered(min(len(chosen), spec.sampling.instances or len(chosen)))
    containers_act = spec.docker is not None and spec.docker.on_mismatch is not None
    if containers_act:
        # the configured action is how a container leaves traffic: it plays the gate's role
        chosen = [
            replace(i, has_readiness_gate=True) if i.kind == "container" else i for i in chosen
        ]
        spec = spec.model_copy(
            update={"policy": spec.policy.model_copy(update={"mode": "quarantine"})}
        )
    rounds = spec.policy.confirmations if containers_act else 1
    history: History | None = None
    async with Fetcher(http=spec.http, retry=spec.retry, logger=log) as fetcher:
        expectations = build_expectations(spec, fetcher, kubeconfig=kubeconfig, context=context)
        for round_ in range(rounds):
            report, decision = await check_once(
                spec,
                instances=chosen,
                fetcher=fetcher,
                expectations=expectations,
                history=history,
                known_versions=spec.known_versions,
                on_result=on_result if round_ == 0 else None,
            )
            history = decision.history
            if not any(r.verdict in (Verdict.MISMATCH,) for r in report.results):
                break
    if containers_act and report.actions:
        report = await act_on_containers(spec, report)
    return report


async def act_on_containers(spec: CheckSpec, report: Report) -> Report:
    """Perform decided quarantines as the configured Docker action (never in dry-run)."""
    from artifactcheck.discover.docker import DockerEngine

    assert spec.docker is not None and spec.docker.on_mismatch is not None
    kind, _, network = spec.docker.on_mismatch.partition("=")
    done: list[Action] = []
    held: list[Finding] = []
    with DockerEngine() as engine:
        for action in report.actions:
            if action.kind is not ActionKind.QUARANTINE:
                done.append(action)
                continue
            described = replace(action, reason=f"docker {spec.docker.on_mismatch}: {action.reason}")
            if action.dry_run:
                done.append(described)
                continue
            try:
                if kind == "stop":
                    await asyncio.to_thread(engine.stop, action.target)
                elif kind == "pause":
                    await asyncio.to_thread(engine.pause, action.target)
                else:
                    await asyncio.to_thread(engine.disconnect, action.target, network)
                done.append(described)
            except ArtifactCheckError as exc:
                held.append(
                    Finding(
                        FindingKind.ACTION_HELD,
                        f"docker {kind} of {action.target} failed: {exc}",
                        instance=action.target,
                        severity=Severity.WARNING,
                    )
                )
    return replace(report, actions=tuple(done), findings=report.findings + tuple(held))
