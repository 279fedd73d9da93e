"""What a browser loads from an HTML page: its scripts, stylesheets, preloads, icons, images.

Every site has a page, while only some builds leave a manifest artifactcheck can read; the
page names every file a user's browser asks for (docs/architecture.md, "the page as a
source"). This module reads one page's bytes and returns the references a browser would
fetch (scripts, stylesheets, preloads, icons, the web app manifest, images, and the modules
an import map names, which scripts load with ``import()``), each resolved against the
page URL and the first ``<base href>`` (RFC 3986, as ``urllib.parse.urljoin`` does), with
its ``integrity=`` hashes and ``crossorigin``.

It reads in two steps: :func:`read_page` tokenizes the bytes into what the page says as
written, in page order (nothing of it depends on where the page is served), and
:func:`resolve_page` places that at one URL. The first is nearly all the cost and the
second a ``urljoin`` per reference, so a fleet's one page is tokenized once and placed at
each instance (:class:`artifactcheck.observe.pages.PageMemo`); :func:`parse_page` is
both steps.

The tokenizer is the standard library's :class:`html.parser.HTMLParser`: it follows the
HTML tokenizer closely enough for start tags and attributes (unquoted values, duplicate
attributes, ``<script>``/``<style>`` raw text, unclosed tags at the end), needs no
dependency, never builds a tree (so nesting cannot exhaust the stack), and accepts any
text without raising for malformed markup. Regular expressions over HTML would misread
comments, raw text and attribute quoting; a tree builder (html5lib, lxml) would add a
dependency for a tree this module never uses. Python 3.11's tokenizer rescans an
unfinished construct for every later ``<`` (quadratic on hostile input), so
:func:`_tokenize` feeds it in slices and caps what it holds unparsed; each hostile case of
tests/pages/test_page_hostile.py ends within seconds.

The page comes from an instance and is hostile: its size, references, open elements,
attributes per tag and attribute length are capped (:class:`PageLimits`). Exceeding a cap,
or anything the tokenizer chokes on, is a :class:`ParsedPage` whose ``problem`` says why,
never an exception; the references read before it are kept for the report, but a page with
a problem must not be judged as complete.
"""

from __future__ import annotations

import json
from enum import StrEnum
from html.parser import HTMLParser
from typing import NamedTuple
from urllib.parse import urljoin, urlsplit

from artifactcheck.manifests.integrity import parse_sri
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.model.records import Record

__all__ = [
    "PageLimits",
    "PageReference",
    "ParsedPage",
    "ReferenceKind",
    "parse_integrity",
    "ReadPage",
    "parse_page",
    "parse_srcset",
    "read_page",
    "resolve_page",
    "resolve_reference",
]


class ReferenceKind(StrEnum):
    """Why a browser fetches a reference: the element and relation that name it."""

    SCRIPT = "script"
    MODULE = "module"  # <script type=module>
    STYLESHEET = "stylesheet"
    MODULEPRELOAD = "modulepreload"
    PRELOAD = "preload"
    PREFETCH = "prefetch"
    ICON = "icon"
    MANIFEST = "manifest"  # the web app manifest
    IMAGE = "image"  # <img src/srcset>
    SOURCE = "source"  # <source src/srcset> in <picture>, <video>, <audio>
    IMPORT_MAP = "importmap"  # a module named in <script type=importmap>: a dynamic import()
    IMPORT = "import"  # a stylesheet's @import (artifactcheck.manifests.stylesheet)
    CSS_URL = "css-url"  # a stylesheet's url(...)


class PageLimits(Record):
    """Caps applied while reading one page (and its stylesheets)."""

    max_bytes: int = 2 * 1024 * 1024
    # tinycss2 is pure Python (about 5 microseconds a byte here): a smaller cap than pages
    max_stylesheet_bytes: int = 1024 * 1024
    max_references: int = 2_000
    max_depth: int = 1_024  # open elements; browsers flatten beyond 512
    max_attributes: int = 256  # per tag
    max_attribute_chars: int = 16_384
    max_inline_styles: int = 64
    max_tokens: int = 500_000  # tags, texts, comments: each costs the tokenizer microseconds
    max_pending: int = 65_536  # characters of one unfinished tag, comment or declaration
    feed_slice: int = 8_192  # characters handed to the tokenizer at a time


