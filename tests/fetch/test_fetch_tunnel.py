"""Proxies on the lean transport: what the proxy is told, what the destination is told.

Real servers on loopback: the logging proxy of :mod:`proxy_support` (absolute-form
requests and ``CONNECT`` tunnels), a raw-socket proxy for the bytes no correct proxy
sends, and a TLS origin that records every request head it decrypts. What must hold:
the proxy's credentials reach the proxy alone (in ``CONNECT``, never inside the
tunnel); one tunnel carries the requests to its destination as a keep-alive
connection would; nothing the proxy sends around its answer to ``CONNECT`` is read as
the destination's answer.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trustme
from fetch_support import server_context, tls_origin
from proxy_support import LoggingProxy
from rawserver import RawConn, RawServer, response

from artifactcheck.fetch.proxy import Proxies
from artifactcheck_sim.web import Site, WebFleet

HELLO = b"hello"
SHA = hashlib.sha256(HELLO).hexdigest()
CREDENTIAL = "Basic " + base64.b64encode(b"ci user:p@ss").decode()


def with_credentials(url: str) -> str:
    """``url`` with a user and a password that both need quoting."""
    return url.replace("http://", "http://ci%20user:p%40ss@", 1)


def header_lines(head: bytes) -> list[str]:
    return [line.decode("latin-1").lower() for line in head.split(b"\r\n")[1:]]


async def test_proxy_credentials_go_in_connect_and_never_inside_the_tunnel(
    make_fetcher, host: Callable[[], str], tmp_path: Path
) -> None:
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    address = host()
    heads: list[bytes] = []
    with (
        RawServer(address, tls_origin(server_context(ca, address), heads)) as cdn,
        LoggingProxy(host()) as proxy,
    ):
        url = f"https://{address}:{cdn.port}/"
        proxies = Proxies.single(with_credentials(proxy.url))
        http = {"ca_bundle": str(ca_file), "headers": {"X-Token": "t"}}
        async with make_fetcher(http=http, proxies=proxies, retry={"attempts": 1}) as f:
            got = await f.get_asset(url, "a.js", host_header="")
    assert got.ok and got.hashes["sha256"] == SHA, got.error
    assert proxy.requests == [f"CONNECT {address}:{cdn.port} HTTP/1.1"]
    assert f"proxy-authorization: {CREDENTIAL.lower()}" in header_lines(proxy.heads[0])
    assert "x-token: t" not in header_lines(proxy.heads[0])  # the request's own: tunnelled
    (inside,) = heads
    assert "x-token: t" in header_lines(inside)
    assert not [h for h in header_lines(inside) if h.startswith("proxy-authorization")]


async def test_a_plain_http_request_carries_the_proxy_credential_to_the_proxy(
    make_fetcher, host: Callable[[], str]
) -> None:
    with (
        LoggingProxy(host()) as proxy,
        RawServer(host(), lambda conn: conn.read_request() and conn.send(response(200, HELLO)))
        as cdn,
    ):  # fmt: skip
        proxies = Proxies.single(with_credentials(proxy.url))
        async with make_fetcher(proxies=proxies, retry={"attempts": 1}) as f:
            got = await f.get_asset(cdn.url, "a.js", host_header="")
    assert got.ok and got.hashes["sha256"] == SHA, got.error
    assert proxy.requests == [f"GET {cdn.url}a.js HTTP/1.1"]
    assert f"proxy-authorization: {CREDENTIAL.lower()}" in header_lines(proxy.heads[0])


async def test_one_tunnel_carries_every_request_to_its_destination(
    make_fetcher, fleet: WebFleet, host: Callable[[], str], tmp_path: Path
) -> None:
    """Keep-alive through the tunnel: one CONNECT for three files of one CDN, and one
    more for another CDN (a tunnel is never reused for another destination)."""
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    site = Site(overrides={"/a.js": HELLO, "/b.js": HELLO, "/c.js": HELLO})
    first, second = host(), host()
    one = fleet.add(site, first, ssl_context=server_context(ca, first))
    two = fleet.add(site, second, ssl_context=server_context(ca, second))
    with LoggingProxy(host()) as proxy:
        http = {"ca_bundle": str(ca_file)}
        async with make_fetcher(http=http, proxies=Proxies.single(proxy.url)) as f:
            got = [await f.get_asset(one, name, host_header="") for name in ("a.js", "b.js")]
            got.append(await f.get_asset(two, "a.js", host_header=""))
            got.append(await f.get_asset(one, "c.js", host_header=""))
    assert all(g.ok and g.hashes["sha256"] == SHA for g in got), [g.error for g in got]
    assert proxy.requests == [
        f"CONNECT {urlsplit(one).netloc} HTTP/1.1",
        f"CONNECT {urlsplit(two).netloc} HTTP/1.1",
    ]


@pytest.mark.parametrize(
    "after",
    [
        response(200, b"forge"),  # a whole response, as if the destination had answered
        b"\x16\x03\x01",  # a TLS record's first bytes, before our hello
    ],
    ids=["forged-response", "early-bytes"],
)
async def test_bytes_after_the_answer_to_connect_are_an_error_never_an_answer(
    make_fetcher, host: Callable[[], str], after: bytes
) -> None:
    def proxy(conn: RawConn) -> None:
        if conn.read_request() is not None:
            conn.send(b"HTTP/1.1 200 Connection established\r\n\r\n" + after)
            conn.wait_closed(5)

    with RawServer(host(), proxy) as raw:
        async with make_fetcher(proxies=Proxies.single(raw.url), retry={"attempts": 1}) as f:
            got = await f.get_asset(f"https://{host()}:8443/", "a.js", host_header="")
    assert got.error_kind == "protocol" and not got.hashes, (got.error_kind, got.error)
    assert "after its answer to CONNECT" in (got.error or ""), got.error


async def test_a_refused_connect_names_the_status_the_proxy_gave(
    make_fetcher, host: Callable[[], str]
) -> None:
    with LoggingProxy(host(), refuse=True, status=407) as proxy:
        async with make_fetcher(proxies=Proxies.single(proxy.url), retry={"attempts": 1}) as f:
            got = await f.get_asset(f"https://{host()}:8443/", "a.js", host_header="")
    assert got.error_kind == "connect" and not got.hashes, got.error
    assert "the HTTP proxy refused the request" in (got.error or "")
    assert "answered 407" in (got.error or ""), got.error


async def test_httpx_api_on_the_lean_transport_goes_through_the_proxy_too(
    host: Callable[[], str],
) -> None:
    """``Http1Transport`` under an ``httpx.AsyncClient`` writes the same absolute form."""
    import httpx

    from artifactcheck.fetch.http1 import Http1Transport
    from artifactcheck.fetch.tunnel import ProxyEndpoint

    with (
        LoggingProxy(host()) as proxy,
        RawServer(host(), lambda conn: conn.read_request() and conn.send(response(200, HELLO)))
        as cdn,
    ):  # fmt: skip
        lean = Http1Transport(
            ssl_context=ssl.create_default_context(),
            proxy=ProxyEndpoint.parse(with_credentials(proxy.url)),
        )
        async with httpx.AsyncClient(transport=lean) as client:
            got = await client.get(f"{cdn.url}a.js")
    assert got.content == HELLO
    assert proxy.requests == [f"GET {cdn.url}a.js HTTP/1.1"]
    assert f"proxy-authorization: {CREDENTIAL.lower()}" in header_lines(proxy.heads[0])


PROXIED_PROBE = """
import asyncio, json, sys
from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.fetch.proxy import Proxies
from artifactcheck.model.settings import HttpSettings, RetrySettings

