"""What a browser loads from a stylesheet: its ``@import`` rules and ``url(...)`` values.

A page's stylesheets name fonts, images and further stylesheets; a browser fetches them
as it applies the sheet, so they belong to the set of files a page loads
(:mod:`artifactcheck.manifests.page`). Each reference is resolved against the
stylesheet's own URL, as browsers do (not the page's).

CSS is read with tinycss2, a tokenizer and parser that follows CSS Syntax Level 3:
``url(`` tokens unquoted and quoted, escapes, comments and strings are its job, and
regular expressions get each of them wrong (a ``url(`` inside a comment or a string is
no reference). ``data:`` URLs and fragment-only URLs (``url(#clip)``) fetch nothing and
are skipped. The sheet comes from an instance, so its size, its references and the
nesting of its blocks are capped; exceeding a cap is a ``problem`` in the result,
never an exception.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import tinycss2

from artifactcheck.manifests.page import (
    DEFAULT_PAGE_LIMITS,
    PageLimits,
    PageReference,
    ReferenceKind,
    resolve_reference,
)
from artifactcheck.model.records import Record

__all__ = [
    "ParsedStylesheet",
    "ReadStylesheet",
    "parse_stylesheet",
    "read_stylesheet",
    "resolve_stylesheet",
]


class ParsedStylesheet(Record):
    """The references of one stylesheet and why it could not be read wholly (``problem``)."""

    url: str
    references: tuple[PageReference, ...] = ()
    problem: str | None = None


class _StylesheetLimitExceeded(Exception):
    """A cap was exceeded while walking the sheet."""


class ReadStylesheet(Record):
    """A sheet's bytes read, before any URL: its references as written (kind, raw), each
    once, in order, and why the reading stopped (``problem``; ``None`` at its end).

    tinycss2 is nearly all of a sheet's cost (pure Python: seconds for a megabyte), and
    what it finds depends only on the bytes, so a run reads each distinct sheet, and
    each distinct inline ``<style>``, once (:class:`artifactcheck.observe.pages.
    StylesheetMemo`) and :func:`resolve_stylesheet` places it at each URL it is served
    at, as reading it there would."""

    values: tuple[tuple[ReferenceKind, str], ...] = ()
    problem: str | None = None


def read_stylesheet(
    data: bytes | str, *, limits: PageLimits = DEFAULT_PAGE_LIMITS
) -> ReadStylesheet:
    """What ``data`` names, as written, under the caps that do not depend on its URL.

    ``data`` is the sheet's bytes (decoded by the sheet's ``@charset`` or BOM, else
    UTF-8, as CSS Syntax says) or the text of an inline ``<style>``.
    """
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if size > limits.max_stylesheet_bytes:
        cap = limits.max_stylesheet_bytes
        return ReadStylesheet(problem=f"stylesheet of {size} bytes, more than the cap of {cap}")
    deepest = _nesting_bound(data)
    if deepest > limits.max_depth:
        # tinycss2 builds every nested block before the walk below could stop it: a
        # megabyte of "a{" costs it seconds, so a sheet that must exceed the cap is
        # refused from a linear scan first
        return ReadStylesheet(problem=f"blocks nested deeper than the cap of {limits.max_depth}")
    rules: Sequence[Any]
    if isinstance(data, bytes):
        rules, _encoding = tinycss2.parse_stylesheet_bytes(
            data, skip_comments=True, skip_whitespace=True
        )
    else:
        rules = tinycss2.parse_stylesheet(data, skip_comments=True, skip_whitespace=True)
    values: dict[tuple[ReferenceKind, str], None] = {}  # the same value: the same URL
    try:
        for value in _references(rules, limits.max_depth):
            values.setdefault(value)
    except _StylesheetLimitExceeded as exc:
        return ReadStylesheet(values=tuple(values), problem=str(exc))
    return ReadStylesheet(values=tuple(values))


def resolve_stylesheet(
    read: ReadStylesheet, sheet_url: str, *, limits: PageLimits = DEFAULT_PAGE_LIMITS
) -> ParsedStylesheet:
    """The sheet ``read`` as served at ``sheet_url``: each reference resolved against
    it, as browsers do (not against the page's URL), each (kind, URL) once, under the
    cap of references."""
    found: list[PageReference] = []
    seen: set[tuple[str, str]] = set()
    for kind, raw in read.values:
        url = resolve_reference(raw, sheet_url)
        if url is None or (kind.value, url) in seen:
            continue
        if len(found) >= limits.max_references:
            problem = f"more than the cap of {limits.max_references} references"
            return ParsedStylesheet(url=sheet_url, references=tuple(found), problem=problem)
        seen.add((kind.value, url))
        found.append(PageReference(raw=raw, url=url, kind=kind))
    return ParsedStylesheet(url=sheet_url, references=tuple(found), problem=read.problem)


def parse_stylesheet(
    data: bytes | str, sheet_url: str, *, limits: PageLimits = DEFAULT_PAGE_LIMITS
) -> ParsedStylesheet:
    """The ``@import`` and ``url(...)`` references of a stylesheet served at ``sheet_url``:
    :func:`read_stylesheet`, then :func:`resolve_stylesheet`."""
    return resolve_stylesheet(read_stylesheet(data, limits=limits), sheet_url, limits=limits)


@functools.cache
def _brackets() -> re.Pattern[bytes]:
    """Comments and strings (whose brackets nest nothing) and the brackets that open or
    close a block. Not a tokenizer: only a bound on how deep tinycss2 would nest.
    Compiled when the first stylesheet is read, not by every run that imports this."""
    return re.compile(
        rb"/\*.*?(?:\*/|\Z)|\"(?:\\.|[^\"\\\n])*\"?|'(?:\\.|[^'\\\n])*'?|[{(\[]|[})\]]",
        re.DOTALL,
    )


_OPENERS = frozenset(b"{([")


def _nesting_bound(data: bytes | str) -> int:
    """How deep the sheet's blocks nest, comments and strings skipped (linear time)."""
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    depth = deepest = 0
    for match in _brackets().finditer(raw):
        token = match.group()
        if len(token) != 1:
            continue  # a comment or a string
        if token[0] in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        elif depth:
            depth -= 1
    return deepest


def _references(rules: Iterable[Any], max_depth: int) -> Iterator[tuple[ReferenceKind, str]]:
    """``(kind, raw URL)`` of every reference, walking nested blocks with a stack (a
    sheet of 100,000 nested ``{`` must not recurse 100,000 deep)."""
    stack: list[tuple[Iterator[Any], int]] = [(iter(rules), 0)]
    while stack:
        nodes, depth = stack[-1]
        node = next(nodes, None)
        if node is None:
            stack.pop()
            continue
        if node.type == "at-rule" and node.lower_at_keyword == "import":
            target = _import_target(node.prelude)
            if target is not None:
                yield ReferenceKind.IMPORT, target
            continue
        if node.type == "url":
            yield ReferenceKind.CSS_URL, node.value
            continue
        if node.type == "function" and node.lower_name in ("url", "src"):
            target = _string_argument(node.arguments)
            if target is not None:
                yield ReferenceKind.CSS_URL, target
                continue
        if node.type == "function" and node.lower_name in ("image-set", "-webkit-image-set"):
            # image-set("a.png" 1x, url(b.png) 2x): its strings are URLs too
            for argument in node.arguments:
                if argument.type == "string":
                    yield ReferenceKind.CSS_URL, argument.value
        children = _children(node)
        if children:
            if depth + 1 > max_depth:
                raise _StylesheetLimitExceeded(f"blocks nested deeper than the cap of {max_depth}")
            stack.append((iter(children), depth + 1))


def _children(node: Any) -> list[Any]:
    """The component values inside a rule, block or function."""
    kind = node.type
    if kind == "qualified-rule":
        return [*node.prelude, *(node.content or ())]
    if kind == "at-rule":
        return [*node.prelude, *(node.content or ())]
    if kind in ("() block", "[] block", "{} block"):
        return list(node.content)
    if kind == "function":
        return list(node.arguments)
    return []


def _import_target(prelude: list[Any]) -> str | None:
    """The URL of ``@import "x.css"``, ``@import url(x.css)`` or ``@import url("x.css")``."""
    for token in prelude:
        if token.type in ("whitespace", "comment"):
            continue
        if token.type in ("string", "url"):
            return str(token.value)
        if token.type == "function" and token.lower_name == "url":
            return _string_argument(token.arguments)
        return None
    return None


def _string_argument(arguments: list[Any]) -> str | None:
    """The one string argument of ``url("x")`` (tinycss2 reads ``url(x)`` unquoted as
    a url token, but a quoted one as a function)."""
    values = [a for a in arguments if a.type not in ("whitespace", "comment")]
    if len(values) == 1 and values[0].type == "string":
        return str(values[0].value)
    return None
