"""A fleet's stylesheets and inline styles are read once, and placed at each instance as
reading them there.

:class:`artifactcheck.observe.pages.StylesheetMemo` keeps what a sheet names as written
(:func:`~artifactcheck.manifests.stylesheet.read_stylesheet`) and places it at every URL
it is served at (:func:`~artifactcheck.manifests.stylesheet.resolve_stylesheet`). The
result must be :func:`~artifactcheck.manifests.stylesheet.parse_stylesheet`'s at that
URL, whichever URL the sheet was first read at.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from artifactcheck.manifests.page import DEFAULT_PAGE_LIMITS, PageLimits
from artifactcheck.manifests.stylesheet import parse_stylesheet
from artifactcheck.observe.pages import StylesheetMemo

from .served import served

#: Its own origin written absolute beside the same file written relative (one file
#: there, two anywhere else), a scheme-relative font, duplicates, an image-set, a data:
#: URL and a fragment that fetch nothing.
SHEET = b"""@import url("http://127.0.0.1:81/css/more.css");
@import "more.css";
a { background: url(../img/x.png) } b { background: url('../img/x.png') }
@font-face { src: url(//fonts.example/f.woff2) format("woff2") }
c { background-image: image-set("a.png" 1x, url(b.png) 2x) }
d { mask: url(#clip) } e { background: url(data:image/gif;base64,R0lGOD) }"""

URLS = [
    "http://127.0.0.1:81/css/site.css",
    "http://127.0.0.2:81/css/site.css",
    "https://127.0.0.3/css/site.css",
    "http://127.0.0.4:81/static/v2/site.css?v=9",
]


@pytest.mark.parametrize("first", URLS)
def test_a_sheet_read_at_one_url_is_placed_at_every_other_as_reading_it_there(first: str) -> None:
    memo = StylesheetMemo()
    memo.parse(served(SHEET, first), first, DEFAULT_PAGE_LIMITS)
    for url in URLS:
        placed = memo.parse(served(SHEET, url), url, DEFAULT_PAGE_LIMITS)
        assert placed == parse_stylesheet(SHEET, url)
    assert memo.parsed == 1


def test_an_own_origin_written_absolute_is_one_file_there_and_two_elsewhere() -> None:
    memo = StylesheetMemo()
    memo.parse(served(SHEET, URLS[0]), URLS[0], DEFAULT_PAGE_LIMITS)
    there = memo.parse(served(SHEET, URLS[0]), URLS[0], DEFAULT_PAGE_LIMITS)
    elsewhere = memo.parse(served(SHEET, URLS[1]), URLS[1], DEFAULT_PAGE_LIMITS)
    assert [(r.kind.value, r.url) for r in there.references] == [
        ("import", "http://127.0.0.1:81/css/more.css"),
        ("css-url", "http://127.0.0.1:81/img/x.png"),
        ("css-url", "http://fonts.example/f.woff2"),
        ("css-url", "http://127.0.0.1:81/css/a.png"),
        ("css-url", "http://127.0.0.1:81/css/b.png"),
    ]
    assert [(r.kind.value, r.url) for r in elsewhere.references] == [
        ("import", "http://127.0.0.1:81/css/more.css"),
        ("import", "http://127.0.0.2:81/css/more.css"),
        ("css-url", "http://127.0.0.2:81/img/x.png"),
        ("css-url", "http://fonts.example/f.woff2"),
        ("css-url", "http://127.0.0.2:81/css/a.png"),
        ("css-url", "http://127.0.0.2:81/css/b.png"),
    ]


def test_an_inline_style_is_read_once_and_placed_at_each_page() -> None:
    memo = StylesheetMemo()
    text = SHEET.decode()
    pages = ["http://127.0.0.1:81/app/", "http://127.0.0.2:81/app/index.html"]
    for url in pages:
        assert memo.parse_inline(text, url, DEFAULT_PAGE_LIMITS) == parse_stylesheet(text, url)
    assert memo.parsed == 1
    memo.parse_inline(text + " ", pages[0], DEFAULT_PAGE_LIMITS)
    assert memo.parsed == 2  # another text: read on its own


def test_a_sheet_holding_too_much_is_read_for_each_instance_never_kept() -> None:
    memo = StylesheetMemo()
    large = "".join(f"a{i}{{b:url(img/{i:05d}.png)}}" for i in range(5_000))  # 5,000 values
    limits = PageLimits(max_references=10_000)
    for url in URLS[:2]:
        assert memo.parse_inline(large, url, limits) == parse_stylesheet(large, url, limits=limits)
        body = large.encode()
        assert memo.parse(served(body, url), url, limits) == parse_stylesheet(
            body, url, limits=limits
        )
    assert memo.parsed == 4  # each time: over what one kept reading may hold


def test_the_caps_hold_at_every_url() -> None:
    memo = StylesheetMemo()
    limits = PageLimits(max_references=2)
    for url in URLS:
        got = memo.parse(served(SHEET, url), url, limits)
        assert got == parse_stylesheet(SHEET, url, limits=limits)
        assert len(got.references) == 2 and got.problem == "more than the cap of 2 references"
    deep = b"a{" * 40 + b"b:url(x.png)" + b"}" * 40
    shallow = PageLimits(max_depth=10)
    for url in URLS[:2]:
        got = memo.parse(served(deep, url), url, shallow)
        assert got == parse_stylesheet(deep, url, limits=shallow)
        assert got.problem == "blocks nested deeper than the cap of 10" and not got.references


_RULE = st.sampled_from(
    ["@import url({v});", "@import '{v}';", "a{{b:url({v})}}", "c{{d:url('{v}')}}", "e{{f:g}}"]
)
_VALUE = st.sampled_from(
    [
        "x.png",
        "../x.png",
        "/x.png",
        "http://127.0.0.1:81/css/x.png",
        "//127.0.0.2:81/x.png",
        "#frag",
        "data:image/png;base64,AA",
        "sub/",
    ]
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.tuples(_RULE, _VALUE), max_size=12), st.integers(1, 6), st.sampled_from(URLS))
def test_whatever_the_sheet_names_its_placing_anywhere_is_its_reading_there(
    rules: list[tuple[str, str]], cap: int, first: str
) -> None:
    body = "\n".join(rule.format(v=value) for rule, value in rules).encode()
    limits = PageLimits(max_references=cap)
    memo = StylesheetMemo()
    memo.parse(served(body, first), first, limits)
    for url in URLS:
        placed = memo.parse(served(body, url), url, limits)
        assert placed == parse_stylesheet(body, url, limits=limits)
