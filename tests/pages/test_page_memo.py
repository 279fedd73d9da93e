"""A fleet's entry page is tokenized once, and placed at each instance as reading it there.

:class:`artifactcheck.observe.pages.PageMemo` keeps what a page says as written
(:func:`~artifactcheck.manifests.page.read_page`) and places it at every instance's URL
(:func:`~artifactcheck.manifests.page.resolve_page`). Whatever URL it was first read
at, the result must be the one :func:`~artifactcheck.manifests.page.parse_page` gives
at the URL it is served at now: references resolved against that URL and the page's
``<base href>``, each (kind, URL, integrity) once, under the cap of references.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rawserver import RawConn, RawServer, response, serve_each

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.manifests.page import DEFAULT_PAGE_LIMITS, PageLimits, parse_page
from artifactcheck.model.settings import CheckSpec, HttpSettings, RetrySettings
from artifactcheck.model.values import Instance
from artifactcheck.observe.pages import PageMemo, observe_pages

from .served import served

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "builds"

#: Written so that where it is served decides what it names: an absolute URL to one
#: instance's own origin beside the same file written relative (one file there, two
#: anywhere else), a scheme-relative CDN, a relative <base href> that comes after a
#: reference, duplicates under both bases, an import map, an inline style.
TRICKY = b"""<!doctype html><html><head>
<script src="http://127.0.0.1:8080/app/x.js"></script>
<script src="/app/x.js"></script>
<link rel="stylesheet" href="site.css" crossorigin="anonymous">
<base href="static/">
<link rel="stylesheet" href="site.css">
<link rel="modulepreload" href="//cdn.example/m.js" integrity="sha384-AAAA">
<script src="x.js"></script><script src="x.js" crossorigin="use-credentials"></script>
<img src="data:image/gif;base64,R0lGOD" srcset="a.png 1x, b.png 2x, a.png 3x">
<script type="importmap">{"imports": {"lazy": "./chunks/lazy.js", "dir/": "./dir/"}}</script>
<style>@import url(theme.css); body { background: url(/bg.png) }</style>
</head><body><template><script src="never.js"></script></template></body></html>"""

URLS = [
    "http://127.0.0.1:8080/app/",
    "http://127.0.0.2:8080/app/",
    "https://127.0.0.3/app/",
    "http://127.0.0.4:8080/",
    "http://127.0.0.5:8080/app/index.html?v=2",
]


@pytest.mark.parametrize("first", URLS)
def test_a_page_read_at_one_url_is_placed_at_every_other_as_reading_it_there(first: str) -> None:
    memo = PageMemo()
    memo.parse(served(TRICKY, first), first, DEFAULT_PAGE_LIMITS)
    for url in URLS:
        assert memo.parse(served(TRICKY, url), url, DEFAULT_PAGE_LIMITS) == parse_page(TRICKY, url)
    assert memo.read == 1


def test_an_own_origin_written_absolute_is_one_file_there_and_two_elsewhere() -> None:
    memo = PageMemo()
    there = memo.parse(served(TRICKY, URLS[0]), URLS[0], DEFAULT_PAGE_LIMITS)
    elsewhere = memo.parse(served(TRICKY, URLS[1]), URLS[1], DEFAULT_PAGE_LIMITS)
    x_there = [r.url for r in there.references if r.raw.endswith("x.js") and "static" not in r.url]
    x_elsewhere = [
        r.url for r in elsewhere.references if r.raw.endswith("x.js") and "static" not in r.url
    ]
    assert x_there == ["http://127.0.0.1:8080/app/x.js"]
    assert x_elsewhere == ["http://127.0.0.1:8080/app/x.js", "http://127.0.0.2:8080/app/x.js"]
    assert there.base_url == "http://127.0.0.1:8080/app/static/"
    assert elsewhere.base_url == "http://127.0.0.2:8080/app/static/"


def test_what_the_tricky_page_names_at_an_instance_read_after_another() -> None:
    memo = PageMemo()
    memo.parse(served(TRICKY, URLS[0]), URLS[0], DEFAULT_PAGE_LIMITS)
    got = memo.parse(served(TRICKY, URLS[1]), URLS[1], DEFAULT_PAGE_LIMITS)
    at = "http://127.0.0.2:8080/app/"
    assert [(r.kind.value, r.url, r.integrity_raw, r.crossorigin) for r in got.references] == [
        ("script", "http://127.0.0.1:8080/app/x.js", None, None),
        ("script", at + "x.js", None, None),
        ("stylesheet", at + "site.css", None, "anonymous"),  # before <base>: the page's URL
        ("stylesheet", at + "static/site.css", None, None),  # the same value after it
        ("modulepreload", "http://cdn.example/m.js", "sha384-AAAA", None),
        ("script", at + "static/x.js", None, None),  # once: the first crossorigin kept
        ("image", at + "static/a.png", None, None),  # data: never fetched; a.png once
        ("image", at + "static/b.png", None, None),
        ("importmap", at + "static/chunks/lazy.js", None, None),  # "dir/" names no file
    ]
    assert got.base_url == at + "static/" and got.problem is None
    assert got.inline_styles == ("@import url(theme.css); body { background: url(/bg.png) }",)


def test_the_cap_of_references_holds_at_every_url() -> None:
    limits = PageLimits(max_references=3)
    memo = PageMemo()
    for url in URLS:
        got = memo.parse(served(TRICKY, url), url, limits)
        assert got == parse_page(TRICKY, url, limits=limits)
        assert len(got.references) == 3 and got.problem == "more than the cap of 3 references"
    assert memo.read == 1


def test_pages_that_differ_are_each_read_and_a_page_holding_too_much_is_not_kept() -> None:
    memo = PageMemo()
    other = TRICKY.replace(b"x.js", b"y.js")
    for body in (TRICKY, other, TRICKY, other):
        assert memo.parse(served(body, URLS[1]), URLS[1], DEFAULT_PAGE_LIMITS) == parse_page(
            body, URLS[1]
        )
    assert memo.read == 2
    large = b"".join(b'<img src="i%d.png">' % i for i in range(20_000))  # 20,000 references
    limits = PageLimits(max_references=50_000)
    for url in URLS[:2]:
        assert memo.parse(served(large, url), url, limits) == parse_page(large, url, limits=limits)
    assert memo.read == 4  # read for each instance, never kept


@pytest.mark.parametrize("build", sorted(p.parent.name for p in FIXTURES.glob("*/index.html")))
def test_each_fixture_build_page_placed_is_the_page_parsed(build: str) -> None:
    body = (FIXTURES / build / "index.html").read_bytes()
    memo = PageMemo()
    for url in URLS:
        assert memo.parse(served(body, url), url, DEFAULT_PAGE_LIMITS) == parse_page(body, url)


_TAG = st.sampled_from(
    [
        '<script src="{v}"></script>',
        '<script type="module" src="{v}" integrity="sha256-AAAA"></script>',
        '<link rel="stylesheet" href="{v}">',
        '<link rel="preload" href="{v}" crossorigin>',
        '<img srcset="{v} 1x, {v} 2x">',
        '<base href="{v}">',
        "<style>@import url({v});</style>",
        '<script type="importmap">{{"imports": {{"a": "{v}"}}}}</script>',
    ]
)
_VALUE = st.sampled_from(
    [
        "a.js",
        "/a.js",
        "./a.js",
        "../a.js",
        "http://127.0.0.1:8080/app/a.js",
        "//127.0.0.2:8080/a.js",
        "https://cdn.example/a.js",
        "sub/",
        "#frag",
        "javascript:void(0)",
        "",
    ]
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.lists(st.tuples(_TAG, _VALUE), max_size=14),
    st.integers(1, 8),
    st.sampled_from(URLS),
)
def test_whatever_the_page_says_its_placing_anywhere_is_its_reading_there(
    parts: list[tuple[str, str]], cap: int, first: str
) -> None:
    body = "".join(tag.format(v=value) for tag, value in parts).encode()
    limits = PageLimits(max_references=cap)
    memo = PageMemo()
    memo.parse(served(body, first), first, limits)
    for url in URLS:
        assert memo.parse(served(body, url), url, limits) == parse_page(body, url, limits=limits)


async def test_an_observer_of_a_fleet_reads_its_one_page_once() -> None:
    page = TRICKY.replace(b"http://127.0.0.1:8080", b"http://127.0.0.9:1")

    def answer(_conn: RawConn, _head: bytes) -> bytes:
        return response(200, page, headers={"Content-Type": "text/html"})

    spec = CheckSpec.model_validate({"pages": ["/"]})
    memo = PageMemo()
    with (
        RawServer("127.0.0.1", serve_each(answer)) as one,
        RawServer("127.0.0.2", serve_each(answer)) as two,
    ):
        async with Fetcher(http=HttpSettings(), retry=RetrySettings(attempts=1)) as fetcher:
            seen = [
                await observe_pages(
                    Instance(name=f"web-{i}", base_url=server.url),
                    spec=spec,
                    fetcher=fetcher,
                    page_memo=memo,
                )
                for i, server in enumerate((one, two))
            ]
    assert memo.read == 1
    for observed, server in zip(seen, (one, two), strict=True):
        assert observed.pages[0].problem is None
        fresh = parse_page(page, server.url)
        assert {r.url for r in fresh.references} <= {
            f.url for f in (*observed.files, *observed.not_requested)
        }