DEFAULT_PAGE_LIMITS = PageLimits()


class PageReference(Record):
    """One resource a browser loads from a page.

    ``raw`` is the attribute value as written, ``url`` the absolute URL it resolves to.
    ``integrity`` holds every valid ``(algorithm, hex digest)`` of the ``integrity=``
    attribute, in the order written (several per algorithm allowed, unknown ones
    dropped); ``integrity_raw`` the attribute itself, ``None`` when absent.
    """

    raw: str
    url: str
    kind: ReferenceKind
    integrity: tuple[tuple[str, str], ...] = ()
    integrity_raw: str | None = None
    crossorigin: str | None = None


class ParsedPage(Record):
    """The references of one page, the base URL they were resolved against, and why the
    page could not be read wholly (``problem``; ``None`` when it was)."""

    url: str
    base_url: str
    references: tuple[PageReference, ...] = ()
    inline_styles: tuple[str, ...] = ()  # <style> contents, resolved against base_url
    problem: str | None = None

    @property
    def complete(self) -> bool:
        """True when every reference of the page was read within the caps."""
        return self.problem is None


# <link rel> tokens that make a browser fetch the href, with the kind they give; the
# first listed that a link carries wins ("preload stylesheet" is a stylesheet).
_LINK_RELS: tuple[tuple[str, ReferenceKind], ...] = (
    ("stylesheet", ReferenceKind.STYLESHEET),
    ("modulepreload", ReferenceKind.MODULEPRELOAD),
    ("preload", ReferenceKind.PRELOAD),
    ("prefetch", ReferenceKind.PREFETCH),
    ("icon", ReferenceKind.ICON),
    ("apple-touch-icon", ReferenceKind.ICON),
    ("apple-touch-icon-precomposed", ReferenceKind.ICON),
    ("mask-icon", ReferenceKind.ICON),
    ("manifest", ReferenceKind.MANIFEST),
)

# Script types a browser runs (and so fetches): empty, a JavaScript MIME type, module.
_JS_TYPES = frozenset(
    {
        "",
        "module",
        "application/ecmascript",
        "application/javascript",
        "application/x-ecmascript",
        "application/x-javascript",
        "text/ecmascript",
        "text/javascript",
        "text/javascript1.0",
        "text/javascript1.1",
        "text/javascript1.2",
        "text/javascript1.3",
        "text/javascript1.4",
        "text/javascript1.5",
        "text/jscript",
        "text/livescript",
        "text/x-ecmascript",
        "text/x-javascript",
    }
)

# Elements without an end tag, and those whose end tag may be left out: neither counts
# as an open element, so a list of 5,000 <li> without </li> is not "nested 5,000 deep".
_VOID = frozenset(
    "area base br col embed hr img input link meta source track wbr "
    "p li dt dd option optgroup tr td th thead tbody tfoot rb rt rp rtc colgroup caption "
    "html head body".split()
)

# ASCII whitespace as the URL parser strips it around, and tab/newline it drops within.
_ASCII_WS = "\t\n\f\r "
_SRI_LIMITS = ManifestLimits()


class _PageLimitExceeded(Exception):
    """A cap was exceeded: stop tokenizing, the page is not read wholly."""


def parse_integrity(value: str | None) -> tuple[tuple[str, str], ...]:
    """The ``(algorithm, hex)`` pairs of an ``integrity=`` value, in the order written.

    Each whitespace-separated token is read by :func:`~artifactcheck.manifests.integrity.parse_sri`
    (the one rule for SRI tokens: unknown algorithms, bad base64 and wrong lengths are
    ignored, as browsers do). Unlike a manifest's one hash per algorithm, a page may list
    several digests of one algorithm, and any of them matching is enough, so all are kept.
    """
    if not value:
        return ()
    pairs: list[tuple[str, str]] = []
    for token in value.split():
        if len(token) > _SRI_LIMITS.max_string:
            continue
        pairs.extend(parse_sri(token, _SRI_LIMITS).items())
    return tuple(dict.fromkeys(pairs))


