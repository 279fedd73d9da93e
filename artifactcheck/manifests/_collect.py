"""The one place where a reader turns raw manifest references into entries.

Every format reader walks its own document shape, but what happens to each path it
finds is the same everywhere, so it lives here and is tested once:

- the path is normalised (:func:`~.limits.normalise_path`); an unsafe one (``..``, an
  absolute URL, a NUL) is recorded in ``Manifest.rejected`` and the reader moves on,
  because one hostile entry must not hide the rest of the manifest;
- a value of the wrong type is skipped and counted: a manifest in which *nothing* was
  usable is a :class:`~artifactcheck.model.errors.ManifestFormatError`, not an empty success;
- every reference counts towards ``max_entries``, rejected or not, so a document of
  200,000 bad paths costs no more than one of 200,000 good ones;
- ``index.html`` pages are always entry points, whatever the format says: they are
  what names every other file, so they are always sampled;
- two references to the same file are merged (a Vite asset is listed by its own chunk
  and by the chunk importing it); when they disagree on a hash, the first one is kept
  and the disagreeing one is rejected, never silently averaged.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from artifactcheck.manifests.limits import ManifestLimits, check_entries, normalise_path
from artifactcheck.model.errors import ManifestFormatError, ManifestLimitError, UnsafeReferenceError
from artifactcheck.model.values import Manifest, ManifestEntry, Sha256Hashes

#: Keys only a web app manifest (PWA) or a browser-extension manifest has; asset
#: manifests are keyed by file names, which never look like these.
APP_MANIFEST_KEYS = frozenset(
    {
        "start_url",
        "short_name",
        "icons",
        "display",
        "display_override",
        "theme_color",
        "background_color",
        "scope",
        "orientation",
        "related_applications",
        "prefer_related_applications",
        "shortcuts",
        "screenshots",
        "share_target",
        "protocol_handlers",
        "file_handlers",
        "manifest_version",
    }
)

_FILE_LIKE = re.compile(r"[^/\s?#]\.[A-Za-z][A-Za-z0-9]{0,11}(?:[?#]\S*)?\Z")
_MAX_REASONS = 3
#: How many values shape detection looks at.
SAMPLE = 1000


def is_app_manifest(doc: Any) -> bool:
    """True for a web app / extension manifest, which shares the name ``manifest.json``."""
    return isinstance(doc, dict) and not APP_MANIFEST_KEYS.isdisjoint(doc)


def looks_like_file(value: Any) -> bool:
    """True for a string shaped like a file reference: no spaces, ends in an extension."""
    return isinstance(value, str) and len(value) < 4096 and bool(_FILE_LIKE.search(value))


def mostly(values: Iterable[Any], predicate: Callable[[Any], bool]) -> bool:
    """True when more than half of the values (and at least one) satisfy the predicate.

    Only the first :data:`SAMPLE` values are looked at: this decides a shape, and
    detection must stay cheap on a 100,000-entry document (the reader still checks
    every entry).
    """
    hits = total = 0
    for value in itertools.islice(values, SAMPLE):
        total += 1
        hits += bool(predicate(value))
    return hits > 0 and hits * 2 > total


def mostly_records(values: Iterable[Any], field: str) -> bool:
    """True when most values are objects whose ``field`` is a string: the formats keyed by
    record (Propshaft's ``digested_path``, Vite's ``file``) are told apart by the one field
    each of their records must have, with the same tolerance as :func:`mostly`."""
    return mostly(
        values, lambda value: isinstance(value, dict) and isinstance(value.get(field), str)
    )


def flat_file_map(doc: Any) -> bool:
    """The shape ``{logical: "path"}`` shared by several plugins (and nothing else).

    Most values must be file-like strings; a few damaged ones do not hide the format
    (the reader skips them), but a web app manifest is never one, whatever its values.
    """
    if not isinstance(doc, dict) or not doc or is_app_manifest(doc):
        return False
    return mostly(doc.values(), looks_like_file)


def text(value: Any, limits: ManifestLimits, what: str) -> str | None:
    """A string field under the length cap, or None when the field is not a string."""
    if not isinstance(value, str):
        return None
    if len(value) > limits.max_string:
        raise ManifestLimitError(f"{what} longer than the cap of {limits.max_string} characters")
    return value


class Collector:
    """Accumulates the entries of one manifest while its reader walks the document."""

    def __init__(
        self, fmt: str, limits: ManifestLimits, *, prefix: str = "", entries: int | None = None
    ) -> None:
        """``entries``: how many the document's top-level containers hold, refused over
        the cap before a single one is read."""
        if entries is not None:
            check_entries(entries, limits)
        self.fmt = fmt
        self.limits = limits
        self.prefix = prefix
        self.files: dict[str, ManifestEntry] = {}
        self.rejected: list[tuple[str, str]] = []
        self.seen = 0
        self.skipped = 0
        self._reasons: list[str] = []
        self._suffixes: dict[str, list[str]] | None = None

    def _count(self) -> None:
        self.seen += 1
        if self.seen > self.limits.max_entries:
            raise ManifestLimitError(
                f"{self.fmt}: more than the cap of {self.limits.max_entries} entries"
            )

    def skip(self, where: str, why: str) -> None:
        """Count an item of the wrong type; it is not a path, so it is not 'rejected'."""
        self._count()
        self._skipped(where, why)

    def _skipped(self, where: str, why: str) -> None:
        self.skipped += 1
        if len(self._reasons) < _MAX_REASONS:
            self._reasons.append(f"{where}: {why}")

    def path_strings(
        self, mapping: Mapping[str, Any], label: str = ""
    ) -> Iterator[tuple[str, str, str]]:
        """``(key, path, where)`` for each string value of a ``{key: "path"}`` object; any
        other value is skipped and counted (see :meth:`skip`)."""
        for key, value, where in keyed(mapping, label):
            if not isinstance(value, str):
                self.skip(where, f"expected a path string, got {kind(value)}")
                continue
            yield key, value, where

    def reject(self, raw: str, why: str) -> None:
        """Record a reference refused as unsafe or unusable (already counted)."""
        self.rejected.append((raw, why))

    def refuse(self, raw: str, why: str) -> None:
        """Count and reject a reference a reader refused by its own rules."""
        self._count()
        self.reject(raw, why)

    def add(
        self,
        raw: Any,
        *,
        where: str,
        hashes: Mapping[str, str] | None = None,
        size: int | None = None,
        entry: bool = False,
        logical: Any = None,
    ) -> str | None:
        """Normalise and record one referenced file; the normalised path, or None.

        A relative reference is taken relative to the manifest's directory and gets
        the collector's prefix; a root-absolute one (``/static/x.js``) is relative to
        the site root and does not.
        """
        path = self._counted_path(raw, where)
        if path is None:
            return None
        name = text(logical, self.limits, f"{where}: logical name")
        # a Sha256Hashes is read-only already: kept as it is, not copied into a dict
        held = hashes if type(hashes) is Sha256Hashes else dict(hashes or {})
        page = path == "index.html" or path.endswith("/index.html")
        new = ManifestEntry(path=path, hashes=held, size=size, entry=entry or page, logical=name)
        self._record(raw, new)
        return path

    def add_entry_ref(self, raw: Any, *, where: str) -> str | None:
        """Flag the file an entry-point list names, adding it when no file matches.

        Entry-point lists are often written without the public path the file list
        carries (``static/js/main.js`` vs ``/app/static/js/main.js``), so a recorded
        file whose path ends with the reference after one to three leading segments
        matches too, when exactly one does.
        """
        path = self._counted_path(raw, where)
        if path is None:
            return None
        found = self._find(path)
        if found is None and self.prefix:
            found = self._find(normalise_path(raw, self.limits))
        if found is not None:
            self.mark_entry(found)
            return found
        self._record(raw, ManifestEntry(path=path, entry=True))
        return path

    def _counted_path(self, raw: Any, where: str) -> str | None:
        """Count one reference, then its normalised path, or None when it was skipped or
        rejected: every reference counts towards ``max_entries`` before it is looked at,
        so a refused one costs as much as a kept one, whichever method recorded it."""
        self._count()
        if not isinstance(raw, str):
            self._skipped(where, f"expected a path string, got {kind(raw)}")
            return None
        try:
            path = normalise_path(raw, self.limits)
        except UnsafeReferenceError as exc:
            self.reject(raw, str(exc))
            return None
        if self.prefix and not raw.startswith("/"):
            path = f"{self.prefix}/{path}"
            if len(path) > self.limits.max_string:
                raise ManifestLimitError(
                    f"{where}: path longer than the cap of {self.limits.max_string} characters"
                )
        return path

    def _record(self, raw: str, new: ManifestEntry) -> None:
        """Keep one file's entry, merged with an earlier entry for the same path."""
        path = new.path
        old = self.files.get(path)
        if old is None:
            self.files[path] = new
            if self._suffixes is not None:
                _index(self._suffixes, path)
        else:
            self.files[path] = self._merge(raw, old, new)

    def _find(self, path: str) -> str | None:
        if path in self.files:
            return path
        if self._suffixes is None:
            self._suffixes = {}
            for known in self.files:
                _index(self._suffixes, known)
        hits = self._suffixes.get(path, ())
        return hits[0] if len(hits) == 1 else None

    def _merge(self, raw: str, old: ManifestEntry, new: ManifestEntry) -> ManifestEntry:
        hashes = dict(old.hashes)
        for algo, digest in new.hashes.items():
            if hashes.setdefault(algo, digest) != digest:
                self.reject(raw, f"declares another {algo} for {old.path} than an earlier entry")
        size = old.size if old.size is not None else new.size
        if old.size is not None and new.size is not None and old.size != new.size:
            self.reject(raw, f"declares another size for {old.path} than an earlier entry")
        return ManifestEntry(
            path=old.path,
            hashes=hashes,
            size=size,
            entry=old.entry or new.entry,
            logical=old.logical if old.logical is not None else new.logical,
        )

    def mark_entry(self, path: str) -> bool:
        """Flag an already recorded file as an entry point; False when it is unknown."""
        old = self.files.get(path)
        if old is None:
            return False
        if not old.entry:
            self.files[path] = ManifestEntry(
                path=old.path, hashes=old.hashes, size=old.size, entry=True, logical=old.logical
            )
        return True

    def manifest(self, *, source: str | None) -> Manifest:
        """The finished manifest, or ManifestFormatError when nothing in it was usable."""
        if not self.files and not self.rejected and self.skipped:
            raise ManifestFormatError(f"{self.fmt}: no usable entry ({'; '.join(self._reasons)})")
        return Manifest(
            format=self.fmt,
            files=dict(sorted(self.files.items())),
            source=source,
            rejected=tuple(self.rejected),
        )


