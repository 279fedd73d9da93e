"""Caps and path hygiene shared by every manifest reader.

Served manifests come from instances, and instances are hostile until proven otherwise:
a reader must fail with a typed error, never hang, blow the stack or hold gigabytes.
Paths are normalised here, once, so that ``./assets/a.js``, ``/assets/a.js`` and
``assets//a.js`` are the same entry, and a path that climbs out of the site root with
``..`` or names another host is refused before anything is fetched.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any
from urllib.parse import unquote

from artifactcheck.model.errors import ManifestFormatError, ManifestLimitError, UnsafeReferenceError
from artifactcheck.model.records import Record

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_AMBIGUOUS = re.compile(r"%[0-9A-Fa-f]{2}|[?#]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# A path every rule below leaves unchanged: segments of unreserved characters that
# start with neither "." nor a scheme-like "name:" (no ":" at all), no "%", "?", "#",
# "\\" or whitespace. Most paths of real builds look like this; they skip the checks.
_PLAIN = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9_.~@+=,-]*(?:/[A-Za-z0-9_~-][A-Za-z0-9_.~@+=,-]*)*")


class ManifestLimits(Record):
    """Caps applied while reading one manifest."""

    max_bytes: int = 8 * 1024 * 1024
    max_entries: int = 100_000
    max_depth: int = 32
    max_string: int = 4096


DEFAULT_LIMITS = ManifestLimits()


def check_entries(count: int, limits: ManifestLimits) -> None:
    """Refuse a manifest with more entries than the cap."""
    if count > limits.max_entries:
        raise ManifestLimitError(f"{count} entries, more than the cap of {limits.max_entries}")


def load_json(data: bytes | str, limits: ManifestLimits) -> Any:
    """Parse JSON under the byte and nesting-depth caps.

    The C decoder is run first: it guards its own recursion (a 10,000-level document
    raises RecursionError, translated here), and it is far faster than scanning
    the text in Python. The nesting cap is then checked on the result without recursion.
    """
    size = len(data) if isinstance(data, bytes) else _utf8_size(data)
    if size > limits.max_bytes:
        raise ManifestLimitError(f"{size} bytes, more than the cap of {limits.max_bytes}")
    try:
        text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise ManifestFormatError(f"not UTF-8: {exc.reason} at byte {exc.start}") from exc
    try:
        doc = json.loads(text)
    except RecursionError as exc:
        raise ManifestLimitError(f"nested deeper than the cap of {limits.max_depth}") from exc
    except ValueError as exc:
        raise ManifestFormatError(f"not valid JSON: {exc}") from exc
    _check_depth(doc, limits.max_depth)
    return doc


def _utf8_size(text: str) -> int:
    """Encoded size of a str; lone surrogates count as the 3 bytes they would take."""
    return len(text.encode("utf-8", errors="surrogatepass"))


def _check_depth(doc: Any, max_depth: int) -> None:
    """Reject nesting deeper than the cap, walking containers with an explicit stack."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            raise ManifestLimitError(f"nested deeper than the cap of {max_depth}")
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def unusable_name(text: str) -> bool:
    """True when no URL can name ``text``: it holds a control character (C0, DEL, C1)
    or a lone surrogate (an undecodable byte in a file name).

    The one rule for every name that is to become a URL path: a served manifest's
    references here, and the files of a release image (:mod:`artifactcheck.release.registry`),
    so both refuse the same names.
    """
    return _CONTROL.search(text) is not None


def normalise_path(raw: Any, limits: ManifestLimits = DEFAULT_LIMITS) -> str:
    """A manifest path made relative to the site root, or UnsafeReferenceError.

    Absolute URLs, protocol-relative URLs and paths that climb out of the root are
    refused; query strings and fragments are dropped. Control characters and lone
    surrogates are refused before and after percent-decoding (``%00`` is a NUL too),
    so a normalised path can always be encoded and put in a URL. The result is a
    fixed point: normalising it again returns it unchanged.
    """
    if not isinstance(raw, str):
        raise ManifestFormatError(f"path must be a string, got {type(raw).__name__}")
    if len(raw) > limits.max_string:
        raise ManifestLimitError(f"path longer than the cap of {limits.max_string} characters")
    if _PLAIN.fullmatch(raw):
        return raw  # already normal: nothing below would change or refuse it
    if not raw or raw.strip() != raw or unusable_name(raw):
        raise UnsafeReferenceError(f"unusable path {raw!r}")
    if raw.replace("\\", "/").startswith("//") or _SCHEME.match(raw):
        raise UnsafeReferenceError(f"absolute URL {raw!r} is outside the base URL")
    # no scheme and no authority are left, so the path is everything before ? or #
    path = unquote(re.split("[?#]", raw, maxsplit=1)[0]).replace("\\", "/")
    if not path or unusable_name(path):
        raise UnsafeReferenceError(f"unusable path {raw!r}")
    if _AMBIGUOUS.search(path):
        # decoded, it would decode (or split) again: normalising must be idempotent,
        # because the path is normalised again wherever it is turned into a URL
        raise UnsafeReferenceError(f"path {raw!r} is encoded twice or names a query")
    segments = [s for s in path.split("/") if s not in ("", ".")]
    if ".." in segments:
        resolved = posixpath.normpath("/" + "/".join(segments))
        if path.startswith("/"):
            raise UnsafeReferenceError(f"path {raw!r} climbs out of the site root")
        # a relative path that climbs is never acceptable from an instance
        raise UnsafeReferenceError(f"path {raw!r} climbs out of the site root ({resolved})")
    if not segments:
        raise UnsafeReferenceError(f"unusable path {raw!r}")
    if _SCHEME.match(segments[0]):
        # decoded, "%68ttps:/evil.com" would read as an absolute URL to urljoin
        raise UnsafeReferenceError(f"path {raw!r} decodes to an absolute URL")
    path = "/".join(segments)
    if path.strip() != path:
        raise UnsafeReferenceError(f"unusable path {raw!r}")
    return path
