"""The transport under the fetcher, as ``http.transport`` names it.

- ``"http1"`` (the default; ``"auto"`` is its old name):
  :class:`~artifactcheck.fetch.http1.Http1Transport`, our lean HTTP/1.1 keep-alive
  transport, the only one that enforces an egress policy;
- ``"httpx"``: httpx's own pool over httpcore (slow with many hosts);
- ``"aiohttp"``: ``httpx_aiohttp.AiohttpTransport`` over an aiohttp connector we
  configure ourselves.

Each is sized to the fetcher's own limits and never reads proxies or CA files from the
environment. docs/perf/history.md has the measurements behind the default.
"""

from __future__ import annotations

import ssl

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
        return httpx.AsyncHTTPTransport(verify=ssl_context, limits=limits, trust_env=False)
    return _aiohttp_transport(http, ssl_context)


def _aiohttp_transport(http: HttpSettings, ssl_context: ssl.SSLContext) -> httpx.AsyncBaseTransport:
    import aiohttp  # only this transport needs it: ~0.15 s of imports otherwise
    from httpx_aiohttp import AiohttpTransport

    connector = aiohttp.TCPConnector(
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
