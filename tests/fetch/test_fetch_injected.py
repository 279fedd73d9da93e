"""Faults no real server can produce on loopback, through an injected transport (respx)."""

from __future__ import annotations

import httpx
import pytest
import respx
from fetch_support import RecordingSleep, settings

from artifactcheck.fetch.fetcher import Fetcher, as_error
from artifactcheck.model.errors import (
    BodyTooLarge,
    ConfigError,
    FetchConnectError,
    FetchError,
    FetchStatusError,
    FetchTimeout,
    RetryBudgetExhausted,
    UnsafeReferenceError,
)
from artifactcheck.model.settings import RetrySettings
from artifactcheck.model.values import Fetched

BASE = "http://10.9.8.7:8080/"


def fetcher_for(router: respx.Router, **retry: object) -> Fetcher:
    return Fetcher(
        http=settings("httpx"),
        retry=RetrySettings(**retry),
        transport=httpx.MockTransport(router.async_handler),
        sleep=RecordingSleep(),
    )


@pytest.mark.parametrize(
    ("exc", "kind", "words"),
    [
        (httpx.ConnectTimeout("slow SYN"), "timeout", "connect timed out"),
        (httpx.PoolTimeout("pool"), "timeout", "connect timed out"),
        (httpx.ReadTimeout("slow"), "timeout", "read_timeout"),
        (httpx.ConnectError("[Errno 113] No route to host"), "connect", "cannot connect"),
        (httpx.RemoteProtocolError("illegal status line"), "connect", "invalid HTTP response"),
    ],
)
async def test_transport_errors_are_classified_and_retried(
    exc: Exception, kind: str, words: str
) -> None:
    router = respx.Router()
    route = router.get(f"{BASE}a.js").mock(side_effect=[exc, exc, exc])
    async with fetcher_for(router, attempts=3) as fetcher:
        got = await fetcher.get_asset(BASE, "a.js")
    assert got.error_kind == kind and words in (got.error or "")
    assert got.attempts == 3 and route.call_count == 3
    assert got.status is None and not got.ok


async def test_recovers_after_a_connect_timeout() -> None:
    router = respx.Router()
    router.get(f"{BASE}a.js").mock(
        side_effect=[httpx.ConnectTimeout("x"), httpx.Response(200, content=b"body")]
    )
    async with fetcher_for(router) as fetcher:
        got = await fetcher.get_asset(BASE, "a.js")
    assert got.ok and got.attempts == 2 and got.size == 4
    assert fetcher.stats.retries == 1 and fetcher.stats.errors == {}


async def test_injected_transport_sees_the_host_header_and_sni_extension() -> None:
    router = respx.Router()
    route = router.get("https://10.9.8.7/a.js").mock(return_value=httpx.Response(200))
    async with fetcher_for(router) as fetcher:
        await fetcher.get_asset("https://10.9.8.7/", "a.js", host_header="shop.example:443")
    request = route.calls.last.request
    assert request.headers["host"] == "shop.example:443"
    assert request.extensions["sni_hostname"] == "shop.example"
    assert request.headers["accept-encoding"] == "identity"


async def test_cookies_are_never_sent_back() -> None:
    router = respx.Router()
    route = router.get(url__startswith=BASE).mock(
        return_value=httpx.Response(200, headers={"Set-Cookie": "route=pod-7; Path=/"})
    )
    async with fetcher_for(router) as fetcher:
        await fetcher.get_asset(BASE, "a.js")
        await fetcher.get_asset(BASE, "b.js")
    assert "cookie" not in route.calls.last.request.headers


@pytest.mark.parametrize(
    ("kind", "error_type"),
    [
        ("timeout", FetchTimeout),
        ("connect", FetchConnectError),
        ("tls", FetchConnectError),
        ("truncated", FetchConnectError),
        ("status", FetchStatusError),
        ("too-large", BodyTooLarge),
        ("budget", RetryBudgetExhausted),
        ("unsafe", UnsafeReferenceError),
        ("redirect-off-base", UnsafeReferenceError),
        ("config", ConfigError),
        ("protocol", FetchError),
        ("egress", FetchError),
    ],
)
def test_as_error(kind: str, error_type: type[Exception]) -> None:
    error = as_error(Fetched(url="u", path="p", status=503, error="why", error_kind=kind))
    assert isinstance(error, error_type) and "why" in str(error)
    assert as_error(Fetched(url="u", path="p", status=404)) is None
