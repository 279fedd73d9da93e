"""The transport under the fetcher for requests sent directly, as ``http.transport`` names it.

- ``"http1"`` (the default; ``"auto"`` is its old name):
  :class:`~artifactcheck.fetch.http1.Http1Transport`, our lean HTTP/1.1 keep-alive
  transport, the only one that enforces an egress policy; requests through an HTTP
  proxy always use it too (:mod:`artifactcheck.fetch.tunnel`);
- ``"httpx"``: httpx's own pool over httpcore (several times the CPU per request at
  fleet scale: docs/http-stacks.md), only when a spec asks for it. It keeps the
  transport's reuse rule through one workaround of httpcore's private connection
  (:class:`_SilentConnection`); removing the setting value removes it.

Each is sized to the fetcher's own limits and never reads proxies or CA files from the
environment. docs/http-stacks.md has the measurements behind the two.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

import httpcore
import httpx

from artifactcheck.fetch.http1 import KEEPALIVE, Http1Transport
from artifactcheck.model.settings import HttpSettings

if TYPE_CHECKING:
    from artifactcheck.tenancy.egress import Egress

__all__ = ["make_transport"]


def make_transport(
    http: HttpSettings, ssl_context: ssl.SSLContext, egress: Egress | None
) -> httpx.AsyncBaseTransport:
    """A new transport of the kind ``http.transport`` names; only "http1" takes an
    egress policy (the Fetcher refuses the other combinations before this)."""
    if http.transport == "http1":
        return Http1Transport(
            ssl_context=ssl_context,
            keepalive=KEEPALIVE,
            max_idle=max(http.max_connections * 2, 64),
            egress=egress,
        )
    if egress is not None:
        raise ValueError(f"the {http.transport!r} transport cannot enforce an egress policy")
    return _httpx_transport(http, ssl_context)


def _httpx_transport(http: HttpSettings, ssl_context: ssl.SSLContext) -> httpx.AsyncHTTPTransport:
    limits = httpx.Limits(
        max_connections=http.max_connections,
        max_keepalive_connections=http.max_connections,
        keepalive_expiry=KEEPALIVE,
    )
    transport = httpx.AsyncHTTPTransport(verify=ssl_context, limits=limits, trust_env=False)
    transport._pool.__class__ = _SilentReusePool  # see there: no other way in
    return transport


class _SilentConnection(httpcore.AsyncHTTPConnection):
    """A pooled httpcore connection that expires when bytes wait after its response.

    HTTP/1.1 has no request ids: bytes the server sent after a response (read by h11
    in the same segment, e.g. a second, forged response) would be taken as the answer
    to the next request on the connection, and a right file reported as a wrong one.
    httpcore only checks the socket (``is_readable``), not h11's own buffer.
    """

    def has_expired(self) -> bool:
        # only an idle connection: one streaming a response holds its own body's bytes
        connection = self._connection
        h11_state = getattr(connection, "_h11_state", None)
        if h11_state is not None and connection is not None and connection.is_idle():
            if h11_state.trailing_data[0]:
                return True
        return super().has_expired()


class _SilentReusePool(httpcore.AsyncConnectionPool):
    """httpx's pool whose new connections are :class:`_SilentConnection` (the class of
    the pool httpx built is swapped: httpx takes no pool of ours)."""

    def create_connection(self, origin: httpcore.Origin) -> httpcore.AsyncConnectionInterface:
        connection = super().create_connection(origin)
        if type(connection) is httpcore.AsyncHTTPConnection:  # not a proxy's (none is made)
            connection.__class__ = _SilentConnection
        return connection
