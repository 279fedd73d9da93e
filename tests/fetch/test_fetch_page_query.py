"""A page's query string stays in the request (``site.css?v=2``), and cannot carry the
request anywhere else: the path rules are unchanged, the query is checked on its own."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from artifactcheck.fetch import urls
from artifactcheck.model.errors import UnsafeReferenceError
from artifactcheck_sim.web import Site, WebFleet


@pytest.mark.parametrize(
    ("query", "sent"),
    [
        ("", ""),
        ("v=2", "?v=2"),
        ("v=2&x=%2F", "?v=2&x=%2F"),  # the page's own escapes kept
        ("a b", "?a%20b"),
        ("v=ü", "?v=%C3%BC"),
        ("next=/a?b", "?next=/a?b"),
    ],
)
def test_a_query_is_kept_and_quoted(query: str, sent: str) -> None:
    assert urls.request_query(query) == sent


@pytest.mark.parametrize(
    "query",
    ["v=1\r\nX-Injected: 1", "v=1\nHost: evil", "v=\x00", "v=1#frag", "v=" + "a" * 3000],
)
def test_a_query_that_could_reach_the_request_line_as_something_else_is_refused(
    query: str,
) -> None:
    with pytest.raises(UnsafeReferenceError):
        urls.request_query(query)


async def test_the_fetcher_sends_the_query_and_refuses_a_hostile_one_unsent(
    make_fetcher, fleet: WebFleet, host: Callable[[], str]
) -> None:
    base = fleet.add(Site(overrides={"/a.css": b"a{}"}), host())
    async with make_fetcher() as f:
        got = await f.get_asset(base, "a.css", query="v=2")
        refused = await f.get_asset(base, "a.css", query="v=1\r\nX: y")
        climbing = await f.get_asset(base, "../a.css", query="v=2")
    assert got.ok and got.url == f"{base}a.css?v=2"
    assert refused.error_kind == "unsafe" and refused.attempts == 0
    assert climbing.error_kind == "unsafe" and climbing.attempts == 0
    assert fleet.server(base).paths == ["/a.css?v=2"]
