"""The transport under the fetcher, as ``http.transport`` names it.

- ``"http1"`` (the default; ``"auto"`` is its old name):
  :class:`~artifactcheck.fetch.http1.Http1Transport`, our lean HTTP/1.1 keep-alive
  transport, the only one that enforces an egress policy;
- ``"httpx"``: httpx's own pool over httpcore (slow with many hosts);
- ``"aiohttp"``: ``httpx_aiohttp.AiohttpTransport`` over an aiohttp connector we
  configure ourselves.

Each is sized to the fetcher's own limits and never reads proxies or CA files from the
environment. docs/benchmarks.md has the measurements behind the default.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpcore
import httpx

from artifactcheck.fetch.http1 import KEEPALIVE, Http1Transport
from artifactcheck.model.settings import HttpSettings
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
    if http.transport == "httpx":
        limits = httpx.Limits(
            max_connections=http.max_connections,
            max_keepalive_connections=http.max_connections,
            keepalive_expiry=KEEPALIVE,
        )
        transport = httpx.AsyncHTTPTransport(verify=ssl_context, limits=limits, trust_env=False)
        transport._pool.__class__ = _SilentReusePool  # see there: no other way in
        return transport
    return _aiohttp_transport(http, ssl_context)


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
        if type(connection) is httpcore.AsyncHTTPConnection:  # not a proxy's (none is used)
            connection.__class__ = _SilentConnection
        return connection


def _aiohttp_transport(http: HttpSettings, ssl_context: ssl.SSLContext) -> httpx.AsyncBaseTransport:
    import aiohttp  # only this transport needs it: ~0.15 s of imports otherwise
    from httpx_aiohttp import AiohttpTransport

    class SilentReuseConnector(aiohttp.TCPConnector):
        """aiohttp's connector that never hands out a pooled connection on which bytes
        arrived while it was idle (aiohttp parses them and keeps them as the answer to
        the next request: a forged response would be hashed as the next file)."""

        async def _get(self, key: Any, *args: Any, **kw: Any) -> Any:  # (key, traces) in 3.14
            conns = self._conns.get(key)
            if conns:
                for entry in [e for e in conns if e[0].should_close]:
                    conns.remove(entry)
                    entry[0].close()
                if not conns:
                    del self._conns[key]
            return await super()._get(key, *args, **kw)

    connector = SilentReuseConnector(
        limit=http.max_connections,
        limit_per_host=http.max_per_host,
        ssl=ssl_context,
        keepalive_timeout=KEEPALIVE,
    )
    session = aiohttp.ClientSession(
        connector=connector,
        auto_decompress=False,  # we decode and cap ourselves
        trust_env=False,
        cookie_jar=aiohttp.DummyCookieJar(),  # instances must not steer later requests
        timeout=aiohttp.ClientTimeout(total=None),  # per request, from the timeout extension
    )
    # aiohttp silently resends a GET once when a pooled connection fails; that would
    # be a second, uncounted retry loop (and 2x load on a resetting server). aiohttp's
    # own test client turns it off the same way; there is no public switch.
    if hasattr(session, "_retry_connection"):
        session._retry_connection = False
    return AiohttpTransport(client=session, verify=ssl_context, trust_env=False)
