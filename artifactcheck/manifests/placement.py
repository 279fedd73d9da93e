"""Where a page's reference is fetched from: the instance, the CDN, or nowhere.

The egress rules say what may be requested: only paths under the instance's base URL and
under the configured CDN's (DESIGN section 7, "no SSRF"). A page is hostile input and may
name any URL, or move every relative URL to another host with ``<base href>``; so each
resolved reference is placed here, purely, before anything is requested:

- on the instance (its origin, or the site name given as the Host header) under its
  base URL: requested from the instance; its release path is what follows the prefix;
- under the CDN base URL: requested from the CDN; the CDN's own path plays the prefix;
- anything else: another origin, listed in the report and never requested.

The query string (``?v=3``) stays in the request (a server may answer by it) and is
stripped from the release path, which names a file of the release.
"""

from __future__ import annotations

from enum import StrEnum
from urllib.parse import urlsplit

from artifactcheck.manifests.limits import normalise_path
from artifactcheck.model.errors import ArtifactCheckError
from artifactcheck.model.records import Record

__all__ = ["Placement", "Where", "place_reference"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


class Where(StrEnum):
    """Who a reference is requested from."""

    INSTANCE = "instance"
    CDN = "cdn"
    OTHER_ORIGIN = "other-origin"  # listed, never requested
    OUTSIDE_BASE = "outside-base"  # the instance's origin, outside its base URL: not requested
    UNUSABLE = "unusable"  # no safe path can name it (listed with the reason)


class Placement(Record):
    """Where one reference goes.

    ``request_path`` is relative to the instance's (or the CDN's) base URL, query kept;
    ``release_path`` the release file it corresponds to (query stripped, under the
    prefix; None when it is not under the prefix or not requested); ``reason`` says why
    a reference is not requested.
    """

    url: str
    where: Where
    request_path: str | None = None
    release_path: str | None = None
    reason: str | None = None

    @property
    def requested(self) -> bool:
        """True when the reference is fetched (from the instance or the CDN)."""
        return self.where in (Where.INSTANCE, Where.CDN)


def _origin(scheme: str, host: str | None, port: int | None) -> tuple[str, str, int | None]:
    scheme = scheme.lower()
    return scheme, (host or "").lower(), port if port is not None else _DEFAULT_PORTS.get(scheme)


def _split(url: str) -> tuple[tuple[str, str, int | None], str, str] | None:
    """(origin, path, query) of an absolute http(s) URL; None when it is not one."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return _origin(parts.scheme, parts.hostname, port), parts.path or "/", parts.query


def _under(path: str, base_path: str) -> str | None:
    """``path`` relative to the directory ``base_path`` names; None when outside it."""
    directory = base_path if base_path.endswith("/") else base_path.rsplit("/", 1)[0] + "/"
    if not path.startswith(directory):
        return None
    return path[len(directory) :]


def _site_origin(base_scheme: str, host_header: str | None) -> tuple[str, str, int | None] | None:
    """The origin of the site name an instance is asked for (``Host: www.site``)."""
    if not host_header:
        return None
    found = _split(f"{base_scheme}://{host_header}/")
    return found[0] if found else None


def place_reference(
    url: str,
    *,
    instance_base: str,
    cdn_base: str | None = None,
    prefix: str = "",
    host_header: str | None = None,
) -> Placement:
    """Where the absolute ``url`` (a resolved page reference) is fetched from.

    ``instance_base`` is the instance's base URL, ``cdn_base`` the configured CDN's,
    ``prefix`` the directory the release's files are served under on the instance
    (``static/``; ``""``: the base URL itself), ``host_header`` the site name the
    instance is asked for, whose absolute URLs are the instance's own.
    """
    target = _split(url)
    if target is None:
        return Placement(url, Where.UNUSABLE, reason="not an http(s) URL")
    origin, path, query = target
    if cdn_base:
        cdn = _split(cdn_base)
        relative = _under(path, cdn[1]) if cdn is not None and cdn[0] == origin else None
        if relative is not None:
            return _requested(url, Where.CDN, relative, query, prefix="")
    base = _split(instance_base)
    if base is None:
        return Placement(url, Where.UNUSABLE, reason=f"instance base {instance_base!r} is no URL")
    if origin not in (base[0], _site_origin(base[0][0], host_header)):
        return Placement(url, Where.OTHER_ORIGIN, reason="another origin: listed, never requested")
    relative = _under(path, base[1])
    if relative is None:
        return Placement(
            url,
            Where.OUTSIDE_BASE,
            reason=f"outside the instance's base URL {instance_base}: not requested",
        )
    return _requested(url, Where.INSTANCE, relative, query, prefix=prefix)


def _requested(url: str, where: Where, relative: str, query: str, *, prefix: str) -> Placement:
    """The placement of a reference that is requested: its request and release paths."""
    try:
        normal = normalise_path(relative)
    except ArtifactCheckError as exc:
        return Placement(url, Where.UNUSABLE, reason=str(exc))
    request = relative + (f"?{query}" if query else "")
    release = normal[len(prefix) :] if normal.startswith(prefix) else None
    return Placement(url, where, request_path=request, release_path=release or None)
