"""Where a request to one URL goes, as our own transport needs it, without httpx.

A route is what ``httpx.URL`` makes of a URL: scheme, host, port, the Host header
value and the request target. The URLs a check requests are plain (an http(s) scheme,
an ASCII host name or IPv4 address, a path and query of characters httpx leaves as
they are, no dot segments): those are routed here by one regular expression, which
reads them exactly as httpx does (tests/fetch/test_fetch_routes.py holds the two side
by side). Anything else (IPv6, IDNA, user info, characters httpx would quote, dot
segments, a fragment) is handed to ``httpx.URL`` itself, which is imported only then:
importing httpx is most of what a small check's start-up would spend on the fetch.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

from artifactcheck.fetch import urls
from artifactcheck.model.records import Record

__all__ = ["BaseRoute", "Route"]

_PCHAR: Final = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})"
_PLAIN: Final = re.compile(
    r"(?P<scheme>https?)://"
    r"(?P<host>[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*)"
    r"(?::(?P<port>[1-9][0-9]{0,4}))?"
    rf"(?P<path>(?:/{_PCHAR}*)*)"
    rf"(?P<query>\?(?:{_PCHAR}|[/?])*)?"
)
_IPV4_STYLE: Final = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")  # httpx's test for IPv4
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


class Route(Record):
    """Where a request to one URL goes: what ``httpx.URL`` makes of the URL, worked out
    once per base URL rather than once per request."""

    scheme: str
    host: str
    port: int
    netloc: bytes  # the Host header httpx.Request would add
    target: bytes  # the request target (path and query) of the URL

    @classmethod
    def of(cls, url: str) -> Route:
        """The route of any URL (a redirect target), parsed as httpx.Request parses it."""
        plain = _plain(url)
        if plain is not None:
            return plain
        import httpx  # an unusual URL: httpx's own parser, so it reads the same

        parsed = httpx.URL(url)
        scheme = parsed.scheme
        port = parsed.port or (443 if scheme == "https" else 80)
        netloc = parsed.netloc if parsed.host else b""
        return cls(scheme, parsed.host, port, netloc, parsed.raw_path)


def _plain(url: str) -> Route | None:
    """The route of a plain URL (see the module), None for any other."""
    match = _PLAIN.fullmatch(url)
    if match is None:
        return None
    scheme, host, port_text, path, query = match.group("scheme", "host", "port", "path", "query")
    if _IPV4_STYLE.fullmatch(host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return None  # httpx refuses it: let it say why
    elif host[-1:].isdigit() and "." in host:
        return None  # a numeric last label: left to httpx's own reading
    segments = path.split("/")
    if "." in segments or ".." in segments:
        return None  # dot segments: httpx removes them
    host = host.lower()
    default = _DEFAULT_PORTS[scheme]
    port = int(port_text) if port_text else default
    if port > 65535:
        return None
    netloc = host if port == default else f"{host}:{port}"
    target = (path or "/") + (query or "")
    return Route(scheme, host, port, netloc.encode("ascii"), target.encode("ascii"))


class BaseRoute(Record):
    """A base URL parsed once: its directory, and the route of that directory.

    A URL that :meth:`urls.Base.join` builds is the directory followed by a quoted,
    normalised path (no dot segments; only characters httpx leaves as they are), so
    its request target is the directory's followed by that same text
    (tests/fetch/test_fetch_fastpath.py checks this against ``httpx.URL``).
    """

    base: urls.Base
    route: Route

    def route_of(self, url: str) -> Route:
        """The route of a URL joined under this base by ``self.base.join``."""
        route = self.route
        suffix = url[len(self.base.directory) :].encode("ascii")
        return Route(route.scheme, route.host, route.port, route.netloc, route.target + suffix)
