"""Reading every manifest format web builds emit into one normalised :class:`Manifest`.

An instance tells what it serves through whatever its build tool wrote; comparing
instances, releases and the CDN needs one shape, so each format has a reader module
exposing ``looks_like(doc)`` and ``parse(doc, *, limits, source, prefix)``, and this
package picks the reader::

    parse_manifest(bytes) -> load_json (byte/depth caps) -> detect_format (shape, then
    file name) -> reader.parse -> Manifest(files={path: ManifestEntry}, rejected=...)

Manifests come from instances, so they are hostile input: the only exceptions that
leave this package are :class:`~artifactcheck.model.errors.ManifestError` subclasses, and a
single unsafe path (``..``, another host) lands in ``Manifest.rejected`` without
failing the rest.

A reader module describes its format in ``FORMAT_INFO``
(:class:`~artifactcheck.manifests.format_info.FormatInfo`: its name, the file names it
is built as, its place in the probe order, where its paths are relative to, where it
declares a version), and every registry here is built from those records: a module of
this package with a ``FORMAT_INFO`` is a reader, so a new format is its module and its
test. docs/manifest-formats.md is generated from them
(``python -m artifactcheck.manifests._format_doc``).

Give ``location`` (the manifest's path relative to the base URL, e.g.
``static/staticfiles.json``) and the relative paths are rebased onto the base URL,
so a Django or Rails manifest probed from the site root resolves correctly.

Give ``mount`` (where the base URL sits on its origin: the target's path plus the
prefix, e.g. ``build`` for ``https://shop/`` with ``--prefix /build/``; a ``location``
is then relative to it, or to the origin when it starts with ``/``) and every
reference resolves as a browser resolves it (RFC 3986): a relative one against the
manifest's own URL, a host-absolute one (``/build/app.2c3f04b6.js``, Encore's and
CRA's public path) against the origin, never against the prefix; both are then made
relative to the base URL, and a host-absolute one outside it lands in
``Manifest.rejected`` (never fetched: only paths under the base URL are).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from types import MappingProxyType, ModuleType
from typing import Any, Protocol
from urllib.parse import urlsplit

from artifactcheck.manifests._collect import is_app_manifest, kind
from artifactcheck.manifests.format_info import FormatInfo
from artifactcheck.manifests.integrity import (
    MD5_PREFIX,
    algorithms_needed,
    parse_sri,
    verify_integrity,
)
from artifactcheck.manifests.limits import DEFAULT_LIMITS, ManifestLimits, load_json, normalise_path
from artifactcheck.model.errors import ManifestFormatError, UnsafeReferenceError
from artifactcheck.model.records import replace
from artifactcheck.model.values import Manifest

__all__ = [
    "DEFAULT_LIMITS",
    "FORMATS",
    "FORMAT_INFOS",
    "MD5_PREFIX",
    "WELL_KNOWN_PATHS",
    "ManifestLimits",
    "ManifestReader",
    "algorithms_needed",
    "detect_format",
    "formats_for_name",
    "normalise_path",
    "parse_manifest",
    "parse_sri",
    "verify_integrity",
]


class ManifestReader(Protocol):
    """What every format module provides."""

    FORMAT_INFO: FormatInfo

    def looks_like(self, doc: Any) -> bool: ...

    def parse(
        self, doc: Any, *, limits: ManifestLimits, source: str | None = None, prefix: str = ""
    ) -> Manifest: ...


def _readers() -> list[ModuleType]:
    """Every reader module of this package (a public one with a ``FORMAT_INFO``), in
    its order.

    Found rather than listed, so that adding a format is adding its module. Private
    modules (``_collect``, ``_format_doc``) are helpers, never readers, and are not
    imported here.
    """
    found = []
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("_"):
            continue
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        if isinstance(getattr(loaded, "FORMAT_INFO", None), FormatInfo):
            found.append(loaded)
    return sorted(found, key=lambda reader: reader.FORMAT_INFO.order)


#: Format name -> reader module, in the order formats are tried and listed.
FORMATS: Mapping[str, ManifestReader] = MappingProxyType(
    {reader.FORMAT_INFO.name: reader for reader in _readers()}
)

#: Format name -> what its reader says about it, in the same order.
FORMAT_INFOS: Mapping[str, FormatInfo] = MappingProxyType(
    {name: reader.FORMAT_INFO for name, reader in FORMATS.items()}
)

#: Paths an instance is probed at, in order, when no manifest path is configured:
#: every reader's probes, by their place in the probe order. A format whose name has
#: a random part (Sprockets') has none and must be configured or found in the release.
WELL_KNOWN_PATHS: tuple[str, ...] = tuple(
    path
    for path, _ in sorted(
        ((path, rank) for info in FORMAT_INFOS.values() for path, rank in info.probes.items()),
        key=lambda probe: probe[1],
    )
)


def formats_for_name(path_hint: str) -> frozenset[str]:
    """The formats a manifest's file name suggests (a URL or a path), possibly none:
    those whose names match the most of it (``.vite/manifest.json`` is Vite's alone)."""
    path = _path_of(path_hint)
    matches = {name: info.name_match(path) for name, info in FORMAT_INFOS.items()}
    longest = max(matches.values(), default=0)
    if not longest:
        return frozenset()
    return frozenset(name for name, length in matches.items() if length == longest)


def _path_of(hint: str) -> str:
    """The path part of a hint that may be a URL, with backslashes as slashes."""
    path = urlsplit(hint).path if "://" in hint else hint.split("?", 1)[0]
    return path.replace("\\", "/").rstrip("/")


def detect_format(doc: Any, *, path_hint: str | None = None) -> str:
    """The format of a parsed document: by shape first, by file name to break a tie.

    Several formats share a shape (a flat ``{name: "path"}`` object is written by
    webpack-manifest-plugin, webpack-assets-manifest without integrity and old
    Propshaft), and then only the file name can tell; without one that settles it,
    the answer is an error listing the candidates, never a guess.
    """
    if not isinstance(doc, dict):
        raise ManifestFormatError(
            f"not a manifest: the document is a JSON {kind(doc)}; every format is an object"
        )
    candidates = [name for name, reader in FORMATS.items() if reader.looks_like(doc)]
    if len(candidates) == 1:
        return candidates[0]
    named = formats_for_name(path_hint) if path_hint else frozenset()
    if candidates:
        chosen = [name for name in candidates if name in named]
        if len(chosen) == 1:
            return chosen[0]
        raise ManifestFormatError(
            f"ambiguous manifest: it has the shape of {', '.join(candidates)}; "
            "name the format or give the file name it was served as"
        )
    if is_app_manifest(doc):
        raise ManifestFormatError(
            "a web app or browser-extension manifest (start_url, icons, ...), not an asset manifest"
        )
    suggested = f" (its name suggests {', '.join(sorted(named))})" if named else ""
    raise ManifestFormatError(f"unknown manifest format{suggested}: tried {', '.join(FORMATS)}")


def parse_manifest(
    data: bytes | str,
    *,
    format: str = "auto",
    path_hint: str | None = None,
    limits: ManifestLimits = DEFAULT_LIMITS,
    source: str | None = None,
    version: str | None = None,
    location: str | None = None,
    mount: str = "",
) -> Manifest:
    """Parse manifest bytes of a given format, or of the detected one, into a Manifest.

    ``path_hint`` is the file name it was served as (a tie-breaker for detection only);
    ``location`` is its path relative to the base URL, which also rebases relative
    paths onto that base (and serves as the hint when none is given). ``version`` is
    recorded only when the document declares none (only the native format carries
    one): a declared version is never overwritten, because it is what keeps a release
    manifest from being applied to another release. ``mount``: see the module
    docstring; ``""`` (the base URL is the origin's root) changes nothing.
    """
    doc = load_json(data, limits)
    hint = path_hint if path_hint is not None else location
    if format == "auto":
        name = detect_format(doc, path_hint=hint)
    elif format in FORMATS:
        name = format
        _check_requested(name, doc)
    else:
        raise ManifestFormatError(
            f"unknown manifest format {format[:40]!r}; known: auto, {', '.join(FORMATS)}"
        )
    root = _mount(mount, limits)
    prefix = _prefix(name, _on_origin(location, root), limits) if location else root
    manifest = FORMATS[name].parse(doc, limits=limits, source=source, prefix=prefix)
    if root:
        manifest = _below(manifest, root)
    if version is None or manifest.version is not None:
        return manifest
    return replace(manifest, version=version)


def _check_requested(name: str, doc: Any) -> None:
    """Refuse a document that plainly is another format than the one requested.

    Readers are lenient with damaged entries, so a Vite manifest read "as
    webpack-assets" could yield entries from its ``src`` fields; its shape says what
    it is, and the error says both.
    """
    reader = FORMATS[name]
    if name != "native" and is_app_manifest(doc):
        raise ManifestFormatError(
            f"{name}: this is a web app or browser-extension manifest, not an asset manifest"
        )
    if reader.looks_like(doc):
        return
    others = [other for other, r in FORMATS.items() if other != name and r.looks_like(doc)]
    if others:
        raise ManifestFormatError(
            f"{name}: the document is not a {name} manifest; it has the shape of "
            f"{', '.join(others)}"
        )


def _mount(mount: str, limits: ManifestLimits) -> str:
    """The mount as a normalised directory (``/build/`` -> ``build``), ``""`` for the root."""
    if not mount.strip("/"):
        return ""
    try:
        return normalise_path(mount, limits)
    except UnsafeReferenceError as exc:
        raise ManifestFormatError(f"manifest mount {mount[:200]!r}: {exc}") from exc


def _on_origin(location: str, mount: str) -> str:
    """A manifest's location as a path from the origin: one starting with ``/`` is
    already, any other is relative to the mount."""
    path = _path_of(location)
    if path.startswith("/"):
        return path.lstrip("/")
    return f"{mount}/{path}" if mount else path


def _below(manifest: Manifest, mount: str) -> Manifest:
    """``manifest`` with its paths (relative to the origin) made relative to ``mount``;
    a path outside it is rejected: the base URL is the boundary of what is fetched."""
    head = mount + "/"
    files = {}
    rejected = list(manifest.rejected)
    for path, entry in manifest.files.items():
        if path.startswith(head):
            files[path[len(head) :]] = replace(entry, path=path[len(head) :])
        else:
            rejected.append(
                (f"/{path}", f"outside /{head}, where the target's files are served: not fetched")
            )
    return replace(manifest, files=files, rejected=tuple(rejected))


def _prefix(name: str, location: str, limits: ManifestLimits) -> str:
    """The directory that relative paths of this format hang from, relative to the base."""
    directory = _path_of(location).rpartition("/")[0]
    below = FORMAT_INFOS[name].root_below
    if below is not None and directory.rpartition("/")[2] == below:
        directory = directory.rpartition("/")[0]
    if not directory.strip("/"):
        return ""
    try:
        return normalise_path(directory, limits)
    except UnsafeReferenceError as exc:
        raise ManifestFormatError(f"manifest location {location[:200]!r}: {exc}") from exc
