"""webpack-manifest-plugin's default output: a flat ``{logical: path}`` object.

::

    {"main.js": "/static/js/main.ca16dfb6.js", "index.html": "/index.html",
     "static/media/logo.svg": "/static/media/logo.4684d137d27c24e34bea.svg"}

Values carry ``output.publicPath`` as a prefix: ``/`` (root-absolute: relative to the
site root, so the base URL must be the origin the site is served from), nothing
(webpack 5's default ``publicPath: "auto"``: version 6 writes paths relative to the
output directory, where the manifest sits; older versions wrote a literal ``auto/``,
which is stripped), or an absolute CDN URL -- recorded in ``Manifest.rejected`` and
never fetched from the instance. No content hashes.

The file is named ``manifest.json`` by default, like the web app manifest of a PWA
(``{name, icons, start_url}``) and a browser extension's: those are refused by shape,
never read as asset lists. Entry points are guessed: ``index.html`` and bare
``name.js``/``name.css`` keys (how the plugin names entry chunks); a named async
chunk looks the same and is sampled too, which costs a request and hides nothing.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from artifactcheck.manifests._collect import (
    Collector,
    flat_file_map,
    is_app_manifest,
    require_object,
)
from artifactcheck.manifests.format_info import FormatInfo
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.model.errors import ManifestFormatError
from artifactcheck.model.values import Manifest

FORMAT = "webpack-manifest"
FORMAT_INFO = FormatInfo(
    name=FORMAT,
    title="webpack-manifest-plugin",
    order=30,
    file_names=("manifest.json",),
    probes={"manifest.json": 50},  # late: also the PWA manifest's name
    root="the site root for ``/``-prefixed paths (publicPath ``/``); the manifest's "
    "directory otherwise",
)
AUTO_PREFIX = "auto/"


@functools.cache
def _entry_key() -> re.Pattern[str]:
    """The keys of entry chunks and pages; compiled when a manifest of this format is
    read, not by every run that imports the readers."""
    return re.compile(r"[^/]+\.(?:m?js|css)\Z|(?:.*/)?index\.html\Z")


def looks_like(doc: Any) -> bool:
    """True for a flat object of file-like strings that is not a web app manifest.

    An ``entrypoints`` object is webpack-assets-manifest's, never this plugin's.
    """
    return flat_file_map(doc) and not isinstance(doc.get("entrypoints"), dict)


def parse(
    doc: Any, *, limits: ManifestLimits, source: str | None = None, prefix: str = ""
) -> Manifest:
    """Read a webpack-manifest-plugin manifest; non-string values are skipped."""
    mapping = require_object(doc, FORMAT)
    if is_app_manifest(mapping):
        raise ManifestFormatError(
            f"{FORMAT}: this is a web app or extension manifest (start_url, icons, ...), "
            "not webpack-manifest-plugin output"
        )
    out = Collector(FORMAT, limits, prefix=prefix, entries=len(mapping))
    for key, value, where in out.path_strings(mapping):
        out.add(strip_auto(value), where=where, entry=is_entry_key(key), logical=key)
    return out.manifest(source=source)


def strip_auto(value: str) -> str:
    """Drop the literal ``auto/`` that ``publicPath: "auto"`` leaves in front of paths."""
    return value[len(AUTO_PREFIX) :] if value.startswith(AUTO_PREFIX) else value


def is_entry_key(key: str) -> bool:
    """True for keys the plugin gives entry chunks (``main.js``) and for HTML pages."""
    return bool(_entry_key().match(key))
