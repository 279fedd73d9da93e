"""Observing one instance: what it serves, fetched under the run's settings and caches.

One :class:`Observer` serves a whole run (or, in the controller, a whole check): it
remembers which manifest name the fleet serves, parses each distinct manifest body
once and plans each version's sample once, so a thousand siblings cost one parse.
The steps of one observation, in order: the version endpoint, the served manifest,
the expected release, the plan (which files, which hashes), the files in every
compared coding, the certificate. Whatever happens, the result is an
:class:`~artifactcheck.model.values.Observation` for the judge, never an exception.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol
from urllib.parse import urlsplit

from artifactcheck.discover.sample import draw_seed, entry_points, sample_paths
from artifactcheck.fetch import urls
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.judge import prefix as prefix_rules
from artifactcheck.judge.statuses import NOT_HERE
from artifactcheck.manifests import WELL_KNOWN_PATHS, algorithms_needed, parse_manifest
from artifactcheck.manifests.limits import normalise_path
from artifactcheck.model.errors import ArtifactCheckError, ErrorKind, ManifestError
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import (
    CertInfo,
    Expectation,
    Fetched,
    Instance,
    Layout,
    Manifest,
    Observation,
)
from artifactcheck.observe.certs import Certificates
from artifactcheck.observe.failures import check_failed, describe, unobservable, unreachable
from artifactcheck.observe.version import read_version
from artifactcheck.release.sources import limits_of

log = logging.getLogger("artifactcheck")

#: Set while a ``first`` observation runs (Observer.observe): its files go wide.
_FIRST: contextvars.ContextVar[bool] = contextvars.ContextVar("first", default=False)
_MEMO_LIMIT = 256  # distinct served manifests (and samples) remembered per Observer


@dataclass(slots=True)
class _Reported:
    """What the version endpoint said, and whether the instance answered at all."""

    answered: bool = False  # an instance that answered anything is never "unreachable"
    version: str | None = None
    error: str | None = None
    note: str | None = None  # how the version was found, when the user did not say


@dataclass(slots=True)
class _Served:
    """What probing the manifest names found: the manifest, or why there is none."""

    path: str = ""
    manifest: Manifest | None = None
    fetch: Fetched | None = None
    error: str | None = None
    not_here: dict[str, Fetched] = field(default_factory=dict)  # probed names not served
    not_manifests: list[str] = field(default_factory=list)  # served, but no build manifest

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


def _few(paths: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


class ReleaseLookup(Protocol):
    """Where an Observer gets the expected release of a version: the run's
    :class:`~artifactcheck.release.sources.Expectations`, or, in a forked observer
    (:mod:`artifactcheck.observe.processes`), the parent's, asked over a pipe."""

    async def get(self, version: str) -> Expectation: ...


#: At most this many files are fetched to confirm which release an instance serves: a
#: hostile or huge release list must not turn one drifted instance into a crawl.
CONFIRM_LIMIT = 64


