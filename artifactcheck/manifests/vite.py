"""Vite's build manifest: ``.vite/manifest.json`` (``build.manifest: true``).

Keys are source paths relative to the Vite root (``index.html``, ``src/main.ts``,
``_shared-B7PI925R.js`` for shared chunks); values are ``ManifestChunk`` objects::

    {"index.html": {"file": "assets/index-Bfu9pp8v.js", "src": "index.html",
                    "isEntry": true, "css": ["assets/index-CQbHzygI.css"],
                    "assets": ["assets/logo-m9-UFto3.svg"],
                    "imports": [...chunk keys...], "dynamicImports": [...chunk keys...]}}

Vite writes no content hashes (the file names carry them), so this reader yields the
file list, which is compared with the release. Every ``file``, ``css`` and ``assets``
path becomes an entry; ``imports``/``dynamicImports`` are keys of other chunks, not
paths. Paths are relative to ``build.outDir`` -- the directory *holding* ``.vite/``,
not ``.vite/`` itself (Vite 4 wrote ``manifest.json`` at the outDir root) -- and never
include the ``base`` option: resolve them against the URL the outDir is served at.

An HTML entry's key is also the path of the page Vite emitted (``index.html`` lands
at ``dist/index.html``); that page is what references the hashed names, so it is
recorded as an entry too, although the manifest does not list it as a ``file``.
Files copied from ``public/`` (``robots.txt``) are not in Vite's manifest at all.
"""

from __future__ import annotations

from typing import Any

from artifactcheck.manifests._collect import keyed, kind, mostly_records, open_table
from artifactcheck.manifests.format_info import FormatInfo
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.model.values import Manifest

FORMAT = "vite"
FORMAT_INFO = FormatInfo(
    name=FORMAT,
    title="Vite",
    order=20,
    file_names=(".vite/manifest.json", "manifest.json"),  # Vite < 5 wrote it at the root
    probes={".vite/manifest.json": 20},
    root="``build.outDir``, the directory holding ``.vite/``",
    root_below=".vite",
)
_LIST_FIELDS = ("css", "assets")


def looks_like(doc: Any) -> bool:
    """True for an object whose values are mostly chunks with a string ``file``."""
    if not isinstance(doc, dict) or not doc:
        return False
    return mostly_records(doc.values(), "file")


def parse(
    doc: Any, *, limits: ManifestLimits, source: str | None = None, prefix: str = ""
) -> Manifest:
    """Read a Vite manifest; ``isEntry`` chunks and their CSS are entry points."""
    chunks, out = open_table(doc, FORMAT, limits, prefix=prefix)
    for key, chunk, where in keyed(chunks):
        if not isinstance(chunk, dict):
            out.skip(where, f"expected a chunk object, got {kind(chunk)}")
            continue
        is_entry = chunk.get("isEntry") is True
        out.add(chunk.get("file"), where=f"{where}.file", entry=is_entry, logical=key)
        for field in _LIST_FIELDS:
            items = chunk.get(field)
            if items is None:
                continue
            if not isinstance(items, list):
                out.skip(f"{where}.{field}", f"expected an array, got {kind(items)}")
                continue
            for item in items:
                out.add(item, where=f"{where}.{field}", entry=is_entry and field == "css")
        if is_entry and key.endswith(".html"):
            out.add(key, where=where, entry=True, logical=key)
    return out.manifest(source=source)
