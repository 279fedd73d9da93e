"""What an instance's pages make a browser load: entry pages, their stylesheets, the rest.

Every site serves pages, while only some builds leave a manifest artifactcheck can read;
the files a user's browser asks for are named by the pages (docs/architecture.md, "the
page as a source"). For one instance this module fetches each configured entry page
(``pages``: the target itself by default), reads it with
:func:`~artifactcheck.manifests.page.parse_page`, fetches the stylesheets it loads (and
the ones those ``@import``) to a bounded depth, and returns one frozen
:class:`PagesObservation`: every reference with the entry pages that load it, where it
is fetched from (:func:`~artifactcheck.manifests.placement.place_reference`), and every
problem as a value.

Only the instance (under its base URL) and the configured CDN are ever requested; a
reference to any other origin, or moved to one by ``<base href>``, is listed and never
requested. Asset bytes are not fetched here: the references are handed on, so a file
named by a page and by a manifest can be fetched once.

The query string of a reference is part of its request path and stays in the request
(:func:`artifactcheck.fetch.urls.request_query`); it is stripped for matching with the
release's paths, so ``site.css?v=2`` and ``site.css`` are one file of the release.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.manifests.page import (
    DEFAULT_PAGE_LIMITS,
    PageLimits,
    PageReference,
    ParsedPage,
    ReadPage,
    ReferenceKind,
    read_page,
    resolve_page,
)
from artifactcheck.manifests.placement import Placement, Where, place_reference
from artifactcheck.manifests.stylesheet import (
    ParsedStylesheet,
    ReadStylesheet,
    read_stylesheet,
    resolve_stylesheet,
)
from artifactcheck.manifests.subresource import strongest_hashes
from artifactcheck.model.errors import ErrorKind
from artifactcheck.model.records import MutableRecord, Record
from artifactcheck.model.settings import MAX_PAGES, CheckSpec
from artifactcheck.model.values import Fetched, Instance, PageLoad

R = TypeVar("R")

__all__ = [
    "LoadedReference",
    "PageFiles",
    "PageLimitsPerInstance",
    "PageMemo",
    "PagesObservation",
    "StylesheetMemo",
    "linked_directories",
    "ReadDocument",
    "observe_pages",
    "page_files",
    "page_problems",
]


#: ``take(references, page, depth)``: record the references found for an entry page.
_Take = Callable[[Iterable[PageReference], str, int], None]


class PageLimitsPerInstance(Record):
    """How much of one instance's pages is read: pages, stylesheets, ``@import`` depth."""

    max_pages: int = MAX_PAGES
    max_stylesheets: int = 64
    max_css_depth: int = 3  # a page's stylesheet is depth 1; what it @imports, depth 2...


class ReadDocument(Record):
    """One page or stylesheet fetched and read: where, by whom, and what went wrong.

    ``loaded_by`` names the entry pages (as configured, e.g. ``/login``) that lead to it;
    ``problem`` is why it could not be read wholly (an HTTP status, a cap, an
    unreachable instance); ``None`` when it was.
    """

    url: str
    loaded_by: tuple[str, ...]
    fetch: Fetched | None = None
    problem: str | None = None


class LoadedReference(Record):
    """One file a browser loads from the instance's pages, merged over pages.

    ``placement`` says where it is fetched from (or why it is not); ``references`` are
    the occurrences (kind, integrity, crossorigin as written), and ``loaded_by`` the
    entry pages whose loading leads to it, in the order the pages are configured.
    """

    placement: Placement
    references: tuple[PageReference, ...]
    loaded_by: tuple[str, ...]

    @property
    def url(self) -> str:
        """The absolute URL a browser requests."""
        return self.placement.url


class PagesObservation(Record):
    """What one instance's pages load: files requested from the instance or the CDN,
    files of other origins (listed, never requested), and the documents read."""

    instance: Instance
    pages: tuple[ReadDocument, ...]
    stylesheets: tuple[ReadDocument, ...]
    files: tuple[LoadedReference, ...]  # requested: on the instance or the CDN
    not_requested: tuple[LoadedReference, ...]  # other origins, outside the base, unusable
    problems: tuple[str, ...] = ()  # caps of this observation (pages or stylesheets cut)

    @property
    def complete(self) -> bool:
        """True when every page and stylesheet was read wholly and no cap was reached:
        only then may a file missing from ``files`` be said not to be loaded."""
        documents = (*self.pages, *self.stylesheets)
        return not self.problems and all(d.problem is None for d in documents)