def _index(suffixes: dict[str, list[str]], path: str) -> None:
    """Index a path under itself minus its first one, two and three segments."""
    segments = path.split("/")
    for cut in range(1, min(4, len(segments))):
        suffixes.setdefault("/".join(segments[cut:]), []).append(path)


# JSON's names for the Python types json.loads makes; bool before int (a bool is an int)
_JSON_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (type(None), "null"),
    (bool, "boolean"),
    ((int, float), "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def kind(value: Any) -> str:
    """A JSON type name for messages (never the value itself: it may be huge)."""
    for types, name in _JSON_KINDS:
        if isinstance(value, types):
            return name
    return type(value).__name__


def open_table(
    doc: Any, fmt: str, limits: ManifestLimits, *, prefix: str = ""
) -> tuple[dict[str, Any], Collector]:
    """The document and its collector, for the formats whose whole document is the table
    of files (Propshaft, Vite, assets-manifest): it must be an object, and its size is
    refused over the cap before a single entry is read, as for every other format."""
    top = require_object(doc, fmt)
    return top, Collector(fmt, limits, prefix=prefix, entries=len(top))


def open_sections(
    doc: Any, fmt: str, limits: ManifestLimits, *, table: str, listed: str, prefix: str = ""
) -> tuple[dict[str, Any], dict[str, Any], list[Any], Collector]:
    """The document, its file table, the optional list beside it, and their collector,
    for the formats built that way (CRA's ``files`` and ``entrypoints``, ngsw's
    ``hashTable`` and ``assetGroups``): the table is required, the list may be absent,
    and the two together are refused over the cap before a single entry is read."""
    top = require_object(doc, fmt)
    files = object_member(top, table, fmt)
    items = array_member(top, listed, fmt, default=[])
    return top, files, items, Collector(fmt, limits, prefix=prefix, entries=len(files) + len(items))


def keyed(mapping: Mapping[str, Any], label: str = "") -> Iterator[tuple[str, Any, str]]:
    """``(key, value, where)`` for each member of an object, ``where`` as :func:`at`
    writes it, so that every reader names a bad member the same way."""
    for key, value in mapping.items():
        yield key, value, at(key, label)


def require_object(doc: Any, fmt: str) -> dict[str, Any]:
    """The top-level object of a manifest, or ManifestFormatError naming the format."""
    if not isinstance(doc, dict):
        raise ManifestFormatError(f"{fmt}: the document must be a JSON object, got {kind(doc)}")
    return doc


def object_member(
    top: Mapping[str, Any], key: str, fmt: str, *, default: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``top[key]``, which must be an object; ``default`` when absent (None: required)."""
    value = top.get(key, default)
    if not isinstance(value, dict):
        raise ManifestFormatError(f"{fmt}: {key!r} must be an object, got {kind(value)}")
    return value


def array_member(
    top: Mapping[str, Any], key: str, fmt: str, *, default: list[Any] | None = None
) -> list[Any]:
    """``top[key]``, which must be an array; ``default`` when absent (None: required)."""
    value = top.get(key, default)
    if not isinstance(value, list):
        raise ManifestFormatError(f"{fmt}: {key!r} must be an array, got {kind(value)}")
    return value


def at(key: str, label: str = "") -> str:
    """Where a keyed value sits, for messages: ``files['main.js']``, the key cut short."""
    return f"{label}[{key[:200]!r}]"


def size_field(value: Any) -> int | None:
    """A non-negative integer size, or None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
