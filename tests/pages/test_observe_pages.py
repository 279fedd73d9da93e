"""Reading an instance's pages over real servers: nginx for sites, raw sockets for hostile
bytes. What a page names on another origin is listed and never requested: the other
server's own access log proves it."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from layout_nginx import Nginx
from rawserver import RawServer, response, serve_each

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.manifests.placement import Where
from artifactcheck.model.settings import CheckSpec, HttpSettings, RetrySettings
from artifactcheck.model.values import Instance
from artifactcheck.observe.pages import PageLimitsPerInstance, observe_pages

SITE_HOST, CDN_HOST, OTHER_HOST, RAW_HOST = "127.0.77.1", "127.0.77.2", "127.0.77.3", "127.0.77.4"
APP_JS = b"console.log('app')"


def sri(data: bytes) -> str:
    return "sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode()


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[Nginx, Nginx, Path, Path]]:
    """One nginx for the site and its CDN, another (its own log) for the other origin."""
    site, other = Nginx(tmp_path / "nginx-site"), Nginx(tmp_path / "nginx-other")
    try:
        yield site, other, tmp_path / "site", tmp_path / "cdn"
    finally:
        site.stop()
        other.stop()


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(http=HttpSettings(), retry=RetrySettings(attempts=1)) as f:
        yield f


def site_files(instance: str, cdn: str, other: str) -> dict[str, str | bytes]:
    return {
        "index.html": f"""<!doctype html><html><head>
<meta charset="utf-8"><title>shop</title>
<script type="module" crossorigin src="/assets/app.js" integrity="{sri(APP_JS)}"></script>
<link rel="stylesheet" href="assets/site.css?v=2">
<link rel="modulepreload" href="/assets/chunk.js">
<link rel="icon" href="/favicon.ico">
<link rel="manifest" href="/site.webmanifest">
<link rel="stylesheet" href="{cdn}static/cdn.css">
<link rel="preconnect" href="{other}">
<style>body{{background:url(/assets/inline-bg.png)}}</style>
</head><body>
<img src="{cdn}static/logo.png" srcset="{cdn}static/logo@2x.png 2x">
<img src="{other}tracker.png"><script src="{other}evil.js"></script>
<img src="data:image/png;base64,AAAA">
</body></html>""",
        "login.html": f"""<!doctype html><base href="{other}">
<link rel="stylesheet" href="/assets/site.css"><script src="login.js"></script>
<img src="/assets/login.png"><link rel="icon" href="{instance}favicon.ico">""",
        "assets/site.css": f"""@import "base.css";
