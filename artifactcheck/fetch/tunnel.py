"""An HTTP proxy as the lean transport uses it: where it is, what it is told, and when.

A request through a proxy (:mod:`artifactcheck.fetch.proxy` picks which) is sent by the
same HTTP/1.1 transport as a direct one (:class:`~artifactcheck.fetch.http1.Http1Transport`
with a :class:`ProxyEndpoint`), so it keeps the same parser, limits and keep-alive rules:

- an ``http://`` URL is sent to the proxy in absolute form (``GET http://host/path``,
  RFC 9112 3.2.2), with ``Proxy-Authorization`` when the proxy URL carries credentials;
- an ``https://`` URL goes through a ``CONNECT host:port`` tunnel (RFC 9110 9.3.6), then
  TLS with the destination, verified end to end: the proxy sees the authority only, and
  its credentials are sent in the ``CONNECT`` request alone, never inside the tunnel.

Written here rather than taken from httpx: httpx proxies only through its own pool,
whose connections keep the transport's reuse rules only by reading h11's private
buffer (docs/http-stacks.md). The proxy's answer to ``CONNECT`` is read by the same
head parser as any response.
"""

from __future__ import annotations

import base64
from typing import Final
from urllib.parse import unquote, urlsplit

from artifactcheck.fetch.error_kinds import ProxyError
from artifactcheck.model.records import Record

__all__ = ["ProxyEndpoint", "refused", "shown"]

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


class ProxyEndpoint(Record):
    """An HTTP proxy: where to connect, and the credential line it alone is sent."""

    scheme: str  # how we reach the proxy itself: "http", or "https" (TLS to the proxy)
    host: str
    port: int
    authorization: bytes  # b"Proxy-Authorization: Basic ...\r\n" or b""

    def __repr__(self) -> str:
        """Every field but the credential line, which no log or traceback may show."""
        return f"ProxyEndpoint(scheme={self.scheme!r}, host={self.host!r}, port={self.port!r})"

    @classmethod
    def parse(cls, url: str) -> ProxyEndpoint:
        """The proxy at ``url`` (http:// or https://, as :mod:`fetch.proxy` admits);
        ValueError for anything else."""
        split = urlsplit(url)
        if split.scheme not in _DEFAULT_PORTS or not split.hostname:
            raise ValueError(f"not an HTTP proxy URL: {split.scheme}://{split.hostname or ''}")
        authorization = b""
        if split.username is not None:
            pair = f"{unquote(split.username)}:{unquote(split.password or '')}"
            token = base64.b64encode(pair.encode("utf-8"))
            authorization = b"Proxy-Authorization: Basic " + token + b"\r\n"
        port = split.port or _DEFAULT_PORTS[split.scheme]
        return cls(split.scheme, split.hostname, port, authorization)

    def connect_request(self, host: str, port: int) -> bytes:
        """The ``CONNECT`` request opening a tunnel to ``host:port`` (an IPv6 address in
        brackets, as in a URL's authority)."""
        authority = (f"[{host}]" if ":" in host else host).encode("ascii") + b":%d" % port
        return (
            b"CONNECT " + authority + b" HTTP/1.1\r\nHost: " + authority + b"\r\n"
            + self.authorization + b"\r\n"
        )  # fmt: skip

    def forwarded_target(self, scheme: str, netloc: bytes, target: bytes) -> bytes:
        """The absolute-form request target of a plain ``http://`` request."""
        return scheme.encode("ascii") + b"://" + netloc + target


def shown(url: str) -> str:
    """A proxy URL as a message may show it: a password in it replaced by ``***``
    (errors end up in reports, logs and Events)."""
    split = urlsplit(url)
    if split.password is None:
        return url
    netloc = f"{split.username}:***@" + split.netloc.rpartition("@")[2]
    return split._replace(netloc=netloc).geturl()


def refused(host: str, port: int, status: int, reason: bytes) -> ProxyError:
    """The error for a proxy that answered ``CONNECT`` with anything but 2xx (403: its
    policy, 407: credentials wanted): an error of the fetch, never an answer."""
    shown = reason[:80].decode("latin-1")
    return ProxyError(f"CONNECT {host}:{port} answered {status} {shown}".rstrip())
