"""The page reader finds what a browser loads, resolved as a browser resolves it."""

from __future__ import annotations

import base64
import hashlib

import pytest

from artifactcheck.manifests.page import (
    PageLimits,
    parse_integrity,
    parse_page,
    parse_srcset,
)

PAGE = "http://10.0.0.5:8080/shop/index.html"


def sri(algo: str, data: bytes) -> str:
    return f"{algo}-" + base64.b64encode(hashlib.new(algo, data).digest()).decode()


def refs(html: str, url: str = PAGE) -> list[tuple[str, str]]:
    page = parse_page(html.encode(), url)
    assert page.problem is None, page.problem
    return [(r.kind.value, r.url) for r in page.references]


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        ('<script src="a.js"></script>', [("script", "http://10.0.0.5:8080/shop/a.js")]),
        ('<script type="module" src="/m.js">', [("module", "http://10.0.0.5:8080/m.js")]),
        ("<SCRIPT SRC=b.js TYPE=text/javascript>", [("script", "http://10.0.0.5:8080/shop/b.js")]),
        ('<script type="text/template" src="t.js"></script>', []),
        ('<script type="importmap" src="i.json"></script>', []),
        (
            '<link rel="stylesheet" href="s.css">',
            [("stylesheet", "http://10.0.0.5:8080/shop/s.css")],
        ),
        (
            '<link rel="Alternate StyleSheet" href="s.css">',
            [("stylesheet", "http://10.0.0.5:8080/shop/s.css")],
        ),
        (
            '<link rel=modulepreload href="c.js">',
            [("modulepreload", "http://10.0.0.5:8080/shop/c.js")],
        ),
        (
            '<link rel=preload as=font href="f.woff2">',
            [("preload", "http://10.0.0.5:8080/shop/f.woff2")],
        ),
        ('<link rel=prefetch href="p.js">', [("prefetch", "http://10.0.0.5:8080/shop/p.js")]),
        (
            '<link rel="shortcut icon" href="/favicon.ico">',
            [("icon", "http://10.0.0.5:8080/favicon.ico")],
        ),
        ('<link rel=apple-touch-icon href="t.png">', [("icon", "http://10.0.0.5:8080/shop/t.png")]),
        (
            '<link rel=manifest href="site.webmanifest">',
            [("manifest", "http://10.0.0.5:8080/shop/site.webmanifest")],
        ),
        ('<link rel=preconnect href="https://fonts.example">', []),
        ('<link rel=canonical href="/x">', []),
        ('<img src="i.png">', [("image", "http://10.0.0.5:8080/shop/i.png")]),
        (
            '<picture><source srcset="s.webp 1x"></picture>',
            [("source", "http://10.0.0.5:8080/shop/s.webp")],
        ),
        ('<video><source src="v.mp4"></video>', [("source", "http://10.0.0.5:8080/shop/v.mp4")]),
        ('<img src="" srcset="">', []),
        ('<img src="data:image/png;base64,AAAA">', []),
        ('<script src="javascript:alert(1)"></script>', []),
        ('<img src="#frag">', []),
        (
            "<template><img src=inert.png><script src=inert.js></script></template>"
            "<img src=live.png>",
            [("image", "http://10.0.0.5:8080/shop/live.png")],
        ),
        ('<script src=" \n a.js\t "></script>', [("script", "http://10.0.0.5:8080/shop/a.js")]),
        ('<img src="\\\\evil.example\\x.png">', [("image", "http://evil.example/x.png")]),
        ('<img src="//cdn.example/x.png">', [("image", "http://cdn.example/x.png")]),
        (
            '<script src="x.js?v=3#h"></script>',
            [("script", "http://10.0.0.5:8080/shop/x.js?v=3#h")],
        ),
        ('<img src="a.png"><img src="a.png">', [("image", "http://10.0.0.5:8080/shop/a.png")]),
        (
            '<img src="first.png" src="second.png">',
            [("image", "http://10.0.0.5:8080/shop/first.png")],
        ),
        ('<!-- <script src="c.js"></script> -->', []),
        ('<script>document.write("<script src=x.js></script>")</script>', []),
        ('<img src="a&amp;b.png">', [("image", "http://10.0.0.5:8080/shop/a&b.png")]),
        ("<script src=x.js />", [("script", "http://10.0.0.5:8080/shop/x.js")]),
    ],
)
def test_what_a_browser_loads(html: str, expected: list[tuple[str, str]]) -> None:
    assert refs(html) == expected


def test_base_href_first_only_and_resolved_against_the_page() -> None:
    html = '<base href="../static/"><base href="/other/"><script src="app.js"></script>'
    page = parse_page(html.encode(), PAGE)
    assert page.base_url == "http://10.0.0.5:8080/static/"
    assert [r.url for r in page.references] == ["http://10.0.0.5:8080/static/app.js"]


def test_base_href_to_another_host_moves_the_references_there() -> None:
    """The page says so; placement (not the parser) decides that nothing is fetched there."""
    page = parse_page(b'<base href="https://evil.example/"><img src="a.png">', PAGE)
    assert [r.url for r in page.references] == ["https://evil.example/a.png"]


def test_base_without_http_scheme_is_ignored() -> None:
    page = parse_page(b'<base href="javascript:x"><img src="a.png">', PAGE)
    assert page.base_url == PAGE
    assert page.references[0].url == "http://10.0.0.5:8080/shop/a.png"


