"""URL arithmetic that keeps every request under an allowed base URL (no SSRF).

Paths come from served manifests, and served manifests come from instances, which
are hostile until proven otherwise: a path may climb with ``..``, name another host,
or a redirect may point anywhere. Everything the fetcher requests is built by
:func:`join` and every redirect it follows is checked with :func:`is_under`, so the
rule "only fetch under the instance's and the CDN's own base URLs" lives in one place.
This module is pure (no I/O, no httpx) so that the rule can be tested exhaustively.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import SplitResult, quote, unquote, urljoin, urlsplit

from artifactcheck.manifests.limits import normalise_path
from artifactcheck.model.errors import UnsafeReferenceError
from artifactcheck.model.records import Record

__all__ = [
    "Base",
    "base_directory",
    "host_key",
    "is_under",
    "join",
    "parse_base",
    "request_query",
    "resolve_redirect",
    "split_base",
]

_DEFAULT_PORTS = {"http": 80, "https": 443}
# RFC 3986 pchar minus "%" (re-quoted) and "?" / "#" (never part of a path here).
_PATH_SAFE = "/!$&'()*+,;=:@~-._"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MAX_LOCATION = 8192  # longer Location values are refused, not parsed
_MAX_QUERY = 2048  # a page's query string longer than this is refused
# RFC 3986 query characters: "%" kept (the page's own escapes), "#" never (a fragment).
_QUERY_SAFE = "/?:@!$&'()*+,;=-._~%"


def _origin(parts: SplitResult) -> tuple[str, str, int]:
    """(scheme, host, port) with the default port made explicit; ValueError if unusable."""
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError(f"not an http(s) URL: scheme {parts.scheme!r}")
    host = (parts.hostname or "").lower()
    if not host:
        raise ValueError("URL has no host")
    port = parts.port  # raises ValueError for a malformed port
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]


def split_base(base_url: str) -> SplitResult:
    """Parse a base URL, refusing anything that is not an absolute http(s) URL."""
    parts = urlsplit(base_url)
    _origin(parts)
    if parts.username is not None or parts.password is not None:
        raise ValueError("base URL must not carry credentials")
    return parts


def _segments(path: str) -> list[str] | None:
    """Decoded path segments with dot segments resolved; None when it climbs above '/'.

    A dot segment with path parameters (``..;``, ``..;jsessionid=1``, ``.;x``) is
    refused too (None): servlet containers strip the parameters and read it as ``..``,
    so the server would resolve a path this check never saw.
    """
    decoded = unquote(path).replace("\\", "/")
    out: list[str] = []
    for segment in decoded.split("/"):
        if ";" in segment and segment.split(";", 1)[0] in (".", ".."):
            return None
        if segment in ("", "."):
            continue
        if segment == "..":
            if not out:
                return None
            out.pop()
        else:
            out.append(segment)
    return out


def base_directory(base_url: str) -> str:
    """The base URL as a directory: trailing ``/`` added, query and fragment dropped."""
    parts = split_base(base_url)
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    return parts._replace(path=path, query="", fragment="").geturl()


def join(base_url: str, path: Any) -> str:
    """The absolute URL of a manifest path under ``base_url``, or UnsafeReferenceError.

    ``path`` is normalised with :func:`~artifactcheck.manifests.limits.normalise_path`
    (so ``..``, absolute and protocol-relative URLs are refused and a query string is
    dropped), then percent-encoded again. A base URL without a trailing ``/`` is read
    as a directory, as :class:`~artifactcheck.model.values.Instance` promises.
    """
    base = base_directory(base_url)
    relative = normalise_path(path)
    url = base + quote(relative, safe=_PATH_SAFE)
    if not is_under(base, url):  # defence in depth: normalise_path already refuses these
        raise UnsafeReferenceError(f"path {path!r} resolves outside {base}")
    return url


def request_query(query: str) -> str:
    """``?QUERY`` to follow a URL built by :func:`join`, or ``""`` for no query.

    A page's reference keeps its query in the request (``site.css?v=2``: a server or a
    CDN may answer by it), while :func:`join` drops any query a path carries. What comes
    after ``?`` cannot move a request off its host or path; what is refused here is what
    could reach the request line as something else: control characters (CR/LF), ``#``,
    and an overlong value. Anything else outside RFC 3986's query characters is
    percent-encoded.
    """
    if not query:
        return ""
    if len(query) > _MAX_QUERY:
        raise UnsafeReferenceError(f"query longer than the cap of {_MAX_QUERY} characters")
    if _CONTROL.search(query) or "#" in query:
        raise UnsafeReferenceError(f"unusable query {query[:80]!r}")
    return "?" + quote(query, safe=_QUERY_SAFE)


class Base(Record):
    """A base URL parsed once, for the many paths joined under it.

    :meth:`join` gives exactly what :func:`join` gives for a path already normalised
    (tests/fetch/test_fetch_urls.py compares them), without parsing the base URL
    again for every path: the joined URL is the base directory followed by the quoted
    path, and a quoted path holds no ``?`` or ``#``, so the URL's scheme, host, port and
    credentials are the base's and only its path needs :func:`is_under`'s check.
    """

    directory: str  # base_directory(base_url)
    path: str  # the path of ``directory`` (ends with "/")
    segments: tuple[str, ...] | None  # _segments(path); None: nothing is under it

    def join(self, relative: str) -> str:
        """The URL of ``relative`` (the result of ``normalise_path``) under this base."""
        quoted = quote(relative, safe=_PATH_SAFE)
        url = self.directory + quoted
        # defence in depth, as in join(): the same rule as is_under, on the path alone
        target = _segments(self.path + quoted)
        base = self.segments
        if base is None or target is None or tuple(target[: len(base)]) != base:
            raise UnsafeReferenceError(f"path {relative!r} resolves outside {self.directory}")
        return url


def parse_base(base_url: str) -> Base:
    """:class:`Base` of a base URL; ValueError as :func:`split_base` for an unusable one."""
    directory = base_directory(base_url)
    path = urlsplit(directory).path
    segments = _segments(path)
    return Base(directory, path, None if segments is None else tuple(segments))


def resolve_redirect(url: str, location: str) -> str:
    """The absolute URL a ``Location`` value sent in answer to ``url`` points to.

    ValueError for a value that is no usable URL: control characters (NUL, DEL, CR,
    LF, TAB), an unparseable authority such as ``http://[``, an oversized value.
    Whether the target is allowed is :func:`is_under`'s business.
    """
    if len(location) > _MAX_LOCATION:
        raise ValueError(f"Location longer than {_MAX_LOCATION} characters")
    if _CONTROL.search(location):
        raise ValueError("Location contains a control character")
    target = urljoin(url, location.strip(" "))
    parts = urlsplit(target)  # ValueError for a malformed authority, e.g. "http://["
    _ = parts.port  # ValueError for a malformed port
    return target


def is_under(base_url: str, url: str) -> bool:
    """True when ``url`` has the base's scheme, host and port and a path inside its path.

    Dot segments (also percent-encoded ones) are resolved before comparing, and URLs
    carrying credentials are refused, so a redirect cannot smuggle a request elsewhere.
    """
    try:
        base = split_base(base_url)
        target = urlsplit(url)
        if _origin(base) != _origin(target):
            return False
    except ValueError:
        return False
    if target.username is not None or target.password is not None:
        return False
    base_segments = _segments(base.path)
    target_segments = _segments(target.path)
    if base_segments is None or target_segments is None:
        return False
    # "/app" as a base is the directory "/app/": "/application" is not under it.
    return target_segments[: len(base_segments)] == base_segments


def host_key(url: str) -> str:
    """``scheme://host:port`` of a URL, the unit for per-host limits and counters."""
    parts = urlsplit(url)
    scheme, host, port = _origin(parts)
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"
