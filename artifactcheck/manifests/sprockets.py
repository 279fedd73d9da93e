"""Sprockets' ``.sprockets-manifest-<hex>.json`` (Rails' ``assets:precompile``).

::

    {"files": {"application-9f11...26ca.js": {"logical_path": "application.js",
                 "mtime": "2023-11-14T22:13:20+00:00", "size": 252,
                 "digest": "9f11...26ca", "integrity": "sha256-nxFg..."}},
     "assets": {"application.js": "application-9f11...26ca.js"}}

Sprockets 3.7 and 4 write ``digest`` as the SHA-256 hex of the compiled asset (the
bytes written and served: checked against real Sprockets 3.7.2 output, and Sprockets
4's source) and ``integrity`` as the SRI form of the same digest. SRI is preferred,
being unambiguously a content hash; ``digest`` is only used as sha256 when there is
no SRI sha256 and it is 64 hex digits (Sprockets 2 wrote a 32-hex MD5-based one,
which is ignored). The name's fingerprint is never used: it can mix in
``config.assets.version``. ``size`` is the byte size.

Paths are relative to the directory the manifest sits in: ``public/assets``, served
at ``config.assets.prefix`` (``/assets/`` by default). The caller's base URL must be
that prefix (``https://site/assets/``), or the manifest read with its location
(``assets/.sprockets-manifest-....json``). The file name carries a random suffix, so
it cannot be probed: configure its path. Precompressed ``.gz`` siblings are not
listed by Sprockets and are not entries. ``application.js``/``application.css`` (the
Rails convention for the pages' bundles) are marked as entry points.
"""

from __future__ import annotations

import posixpath
from typing import Any

from artifactcheck.manifests._collect import (
    Collector,
    at,
    kind,
    mostly,
    object_member,
    require_object,
    size_field,
    text,
)
from artifactcheck.manifests.format_info import FormatInfo
from artifactcheck.manifests.integrity import is_hex, parse_sri
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.model.errors import ManifestFormatError
from artifactcheck.model.values import Manifest

FORMAT = "sprockets"
FORMAT_INFO = FormatInfo(
    name=FORMAT,
    title="Sprockets",
    order=80,
    file_names=(),
    name_pattern=r"\.sprockets-manifest-[0-9a-f]+\.json|manifest-[0-9a-f]{32}\.json",
    root="``public/assets``, served at ``/assets/``",
)  # a random name: never probed, configured or found by the name the release lists


def looks_like(doc: Any) -> bool:
    """True for ``files`` records with ``logical_path``/``digest``, or an ``assets`` map."""
    if not isinstance(doc, dict):
        return False
    files = doc.get("files")
    assets = doc.get("assets")
    if files is None and assets is None:
        return False
    if not isinstance(files, (dict, type(None))) or not isinstance(assets, (dict, type(None))):
        return False
    if files and mostly(files.values(), _is_record):
        return True
    return assets is not None and not files


def _is_record(value: Any) -> bool:
    return isinstance(value, dict) and ("logical_path" in value or "digest" in value)


def is_app_bundle(logical: Any) -> bool:
    """True for the Rails convention's page bundles, ``application.js``/``.css``."""
    return isinstance(logical, str) and posixpath.basename(logical) in {
        "application.js",
        "application.css",
    }


def parse(
    doc: Any, *, limits: ManifestLimits, source: str | None = None, prefix: str = ""
) -> Manifest:
    """Read a Sprockets manifest; ``integrity``/``digest`` give SHA-256 hashes."""
    top = require_object(doc, FORMAT)
    if "files" not in top and "assets" not in top:
        raise ManifestFormatError(f"{FORMAT}: neither 'files' nor 'assets' is present")
    files = object_member(top, "files", FORMAT, default={})
    assets = object_member(top, "assets", FORMAT, default={})
    out = Collector(FORMAT, limits, prefix=prefix, entries=len(files) + len(assets))
    for name, meta in files.items():
        where = at(name, "files")
        if not isinstance(meta, dict):
            out.skip(where, f"expected a record, got {kind(meta)}")
            continue
        logical = text(meta.get("logical_path"), limits, f"{where}.logical_path")
        out.add(
            name,
            where=where,
            hashes=_hashes(meta, limits),
            size=size_field(meta.get("size")),
            entry=is_app_bundle(logical),
            logical=logical,
        )
    for logical, name in assets.items():
        out.add(name, where=at(logical, "assets"), entry=is_app_bundle(logical), logical=logical)
    return out.manifest(source=source)


def _hashes(meta: dict[str, Any], limits: ManifestLimits) -> dict[str, str]:
    """SRI digests, plus ``digest`` as sha256 when it is SHA-256 shaped and SRI has none."""
    hashes = parse_sri(meta.get("integrity"), limits)
    digest = meta.get("digest")
    if "sha256" not in hashes and is_hex(digest, 64):
        hashes["sha256"] = digest.lower()
    return hashes
