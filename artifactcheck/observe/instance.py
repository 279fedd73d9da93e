"""Observing one instance: what it serves, fetched under the run's settings and caches.

One :class:`Observer` serves a whole run (or, in the controller, a whole check): it
remembers which manifest name the fleet serves, parses each distinct manifest body
once and plans each version's sample once, so a thousand siblings cost one parse.
The steps of one observation, in order: the version endpoint
(:mod:`~artifactcheck.observe.version`), the served manifest
(:mod:`~artifactcheck.observe.served`), the expected release, the plan (which files,
which hashes: :mod:`~artifactcheck.observe.plan`), the files in every compared coding
(:mod:`~artifactcheck.observe.files`), the certificate. The Observer runs them in order,
within the instance's deadline, and finds the prefix a release's files are served
under. Whatever happens, the result is an
:class:`~artifactcheck.model.values.Observation` for the judge, never an exception.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Protocol
from urllib.parse import urlsplit

from artifactcheck.discover.sample import draw_seed
from artifactcheck.fetch import urls
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.judge import prefix as prefix_rules
from artifactcheck.judge.statuses import NOT_HERE
from artifactcheck.model.errors import ErrorKind
from artifactcheck.model.records import MutableRecord, replace
from artifactcheck.model.settings import CheckSpec
from artifactcheck.model.values import (
    CertInfo,
    Expectation,
    Fetched,
    Instance,
    Layout,
    Manifest,
    Observation,
    PageLoad,
)
from artifactcheck.observe.certs import Certificates
from artifactcheck.observe.failures import check_failed, describe, unreachable
from artifactcheck.observe.files import FIRST as _FIRST
from artifactcheck.observe.files import Files
from artifactcheck.observe.pages import (
    PageMemo,
    PagesObservation,
    StylesheetMemo,
    linked_directories,
    observe_pages,
    page_files,
    page_problems,
)
from artifactcheck.observe.plan import Plans, cdn_references
from artifactcheck.observe.served import Served, ServedManifests
from artifactcheck.observe.version import read_version
from artifactcheck.release.sources import limits_of

log = logging.getLogger("artifactcheck")


class _Reported(MutableRecord):
    """What the version endpoint said, and whether the instance answered at all."""

    answered: bool = False  # an instance that answered anything is never "unreachable"
    version: str | None = None
    error: str | None = None
    note: str | None = None  # how the version was found, when the user did not say
    pages: PagesObservation | None = None  # the entry pages, read once per instance


class ReleaseLookup(Protocol):
    """Where an Observer gets the expected release of a version: the run's
    :class:`~artifactcheck.release.sources.Expectations`, or, in an observing process
    (:mod:`artifactcheck.observe.pool`), its owner's, asked over a pipe; the previous
    releases' observer (:mod:`artifactcheck.observe.previous_release`) asks the same."""

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
        # learned from the instances observed so far: the prefix a release's files were
        # last found under
        self._learned_prefix = ""
        # Instances are observed a bounded number at a time, each to completion (see
        # observe); the files step counts them, to share request slots between their assets.
        self._slots: asyncio.Semaphore | None = None
        self._files = Files(spec=spec, fetcher=fetcher)
        # Pods waiting out of traffic go first (observe(first=True)): while one is
        # observed, no other instance starts; the ones under way finish.
        self._firsts = 0
        self._no_firsts: asyncio.Event | None = None
        self._certs = Certificates(spec.http, fetcher.egress)
        # siblings serve the same manifest: each distinct one is parsed, and its sample
        # drawn, once per run
        self._manifests = ServedManifests(
            spec=spec, fetcher=fetcher, limits=self.limits, unreachable=self._unreachable
        )
        self._plans = Plans(spec)
        # siblings' pages and stylesheets are the same bytes: each distinct one read once
        self._stylesheets = StylesheetMemo()
        self._pages_read = PageMemo()

    async def aclose(self) -> None:
        """Nothing to close: every coding is asked for through the run's one fetcher."""

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
        self._files.active += 1
        started = time.perf_counter()
        try:
            return await self._observe_within_deadline(instance)
        except Exception as exc:  # noqa: BLE001 - one instance never ends the run
            log.warning("check of %s failed: %s", instance.name, describe(exc))
            failed = check_failed(instance, self.spec.manifest_path or "", exc)
            return replace(failed, elapsed=time.perf_counter() - started), None
        finally:
            self._files.active -= 1

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
        served = await self._manifests.served(instance, looked, answered=reported.answered)
        if isinstance(served, Observation):
            return served, None
        reported.pages = await self._pages(instance)
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
                moved = self._manifests.moved(instance, served, looked + below)
                again = await self._observe_under(
                    instance, looked + below, reported, None, version, moved
                )
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
            await self._redirected(instance),
        )
        linked = linked_directories(reported.pages) if reported.pages is not None else ()
        tried = prefix_rules.candidates(looked, *evidence, linked=linked)
        pages = prefix_rules.page_hashes(obs.assets, expected)
        found = await self._find_prefix(instance, tried, expected, pages)
        if configured is not None or found is None:
            layout = Layout(prefix=looked, detected=learned, found_at=found, tried=tuple(tried))
            return replace(obs, layout=layout), expectation
        self._learned_prefix = found
        # a configured manifest found where it was asked for stays there
        kept = self._manifests.moved(instance, served, found) if self.spec.manifest_path else None
        again = await self._observe_under(instance, found, reported, expected, version, kept)
        if again.error is not None:
            return again, None
        return replace(again, layout=Layout(prefix=found, detected=bool(found))), expectation

    async def _redirected(self, instance: Instance) -> str | None:
        """Where the target's own URL redirects, as a prefix (a root answering
        ``302 /app/``): evidence of where the site lives. One request, made only when
        the release's files were not found where they were looked for."""
        got = await self.fetcher.get_document(
            instance.base_url, "", host_header=self.spec.http.host_header
        )
        return prefix_rules.redirect_prefix(instance.base_url, got.url) if got.url else None

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
                (
                    path,
                    await self._files.get(
                        "identity", instance.base_url, candidate + path, ["sha256"]
                    ),
                )
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
        served: Served | None = None,
    ) -> Observation:
        """The served manifest (unless already probed), the plan and the files, with the
        release's paths under ``prefix``; an Observation with ``error`` when the
        instance could not be observed."""
        if served is None:
            probed = await self._manifests.served(instance, prefix, answered=True)
            if isinstance(probed, Observation):
                return probed
            served = probed
        if expected is not None and served.fetch is None and not self.spec.manifest_path:
            # none at a well-known name: the release names its own (Sprockets 3/4)
            probed = await self._manifests.from_release(instance, prefix, expected, served)
            if isinstance(probed, Observation):
                return probed
            served = probed
        on_cdn, unsafe = cdn_references(served.manifest, self.spec.cdn, self.limits)
        loaded = page_files(reported.pages, prefix) if reported.pages is not None else None
        paths, algorithms, sampled = self._plans.plan(
            served.manifest,
            served.key,
            expected,
            version,
            served.as_file,
            frozenset(on_cdn),
            seed=self.seed,
        )
        loads: dict[str, PageLoad] = {}
        if loaded is not None:  # a file listed by the manifest and a page is fetched once
            loads = {**loaded.on_instance, **{p: load for p, (_, load) in loaded.on_cdn.items()}}
            on_cdn = {**{p: url for p, (url, _) in loaded.on_cdn.items()}, **on_cdn}
            paths = [*paths, *sorted(set(loads) - set(paths))]
            algorithms = sorted(set(algorithms) | loaded.algorithms)
        problems = page_problems(reported.pages) if reported.pages is not None else ((), ())
        reused = {p: served.answered[p] for p in paths if p in served.answered}
        assets = await self._files.fetch_all(
            instance.base_url,
            [p for p in paths if p not in reused],
            algorithms,
            on_cdn=on_cdn,
            prefix=prefix,
            queries=loaded.queries if loaded is not None else None,
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
            encodings=self._files.encodings,
            on_cdn=on_cdn,
            page_loads=loads,
            page_elsewhere=loaded.elsewhere if loaded is not None else (),
            page_problems=problems[0],
            page_failures=problems[1],
        )

    async def _pages(self, instance: Instance) -> PagesObservation | None:
        """The instance's entry pages and what they load (``pages``; none: not read)."""
        if not self.spec.pages:
            return None
        return await observe_pages(
            instance,
            spec=self.spec,
            fetcher=self.fetcher,
            memo=self._stylesheets,
            page_memo=self._pages_read,
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
        got = await self._files.fetch_all(
            obs.instance.base_url, wanted, algorithms, prefix=obs.layout.prefix
        )
        return replace(obs, assets=dict(sorted({**obs.assets, **got}.items())))


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
