"""``NO_PROXY`` matched as curl (7.86 and later) matches it, against curl's own cases.

The tables are curl's: the cases of its unit test 1614 (``Curl_check_noproxy``,
``Curl_cidr4_match``, ``Curl_cidr6_match``) and the examples of CURLOPT_NOPROXY's
documentation. What is sent direct here and not by curl (a port, a bracketed IPv6
entry, ``*`` among others) is its own table, each row saying why. When ``curl`` is
installed, the same rows are run through it against a loopback proxy: whatever curl
sends direct, artifactcheck sends direct too, so the proxy never sees a request (and its
credential headers) that curl would have kept from it.
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import subprocess
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest
from proxy_support import LoggingProxy
from rawserver import RawServer, response, serve_each

from artifactcheck.fetch.proxy import Proxies, no_proxy_matches

# curl's tests/unit/unit1614.c: (host as curl is given it, NO_PROXY, direct?)
CURL_1614 = [
    ("www.example.com", "localhost .example.com .example.de", True),
    ("www.example.com", "localhost,.example.com,.example.de", True),
    ("www.example.com.", "localhost,.example.com,.example.de", True),
    ("example.com", "localhost,.example.com,.example.de", True),
    ("example.com.", "localhost,.example.com,.example.de", True),
    ("www.example.com", "localhost,.example.com.,.example.de", True),
    ("www.example.com", "localhost,www.example.com.,.example.de", True),
    ("example.com", "localhost,example.com,.example.de", True),
    ("example.com.", "localhost,example.com,.example.de", True),
    ("nexample.com", "localhost,example.com,.example.de", False),
    ("www.example.com", "localhost,example.com,.example.de", True),
    ("127.0.0.1", "127.0.0.1,localhost", True),
    ("127.0.0.1", "127.0.0.1,localhost,", True),
    ("127.0.0.1", "127.0.0.1/8,localhost,", True),
    ("127.0.0.1", "127.0.0.1/28,localhost,", True),
    ("127.0.0.1", "127.0.0.1/31,localhost,", True),
    ("127.0.0.1", "localhost,127.0.0.1", True),
    ("127.0.0.1", "localhost," + ("127.0.0.1." * 13)[:128], False),
    ("127.0.0.1", "localhost," + ("127.0.0.1." * 13)[:127], False),
    ("localhost", "localhost,127.0.0.1", True),
    ("localhost", "127.0.0.1,localhost", True),
    ("foobar", "barfoo", False),
    ("foobar", "foobar", True),
    ("192.168.0.1", "foobar", False),
    ("192.168.0.1", "192.168.0.0/16", True),
    ("192.168.0.1", "192.168.0.0/24", True),
    ("192.168.0.1", "192.168.0.0/32", False),
    ("192.168.0.1", "192.168.0.0", False),
    ("192.168.1.1", "192.168.0.0/24", False),
    ("192.168.1.1", "foo, bar, 192.168.0.0/24", False),
    ("192.168.1.1", "foo, bar, 192.168.0.0/16", True),
    ("[::1]", "foo, bar, 192.168.0.0/16", False),
    ("[::1]", "foo, bar, ::1/64", True),
    ("bar", "foo, bar, ::1/64", True),
    ("BAr", "foo, bar, ::1/64", True),
    ("BAr", "foo,,,,,              bar, ::1/64", True),
    ("www.example.com", "foo, .example.com", True),
    ("www.example.com", "www2.example.com, .example.net", False),
    ("example.com", ".example.com, .example.net", True),
    ("nonexample.com", ".example.com, .example.net", False),
    # Curl_cidr4_match (address, network, bits): as the entry "network/bits"
    ("192.160.0.1", "192.160.0.1/33", False),
    ("192.160.0.1", "192.160.0.1/32", True),
    ("192.160.0.1", "192.160.0.1/0", True),
    ("192.160.0.1", "192.160.0.1/24", True),
    ("192.160.0.1", "192.160.0.1/26", True),
    ("192.160.0.1", "192.160.0.1/20", True),
    ("192.160.0.1", "192.160.0.1/18", True),
    ("192.160.0.1", "192.160.0.1/12", True),
    ("192.160.0.1", "192.160.0.1/8", True),
    ("192.160.0.1", "10.0.0.1/8", False),
    ("192.160.0.1", "10.0.0.1/32", False),
    ("192.160.0.1", "10.0.0.1/0", False),
    # Curl_cidr6_match
    ("[::1]", "::1/0", True),
    ("[::1]", "::1/128", True),
    ("[::1]", "0:0::1/128", True),
    ("[::1]", "0:0::1/129", False),
    ("[fe80::ab47:4396:55c9:8474]", "fe80::ab47:4396:55c9:8474/64", True),
    # CURLOPT_NOPROXY's documentation
    ("ample.com", "ample.com", True),
    ("www.ample.com", "ample.com", True),
    ("www.example.com", "ample.com", False),
    ("ample.com.org", "ample.com", False),
    ("anything.example", "*", True),
    ("::1", "example.com,::1,localhost", True),
    ("192.168.7.7", "192.168.0.0/16", True),
    ("192.169.0.1", "192.168.0.0/16", False),
]


@pytest.mark.parametrize(("host", "no_proxy", "direct"), CURL_1614)
def test_curl_s_own_cases(host: str, no_proxy: str, direct: bool) -> None:
    assert no_proxy_matches(no_proxy, host, 80) is direct


# (URL, NO_PROXY, direct?) through Proxies.for_url: the rows and the IPv6 forms
ROUTES = [
    ("http://10.1.2.3/", "10.0.0.0/8", True),
    ("http://10.1.2.3/", "10.0.0.0/16", False),
    ("http://11.1.2.3/", "10.0.0.0/8", False),
    ("https://example.com/", "example.com:443", True),  # the scheme's default port
    ("http://example.com/", "example.com:80", True),
    ("http://example.com/", "example.com:443", False),
    ("https://example.com:8443/", "example.com:443", False),
    ("https://example.com:8443/", "example.com:8443", True),
    ("http://[::1]/", "::1", True),
    ("http://[::1]/", "[::1]", True),
    ("http://[::1]:8080/", "[::1]:8080", True),
    ("http://[::1]/", "[::1]:8080", False),
    ("http://[::1]/", "0:0::1", True),
    ("http://[::1]/", "::2", False),
    ("http://[fe80::1]/", "fe80::/10", True),
    ("http://[fe80::1]/", "[fe80::]/10", False),  # brackets hold an address, not a range
    ("http://[2001:db8::5]/", "2001:db8::/32", True),
    ("http://[2001:db9::5]/", "2001:db8::/32", False),
    ("http://[::1]/", "127.0.0.1", False),  # families never match each other
    ("http://127.0.0.1/", "::1", False),
    ("http://10.1.2.3/", "2.3", False),  # an address is no domain: no suffix match
    ("http://10.1.2.3/", ".1.2.3", False),
    ("http://www.example.com/", ".example.com", True),
    ("http://example.com/", ".example.com", True),
    ("http://www.example.com/", "..example.com", False),  # one leading dot only
    ("http://EXAMPLE.com./", "Example.COM", True),
    ("http://localhost/", "127.0.0.1", False),  # names are never resolved
    ("http://127.0.0.1/", "localhost", False),
    ("http://anything/", "*", True),
    ("http://anything/", "  *  ", True),
    ("http://anything/", "foo,*", True),
    ("http://anything/", "", False),
    ("http://anything/", ",,, ,", False),
    ("http://anything/", "*.anything", False),  # no wildcards inside names
]


@pytest.mark.parametrize(("url", "no_proxy", "direct"), ROUTES)
def test_routes(url: str, no_proxy: str, direct: bool) -> None:
    proxies = Proxies(
        by_scheme={"http": "http://p:3128", "https": "http://p:3128"}, no_proxy=no_proxy
    )
    assert proxies.for_url(url) == (None if direct else "http://p:3128")


def test_the_environment_s_no_proxy_is_the_one_matched() -> None:
    environ = {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "10.0.0.0/8,example.com:443"}
    proxies = Proxies.from_environment(environ)
    assert proxies.for_url("https://10.200.0.1/") is None
    assert proxies.for_url("https://example.com/") is None
    assert proxies.for_url("https://example.org/") == "http://p:3128"


# -- the real thing ------------------------------------------------------------------------


async def test_a_cidr_entry_keeps_the_request_from_the_proxy(
    make_fetcher, host: Callable[[], str]
) -> None:
    """A CDN on a loopback address inside ``NO_PROXY``'s range is fetched direct: the
    proxy sees nothing (no request line, so no credential header either)."""
    cdn_host = host()
    cidr = ".".join(cdn_host.split(".")[:3]) + ".0/24"
    with LoggingProxy(host()) as proxy:
        server = RawServer(cdn_host, serve_each(lambda conn, head: response(200, b"hello")))
        with server as cdn:
            async with make_fetcher(proxies=Proxies.single(proxy.url, no_proxy=cidr)) as f:
                got = await f.get_asset(cdn.url, "a.js", host_header="")
    assert got.ok, got.error
    assert proxy.requests == [] and cdn.connections == 1


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _curl_route(url: str, no_proxy: str) -> str:
    """Where the installed curl sends ``url``: "proxy" or "direct" (the URL's host and
    port connected to a loopback listener with ``--connect-to``, so nothing leaves)."""
    split = urlsplit(url)
    assert split.hostname is not None
    port = split.port or (443 if split.scheme == "https" else 80)
    loopback = "::1" if ":" in split.hostname else "127.0.0.1"
    family = socket.AF_INET6 if loopback == "::1" else socket.AF_INET
    with (
        socket.create_server(("127.0.0.1", 0)) as proxy,
        socket.create_server((loopback, 0), family=family) as direct,
    ):
        proxy_url = f"http://127.0.0.1:{proxy.getsockname()[1]}"
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env.update(http_proxy=proxy_url, https_proxy=proxy_url, NO_PROXY=no_proxy)
        connect_to = (
            f"{_bracketed(split.hostname)}:{port}:{_bracketed(loopback)}:{direct.getsockname()[1]}"
        )
        curl = subprocess.Popen(
            ["curl", "-s", "-k", "-m", "5", "--connect-to", connect_to, url],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            ready, _, _ = select.select([proxy, direct], [], [], 5)
        finally:
            curl.kill()
            curl.wait()
    assert len(ready) == 1, f"curl reached {len(ready)} listeners for {url}"
    return "proxy" if ready[0] is proxy else "direct"


LIVE = [
    ("http://10.1.2.3/", "10.0.0.0/8"),
    ("http://10.1.2.3/", "10.0.0.0/16"),
    ("http://10.1.2.3/", "10.0.0.0/0"),
    ("http://10.1.2.3/", "10.1.2.3"),
    ("http://10.1.2.3/", "2.3"),
    ("https://example.com/", "example.com:443"),
    ("http://www.example.com/", "example.com"),
    ("http://www.example.com/", ".example.com"),
    ("http://nexample.com/", "example.com"),
    ("http://example.com./", "example.com"),
    ("http://example.com/", "example.com."),
    ("http://example.com/", "*"),
    ("http://example.com/", "foo,*"),
    ("http://example.com/", "foo bar example.com"),
    ("http://localhost/", "127.0.0.1"),
    ("http://[::1]/", "::1"),
    ("http://[::1]/", "[::1]"),
    ("http://[::1]/", "::1/64"),
    ("http://[::1]/", "::2"),
]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_whatever_curl_sends_direct_is_sent_direct() -> None:
    """Run through the installed curl: every request curl keeps from the proxy is kept
    from it here; where this sends direct and curl does not, the row is one of the
    documented extensions (a port, brackets, ``*`` among others) or an IPv6 range that
    curl's documentation promises and older builds miss (the host reaches its matcher
    without brackets)."""
    extensions = {"example.com:443", "foo,*", "[::1]", "::1/64"}
    seen = {"proxy": 0, "direct": 0}
    for url, no_proxy in LIVE:
        via = _curl_route(url, no_proxy)
        seen[via] += 1
        ours = Proxies(by_scheme={"http": "p", "https": "p"}, no_proxy=no_proxy).for_url(url)
        if via == "direct":
            assert ours is None, (url, no_proxy)
        elif ours is None:
            assert no_proxy in extensions, (url, no_proxy, "direct here, proxied by curl")
    assert seen["proxy"] >= 5 and seen["direct"] >= 5, seen  # both routes were exercised
