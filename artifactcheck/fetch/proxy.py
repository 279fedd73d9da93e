"""Which requests go through an HTTP proxy, and which proxy.

A corporate network reaches release sources and CDNs only through its proxy, named as
curl and httpx read it: ``HTTP_PROXY``/``HTTPS_PROXY`` (or lowercase; lowercase wins)
for each scheme, and ``NO_PROXY`` for what goes direct, matched as curl (7.86 and
later) matches it (:func:`no_proxy_matches`): a request that curl sends direct never
reaches the proxy here, where the proxy would see its credential headers. Instances
are another matter: they are reached by IP inside the network, and a proxy between us
and them would be what answers, so they are fetched directly unless
``http.proxy_instances`` says otherwise. The CLI reads the environment
(:meth:`Proxies.from_environment`); the controller never does: its proxy comes only
from the admin configuration, and its egress rules judge the destination.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from typing import Protocol
from urllib.parse import urlsplit

from artifactcheck.model.errors import ConfigError
from artifactcheck.model.records import Record, field

__all__ = ["Proxies", "no_proxy_matches", "proxies_of"]


class Proxies(Record):
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
        port = split.port or _DEFAULT_PORTS.get(split.scheme)
        if proxy is None or self.bypassed(split.hostname or "", port):
            return None
        return proxy

    def bypassed(self, host: str, port: int | None) -> bool:
        """``NO_PROXY`` sends ``host`` (on ``port``, the scheme's default when the URL
        names none) direct (:func:`no_proxy_matches`)."""
        return no_proxy_matches(self.no_proxy, host, port)


_DEFAULT_PORTS = {"http": 80, "https": 443}
_SEPARATORS = re.compile(r"[,\s]+")


def no_proxy_matches(no_proxy: str, host: str, port: int | None) -> bool:
    """Whether the ``NO_PROXY`` value sends ``host`` direct, as curl >= 7.86 decides
    (its ``lib/noproxy.c`` and the cases of its test 1614; tests/fetch/test_no_proxy.py).

    Entries are separated by commas or blanks and compared without case. A host name
    matches an entry that is the name itself or a domain holding it (``example.com``
    and ``.example.com`` both match ``www.example.com``; one leading and one trailing
    dot are ignored on either side; ``nonexample.com`` does not match). An IP address
    (an IPv6 one with or without brackets) matches only an address entry: the same
    address in any spelling (``0:0::1`` is ``::1``) or a CIDR range (``10.0.0.0/8``,
    ``fe80::/10``; a prefix of 0 or one longer than the address compares the whole
    address, or nothing, as curl does). ``*`` alone sends everything direct.

    Where curl matches nothing, three entries go direct here too, because they say
    plainly which host is meant and sending it to the proxy would show the proxy what
    the user kept from it: ``*`` among other entries; an IPv6 entry in brackets
    (``[::1]``); an entry with a port (``example.com:443``, ``[::1]:8080``), which
    matches that port only, a URL without one being on its scheme's default port.
    """
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        return False
    address = _address(host)
    host = host.removesuffix(".")
    for token in _SEPARATORS.split(no_proxy.lower()):
        if token == "*":
            return True
        if not token:
            continue
        name, wanted = _entry_port(token)
        if wanted is not None and wanted != port:
            continue
        if address is not None:
            if _in_range(address, name):
                return True
        elif _in_domain(host, name):
            return True
    return False


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _entry_port(token: str) -> tuple[str, int | None]:
    """``name:port`` or ``[v6]:port`` split (``[v6]`` unbracketed); a bare IPv6 address
    (``::1``, ``fe80::1``) has no port."""
    if token.startswith("["):
        inside, _, rest = token[1:].partition("]")
        if rest.startswith(":") and rest[1:].isdigit():
            return inside, int(rest[1:])
        return (inside, None) if not rest else (token, None)
    head, sep, tail = token.rpartition(":")
    if sep and tail.isdigit() and ":" not in head:
        return head, int(tail)
    return token, None


def _in_range(address: ipaddress.IPv4Address | ipaddress.IPv6Address, entry: str) -> bool:
    """``address`` is ``entry``'s address, or in its CIDR range (curl's rules for the
    prefix: 0 is the whole address, longer than the address matches nothing)."""
    text, slash, bits = entry.partition("/")
    network = _address(text)
    if network is None or network.version != address.version:
        return False
    prefix: int = network.max_prefixlen
    if slash:
        if not bits.isdigit() or int(bits) > network.max_prefixlen:
            return False
        prefix = int(bits) or network.max_prefixlen
    return address in ipaddress.ip_network((network, prefix), strict=False)


def _in_domain(host: str, entry: str) -> bool:
    """``host`` is ``entry`` or a name inside it (one leading and trailing dot ignored)."""
    name = entry.removesuffix(".").removeprefix(".")
    return bool(name) and (host == name or host.endswith("." + name))


def _usable(value: str, variable: str) -> str:
    """``value`` as a proxy URL httpx can use, or ConfigError naming ``variable``."""
    url = value.strip() if "://" in value else f"http://{value.strip()}"
    split = urlsplit(url)
    if split.scheme not in ("http", "https") or not split.hostname:
        raise ConfigError(
            f"{variable}={value!r}: only http:// and https:// proxies with a host are supported"
        )
    return url


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