class Observer:
    """Fetches what one instance serves, under the run's settings and caches."""

    def __init__(
        self,
        *,
        spec: CheckSpec,
        fetcher: Fetcher,
        expectations: ReleaseLookup | None,
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
        # learned from the instances observed so far: the manifest name found under each
        # prefix, and the prefix a release's files were last found under
        self._found_manifests: dict[str, str] = {}
        self._learned_prefix = ""
        # Instances are observed a bounded number at a time, each to completion (see
        # observe); _active counts them, to share request slots between their assets.
        self._slots: asyncio.Semaphore | None = None
        self._active = 0
        # Pods waiting out of traffic go first (observe(first=True)): while one is
        # observed, no other instance starts; the ones under way finish.
        self._firsts = 0
        self._no_firsts: asyncio.Event | None = None
        self._certs = Certificates(spec.http, fetcher.egress)
        # Siblings serve the same manifest bytes: each distinct document is parsed, and
        # its sample drawn, once per run (else parsing grows with instances x entries,
        # a large run's CPU). Keys hold the body's sha256; values the result or the error.
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

    @property
    def asset_parallelism(self) -> int:
        """Assets fetched at once for one instance: max_per_host for a lone new pod,
        one when max_connections instances are in flight (one kept-alive connection
        each, instead of max_per_host new ones, each a TCP/TLS handshake)."""
        http = self.spec.http
        return max(1, min(http.max_per_host, http.max_connections // max(1, self._active)))

    async def certificate(self, base_url: str, *, own_name: bool = False) -> CertInfo | None:
        """The certificate an https endpoint presents (read once per endpoint and run).

        Instances are asked under the site's name (``http.host_header``); endpoints
        of their own (``own_name``: the CDN) under the name in their URL.
        """
        return await self._certs.of(base_url, own_name=own_name)

    # -- one instance --------------------------------------------------------------

    async def observe(
        self, instance: Instance, *, first: bool = False
    ) -> tuple[Observation, Expectation | None]:
        """Observe one instance within its deadline; never raises, except when cancelled.

        At most ``http.max_connections`` instances are observed at once, each to
        completion, and the deadline starts when its turn comes: started all at once,
        1,000 instances would share the fetcher's request slots breadth-first, so every
        one of them would finish late (or miss its deadline). Whatever an instance's
        answers make the code raise is that instance's failed check, never the run's:
        a sibling, or the controller's loop, must not die of one hostile response.

        ``first``: a pod that waits out of traffic for this verdict (the controller's
        new pods). It starts at once, beside the instances under way, its files
        ``max_per_host`` at a time; until it is done no queued instance starts (their
        deadlines have not begun), so a full cycle's sample of hundreds of pods does
        not stand between a new pod and its verdict.
        """
        if self._slots is None:
            self._slots = asyncio.Semaphore(max(1, self.spec.http.max_connections))
            self._no_firsts = asyncio.Event()
            self._no_firsts.set()
        assert self._no_firsts is not None
        if first:
            self._firsts += 1
            self._no_firsts.clear()
            token = _FIRST.set(True)
            try:
                return await self._observe_counted(instance)
            finally:
                _FIRST.reset(token)
                self._firsts -= 1
                if not self._firsts:
                    self._no_firsts.set()
        async with self._slots:
            while not self._no_firsts.is_set():
                await self._no_firsts.wait()
            return await self._observe_counted(instance)

    async def _observe_counted(self, instance: Instance) -> tuple[Observation, Expectation | None]:
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
        """The steps of one observation; an instance that stops answering stops them.

        The release's files are looked for under the configured prefix, else under the
        one a sibling's were found at (the target itself at first); when none of them
        is there, under the candidates the evidence suggests
        (:func:`~artifactcheck.judge.prefix.candidates`), and the observation is made
        again where they are (detected), or records where they are (configured).
        """
        reported = await self._reported(instance)
        if isinstance(reported, Observation):
            return reported, None
        configured = self.spec.prefix
        looked = configured if configured is not None else self._learned_prefix
        # an instance that does not answer is unreachable before any release is loaded
        served = await self._served(instance, looked, answered=reported.answered)
        if isinstance(served, Observation):
            return served, None
        version = instance.reported_version or reported.version
        expectation = None
        if self.expectations is not None and version is not None:
            expectation = await self.expectations.get(version)
        expected = expectation.manifest if expectation is not None else None
        obs = await self._observe_under(instance, looked, reported, expected, version, served)
        if obs.error is not None:
            return obs, None
        learned = configured is None and looked != ""
        if expected is None and configured is None:
            # no release to look for: the served manifest's own directory, when it lists
            # only files below it (Django's static/staticfiles.json), is the prefix, so
            # paths are the release's and the CDN is asked for them under its own path
            below = prefix_rules.manifest_directory(obs.manifest_path, obs.manifest)
            if below is not None:
                self._learned_prefix = looked + below
                again = await self._observe_under(instance, looked + below, reported, None, version)
                if again.error is not None:
                    return again, None
                layout = Layout(prefix=looked + below, detected=True)
                return replace(again, layout=layout), expectation
        if expected is None or not prefix_rules.nothing_found(obs.assets, expected):
            return replace(obs, layout=Layout(prefix=looked, detected=learned)), expectation
        evidence = (
            None if configured is not None else self._learned_prefix or None,
            self._listing_prefix(obs, expected, looked),
            prefix_rules.directory_of(self.spec.version_endpoint.path)
            if self.spec.version_endpoint is not None
            else None,
        )
        tried = prefix_rules.candidates(looked, *evidence)
        pages = prefix_rules.page_hashes(obs.assets, expected)
        found = await self._find_prefix(instance, tried, expected, pages)
        if configured is not None or found is None:
            layout = Layout(prefix=looked, detected=learned, found_at=found, tried=tuple(tried))
            return replace(obs, layout=layout), expectation
        self._learned_prefix = found
        again = await self._observe_under(instance, found, reported, expected, version)
        if again.error is not None:
            return again, None
        return replace(again, layout=Layout(prefix=found, detected=bool(found))), expectation

    def _listing_prefix(self, obs: Observation, expected: Manifest, looked: str) -> str | None:
        """The prefix the served manifest lists the release's files under (a Django
        manifest found at ``static/staticfiles.json`` lists ``static/...``)."""
        if obs.manifest is None:
            return None
        below = prefix_rules.prefix_from_listing(obs.manifest.files, expected.files)
        return None if below is None else looked + below

    async def _find_prefix(
        self,
        instance: Instance,
        tried: Sequence[str],
        expected: Manifest,
        pages: frozenset[str],
    ) -> str | None:
        """The first candidate prefix most of a few release files are found under."""
        probes = prefix_rules.probe_paths(expected)
        if not probes:
            return None
        for candidate in tried:
            answers = [
                (path, await self._get("identity", instance.base_url, candidate + path, ["sha256"]))
                for path in probes
            ]
            if any(got.unreachable for _, got in answers):
                return None  # it stopped answering: no evidence either way
            if prefix_rules.confirmed(answers, pages):
                return candidate
        return None

    async def _observe_under(
        self,
        instance: Instance,
        prefix: str,
        reported: _Reported,
        expected: Manifest | None,
        version: str | None,
        served: _Served | None = None,
    ) -> Observation:
        """The served manifest (unless already probed), the plan and the files, with the
        release's paths under ``prefix``; an Observation with ``error`` when the
        instance could not be observed."""
        if served is None:
            probed = await self._served(instance, prefix, answered=True)
            if isinstance(probed, Observation):
                return probed
            served = probed
        on_cdn, unsafe = self._references(served.manifest)
        paths, algorithms, sampled = self._plan(
            served.manifest, served.key, expected, version, served.as_file, frozenset(on_cdn)
        )
        reused = {p: served.not_here[p] for p in paths if p in served.not_here}
        assets = await self._fetch_all(
            instance.base_url,
            [p for p in paths if p not in reused],
            algorithms,
            on_cdn=on_cdn,
            prefix=prefix,
        )
        assets.update(reused)
        return Observation(
            instance=instance,
            tls=await self.certificate(instance.base_url),
            manifest_path=served.path,
            manifest=served.manifest,
            manifest_fetch=served.fetch,
            manifest_error=served.error,
            assets=dict(sorted(assets.items())),
            unsafe_paths=tuple(unsafe),
            endpoint_version=reported.version,
            endpoint_error=reported.error,
            endpoint_note=reported.note,
            sampled=sampled,
            encodings=self.encodings,
            on_cdn=on_cdn,
        )

    async def _reported(self, instance: Instance) -> _Reported | Observation:
        """Step 1: the version endpoint's answer, if one is configured."""
        ve = self.spec.version_endpoint
        if ve is None:
            return _Reported()
        got = await self.fetcher.get_document(
            instance.base_url, ve.path, host_header=self.spec.http.host_header
        )
        if got.error is not None and got.unreachable:
            return await self._unreachable(instance, ve.path, got)
        read = read_version(got, ve.path, ve.pointer)
        error = read.error
        if error is not None and got.status in NOT_HERE:
            error += _endpoint_hint(instance.base_url, ve.path)
        return _Reported(
            answered=got.status is not None, version=read.version, error=error, note=read.note
        )

    async def _served(
        self, instance: Instance, prefix: str, *, answered: bool
    ) -> _Served | Observation:
        """Step 2: the served manifest under ``prefix``, probing the well-known names
        unless configured.

        Fetched as the instance's URL plus ``prefix + name``: the instance's URL stays
        the base every redirect must stay under, so a login redirect from a wrong
        prefix is followed (and read as "not here"), as it is from the target itself.
        """
        configured = bool(self.spec.manifest_path)
        found = _Served()
        for path in self._candidates(prefix):
            got = self._shared_body(
                await self.fetcher.get_document(
                    instance.base_url, prefix + path, host_header=self.spec.http.host_header
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
                    found.error = f"served manifest {path} answers HTTP {got.status}"
                    return found
                continue
            if not got.ok or got.body is None:
                # 5xx, 429, 401...: the instance could not be observed, which is never
                # evidence of a mismatch
                return unobservable(instance, path, got, f"HTTP {got.status}")
            try:
                found.manifest = self._parse(got, path)
                self._found_manifests[prefix] = path
                found.path, found.fetch = path, got
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
        if self.spec.manifest_path:
            return [normalise_path(self.spec.manifest_path)]
        paths = list(WELL_KNOWN_PATHS)
        known = self._found_manifests.get(prefix)
        if known in paths:
            paths.remove(known)
            paths.insert(0, known)
        return paths

    def _references(self, manifest: Manifest | None) -> tuple[dict[str, str], list[str]]:
        """Step 3: the served manifest's absolute references, as files on the CDN
        (path under the CDN base -> the reference as written) and ones never fetched."""
        on_cdn: dict[str, str] = {}
        unsafe: list[str] = []
        for raw, _why in manifest.rejected if manifest is not None else ():
            relative = self._on_cdn(raw)
            if relative is None:
                unsafe.append(raw)
            else:
                on_cdn.setdefault(relative, raw)
        return on_cdn, unsafe

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
        obs = unreachable(instance, path, got)
        if got.error_kind == ErrorKind.TLS:
            obs = replace(obs, tls=await self.certificate(instance.base_url))
        return obs

    # -- caches shared by siblings -------------------------------------------------

    def _shared_body(self, got: Fetched) -> Fetched:
        """``got`` holding the run's one copy of its body: observations keep their
        manifest fetch, and a copy per instance would grow memory with the fleet."""
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
        """Step 4: paths to fetch, hash algorithms, and whether the paths are a sample
        (memoised).

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
        algorithms = sorted(
            {"sha256"}
            | (algorithms_needed(manifest) if manifest else set())
            | (algorithms_needed(expected) if expected else set())  # an ngsw release: sha1
        )
        sampled = len(paths) < len(candidates)
        if manifest_key is not None:
            if len(self._plans) >= _MEMO_LIMIT:
                self._plans.clear()
            self._plans[key] = (expected, paths, algorithms, sampled)
        return paths, algorithms, sampled

    # -- the files -----------------------------------------------------------------

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

    async def confirm(self, obs: Observation, paths: Sequence[str]) -> Observation:
        """``obs`` with ``paths`` fetched too, under the prefix its files were found at.

        The files of the one other release an instance's content matches, that no one
        asked for: "serves release X" is said only when all of X's files were seen, so
        a drifted instance judged by its reported release's file list (no served
        manifest) is named once X's own files are fetched, and a partial build is
        caught by the very file that falls back. Only what was not fetched is added.
        """
        wanted = [p for p in paths if p not in obs.assets][:CONFIRM_LIMIT]
        if not wanted or obs.error is not None:
            return obs
        algorithms = sorted({"sha256"} | {a for f in obs.assets.values() for a in f.hashes})
        got = await self._fetch_all(
            obs.instance.base_url, wanted, algorithms, prefix=obs.layout.prefix
        )
        return replace(obs, assets=dict(sorted({**obs.assets, **got}.items())))

    async def _fetch_all(
        self,
        base_url: str,
        paths: Sequence[str],
        algorithms: Sequence[str],
        *,
        on_cdn: Mapping[str, str] | None = None,
        prefix: str = "",
    ) -> dict[str, Fetched]:
        """Step 5: every planned path, in every compared coding; what differs between
        codings wins.

        A path whose bytes depend on the coding asked for is recorded with the answer
        that differs from the identity one (browsers get it), so a stale ``.gz`` is
        compared, not hidden behind a correct uncompressed file.
        """
        located = on_cdn or {}
        jobs: list[tuple[str, str, str, str]] = []  # (coding, base, path, path fetched)
        for coding in self.encodings:
            for path in paths:
                if path in located and self.spec.cdn:
                    jobs.append((coding, self.spec.cdn, path, path))
                else:  # the release's path, under the prefix it is served at
                    jobs.append((coding, base_url, path, prefix + path))
        results = await self._run_jobs(jobs, algorithms)
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

    async def _run_jobs(
        self, jobs: Sequence[tuple[str, str, str, str]], algorithms: Sequence[str]
    ) -> dict[tuple[str, str], Fetched]:
        """Fetch each (coding, base, path, path fetched), at most ``asset_parallelism``
        at once; each answer is kept under (coding, path)."""
        results: dict[tuple[str, str], Fetched] = {}

        async def one(job: tuple[str, str, str, str]) -> None:
            coding, base, path, fetched = job
            results[(coding, path)] = await self._get(coding, base, fetched, algorithms)

        wide = self.spec.http.max_per_host if _FIRST.get() else self.asset_parallelism
        width = min(wide, len(jobs))
        if width <= 1:  # many instances in flight: one kept-alive connection each
            for job in jobs:
                await one(job)
            return results
        slots = asyncio.Semaphore(width)

        async def bounded(job: tuple[str, str, str, str]) -> None:
            async with slots:
                await one(job)

        async with asyncio.TaskGroup() as tg:
            for job in jobs:
                tg.create_task(bounded(job))
        return results


def _endpoint_hint(base_url: str, path: str) -> str:
    """How to reach a version endpoint that is not under a target with a path of its
    own: the endpoint resolves against the target URL, the assets' prefix is --prefix."""
    below = urlsplit(base_url).path
    if below in ("", "/"):
        return ""
    root = urls.base_directory(base_url)[: -len(below)] + "/"
    return (
        f" (resolved against the target {base_url}; if the endpoint is at {root}, target "
        f"{root} and give --prefix {below})"
    )


def _differs(a: Fetched, b: Fetched) -> bool:
    """Two answers for one path that a client could tell apart (status, bytes, failure)."""
    return (a.status, a.sha256, a.error_kind) != (b.status, b.sha256, b.error_kind)
