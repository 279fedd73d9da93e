"""A URL is routed without httpx exactly as ``httpx.URL`` reads it (fetch/routes.py).

The lean reading covers the plain URLs a check requests; everything else goes to
httpx's own parser. Either way the route must be what httpx makes of the URL.
"""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from artifactcheck.fetch import routes
from artifactcheck.fetch.routes import Route


def _httpx_route(url: str) -> Route:
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return Route(parsed.scheme, parsed.host, port, parsed.netloc, parsed.raw_path)


hosts = st.sampled_from(
    ["web-1", "WEB.Example.COM", "10.0.0.7", "127.200.0.1", "a.b-c.d9", "1.2.3", "999.1.1.1",
     "01.2.3.4", "x", "[::1]", "b\u00fccher.de", "h_1", "example.com.", "-bad"]
)  # fmt: skip
ports = st.sampled_from(["", ":80", ":443", ":8080", ":0", ":65535", ":65536", ":080", ":1"])
pieces = st.text(alphabet="az09-._~!$&'()*+,;=:@%/?#[] \u00e9AF", max_size=12)


@given(st.sampled_from(["http", "https", "HTTP"]), hosts, ports, pieces)
def test_every_url_is_routed_as_httpx_routes_it(
    scheme: str, host: str, port: str, rest: str
) -> None:
    url = f"{scheme}://{host}{port}/{rest}"
    try:
        expected = _httpx_route(url)
    except httpx.InvalidURL:
        with pytest.raises(httpx.InvalidURL):
            Route.of(url)
        return
    assert Route.of(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://127.200.0.1:35559/artifactcheck.json",
        "http://web-1/assets/index-DkJcOLVa.js?v=1&x=%2F",
        "https://cdn.example.com/",
        "https://CDN.example.com:443/a;b=c/d@e",
        "http://h:8080",
        "http://h?q",
    ],
)
def test_plain_urls_are_read_without_httpx(url: str) -> None:
    """The URLs a check requests take the lean reading (no httpx import on a run)."""
    lean = routes._plain(url)
    assert lean is not None
    assert lean == _httpx_route(url)


@pytest.mark.parametrize(
    "url",
    ["http://[::1]:8080/a", "http://b\u00fccher.de/", "http://u@h/", "http://h/a/../b",
     "http://h/a b", "http://h/#f", "http://999.1.1.1/", "http://h:99999/"],
)  # fmt: skip
def test_unusual_urls_are_left_to_httpx(url: str) -> None:
    assert routes._plain(url) is None
