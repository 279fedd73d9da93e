"""Django's ``staticfiles.json`` (``ManifestStaticFilesStorage``, also WhiteNoise's).

::

    {"paths": {"css/site.css": "css/site.668e1ced1b32.css"}, "version": "1.1",
     "hash": "694ccfc39477"}

``collectstatic`` writes it into ``STATIC_ROOT``, and both sides of ``paths`` are
relative to ``STATIC_ROOT``, i.e. to ``STATIC_URL`` on the wire: the caller's base URL
must be the static root (``https://site/static/``), or the manifest must be read with
its location (``static/staticfiles.json``) so the paths are rebased onto the site.
Entries are the hashed names.

Django builds a hashed name as ``root + "." + md5(content).hexdigest()[:12] + ext``
(``HashedFilesMixin.file_hash``/``hashed_name``), and for post-processed CSS/JS the
content is the final, URL-rewritten file it writes -- so the 12 hex digits are a hash
of the served bytes. Checked against real ``collectstatic`` output (including
rewritten CSS, whose prefix differs from its source's). When a hashed name has
exactly that shape the prefix is kept as ``hashes={"md5-prefix": ...}``; a storage
that overrides ``file_hash`` with another 12-hex scheme would make those checks fail,
and then the manifest should be read without hashes. ``version`` is the manifest
format (Django reads ``1.0`` and ``1.1``), not the release; ``hash`` is Django's hash
of the path mapping and is not needed here.
"""

from __future__ import annotations

import functools
import posixpath
import re
from typing import Any

from artifactcheck.manifests._collect import Collector, object_member, require_object
from artifactcheck.manifests.format_info import FormatInfo
from artifactcheck.manifests.integrity import MD5_PREFIX, is_hex
from artifactcheck.manifests.limits import ManifestLimits
from artifactcheck.model.errors import ManifestFormatError
from artifactcheck.model.values import Manifest

FORMAT = "django"
FORMAT_INFO = FormatInfo(
    name=FORMAT,
    title="Django",
    order=60,
    file_names=("staticfiles.json",),
    # below the site root: read with location=, so its paths are rebased onto the site
    probes={"staticfiles.json": 70, "static/staticfiles.json": 80},
    root="``STATIC_ROOT``, served at ``STATIC_URL``",
)


@functools.cache
def _version() -> re.Pattern[str]:
    """The manifest versions this reader knows; compiled when one is read."""
    return re.compile(r"1\.\d{1,3}\Z")


def looks_like(doc: Any) -> bool:
    """True for ``{paths: {...}, version: "1.x"}``."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("paths"), dict)
        and isinstance(doc.get("version"), str)
    )


def parse(
    doc: Any, *, limits: ManifestLimits, source: str | None = None, prefix: str = ""
) -> Manifest:
    """Read a staticfiles.json; the hashed names are the entries."""
    top = require_object(doc, FORMAT)
    paths = object_member(top, "paths", FORMAT)
    version = top.get("version")
    if not isinstance(version, str) or not _version().match(version):
        raise ManifestFormatError(
            f"{FORMAT}: unsupported staticfiles.json version {str(version)[:20]!r} "
            "(Django writes '1.0' or '1.1')"
        )
    out = Collector(FORMAT, limits, prefix=prefix, entries=len(paths))
    for original, hashed, where in out.path_strings(paths, "paths"):
        digest = name_hash(original, hashed)
        out.add(
            hashed,
            where=where,
            hashes={MD5_PREFIX: digest} if digest else None,
            logical=original,
        )
    return out.manifest(source=source)


def name_hash(original: str, hashed: str) -> str | None:
    """The 12-hex MD5 prefix Django put in ``hashed``, or None if it is not that shape."""
    head, name = posixpath.split(original)
    root, ext = posixpath.splitext(name)
    prefix = posixpath.join(head, root + ".")
    if not hashed.startswith(prefix) or not hashed.endswith(ext):
        return None
    digest = hashed[len(prefix) : len(hashed) - len(ext)]
    return digest if is_hex(digest, 12) and digest == digest.lower() else None
