"""Which requests go through an HTTP proxy, and which proxy.

A corporate network reaches release sources and CDNs only through its proxy, named as
curl and httpx read it: ``HTTP_PROXY``/``HTTPS_PROXY`` (or lowercase; lowercase wins)
for each scheme, and ``NO_PROXY`` (host names, domain suffixes, ``*``) for what goes
direct. Instances are another matter: they are reached by IP inside the network, and a
proxy between us and them would be what answers, so they are fetched directly unless
``http.proxy_instances`` says otherwise. The CLI reads the environment
(:meth:`Proxies.from_environment`); the controller never does: its proxy comes only
from the admin configuration, and its egress rules judge the destination.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

from artifactcheck.model.errors import ConfigError

__all__ = ["Proxies", "proxies_of"]


@dataclass(frozen=True)
class Proxies:
    """Proxy URLs by scheme of the destination, and the ``NO_PROXY`` list."""

    by_scheme: Mapping[str, str] = field(default_factory=dict)
    no_proxy: str = ""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Proxies:
        """The proxies curl would use, from ``environ`` (default: this process's):
        ``<scheme>_proxy``, else ``all_proxy``; a value without a scheme is http://.

        Raises :class:`ConfigError` naming the variable for a proxy no request could go
        through (another scheme, e.g. ``socks5://``, or no host).
        """
        found = proxy_variables(os.environ if environ is None else environ)
        schemes: dict[str, str] = {}
        for scheme in ("http", "https"):
            key = scheme if found.get(scheme) else "all"
            if found.get(key):
                schemes[scheme] = _usable(found[key], f"{key.upper()}_PROXY")
        return cls(by_scheme=schemes, no_proxy=found.get("no", ""))

    @classmethod
    def single(cls, url: str, no_proxy: str = "") -> Proxies:
        """One proxy for both schemes (the admin configuration's ``http.proxy``)."""
        return cls(by_scheme={"http": url, "https": url}, no_proxy=no_proxy)

    def __bool__(self) -> bool:
        return bool(self.by_scheme)

    def for_url(self, url: str) -> str | None:
        """The proxy to send a request for ``url`` through, or None to go direct."""
        split = urlsplit(url)
        proxy = self.by_scheme.get(split.scheme)
        if proxy is None or self.bypassed(split.hostname or "", split.port):
            return None
        return proxy

    def bypassed(self, host: str, port: int | None) -> bool:
        """``NO_PROXY`` matches ``host`` as curl matches it: ``*`` matches every host;
        an entry (a leading dot ignored) matches that host and its subdomains; an entry
        with ``:port`` matches only that port."""
        host = host.strip("[]").lower().rstrip(".")
        for entry in self.no_proxy.lower().split(","):
            entry = entry.strip()
            if entry == "*":
                return True
            name, _, wanted = entry.rpartition(":") if _has_port(entry) else (entry, "", "")
            name = name.strip("[]").lstrip(".").rstrip(".")
            if not name or (wanted and str(port) != wanted):
                continue
            if host == name or host.endswith("." + name):
                return True
        return False


def _usable(value: str, variable: str) -> str:
    """``value`` as a proxy URL httpx can use, or ConfigError naming ``variable``."""
    url = value.strip() if "://" in value else f"http://{value.strip()}"
    split = urlsplit(url)
    if split.scheme not in ("http", "https") or not split.hostname:
        raise ConfigError(
            f"{variable}={value!r}: only http:// and https:// proxies with a host are supported"
        )
    return url


def _has_port(entry: str) -> bool:
    """``name:port`` or ``[v6]:port``, not a bare IPv6 address."""
    head, sep, tail = entry.rpartition(":")
    return bool(sep) and tail.isdigit() and (head.endswith("]") or ":" not in head)


class _AdminEgress(Protocol):
    """The admin configuration's egress settings, as far as a proxy goes."""

    @property
    def proxy(self) -> str | None: ...

    @property
    def no_proxy(self) -> str: ...


def proxy_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """``<scheme>_proxy`` variables by scheme, read as ``urllib.request.getproxies_environment``
    reads them (tests/fetch/test_fetch_proxy.py holds the two side by side), without
    importing urllib.request (http.client, email: a part of every start-up): any case
    first, then lowercase names win (an empty one removes the scheme); under CGI
    (``REQUEST_METHOD`` set) an uppercase ``HTTP_PROXY`` may come from a client's
    ``Proxy:`` header (CVE-2016-1000110) and is ignored."""
    found: dict[str, str] = {}
    for name, value in environ.items():
        lower = name.lower()
        if value and lower[-6:] == "_proxy":
            found[lower[:-6]] = value
    if "REQUEST_METHOD" in environ:
        found.pop("http", None)
    for name, value in environ.items():
        if name[-6:] == "_proxy":
            if value:
                found[name.lower()[:-6]] = value
            else:
                found.pop(name.lower()[:-6], None)
    return found


def proxies_of(egress: _AdminEgress) -> Proxies | None:
    """The controller's proxies: the admin configuration's ``egress.proxy``, or none."""
    return Proxies.single(egress.proxy, egress.no_proxy) if egress.proxy else None
