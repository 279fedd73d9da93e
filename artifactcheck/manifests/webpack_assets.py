"""webpack-assets-manifest's ``assets-manifest.json``, with or without SRI.

With ``integrity: true`` every value is a record carrying Subresource Integrity::

    {"main.js": {"src": "static/js/main.ca16dfb6.js",
                 "integrity": "sha256-95h7... sha384-9fOt..."}}

and with integrity off it is the flat ``{logical: "path"}`` shape that
webpack-manifest-plugin and legacy Propshaft share (told apart by file name only).
SRI digests become ``hashes`` as lowercase hex per algorithm (sha256/sha384/sha512),
which lets served bytes be verified without any release manifest. Asset modules get
``"integrity": ""`` from the plugin: such a file is listed, just without a hash.

Paths are relative to webpack's output directory, where the manifest sits (with the
plugin's ``publicPath`` option they carry that prefix instead, as in
webpack-manifest-plugin). The ``entrypoints`` option adds an ``entrypoints`` object
(``{name: {assets: {js: [...], css: [...]}, preload, prefetch}}``; before v4
``{name: {js: [...], css: [...]}}``; with ``entrypointsKey: false`` the entry point
records sit at the top level). Those are not assets: their ``assets`` lists mark
entry points (paths, or with ``entrypointsUseAssets`` the asset records); preload and
prefetch lists do not. Checked against the plugin's real output (v6.5).
"""

from __future__ import annotations

from typing import Any

from artifactcheck.manifests._collect import (
    flat_file_map,
    keyed,
    kind,
    mostly,
    open_table,
)
from artifactcheck.manifests.format_info import FormatInfo
from artifactcheck.manifests.integrity import parse_sri
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.manifests.webpack_manifest import strip_auto
from artifactcheck.model.values import Manifest

FORMAT = "webpack-assets"
FORMAT_INFO = FormatInfo(
    name=FORMAT,
    title="webpack-assets-manifest",
    order=50,
    file_names=("assets-manifest.json",),
    probes={"assets-manifest.json": 40},
    root="the manifest's directory (webpack's output path)",
)
ENTRYPOINTS_KEY = "entrypoints"
_NOT_ENTRY_GROUPS = frozenset({"preload", "prefetch"})


def looks_like(doc: Any) -> bool:
    """True for records with a string ``src`` (and no Vite ``file``), or a flat map."""
    if not isinstance(doc, dict) or not doc:
        return False
    assets = {k: v for k, v in doc.items() if not _is_entrypoints(k, v)}
    if flat_file_map(assets):
        return True
    return mostly(assets.values(), _is_record)


def _is_record(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("src"), str) and "file" not in value


def _is_entrypoints(key: str, value: Any) -> bool:
    """The entrypoints object, or one entry point record hoisted to the top level."""
    if not isinstance(value, dict) or "src" in value:
        return False
    return key == ENTRYPOINTS_KEY or isinstance(value.get("assets"), dict)


def parse(
    doc: Any, *, limits: ManifestLimits, source: str | None = None, prefix: str = ""
) -> Manifest:
    """Read an assets-manifest.json; SRI strings become per-algorithm hex hashes."""
    top, out = open_table(doc, FORMAT, limits, prefix=prefix)
    sources: dict[str, str] = {}
    entry_groups: list[Any] = []
    for key, value, where in keyed(top):
        if _is_entrypoints(key, value):
            entry_groups.extend(value.values() if key == ENTRYPOINTS_KEY else [value])
            continue
        if isinstance(value, str):
            raw: Any = value
            hashes: dict[str, str] = {}
        elif isinstance(value, dict):
            raw = value.get("src")
            hashes = parse_sri(value.get("integrity"), limits)
        else:
            out.skip(where, f"expected a record or a path string, got {kind(value)}")
            continue
        if isinstance(raw, str):
            raw = strip_auto(raw)
            sources[key] = raw
        out.add(raw, where=f"{where}.src", hashes=hashes, logical=key)
    for index, ref in enumerate(_entry_refs(entry_groups)):
        if isinstance(ref, str) and ref in sources:
            ref = sources[ref]
        out.add_entry_ref(ref, where=f"{ENTRYPOINTS_KEY}[{index}]")
    return out.manifest(source=source)


def _entry_refs(groups: list[Any]) -> list[Any]:
    """Every file reference listed as an entry point's own asset, in document order.

    Items are paths, or with ``entrypointsUseAssets`` the asset records themselves
    (``{src, integrity}``, as the real plugin writes them) or, in older releases,
    asset keys.
    """
    refs: list[Any] = []
    for record in groups:
        if not isinstance(record, dict):
            continue
        assets = record.get("assets")
        by_type = assets if isinstance(assets, dict) else record
        for group, files in by_type.items():
            if group in _NOT_ENTRY_GROUPS or not isinstance(files, list):
                continue
            for item in files:
                ref = item.get("src") if isinstance(item, dict) else item
                refs.append(strip_auto(ref) if isinstance(ref, str) else ref)
    return refs