.hero{{background:url(img/bg.png)}} .x{{background:url({other}x.png)}}
/* url(comment.png) */""",
        "assets/base.css": "@font-face{font-family:f;src:url(../fonts/f.woff2) format('woff2')}",
        "assets/app.js": APP_JS,
    }


async def test_a_site_read_as_a_browser_reads_it(
    servers: tuple[Nginx, Nginx, Path, Path], fetcher: Fetcher
) -> None:
    site, other, site_root, cdn_root = servers
    other_root = site_root.parent / "other"
    write(other_root, {"evil.js": "x", "tracker.png": "x", "login.js": "x", "x.png": "x"})
    other_url = other.serve(OTHER_HOST, "static", other_root)
    instance_url = site.serve(SITE_HOST, "pages", site_root)
    cdn_url = site.serve(CDN_HOST, "static", cdn_root)
    write(site_root, site_files(instance_url, cdn_url, other_url))
    write(cdn_root, {"static/logo.png": "png", "static/cdn.css": "a{background:url(icons.png)}"})
    site.start()
    other.start()
    spec = CheckSpec(pages=["/", "/login"], cdn=cdn_url + "static/")
    seen = await observe_pages(
        Instance(name="a", base_url=instance_url), spec=spec, fetcher=fetcher
    )
    other.stop()  # its access log is complete: no request ever reached the other origin
    log = other.workdir / "access.log"
    assert not log.exists() or log.read_text() == "", log.read_text()

    assert seen.complete, [d.problem for d in (*seen.pages, *seen.stylesheets)]
    files = {(f.placement.where.value, f.placement.request_path): f.loaded_by for f in seen.files}
    assert files == {
        ("instance", "assets/app.js"): ("/",),
        ("instance", "assets/site.css?v=2"): ("/",),
        ("instance", "assets/chunk.js"): ("/",),
        ("instance", "favicon.ico"): ("/", "/login"),
        ("instance", "site.webmanifest"): ("/",),
        ("instance", "assets/inline-bg.png"): ("/",),
        ("cdn", "logo.png"): ("/",),
        ("cdn", "cdn.css"): ("/",),
        ("cdn", "icons.png"): ("/",),
        ("cdn", "logo@2x.png"): ("/",),
        ("instance", "assets/base.css"): ("/",),
        ("instance", "assets/img/bg.png"): ("/",),
        ("instance", "fonts/f.woff2"): ("/",),
    }
    app = next(f for f in seen.files if f.placement.request_path == "assets/app.js")
    assert app.references[0].integrity == (("sha384", hashlib.sha384(APP_JS).hexdigest()),)
    assert app.placement.release_path == "assets/app.js"
    css = next(f for f in seen.files if f.placement.request_path == "assets/site.css?v=2")
    assert css.placement.release_path == "assets/site.css"

    listed = {f.url: f.loaded_by for f in seen.not_requested}
    assert listed == {
        f"{other_url}tracker.png": ("/",),
        f"{other_url}evil.js": ("/",),
        f"{other_url}x.png": ("/",),
        # <base href> to another host moves /login's references there: listed only
        f"{other_url}assets/site.css": ("/login",),
        f"{other_url}login.js": ("/login",),
        f"{other_url}assets/login.png": ("/login",),
    }
    assert all(f.placement.where is Where.OTHER_ORIGIN for f in seen.not_requested)
    # the documents were read, each once; the assets are not fetched here
    assert [d.loaded_by for d in seen.pages] == [("/",), ("/login",)]
    assert {d.url for d in seen.stylesheets} == {
        f"{instance_url}assets/site.css?v=2",
        f"{instance_url}assets/base.css",
        f"{cdn_url}static/cdn.css",
    }
    assert site.requests_for("/assets/site.css?v=2") == 1  # the page's query kept
    assert site.requests_for("/assets/site.css") == 0
    assert site.requests_for("/assets/base.css") == 1
    assert site.requests_for("/assets/app.js") == 0
    assert site.requests_for("/static/cdn.css") == 1  # from the CDN (one nginx logs both)


async def test_css_import_depth_is_capped(
    servers: tuple[Nginx, Nginx, Path, Path], fetcher: Fetcher
) -> None:
    site, _other, root, _cdn = servers
    write(
        root,
        {
            "index.html": '<link rel="stylesheet" href="a.css">',
            "a.css": '@import "b.css";',
            "b.css": '@import "c.css";',
            "c.css": "x{background:url(deep.png)}",
        },
    )
    url = site.serve(SITE_HOST, "static", root)
    site.start()
    seen = await observe_pages(
        Instance(name="a", base_url=url),
        spec=CheckSpec(),
        fetcher=fetcher,
        per_instance=PageLimitsPerInstance(max_css_depth=2),
    )
    assert not seen.complete
    assert seen.problems == ("stylesheets @import-ed deeper than the cap of 2",)
    assert site.requests_for("/c.css") == 0
    assert {f.placement.request_path for f in seen.files} == {"a.css", "b.css", "c.css"}


async def test_a_missing_page_and_a_missing_stylesheet_are_problems_not_errors(
    servers: tuple[Nginx, Nginx, Path, Path], fetcher: Fetcher
) -> None:
    site, _other, root, _cdn = servers
    write(root, {"index.html": '<link rel="stylesheet" href="gone.css"><script src="a.js">'})
    url = site.serve(SITE_HOST, "static", root)
    site.start()
    seen = await observe_pages(
        Instance(name="a", base_url=url), spec=CheckSpec(pages=["/", "/nope"]), fetcher=fetcher
    )
    assert not seen.complete
    assert seen.pages[1].problem == "page /nope answers HTTP 404"
    assert seen.stylesheets[0].problem == f"stylesheet {url}gone.css answers HTTP 404"
    assert {f.placement.request_path for f in seen.files} == {"gone.css", "a.js"}


HOSTILE_PAGES = {
    "deeply nested": (b"<div>" * 200_000, "nested deeper than the cap"),
    "unclosed tags": (b"<a " * 200_000, "longer than the cap"),
    "too large": (b"<img src=a.png>" + b" " * (3 * 1024 * 1024), "page /"),
    "many attributes": (b"<img " + b"a " * 300 + b">", "attributes, more than the cap"),
}


@pytest.mark.parametrize("name", list(HOSTILE_PAGES))
async def test_hostile_pages_from_a_raw_socket_are_a_problem(name: str, fetcher: Fetcher) -> None:
    body, reason = HOSTILE_PAGES[name]
    wire = response(200, body, headers={"Content-Type": "text/html"})
    with RawServer(RAW_HOST, serve_each(lambda conn, head: wire)) as server:
        seen = await observe_pages(
            Instance(name="raw", base_url=server.url), spec=CheckSpec(), fetcher=fetcher
        )
    (page,) = seen.pages
    assert page.problem is not None and reason in page.problem, page.problem
    assert not seen.complete


async def test_invalid_bytes_and_nuls_are_read(fetcher: Fetcher) -> None:
    body = b'\xff\xfe\x00<img src=a.png>\x00\x80<script src="b\x00.js"></script>'
    wire = response(200, body, headers={"Content-Type": "text/html"})
    with RawServer(RAW_HOST, serve_each(lambda conn, head: wire)) as server:
        seen = await observe_pages(
            Instance(name="raw", base_url=server.url), spec=CheckSpec(), fetcher=fetcher
        )
    assert seen.complete
    assert {f.placement.request_path for f in seen.files} == {"a.png", "b\ufffd.js"}


async def test_an_unreachable_instance_is_a_problem(fetcher: Fetcher) -> None:
    with RawServer(RAW_HOST, serve_each(lambda conn, head: None)) as server:
        url = server.url
    seen = await observe_pages(
        Instance(name="gone", base_url=url), spec=CheckSpec(), fetcher=fetcher
    )
    (page,) = seen.pages
    assert page.problem is not None and page.problem.startswith("page /: ")
    assert seen.files == () and not seen.complete
