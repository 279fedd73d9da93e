"""Hostile pages and stylesheets: every input ends in a value, within a bounded time.

Python 3.11's html.parser rescans an unfinished construct for every later ``<``
(quadratic); the reader feeds it in slices and caps what it holds unparsed, so each
case here must finish in well under a second or two on a loaded machine.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from artifactcheck.manifests.page import ParsedPage, parse_page
from artifactcheck.manifests.stylesheet import ParsedStylesheet, parse_stylesheet

URL = "http://127.0.0.1:8080/"
MB = 1_900_000  # under the 2 MiB page cap: the tokenizer sees all of it
BOUND = 20.0  # seconds per case on a shared 2-core machine (worst seen: 4.5 s alone, >10 s loaded)

HOSTILE = {
    "deeply nested": b"<div>" * (MB // 5),
    "a million attributes": b"<img " + b"a " * (MB // 2) + b">",
    "many attributes in small tags": b"<img a b c d e f g h i j k l m n o p q r s t>" * 40_000,
    "unclosed start tags": b"<a " * (MB // 3),
    "unclosed quoted attributes": b'<a b="' * (MB // 6),
    "end tag openers": b"</" * (MB // 2),
    "processing instructions": b"<?" * (MB // 2),
    "declarations": b"<!" * (MB // 2),
    "cdata openers": b"<![CDATA[" * (MB // 9),
    "unclosed comment": b"<!--" + b"-" * MB,
    "lone less-thans": b"<" * MB,
    "character references": b"&#" * (MB // 2),
    "invalid bytes": bytes(range(128, 256)) * (MB // 128),
    "NULs": b"\x00" * MB,
    "NULs in tags": b"<scr\x00ipt src=\x00a.js>" * (MB // 20),
    "script never closed": b"<script>" + b"</scrip" * (MB // 7),
    "style never closed": b"<style>" + b"url(a)" * (MB // 6),
    "huge": b"<img src=a.png>" + b" " * (3 * MB),
    "references": b"".join(b"<img src=a%d.png>" % i for i in range(MB // 20)),
    "unicode surrogates as text": "\ud800".encode("utf-8", "surrogatepass") * (MB // 3),
}


def timed(call: object) -> tuple[object, float]:
    started = time.perf_counter()
    result = call()  # type: ignore[operator]
    return result, time.perf_counter() - started


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_page_is_a_value_within_bounded_time(name: str) -> None:
    page, elapsed = timed(lambda: parse_page(HOSTILE[name], URL))
    assert isinstance(page, ParsedPage)
    assert elapsed < BOUND, f"{name}: {elapsed:.2f} s"


@pytest.mark.parametrize(
    "name",
    [
        "deeply nested",
        "a million attributes",
        "unclosed start tags",
        "unclosed quoted attributes",
        "end tag openers",
        "lone less-thans",
        "huge",
    ],
)
def test_hostile_page_says_why(name: str) -> None:
    page = parse_page(HOSTILE[name], URL)
    assert page.problem


def test_references_cap_keeps_what_was_read() -> None:
    page = parse_page(HOSTILE["references"], URL)
    assert page.problem == "more than the cap of 2000 references"
    assert len(page.references) == 2000


CSS_MB = 1_000_000  # under the 1 MiB stylesheet cap
CSS_HOSTILE = {
    "nested blocks": b"a{" * (CSS_MB // 2),
    "nested functions": b"a{b:" + b"f(" * (CSS_MB // 2) + b"}",
    "unclosed url": b"a{b:url(" + b"x" * CSS_MB,
    "unclosed string": b'a{b:"' + b"x" * CSS_MB,
    "many urls": b"".join(b"a{b:url(x%d)}" % i for i in range(60_000)),
    "one url many times": b"a{b:url(x)}" * 80_000,
    "invalid bytes": bytes(range(256)) * 4_000,
    "huge": b" " * (3 * MB),
}


@pytest.mark.parametrize("name", list(CSS_HOSTILE))
def test_hostile_stylesheet_is_a_value_within_bounded_time(name: str) -> None:
    sheet, elapsed = timed(lambda: parse_stylesheet(CSS_HOSTILE[name], URL))
    assert isinstance(sheet, ParsedStylesheet)
    assert elapsed < BOUND, f"{name}: {elapsed:.2f} s"


def test_deeply_nested_stylesheet_says_why() -> None:
    assert "nested deeper" in (parse_stylesheet(CSS_HOSTILE["nested blocks"], URL).problem or "")


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096))
def test_any_bytes_are_a_page(data: bytes) -> None:
    page = parse_page(data, URL)
    for ref in page.references:
        assert ref.url.startswith(("http://", "https://"))


_TAGS = st.sampled_from(
    [
        "<script src=",
        "<link rel=stylesheet href=",
        "<img srcset=",
        "<base href=",
        "<!--",
        "-->",
        "<template>",
        "</template>",
        "<style>",
        "</style>",
        "<",
        ">",
        "'",
        '"',
        "=",
        " ",
        "&amp;",
        "\x00",
        "\ud800",
        "a.js",
        "//x/",
        "\\",
        "?v=1",
        "#",
        "integrity=sha256-",
        "</",
    ]
)


@settings(max_examples=300, deadline=2000)
@given(st.lists(_TAGS, max_size=200).map("".join))
def test_html_shaped_text_is_a_page(text: str) -> None:
    page = parse_page(text.encode("utf-8", "surrogatepass"), URL)
    assert isinstance(page, ParsedPage)
    for ref in page.references:
        assert ref.url.startswith(("http://", "https://"))


@settings(max_examples=300, deadline=2000)
@given(st.binary(max_size=4096) | st.text(max_size=2048))
def test_any_input_is_a_stylesheet(data: bytes | str) -> None:
    sheet = parse_stylesheet(data, URL)
    assert isinstance(sheet, ParsedStylesheet)
