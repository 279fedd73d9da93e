"""Faults no real server can produce on loopback, through an injected transport (respx).

An injected transport raises the errors our own transport raises
(:mod:`artifactcheck.fetch.error_kinds`); anything else is that fetch's error too."""

from __future__ import annotations

import httpx
import pytest
import respx
from fetch_support import RecordingSleep, settings

from artifactcheck.fetch import Fetcher, error_kinds
from artifactcheck.fetch.http1 import Http1Transport
from artifactcheck.model.settings import RetrySettings

BASE = "http://10.9.8.7:8080/"


def fetcher_for(router: respx.Router, **retry: object) -> Fetcher:
    return Fetcher(
        http=settings(),
        retry=RetrySettings(**retry),
        transport=httpx.MockTransport(router.async_handler),
        sleep=RecordingSleep(),
    )


@pytest.mark.parametrize(
    ("exc", "kind", "words"),
    [
        (error_kinds.ConnectTimeout("slow SYN"), "timeout", "connect timed out"),
        (error_kinds.ReadTimeout("slow"), "timeout", "read_timeout"),
        (error_kinds.ConnectError("[Errno 113] No route to host"), "connect", "cannot connect"),
        (
            error_kinds.RemoteProtocolError("illegal status line"),
            "connect",
            "invalid HTTP response",
        ),
        (ConnectionResetError("reset by peer"), "connect", "connection failed"),
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
        side_effect=[error_kinds.ConnectTimeout("x"), httpx.Response(200, content=b"body")]
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


async def test_an_error_of_another_library_is_that_fetch_s_error_not_retried() -> None:
    """httpx's own errors are not transport errors here: an injected transport raising
    one fails that fetch as unexpected (kind "protocol"), once, never a crash."""
    router = respx.Router()
    route = router.get(f"{BASE}a.js").mock(side_effect=httpx.ConnectTimeout("x"))
    async with fetcher_for(router, attempts=3) as fetcher:
        got = await fetcher.get_asset(BASE, "a.js")
    assert got.error_kind == "protocol" and got.error is not None
    assert got.error.startswith("unexpected error: ConnectTimeout"), got.error
    assert route.call_count == 1 and got.status is None


@pytest.mark.parametrize(
    ("name", "expected", "kind"),
    [
        ("http1", "http1", Http1Transport),
        ("auto", "http1", Http1Transport),  # the old name of "http1", still read
    ],
)
async def test_the_transport_setting_names_the_transport_requests_go_through(
    name: str, expected: str, kind: type
) -> None:
    fetcher = Fetcher(http=settings(transport=name), retry=RetrySettings())
    assert fetcher.transport_name == expected
    async with fetcher:
        made = type(fetcher._wire.transport)
        assert made is kind
    assert fetcher._wire.transport is None  # closed with the Fetcher


async def test_on_asset_sees_every_asset_answer_and_no_document() -> None:
    router = respx.Router()
    router.get(f"{BASE}a.js").mock(return_value=httpx.Response(200, content=b"body"))
    router.get(f"{BASE}m.json").mock(return_value=httpx.Response(200, content=b"{}"))
    seen: list[tuple[str, str, int | None]] = []
    fetcher = Fetcher(
        http=settings(),
        retry=RetrySettings(),
        transport=httpx.MockTransport(router.async_handler),
        on_asset=lambda base, path, got: seen.append((base, path, got.status)),
    )
    async with fetcher:
        got = await fetcher.get_asset(BASE, "a.js")
        await fetcher.get_document(BASE, "m.json")
    assert got.ok and seen == [(BASE, "a.js", 200)]