async def main(base):
    proxies = Proxies.from_environment()  # as the CLI reads them
    async with Fetcher(http=HttpSettings(), retry=RetrySettings(), proxies=proxies) as fetcher:
        got = await fetcher.get_asset(base, "a.js", host_header="")
    return [got.status, got.error]

got = asyncio.run(main(sys.argv[1]))
print(json.dumps({"got": got, "httpx": "httpx" in sys.modules}))
"""


def test_a_run_through_a_proxy_never_imports_httpx(host: Callable[[], str]) -> None:
    """Through a proxy, as directly: httpx's import is most of a small check's start-up."""
    with (
        LoggingProxy(host()) as proxy,
        RawServer(host(), lambda conn: conn.read_request() and conn.send(response(200, HELLO)))
        as cdn,
    ):  # fmt: skip
        proc = subprocess.run(
            [sys.executable, "-c", PROXIED_PROBE, cdn.url],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env={**os.environ, "HTTP_PROXY": proxy.url},
        )
    assert json.loads(proc.stdout) == {"got": [200, None], "httpx": False}, proc.stderr
    assert proxy.requests == [f"GET {cdn.url}a.js HTTP/1.1"]


@pytest.mark.parametrize("named", [True, False], ids=["certificate-matches", "other-name"])
async def test_an_https_proxy_is_reached_over_tls_verified_by_its_name(
    make_fetcher, host: Callable[[], str], tmp_path: Path, named: bool
) -> None:
    """``HTTPS_PROXY=https://...``: TLS to the proxy itself, its certificate checked as
    any server's; a proxy presenting another name's certificate is never told a thing."""
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    proxy_host = host()
    context = server_context(ca, proxy_host if named else "other.example")
    seen: list[bytes] = []

    # the proxy over TLS: one absolute-form request, answered for the origin
    with RawServer(proxy_host, tls_origin(context, seen)) as raw:
        url = f"https://{proxy_host}:{raw.port}"
        http = {"ca_bundle": str(ca_file)}
        proxies = Proxies.single(url)
        async with make_fetcher(http=http, proxies=proxies, retry={"attempts": 1}) as f:
            got = await f.get_asset("http://cdn.example:8080/", "a.js", host_header="")
    if named:
        assert got.ok and got.hashes["sha256"] == SHA, got.error
        assert [h.split(b"\r\n", 1)[0] for h in seen] == [
            b"GET http://cdn.example:8080/a.js HTTP/1.1"
        ]
    else:
        assert got.error_kind == "tls" and not got.hashes, (got.error_kind, got.error)
        assert seen == []


async def test_a_response_nobody_asked_for_inside_a_tunnel_is_never_the_next_answer(
    make_fetcher, host: Callable[[], str], tmp_path: Path
) -> None:
    """The origin sends a forged second response in the same TLS write as the first:
    the tunnel is not reused, the next file comes over a new one, both hashed right."""
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    address = host()
    context = server_context(ca, address)

    def origin(conn: RawConn) -> None:
        with context.wrap_socket(conn.sock, server_side=True) as tls:
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = tls.recv(65536)
                    if not data:
                        return
                    buffer += data
                _head, _, buffer = buffer.partition(b"\r\n\r\n")
                tls.sendall(response(200, HELLO) + response(200, b"forged"))

    with RawServer(address, origin) as cdn, LoggingProxy(host()) as proxy:
        url = f"https://{address}:{cdn.port}/"
        http = {"ca_bundle": str(ca_file)}
        async with make_fetcher(http=http, proxies=Proxies.single(proxy.url)) as f:
            got = [await f.get_asset(url, name, host_header="") for name in ("a.js", "b.js")]
    assert [g.hashes.get("sha256") for g in got] == [SHA, SHA], [g.error for g in got]
    assert proxy.requests == [f"CONNECT {address}:{cdn.port} HTTP/1.1"] * 2


@pytest.mark.parametrize("status", [None, 407])
async def test_an_error_through_a_proxy_never_shows_its_password(
    make_fetcher, host: Callable[[], str], status: int | None
) -> None:
    """The proxy is named in the error (down, or asking for credentials over plain
    http), its password is not: errors end up in reports, logs and Events."""
    if status is None:
        proxy = LoggingProxy(host())  # bound, then closed: its port refuses
        proxy.__exit__(None, None, None)
        got = await _fetch_through(make_fetcher, with_credentials(proxy.url), host())
    else:
        with LoggingProxy(host(), refuse=True, status=status) as proxy:
            got = await _fetch_through(make_fetcher, with_credentials(proxy.url), host())
    assert got.error_kind == "connect" and not got.hashes, (got.error_kind, got.error)
    assert f"http://ci%20user:***@{urlsplit(proxy.url).netloc}" in (got.error or ""), got.error
    assert "p@ss" not in (got.error or "") and "p%40ss" not in (got.error or ""), got.error


async def _fetch_through(make_fetcher: Any, proxy_url: str, cdn_host: str) -> Any:
    async with make_fetcher(proxies=Proxies.single(proxy_url), retry={"attempts": 1}) as f:
        return await f.get_asset(f"http://{cdn_host}:8080/", "a.js", host_header="")