def parse_srcset(value: str) -> list[str]:
    """The image URLs of a ``srcset`` value, by the HTML standard's parsing algorithm.

    Written by hand: the standard library has no srcset parser, and splitting on commas
    is wrong (a URL may hold commas; descriptors may hold parenthesised commas).
    """
    urls: list[str] = []
    pos, end = 0, len(value)
    while pos < end:
        while pos < end and (value[pos] in _ASCII_WS or value[pos] == ","):
            pos += 1
        start = pos
        while pos < end and value[pos] not in _ASCII_WS:
            pos += 1
        url = value[start:pos]
        if not url:
            break
        if url.endswith(","):
            url = url.rstrip(",")
        else:
            # skip the descriptors up to the next comma outside parentheses
            depth = 0
            while pos < end:
                char = value[pos]
                if char == "(":
                    depth += 1
                elif char == ")" and depth:
                    depth -= 1
                elif char == "," and not depth:
                    pos += 1
                    break
                pos += 1
        if url:
            urls.append(url)
    return urls


def _clean_url(raw: str) -> str:
    """An attribute value as the URL parser sees it: outer ASCII whitespace stripped,
    tabs and newlines inside removed."""
    return raw.strip(_ASCII_WS).replace("\t", "").replace("\n", "").replace("\r", "")


def resolve_reference(raw: str, base: str) -> str | None:
    """The absolute URL a browser fetches for ``raw`` from the network; None when it
    fetches nothing there (empty, a fragment alone, ``data:``, ``javascript:``, ``blob:``:
    any scheme but http and https) or the value is no URL."""
    cleaned = _clean_url(raw)
    if not cleaned or cleaned.startswith("#"):
        return None
    try:
        if not urlsplit(cleaned).scheme:
            # browsers read "\" as "/" in http(s) URLs: "\\evil.example\x" is another host
            cleaned = cleaned.replace("\\", "/")
        url = urljoin(base, cleaned)
        parts = urlsplit(url)
    except ValueError:
        return None  # e.g. an invalid IPv6 literal: no request can be made of it
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return url


