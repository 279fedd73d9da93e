"""The stylesheet reader finds @import and url() references, resolved against the sheet."""

from __future__ import annotations

import pytest

from artifactcheck.manifests.page import PageLimits
from artifactcheck.manifests.stylesheet import parse_stylesheet
from artifactcheck.observe.pages import StylesheetMemo

from .served import served

SHEET = "http://10.0.0.5:8080/static/css/site.css"


def refs(css: bytes | str) -> list[tuple[str, str]]:
    sheet = parse_stylesheet(css, SHEET)
    assert sheet.problem is None, sheet.problem
    return [(r.kind.value, r.url) for r in sheet.references]


@pytest.mark.parametrize(
    ("css", "expected"),
    [
        ('@import "base.css";', [("import", "http://10.0.0.5:8080/static/css/base.css")]),
        ("@import url(p.css) print;", [("import", "http://10.0.0.5:8080/static/css/p.css")]),
        ('@IMPORT url("q.css");', [("import", "http://10.0.0.5:8080/static/css/q.css")]),
        (
            "a{background:url( img/a.png?v=1 )}",
            [("css-url", "http://10.0.0.5:8080/static/css/img/a.png?v=1")],
        ),
        ("a{background:url('../i.png')}", [("css-url", "http://10.0.0.5:8080/static/i.png")]),
        (
            '@font-face{src:url("/f.woff2") format("woff2")}',
            [("css-url", "http://10.0.0.5:8080/f.woff2")],
        ),
        (
            "@media (min-width:1px){@supports (x:y){a{b:url(deep.png)}}}",
            [("css-url", "http://10.0.0.5:8080/static/css/deep.png")],
        ),
        (
            'a{b:image-set("1x.png" 1x, url(2x.png) 2x)}',
            [
                ("css-url", "http://10.0.0.5:8080/static/css/1x.png"),
                ("css-url", "http://10.0.0.5:8080/static/css/2x.png"),
            ],
        ),
        ("a{b:url(\\61.png)}", [("css-url", "http://10.0.0.5:8080/static/css/a.png")]),
        ("/* a{b:url(comment.png)} */", []),
        ('a{content:"url(string.png)"}', []),
        ("a{b:url(data:image/png;base64,AAAA)}", []),
        ("a{mask:url(#clip)}", []),
        ("a{b:url(//cdn.example/x.png)}", [("css-url", "http://cdn.example/x.png")]),
        ("a{b:url(x.png)} c{d:url(x.png)}", [("css-url", "http://10.0.0.5:8080/static/css/x.png")]),
    ],
)
def test_references(css: str, expected: list[tuple[str, str]]) -> None:
    assert refs(css) == expected


def test_bytes_decoded_by_charset() -> None:
    css = '@charset "iso-8859-1"; a{b:url(caf\xe9.png)}'.encode("latin-1")
    assert refs(css) == [("css-url", "http://10.0.0.5:8080/static/css/caf\xe9.png")]


@pytest.mark.parametrize(
    ("css", "limits", "reason"),
    [
        (
            b" " * 101,
            PageLimits(max_stylesheet_bytes=100),
            "stylesheet of 101 bytes, more than the cap of 100",
        ),
        (
            b"a{b:url(1)}c{d:url(2)}e{f:url(3)}",
            PageLimits(max_references=2),
            "more than the cap of 2 references",
        ),
        (b"@media x{" * 5, PageLimits(max_depth=3), "nested deeper than the cap of 3"),
    ],
)
def test_caps_end_in_a_reason(css: bytes, limits: PageLimits, reason: str) -> None:
    sheet = parse_stylesheet(css, SHEET, limits=limits)
    assert sheet.problem is not None and reason in sheet.problem


def test_brackets_in_comments_and_strings_nest_nothing() -> None:
    """The linear pre-scan that refuses a too-deep sheet skips comments and strings: a
    sheet whose only deep "nesting" is text still has its references read."""
    text = b"/* " + b"{" * 2000 + b' */ a{content:"' + b"(" * 2000 + b'"} b{c:url(x.png)}'
    parsed = parse_stylesheet(text, "https://shop.example/css/site.css")
    assert parsed.problem is None
    assert [r.raw for r in parsed.references] == ["x.png"]
    deep = parse_stylesheet(b"a{" * 2000, "https://shop.example/css/site.css")
    assert deep.problem is not None and "nested deeper" in deep.problem


def test_siblings_stylesheet_is_read_once_and_resolved_where_each_serves_it() -> None:
    """A fleet's siblings serve one stylesheet: it is read once per run (the memo),
    and each instance's references are its own URLs, not the first sibling's."""
    memo = StylesheetMemo()
    body = b"@import 'more.css'; a{b:url(../img/x.png)} c{d:url(../img/x.png)}"
    limits = PageLimits()
    first = memo.parse(
        served(body, "http://127.0.0.1:81/css/site.css", "css/site.css"),
        "http://127.0.0.1:81/css/site.css",
        limits,
    )
    second = memo.parse(
        served(body, "http://127.0.0.2:81/css/site.css", "css/site.css"),
        "http://127.0.0.2:81/css/site.css",
        limits,
    )
    assert memo.parsed == 1
    assert [r.url for r in first.references] == [
        "http://127.0.0.1:81/css/more.css",
        "http://127.0.0.1:81/img/x.png",
    ]
    assert [r.url for r in second.references] == [
        "http://127.0.0.2:81/css/more.css",
        "http://127.0.0.2:81/img/x.png",
    ]
    other = memo.parse(
        served(body + b" ", "http://127.0.0.3:81/css/site.css", "css/site.css"),
        "http://127.0.0.3:81/css/site.css",
        limits,
    )
    assert memo.parsed == 2 and other.url == "http://127.0.0.3:81/css/site.css"
