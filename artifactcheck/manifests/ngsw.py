"""Angular service worker manifest, ``ngsw.json`` (written by ``ng build``/``ngsw-config``).

::

    {"configVersion": 1, "timestamp": 1700000000000, "index": "/index.html",
     "assetGroups": [{"name": "app", "urls": ["/index.html", "/main-XYZ.js"], ...}],
     "dataGroups": [...], "navigationUrls": [...],
     "hashTable": {"/index.html": "f6d5e2c6...", "/main-XYZ.js": "..."}}

``hashTable`` maps every cached file to the SHA-1 hex of its bytes -- the service
worker itself refuses a file whose hash differs -- so served bytes can be verified
from this manifest alone. Entries come from ``hashTable`` (with ``hashes={"sha1":
hex}``) and from the asset groups' ``urls`` (a file listed without a hash is still a
file of the release). ``dataGroups`` and ``navigationUrls`` are URL patterns, not files.

URLs are absolute paths that include the app's base href (``/app/main.js`` for
``--base-href /app/``). ``ngsw.json`` sits at the root of the built app, and the base
href is the directory of ``index`` (``/app/index.html``), so it is stripped: paths
come out relative to the app root, the URL ``ngsw.json`` itself is served from. A
URL outside the base href is rejected, not fetched.

The format has no application version. Angular's documented place for one is
``appData`` in ``ngsw-config.json`` (copied into ``ngsw.json`` as is); its ``version``
member is the version the manifest declares when it is a string in the version
grammar, and nothing is declared otherwise: a release manifest declaring no version
is never applied to whatever version an instance reports (see release/sources.py).
"""

from __future__ import annotations

from typing import Any

from artifactcheck.manifests._collect import (
    Collector,
    keyed,
    kind,
    open_sections,
)
from artifactcheck.manifests.format_info import FormatInfo
from artifactcheck.manifests.integrity import is_hex
from artifactcheck.manifests.limits import ManifestLimits, normalise_path
from artifactcheck.model.errors import UnsafeReferenceError
from artifactcheck.model.records import replace
from artifactcheck.model.values import Manifest
from artifactcheck.model.versions import is_version

FORMAT = "ngsw"
FORMAT_INFO = FormatInfo(
    name=FORMAT,
    title="Angular",
    order=70,
    file_names=("ngsw.json",),
    probes={"ngsw.json": 60},
    root="the app root (its base href, which is stripped)",
    version="``appData.version``, when it is a version",
    version_hint=" (e.g. releases/{version}/ngsw.json); or declare it in ngsw-config.json, "
    '"appData": {"version": "1.4.2"}, which ng build copies into ngsw.json',
)


def looks_like(doc: Any) -> bool:
    """True for an object with ``configVersion`` and a ``hashTable`` object."""
    return (
        isinstance(doc, dict) and "configVersion" in doc and isinstance(doc.get("hashTable"), dict)
    )


def parse(
    doc: Any, *, limits: ManifestLimits, source: str | None = None, prefix: str = ""
) -> Manifest:
    """Read an ngsw.json; SHA-1 hashes from ``hashTable``, ``index`` is the entry."""
    top, table, groups, out = open_sections(
        doc, FORMAT, limits, table="hashTable", listed="assetGroups", prefix=prefix
    )
    index = top.get("index")
    base = _base_href(index, limits)
    for url, sha1, where in keyed(table, "hashTable"):
        hashes = {"sha1": sha1.lower()} if is_hex(sha1, 40) else None
        _add(out, base, url, where=where, hashes=hashes)
    for number, group in enumerate(groups):
        urls = group.get("urls") if isinstance(group, dict) else None
        if not isinstance(urls, list):
            out.skip(f"assetGroups[{number}]", "expected an object with a 'urls' array")
            continue
        for position, url in enumerate(urls):
            _add(out, base, url, where=f"assetGroups[{number}].urls[{position}]")
    if isinstance(index, str):
        path = _add(out, base, index, where="index")
        if path is not None:
            out.mark_entry(path)
    elif index is not None:
        out.skip("index", f"expected a path string, got {kind(index)}")
    return replace(out.manifest(source=source), version=declared_version(top))


def declared_version(doc: dict[str, Any]) -> str | None:
    """``appData.version`` when it is a version; ngsw.json has no version field of its own."""
    app = doc.get("appData")
    value = app.get("version") if isinstance(app, dict) else None
    return value if isinstance(value, str) and is_version(value) else None


def _base_href(index: Any, limits: ManifestLimits) -> str:
    """The app's base href: the directory of a safe, root-absolute ``index``, else ``/``."""
    if not isinstance(index, str) or not index.startswith("/"):
        return "/"
    try:
        normalise_path(index, limits)
    except UnsafeReferenceError:
        return "/"
    return index[: index.rindex("/") + 1]


def _add(
    out: Collector, base: str, url: Any, *, where: str, hashes: dict[str, str] | None = None
) -> str | None:
    """Record one URL made relative to the base href (outside it: rejected)."""
    if not isinstance(url, str):
        return out.add(url, where=where, hashes=hashes)
    local = url
    if url.startswith("/") and not url.replace("\\", "/").startswith("//"):
        if not url.startswith(base):
            out.refuse(url, f"outside the app's base href {base!r}")
            return None
        local = url[len(base) :]
    try:
        normalise_path(local, out.limits)
    except UnsafeReferenceError as exc:  # reported with the URL as the manifest wrote it
        out.refuse(url, str(exc).replace(repr(local), repr(url)))
        return None
    return out.add(local, where=where, hashes=hashes)