class _Collector(HTMLParser):
    """Tokenizer callbacks that record, in page order, what a browser would load (as
    written) under the caps; nothing here depends on the page's URL."""

    def __init__(self, limits: PageLimits) -> None:
        super().__init__(convert_charrefs=True)
        self.limits = limits
        self.base_seen = False
        self.events: list[_Event] = []
        self.written: set[tuple[bool, str, ReferenceKind, str | None]] = set()
        self.styles = 0
        self.open: list[str] = []
        self.template_depth = 0  # inside <template>: inert, nothing is fetched
        self.in_style = False
        self.in_import_map = False
        self.import_maps: list[str] = []
        self.tokens = 0

    # ------------------------------------------------------------------ tokens

    def _count(self) -> None:
        self.tokens += 1
        if self.tokens > self.limits.max_tokens:
            raise _PageLimitExceeded(f"more than the cap of {self.limits.max_tokens} tokens")

    def handle_comment(self, data: str) -> None:
        self._count()

    def handle_decl(self, decl: str) -> None:
        self._count()

    def handle_pi(self, data: str) -> None:
        self._count()

    def unknown_decl(self, data: str) -> None:
        self._count()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._count()
        self.in_import_map = False
        self._element(tag, attrs)
        if tag not in _VOID:
            self.open.append(tag)
            if len(self.open) > self.limits.max_depth:
                raise _PageLimitExceeded(
                    f"elements nested deeper than the cap of {self.limits.max_depth}"
                )
            if tag == "template":
                self.template_depth += 1
        self.in_style = tag == "style"

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._count()
        self._element(tag, attrs)  # "<script src=x />": the slash is ignored, as browsers do

    def handle_endtag(self, tag: str) -> None:
        self._count()
        self.in_style = self.in_import_map = False
        if tag in self.open:
            while self.open:
                closed = self.open.pop()
                if closed == "template":
                    self.template_depth -= 1
                if closed == tag:
                    break

    def handle_data(self, data: str) -> None:
        self._count()
        if self.in_style and not self.template_depth:
            if self.styles >= self.limits.max_inline_styles:
                raise _PageLimitExceeded(
                    f"more than the cap of {self.limits.max_inline_styles} inline styles"
                )
            self.styles += 1
            self.events.append(_Event(_STYLE, data))
        elif self.in_import_map:
            if len(self.import_maps) >= self.limits.max_inline_styles:
                raise _PageLimitExceeded(
                    f"more than the cap of {self.limits.max_inline_styles} import maps"
                )
            self.import_maps.append(data)

    # ------------------------------------------------------------------ elements

    def _element(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if len(attrs) > self.limits.max_attributes:
            raise _PageLimitExceeded(
                f"a <{tag}> with {len(attrs)} attributes, more than the cap of "
                f"{self.limits.max_attributes}"
            )
        values: dict[str, str] = {}
        for name, value in attrs:
            text = value or ""
            if len(text) > self.limits.max_attribute_chars:
                raise _PageLimitExceeded(
                    f"a <{tag}> {name}= attribute of {len(text)} characters, more than the "
                    f"cap of {self.limits.max_attribute_chars}"
                )
            values.setdefault(name, text)  # the first of duplicate attributes wins
        if self.template_depth:
            return
        if tag == "base":
            self._base(values)
        elif tag == "script":
            self._script(values)
        elif tag == "link":
            self._link(values)
        elif tag in ("img", "source"):
            kind = ReferenceKind.IMAGE if tag == "img" else ReferenceKind.SOURCE
            if "src" in values:
                self._add(values["src"], kind, values)
            for url in parse_srcset(values.get("srcset", "")):
                self._add(url, kind, values)

    def _base(self, values: dict[str, str]) -> None:
        # only the first <base href> counts; one that is no http(s) URL is ignored
        if self.base_seen or "href" not in values:
            return
        self.base_seen = True
        self.events.append(_Event(_BASE, values["href"]))

    def _script(self, values: dict[str, str]) -> None:
        kind_of = values.get("type", "").strip(_ASCII_WS).lower()
        if kind_of == "importmap" and "src" not in values:
            self.in_import_map = True  # its JSON follows as the element's text
            return
        if "src" not in values or kind_of not in _JS_TYPES:
            return  # a data block (type=text/template, importmap): never fetched
        kind = ReferenceKind.MODULE if kind_of == "module" else ReferenceKind.SCRIPT
        self._add(values["src"], kind, values, integrity=True)

    def _link(self, values: dict[str, str]) -> None:
        rels = set(values.get("rel", "").lower().split())
        if "href" not in values:
            return
        for rel, kind in _LINK_RELS:
            if rel in rels:
                subresource = kind in (
                    ReferenceKind.STYLESHEET,
                    ReferenceKind.MODULEPRELOAD,
                    ReferenceKind.PRELOAD,
                )
                self._add(values["href"], kind, values, integrity=subresource)
                return

    def _add(
        self, raw: str, kind: ReferenceKind, values: dict[str, str], *, integrity: bool = False
    ) -> None:
        sri = values.get("integrity") if integrity else None
        # the same value again under the same base resolves to the same URL, which the
        # placing keeps once (its first crossorigin): kept once here too
        key = (self.base_seen, raw, kind, sri)
        if key not in self.written:
            self.written.add(key)
            self.events.append(_Event(_REFERENCE, raw, kind, sri, values.get("crossorigin")))


_BASE, _REFERENCE, _STYLE = "base", "reference", "style"


class _Event(NamedTuple):
    """One thing the page says, as written: its first ``<base href>``, a reference (raw,
    kind, ``integrity=`` when it counts, ``crossorigin``), or an inline style's text."""

    what: str
    raw: str
    kind: ReferenceKind | None = None
    integrity: str | None = None
    crossorigin: str | None = None


class ReadPage(Record):
    """A page's bytes read, before any URL: what it says in page order, its import maps'
    texts, and why the reading stopped (``problem``; ``None`` when it read to the end).

    The tokenizer is most of a page's cost (tens of milliseconds for a server-rendered
    page of 30 KB) and depends only on the bytes, so a run reads each distinct page once
    (:class:`artifactcheck.observe.pages.PageMemo`) and :func:`resolve_page` places it at
    each instance's URL, as reading it there would."""

    events: tuple[_Event, ...] = ()
    import_maps: tuple[str, ...] = ()
    problem: str | None = None


def import_map_addresses(text: str) -> list[str]:
    """The module addresses of an import map's JSON, as the HTML standard reads them.

    An address must be URL-like (absolute, or starting with ``/``, ``./`` or ``../``);
    one ending in ``/`` maps a prefix, a directory rather than a file, and names nothing
    to fetch. A map that is not valid JSON is ignored, as browsers ignore it.
    """
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return []
    if not isinstance(doc, dict):
        return []
    tables = [doc.get("imports")]
    scopes = doc.get("scopes")
    if isinstance(scopes, dict):
        tables.extend(scopes.values())
    found: list[str] = []
    for table in tables:
        if not isinstance(table, dict):
            continue
        for address in table.values():
            if isinstance(address, str) and _url_like(address) and not address.endswith("/"):
                found.append(address)
    return found


def _url_like(address: str) -> bool:
    if address.startswith(("/", "./", "../")):
        return True
    try:
        return bool(urlsplit(address).scheme)
    except ValueError:
        return False


def decode_page(data: bytes) -> str:
    """A page's text as a browser decodes a UTF-8 document: a BOM dropped, invalid bytes
    as U+FFFD, NULs as U+FFFD (the tokenizer's rule for them)."""
    text = data.decode("utf-8-sig", errors="replace")
    return text.replace("\x00", "\ufffd")


def _tokenize(collector: _Collector, text: str, limits: PageLimits) -> None:
    """Feed ``text`` in slices, keeping the tokenizer's work linear in the page's size.

    Python 3.11's tokenizer rescans an unfinished construct (``<a <a <a ...`` with no
    ``>``, ``</</``, ``<?<?``) from its start for every later ``<``: quadratic, minutes
    for a few hundred kilobytes. Fed in slices, what it holds unparsed (``rawdata``) is
    that construct; past ``max_pending`` characters outside ``<script>``/``<style>`` raw
    text (whose end is found by one linear search) no browser-loaded tag can be in it,
    and the page is refused. ``close()`` is never called: at the end of the page it
    re-reads an unfinished tag as text, quadratically, where a browser drops the tag
    (and with it any reference it holds), as skipping it does.
    """
    lowered = text.lower()
    start = 0
    while start < len(text):
        end = start + limits.feed_slice
        if collector.cdata_elem is not None:
            # raw text: hand it over up to its end tag at once, else the tokenizer
            # searches the growing text again for every slice
            found = lowered.find("</" + collector.cdata_elem, start)
            end = len(text) if found < 0 else max(end, found + 2)
        collector.feed(text[start:end])
        start = end
        if len(collector.rawdata) > limits.max_pending and collector.cdata_elem is None:
            raise _PageLimitExceeded(
                f"a tag, comment or declaration longer than the cap of {limits.max_pending} "
                "characters (or never closed)"
            )


def read_page(data: bytes, *, limits: PageLimits = DEFAULT_PAGE_LIMITS) -> ReadPage:
    """What ``data`` says, as written, under the caps that do not depend on its URL.

    Never raises for any ``data``: a page over a cap, or one the tokenizer cannot read,
    is a :class:`ReadPage` with ``problem`` set and what was read before it.
    """
    if len(data) > limits.max_bytes:
        return ReadPage(
            problem=f"page of {len(data)} bytes, more than the cap of {limits.max_bytes}"
        )
    collector = _Collector(limits)
    problem: str | None = None
    try:
        _tokenize(collector, decode_page(data), limits)
    except _PageLimitExceeded as exc:
        problem = str(exc)
    except (AssertionError, ValueError, IndexError, RecursionError) as exc:
        # html.parser has raised these on some malformed declarations in past releases;
        # a page is hostile input, so it is a reason, never an exception
        problem = f"the page could not be tokenized: {type(exc).__name__}: {exc}"
    return ReadPage(
        events=tuple(collector.events),
        import_maps=tuple(collector.import_maps) if problem is None else (),
        problem=problem,
    )


def resolve_page(
    read: ReadPage, page_url: str, *, limits: PageLimits = DEFAULT_PAGE_LIMITS
) -> ParsedPage:
    """The page ``read`` as served at ``page_url``: every reference resolved against the
    page URL and its first ``<base href>`` in page order, each (kind, URL, integrity)
    once, under the cap of references; then the modules its import maps name (files a
    browser loads when a script imports them, such as a bundler's lazy chunks)."""
    placed = _Placed(page_url, limits)
    problem = read.problem
    try:
        for event in read.events:
            if event.what == _REFERENCE:
                assert event.kind is not None
                placed.add(event.raw, event.kind, event.integrity, event.crossorigin)
            elif event.what == _STYLE:
                placed.styles.append(event.raw)
            else:
                placed.base(event.raw)
        for text in read.import_maps:
            for address in import_map_addresses(text):
                placed.add(address, ReferenceKind.IMPORT_MAP, None, None)
    except _PageLimitExceeded as exc:
        problem = str(exc)
    return ParsedPage(
        url=page_url,
        base_url=placed.base_url,
        references=tuple(placed.references),
        inline_styles=tuple(placed.styles),
        problem=problem,
    )


class _Placed:
    """A page's references placed at one URL, as :func:`resolve_page` reads them."""

    def __init__(self, page_url: str, limits: PageLimits) -> None:
        self.page_url = self.base_url = page_url
        self.limits = limits
        self.references: list[PageReference] = []
        self.styles: list[str] = []
        self.seen: set[tuple[str, str, str | None]] = set()
        self.resolved: dict[str, str | None] = {}  # raw -> URL, under the current base

    def base(self, href: str) -> None:
        # the first <base href> only (the reader keeps no other); no http(s) URL: ignored
        resolved = resolve_reference(href, self.page_url)
        if resolved is not None:
            self.base_url = resolved
            self.resolved.clear()

    def add(self, raw: str, kind: ReferenceKind, sri: str | None, crossorigin: str | None) -> None:
        if raw in self.resolved:
            url = self.resolved[raw]
        else:
            url = self.resolved[raw] = resolve_reference(raw, self.base_url)
        if url is None:
            return
        key = (kind.value, url, sri)
        if key in self.seen:
            return
        if len(self.references) >= self.limits.max_references:
            raise _PageLimitExceeded(
                f"more than the cap of {self.limits.max_references} references"
            )
        self.seen.add(key)
        self.references.append(
            PageReference(
                raw=raw,
                url=url,
                kind=kind,
                integrity=parse_integrity(sri),
                integrity_raw=sri,
                crossorigin=crossorigin,
            )
        )


def parse_page(
    data: bytes, page_url: str, *, limits: PageLimits = DEFAULT_PAGE_LIMITS
) -> ParsedPage:
    """The references a browser loads from ``data``, the page served at ``page_url``.

    Never raises for any ``data``: a page over a cap, or one the tokenizer cannot read,
    is a :class:`ParsedPage` with ``problem`` set.
    """
    return resolve_page(read_page(data, limits=limits), page_url, limits=limits)