def test_integrity_and_crossorigin_are_kept() -> None:
    body = b"console.log(1)"
    value = f"{sri('sha384', body)} {sri('sha256', body)} md5-abc sha512-notbase64!"
    html = f'<script src="a.js" integrity="{value}" crossorigin="anonymous"></script>'
    (ref,) = parse_page(html.encode(), PAGE).references
    assert ref.integrity == (
        ("sha384", hashlib.sha384(body).hexdigest()),
        ("sha256", hashlib.sha256(body).hexdigest()),
    )
    assert ref.integrity_raw == value
    assert ref.crossorigin == "anonymous"


def test_integrity_keeps_several_hashes_of_one_algorithm() -> None:
    one, two = sri("sha256", b"one"), sri("sha256", b"two")
    assert parse_integrity(f"{one} {two}") == (
        ("sha256", hashlib.sha256(b"one").hexdigest()),
        ("sha256", hashlib.sha256(b"two").hexdigest()),
    )


def test_integrity_on_an_image_is_not_read() -> None:
    (ref,) = parse_page(
        f'<img src=a.png integrity="{sri("sha256", b"x")}">'.encode(), PAGE
    ).references
    assert ref.integrity == ()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a.png 1x, b.png 2x", ["a.png", "b.png"]),
        ("a,b.png 1x,c.png 2x", ["a,b.png", "c.png"]),
        ("a.png, b.png", ["a.png", "b.png"]),
        ("a.png (x, y) 1x, b.png", ["a.png", "b.png"]),
        ("  ,, a.png  ", ["a.png"]),
        ("", []),
    ],
)
def test_srcset(value: str, expected: list[str]) -> None:
    assert parse_srcset(value) == expected


def test_inline_styles_are_returned() -> None:
    page = parse_page(
        b"<style>a{background:url(x.png)}</style><template><style>y</style></template>", PAGE
    )
    assert page.inline_styles == ("a{background:url(x.png)}",)


def test_invalid_bytes_and_nuls_are_read_as_a_browser_reads_them() -> None:
    page = parse_page(b'\xef\xbb\xbf\xff\xfe<img\x00 src=a.png><img src="b\x00.png">', PAGE)
    assert page.problem is None
    assert [r.url for r in page.references] == ["http://10.0.0.5:8080/shop/b\ufffd.png"]


def test_unclosed_tag_at_the_end_is_dropped_as_browsers_drop_it() -> None:
    page = parse_page(b'<img src="a.png"><script src="b.js"', PAGE)
    assert page.problem is None
    assert [r.url for r in page.references] == ["http://10.0.0.5:8080/shop/a.png"]


@pytest.mark.parametrize(
    ("html", "limits", "reason"),
    [
        (b"x" * 101, PageLimits(max_bytes=100), "page of 101 bytes, more than the cap of 100"),
        (
            b"<img src=a><img src=b><img src=c>",
            PageLimits(max_references=2),
            "more than the cap of 2 references",
        ),
        (b"<div>" * 11, PageLimits(max_depth=10), "nested deeper than the cap of 10"),
        (
            b"<img " + b" ".join(b"a%d" % i for i in range(5)) + b">",
            PageLimits(max_attributes=4),
            "5 attributes, more than the cap of 4",
        ),
        (
            b'<img src="' + b"a" * 50 + b'">',
            PageLimits(max_attribute_chars=40),
            "50 characters, more than the cap of 40",
        ),
        (b"<p>x</p>" * 10, PageLimits(max_tokens=20), "more than the cap of 20 tokens"),
        (
            b"<style>a</style>" * 3,
            PageLimits(max_inline_styles=2),
            "more than the cap of 2 inline styles",
        ),
        (
            b"<a " + b"b " * 100,
            PageLimits(max_pending=64, feed_slice=16),
            "longer than the cap of 64",
        ),
    ],
)
def test_caps_end_in_a_reason(html: bytes, limits: PageLimits, reason: str) -> None:
    page = parse_page(html, PAGE, limits=limits)
    assert page.problem is not None and reason in page.problem
    assert not page.complete


def test_optional_end_tags_do_not_count_as_nesting() -> None:
    html = b"<ul>" + b"<li>item" * 50 + b"</ul><img src=a.png>"
    page = parse_page(html, PAGE, limits=PageLimits(max_depth=10))
    assert page.problem is None
    assert len(page.references) == 1


def test_long_inline_script_is_not_a_pending_construct() -> None:
    html = b"<script>" + b"var a = '<a';" * 20_000 + b"</script><img src=a.png>"
    page = parse_page(html, PAGE)
    assert page.problem is None
    assert [r.url for r in page.references] == ["http://10.0.0.5:8080/shop/a.png"]


def test_import_map_modules_are_loaded_files() -> None:
    html = """<script type="importmap">{"imports": {"lazy": "/lazy.1234.js", "dir/": "/dir/",
    "bare": "not-url-like.js", "n": 3}, "scopes": {"/admin/": {"x": "./x.js"}}}</script>
    <script type="importmap">not json</script>
    <script type="importmap" src="map.json"></script>
    <template><script type="importmap">{"imports": {"t": "/inert.js"}}</script></template>"""
    assert refs(html) == [
        ("importmap", "http://10.0.0.5:8080/lazy.1234.js"),
        ("importmap", "http://10.0.0.5:8080/shop/x.js"),
    ]
