"""Create React App's ``asset-manifest.json`` (react-scripts' webpack-manifest-plugin).

::

    {"files": {"main.js": "/static/js/main.ca16dfb6.js",
               "main.ca16dfb6.js.map": "/static/js/main.ca16dfb6.js.map", ...},
     "entrypoints": ["static/css/main.138366f0.css", "static/js/main.ca16dfb6.js"]}

``files`` values carry the public path (``/`` by default: root-absolute, so the base
URL must be the origin the app is served from); ``entrypoints`` are the same files
written relative to the build directory *without* it. An entrypoint is therefore
matched to a ``files`` path that equals it or ends with ``/`` + it (a ``PUBLIC_URL``
of ``/app/`` gives ``app/static/js/main.js`` vs ``static/js/main.js``), and is only
added on its own when nothing matches. No content hashes.

Source maps (``*.map``) are kept as ordinary entries, never entry points: they are
served files of the release and differ between releases like the code they map,
so comparing them costs little and catches a mixed deploy. The model has no flag
for them; a caller who wants to skip them can filter on the ``.map`` suffix.
"""

from __future__ import annotations

from typing import Any

from artifactcheck.manifests._collect import mostly, open_sections
from artifactcheck.manifests.format_info import FormatInfo
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.manifests.webpack_manifest import strip_auto
from artifactcheck.model.values import Manifest

FORMAT = "cra"
FORMAT_INFO = FormatInfo(
    name=FORMAT,
    title="CRA",
    order=40,
    file_names=("asset-manifest.json",),
    probes={"asset-manifest.json": 30},
    root="the site root for ``/``-prefixed paths (publicPath ``/``); the manifest's "
    "directory otherwise",
)


def looks_like(doc: Any) -> bool:
    """True for exactly ``{files: {name: "path"}, entrypoints?: [...]}``, string paths."""
    if not isinstance(doc, dict) or not doc.keys() <= {"files", "entrypoints"}:
        return False
    files = doc.get("files")
    entrypoints = doc.get("entrypoints", [])
    if not isinstance(files, dict) or not isinstance(entrypoints, list):
        return False
    return not files or mostly(files.values(), lambda v: isinstance(v, str))


def parse(
    doc: Any, *, limits: ManifestLimits, source: str | None = None, prefix: str = ""
) -> Manifest:
    """Read an asset-manifest.json; its ``entrypoints`` are the entry points."""
    _, files, entrypoints, out = open_sections(
        doc, FORMAT, limits, table="files", listed="entrypoints", prefix=prefix
    )
    for key, value, where in out.path_strings(files, "files"):
        out.add(strip_auto(value), where=where, logical=key)
    for index, raw in enumerate(entrypoints):
        out.add_entry_ref(
            strip_auto(raw) if isinstance(raw, str) else raw, where=f"entrypoints[{index}]"
        )
    return out.manifest(source=source)