_SHEETS = (ReferenceKind.STYLESHEET, ReferenceKind.IMPORT)


class _Merged:
    """References merged by where they are requested, in first-seen order."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], tuple[Placement, list[PageReference], list[str]]] = {}

    def add(self, placement: Placement, reference: PageReference, page: str) -> bool:
        """Record one occurrence; True when the file is new."""
        key = (placement.where.value, placement.request_path or placement.url)
        found = self.items.get(key)
        if found is None:
            self.items[key] = (placement, [reference], [page])
            return True
        if reference not in found[1]:
            found[1].append(reference)
        if page not in found[2]:
            found[2].append(page)
        return False

    def loaded(self, requested: bool) -> tuple[LoadedReference, ...]:
        return tuple(
            LoadedReference(placement, tuple(refs), tuple(pages))
            for placement, refs, pages in self.items.values()
            if placement.requested == requested
        )


class _Sheet(MutableRecord):
    """A stylesheet to read: where it is requested, by whom, how deep."""

    placement: Placement
    loaded_by: list[str]
    depth: int


class _Readings(Generic[R]):
    """Readings kept by a key (a body's digest and the limits), bounded by what they hold.

    A reading depends only on the bytes read, so siblings' copies share one. What one
    holds grows with what a hostile instance writes (its values as written), so a
    reading over :data:`HELD_LIMIT` is never kept (it is read again for each instance)
    and past :data:`HELD_TOTAL` the oldest go first.
    """

    #: The most one kept reading may hold (its values and texts, roughly, in bytes).
    HELD_LIMIT = 256 * 1024
    #: The most all kept readings of one memo may hold together.
    HELD_TOTAL = 4 * 1024 * 1024

    def __init__(self, read: Callable[[bytes | str, PageLimits], R], held: Callable[[R], int]):
        self._read, self._held_by = read, held
        self._kept: dict[tuple[str, PageLimits], tuple[R, int]] = {}
        self._held = 0
        #: readings made, not taken from the memo (for tests and benchmarks)
        self.made = 0

    def get(self, key: str | None, data: bytes | str, limits: PageLimits) -> R:
        """The reading of ``data`` under ``limits``, kept under ``key`` (None: not kept)."""
        kept = self._kept.get((key, limits)) if key else None
        if kept is not None:
            return kept[0]
        self.made += 1
        reading = self._read(data, limits)
        size = self._held_by(reading)
        if key and size <= self.HELD_LIMIT:
            while self._kept and self._held + size > self.HELD_TOTAL:
                self._held -= self._kept.pop(next(iter(self._kept)))[1]
            self._kept[(key, limits)] = (reading, size)
            self._held += size
        return reading


class StylesheetMemo:
    """Each distinct stylesheet, and each distinct inline ``<style>``, read once per run,
    whichever sibling served it.

    Siblings serve the same stylesheet bytes and pages with the same inline styles, and
    tinycss2 is a pure-Python tokenizer (seconds for a megabyte on this project's
    benchmark machine): read per instance, a fleet of 200 would read a large sheet 200
    times. What is kept is the sheet's references as written
    (:class:`~artifactcheck.manifests.stylesheet.ReadStylesheet`, by the sheet's digest);
    each instance's are resolved again against the URL it was served at
    (:func:`~artifactcheck.manifests.stylesheet.resolve_stylesheet`), a ``urljoin`` per
    reference: the same result as reading it there. Bounded as :class:`_Readings` says.
    """

    def __init__(self) -> None:
        self._sheets = _Readings(_read_sheet, _sheet_holds)

    @property
    def parsed(self) -> int:
        """Sheets read, not taken from the memo (for tests and benchmarks)."""
        return self._sheets.made

    def parse(self, got: Fetched, url: str, limits: PageLimits) -> ParsedStylesheet:
        """``got.body`` read as the stylesheet served at ``url``."""
        assert got.body is not None
        read = self._sheets.get(got.sha256, got.body, limits)
        return resolve_stylesheet(read, url, limits=limits)

    def parse_inline(self, text: str, url: str, limits: PageLimits) -> ParsedStylesheet:
        """An inline ``<style>``'s ``text``, in the page whose base URL is ``url``."""
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        read = self._sheets.get("inline:" + digest, text, limits)
        return resolve_stylesheet(read, url, limits=limits)


class PageMemo:
    """Each distinct entry page tokenized once per run, whichever sibling served it.

    Siblings serve the same page bytes, and the tokenizer (the standard library's, in
    pure Python) is most of a page's cost: tens of milliseconds for a server-rendered
    page of 30 KB, read again for every instance of a fleet. What is kept is what the
    page says as written (:class:`~artifactcheck.manifests.page.ReadPage`: its first
    ``<base href>``, its references, inline styles and import maps, in page order, by
    the page's digest), and each instance's page is placed at the URL it was served at
    (:func:`~artifactcheck.manifests.page.resolve_page`): the same result as reading it
    there, a ``urljoin`` per reference. Bounded as :class:`_Readings` says.
    """

    def __init__(self) -> None:
        self._pages = _Readings(_read_page_data, _page_holds)

    @property
    def read(self) -> int:
        """Pages tokenized, not taken from the memo (for tests and benchmarks)."""
        return self._pages.made

    def parse(self, got: Fetched, url: str, limits: PageLimits) -> ParsedPage:
        """``got.body`` read as the page served at ``url``."""
        assert got.body is not None
        return resolve_page(self._pages.get(got.sha256, got.body, limits), url, limits=limits)


def _read_sheet(data: bytes | str, limits: PageLimits) -> ReadStylesheet:
    return read_stylesheet(data, limits=limits)


def _sheet_holds(read: ReadStylesheet) -> int:
    return sum(64 + len(raw) for _kind, raw in read.values)


def _read_page_data(data: bytes | str, limits: PageLimits) -> ReadPage:
    assert isinstance(data, bytes)
    return read_page(data, limits=limits)


def _page_holds(page: ReadPage) -> int:
    """About what a read page holds, in bytes: its texts and a record per event."""
    return sum(64 + len(e.raw) for e in page.events) + sum(len(t) for t in page.import_maps)


async def observe_pages(
    instance: Instance,
    *,
    spec: CheckSpec,
    fetcher: Fetcher,
    prefix: str = "",
    limits: PageLimits = DEFAULT_PAGE_LIMITS,
    per_instance: PageLimitsPerInstance | None = None,
    memo: StylesheetMemo | None = None,
    page_memo: PageMemo | None = None,
) -> PagesObservation:
    """Fetch and read the instance's entry pages and the stylesheets they load.

    ``prefix`` is where the release's files are served under the instance (``static/``),
    so each file's release path can be named. Never raises for anything an instance
    serves: each failure is a ``problem`` of the document it concerns.
    """
    bounds = per_instance or PageLimitsPerInstance()
    sheets_memo = memo or StylesheetMemo()
    merged = _Merged()
    problems: list[str] = []
    pages: list[ReadDocument] = []
    sheets: dict[tuple[str, str], _Sheet] = {}
    paths = spec.pages[: bounds.max_pages]
    if len(spec.pages) > bounds.max_pages:
        problems.append(f"{len(spec.pages)} pages, more than the cap of {bounds.max_pages}")

    def place(reference: PageReference) -> Placement:
        return place_reference(
            reference.url,
            instance_base=instance.base_url,
            cdn_base=spec.cdn,
            prefix=prefix,
            host_header=spec.http.host_header,
        )

    def take(references: Iterable[PageReference], page: str, depth: int) -> None:
        for reference in references:
            placement = place(reference)
            merged.add(placement, reference, page)
            if placement.requested and reference.kind in _SHEETS:
                key = (placement.where.value, placement.request_path or "")
                if key not in sheets and depth > bounds.max_css_depth:
                    deep = f"stylesheets @import-ed deeper than the cap of {bounds.max_css_depth}"
                    if deep not in problems:
                        problems.append(deep)
                    continue
                sheet = sheets.setdefault(key, _Sheet(placement, [], depth))
                if page not in sheet.loaded_by:
                    sheet.loaded_by.append(page)

    for path in paths:
        read, references, inline = await _read_page(
            instance, path, spec, fetcher, limits, page_memo or PageMemo()
        )
        pages.append(read)
        take(references, path, 1)
        for style in inline:
            parsed = sheets_memo.parse_inline(style, read.url, limits)
            take(parsed.references, path, 1)

    stylesheets = await _read_stylesheets(
        sheets,
        take,
        spec=spec,
        instance=instance,
        fetcher=fetcher,
        limits=limits,
        bounds=bounds,
        memo=sheets_memo,
    )
    if len(sheets) > bounds.max_stylesheets:
        problems.append(f"{len(sheets)} stylesheets, more than the cap of {bounds.max_stylesheets}")
    return PagesObservation(
        instance=instance,
        pages=tuple(pages),
        stylesheets=stylesheets,
        files=merged.loaded(requested=True),
        not_requested=merged.loaded(requested=False),
        problems=tuple(problems),
    )


async def _read_page(
    instance: Instance,
    path: str,
    spec: CheckSpec,
    fetcher: Fetcher,
    limits: PageLimits,
    memo: PageMemo,
) -> tuple[ReadDocument, tuple[PageReference, ...], tuple[str, ...]]:
    """One entry page: its read, its references, its inline styles."""
    got = await fetcher.get_document(
        instance.base_url,
        path.removeprefix("/"),  # "/" is the instance's URL itself, "/login" under it
        max_bytes=limits.max_bytes,
        host_header=spec.http.host_header,
    )
    problem = _fetch_problem(got, f"page {path}")
    if problem is not None or got.body is None:
        return ReadDocument(got.url, (path,), got, problem or f"page {path}: no body"), (), ()
    parsed = memo.parse(got, got.url, limits)
    problem = f"page {path}: {parsed.problem}" if parsed.problem else None
    read = ReadDocument(got.url, (path,), got, problem)
    return read, parsed.references, parsed.inline_styles


async def _read_stylesheets(
    sheets: dict[tuple[str, str], _Sheet],
    take: _Take,
    *,
    spec: CheckSpec,
    instance: Instance,
    fetcher: Fetcher,
    limits: PageLimits,
    bounds: PageLimitsPerInstance,
    memo: StylesheetMemo,
) -> tuple[ReadDocument, ...]:
    """Read the stylesheets found so far, and those they ``@import``, breadth first."""
    done: list[ReadDocument] = []
    read_keys: set[tuple[str, str]] = set()
    while len(read_keys) < bounds.max_stylesheets:
        pending = [(k, s) for k, s in sheets.items() if k not in read_keys]
        if not pending:
            break
        key, sheet = min(pending, key=lambda item: item[1].depth)
        read_keys.add(key)
        request, _, query = (sheet.placement.request_path or "").partition("?")
        base = instance.base_url if sheet.placement.where is Where.INSTANCE else spec.cdn or ""
        host = spec.http.host_header if sheet.placement.where is Where.INSTANCE else ""
        got = await fetcher.get_document(
            base, request, max_bytes=limits.max_stylesheet_bytes, host_header=host, query=query
        )
        loaded_by = tuple(sheet.loaded_by)
        problem = _fetch_problem(got, f"stylesheet {sheet.placement.url}")
        if problem is not None or got.body is None:
            done.append(ReadDocument(sheet.placement.url, loaded_by, got, problem or "no body"))
            continue
        parsed = memo.parse(got, sheet.placement.url, limits)
        problem = f"stylesheet {sheet.placement.url}: {parsed.problem}" if parsed.problem else None
        done.append(ReadDocument(sheet.placement.url, loaded_by, got, problem))
        for page in loaded_by:
            take(parsed.references, page, sheet.depth + 1)
    return tuple(done)


def _fetch_problem(got: Fetched, what: str) -> str | None:
    """Why a fetched page or stylesheet cannot be read, or None when it can."""
    if got.error is not None:
        return f"{what}: {got.error}"
    if not got.ok:
        return f"{what} answers HTTP {got.status}"
    return None


class PageFiles(Record):
    """What the pages load, as paths an observation fetches: the release's paths under
    the prefix on the instance, paths under the CDN's base URL, and what is not fetched."""

    on_instance: dict[str, PageLoad]
    on_cdn: dict[str, tuple[str, PageLoad]]  # path under the CDN base -> (URL, load)
    elsewhere: tuple[str, ...]  # other origins, outside the base or the prefix: never requested
    algorithms: frozenset[str]  # the strongest SRI algorithm of every integrity= given
    queries: dict[str, str]  # path -> the query a page requests it with (site.css?v=2)


def page_files(observed: PagesObservation, prefix: str) -> PageFiles:
    """The files of ``observed`` (read with no prefix) as paths under ``prefix``.

    Pages are read once per instance, before the prefix its release's files are served
    under is known (it may be detected after); a file outside the prefix is not a file
    of the release, so it is listed with the references not requested.
    """
    on_instance: dict[str, PageLoad] = {}
    on_cdn: dict[str, tuple[str, PageLoad]] = {}
    elsewhere = [loaded.url for loaded in observed.not_requested]
    algorithms: set[str] = set()
    queries: dict[str, str] = {}
    for loaded in observed.files:
        path = loaded.placement.release_path
        load = _load(loaded)
        if load.integrity:
            strongest = strongest_hashes(load.integrity)
            if strongest is not None:
                algorithms.add(strongest[0])
        if path is None:
            elsewhere.append(loaded.url)
            continue
        if loaded.placement.where is Where.CDN:
            on_cdn.setdefault(path, (loaded.url, load))
        elif path.startswith(prefix) and path != prefix:
            path = path[len(prefix) :]
            on_instance.setdefault(path, load)
        else:
            elsewhere.append(loaded.url)
            continue
        query = (loaded.placement.request_path or "").partition("?")[2]
        if query:  # the first page's query for a file several pages load
            queries.setdefault(path, query)
    return PageFiles(on_instance, on_cdn, tuple(elsewhere), frozenset(algorithms), queries)


def _load(loaded: LoadedReference) -> PageLoad:
    """The entry pages loading a file and the first ``integrity=`` one of them gives."""
    for reference in loaded.references:
        if reference.integrity_raw is not None:
            return PageLoad(loaded.loaded_by, reference.integrity, loaded.loaded_by[0])
    return PageLoad(loaded.loaded_by)


#: What a document answered that no reader should try again: its bytes are hostile.
_UNREADABLE = frozenset({ErrorKind.TOO_LARGE, ErrorKind.DECODE, ErrorKind.PROTOCOL})


def linked_directories(observed: PagesObservation) -> tuple[str, ...]:
    """The directories of the instance the pages load files from, as prefixes, most
    files first: where a release's files are likely served (Encore's ``build/``) when
    they are not at the target itself."""
    found: Counter[str] = Counter()
    for loaded in observed.files:
        path = loaded.placement.release_path  # read with no prefix: the path itself
        if loaded.placement.where is Where.INSTANCE and path is not None and "/" in path:
            found[path.rsplit("/", 1)[0] + "/"] += 1
    return tuple(directory for directory, _ in found.most_common())


def page_problems(observed: PagesObservation) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Why the pages, or the stylesheets they load, were not read wholly: what they
    serve is unreadable (over a cap, undecodable: the instance cannot be judged as a
    browser sees it), and what failed to answer (a 404 page, a stylesheet refused:
    fewer files are known, no more)."""
    unreadable = list(observed.problems)
    failed = []
    for document in (*observed.pages, *observed.stylesheets):
        if document.problem is None:
            continue
        got = document.fetch
        if got is not None and (got.ok or got.error_kind in _UNREADABLE):
            unreadable.append(document.problem)
        else:
            failed.append(document.problem)
    return tuple(unreadable), tuple(failed)
