"""Propshaft's ``.manifest.json`` (Rails 8's default asset pipeline).

::

    {"application.js": {"digested_path": "application-af81000a.js",
                        "integrity": "sha256-iQ8U..."}}           # Propshaft >= 1.1
    {"application.js": "application-af81000a.js"}                # older Propshaft

Newer releases may add ``"app": true|false`` to a record; it is not needed here.
``integrity`` (present when ``config.assets.integrity_hash_algorithm`` is set) is SRI
and becomes per-algorithm hex hashes. The 8 hex digits in a digested name are *not*
a content hash (Propshaft hashes the content together with
``config.assets.version``, and older releases used a full SHA-1): they are never
used as one. The old flat shape is indistinguishable from webpack-manifest-plugin's
by content, so it is only detected by its file name, ``.manifest.json``.

Paths are relative to ``public/assets``, where the manifest sits, served at
``config.assets.prefix`` (``/assets/``): the caller's base URL must be that prefix,
or the manifest read with its location (``assets/.manifest.json``).
``application.js``/``application.css`` are marked as entry points.
"""

from __future__ import annotations

from typing import Any

from artifactcheck.manifests._collect import (
    flat_file_map,
    keyed,
    kind,
    mostly_records,
    open_table,
)
from artifactcheck.manifests.format_info import FormatInfo
from artifactcheck.manifests.integrity import parse_sri
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.manifests.sprockets import is_app_bundle
from artifactcheck.model.values import Manifest

FORMAT = "propshaft"
FORMAT_INFO = FormatInfo(
    name=FORMAT,
    title="Propshaft",
    order=90,
    file_names=(".manifest.json",),
    probes={"assets/.manifest.json": 90},
    root="``public/assets``, served at ``/assets/``",
)


def looks_like(doc: Any) -> bool:
    """True for records with a string ``digested_path``, or the old flat map."""
    if flat_file_map(doc) and not isinstance(doc.get("entrypoints"), dict):
        return True
    return isinstance(doc, dict) and mostly_records(doc.values(), "digested_path")


def parse(
    doc: Any, *, limits: ManifestLimits, source: str | None = None, prefix: str = ""
) -> Manifest:
    """Read a Propshaft manifest, either shape; SRI becomes hex hashes."""
    top, out = open_table(doc, FORMAT, limits, prefix=prefix)
    for logical, value, where in keyed(top):
        if isinstance(value, str):
            out.add(value, where=where, entry=is_app_bundle(logical), logical=logical)
        elif isinstance(value, dict):
            out.add(
                value.get("digested_path"),
                where=f"{where}.digested_path",
                hashes=parse_sri(value.get("integrity"), limits),
                entry=is_app_bundle(logical),
                logical=logical,
            )
        else:
            out.skip(where, f"expected a record or a path string, got {kind(value)}")
    return out.manifest(source=source)
