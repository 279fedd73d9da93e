"""The nginx configurations behave as the production setups they stand for.

Every layout test leans on these behaviours (a dotfile refused, the SPA fallback, the
pre-compressed file for a gzip client, Django's alias and login redirect, a sub-path
app, clean URLs of an exported site); read with raw ``http.client`` requests, so no
redirect is followed and no coding is undone.
"""

from __future__ import annotations

import gzip
import http.client
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from layout_cli import build
from layout_nginx import Nginx, render


def get(url: str, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_spa_conf(nginx: Nginx) -> None:
    root = build("vue/v1")
    url = nginx.serve("127.70.0.1", "spa", root)
    nginx.start()
    index = (root / "index.html").read_bytes()
    assert get(url, "/.vite/manifest.json")[0] == 403
    status, _, body = get(url, "/some/client/route")
    assert (status, body) == (200, index)
    status, _, body = get(url, "/assets/index-Missing1.js")
    assert (status, body) == (200, index)  # a missing asset is answered by the fallback
    plain = (root / "assets/index-DactLZJg.js").read_bytes()
    assert get(url, "/assets/index-DactLZJg.js")[2] == plain
    status, headers, body = get(url, "/assets/index-DactLZJg.js", **{"Accept-Encoding": "gzip"})
    assert headers.get("content-encoding") == "gzip"
    assert body == (root / "assets/index-DactLZJg.js.gz").read_bytes()
    assert gzip.decompress(body) == plain


def test_django_conf(nginx: Nginx) -> None:
    root = build("django/v1")
    url = nginx.serve("127.70.0.2", "django", root, version="1.0.0")
    nginx.start()
    status, _, body = get(url, "/static/shop/app.c0cd86a85302.js")
    assert (status, body) == (200, (root / "shop/app.c0cd86a85302.js").read_bytes())
    assert get(url, "/static/staticfiles.json")[0] == 200
    status, headers, _ = get(url, "/admin/css/base.css")
    assert status == 302 and headers["location"].endswith("/login/?next=/admin/css/base.css")
    status, headers, body = get(url, "/login/")
    assert status == 200 and b"<form" in body and headers["content-type"] == "text/html"
    status, headers, body = get(url, "/version")
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(body) == {"version": "1.0.0"}
    assert get(url, "/static/missing.css")[0] == 404


def test_subpath_conf(nginx: Nginx, tmp_path: Path) -> None:
    www = tmp_path / "www"
    (www / "app").mkdir(parents=True)
    (www / "app" / "index.html").write_text("<!doctype html><title>app</title>")
    (www / "app" / "main.js").write_text("main")
    url = nginx.serve("127.70.0.3", "subpath", www)
    nginx.start()
    status, headers, _ = get(url, "/")
    assert status == 302 and headers["location"].endswith("/app/")
    assert get(url, "/app/main.js")[2] == b"main"
    assert get(url, "/app/some/route")[2] == b"<!doctype html><title>app</title>"
    assert get(url, "/other")[0] == 404


def test_pages_conf(nginx: Nginx) -> None:
    root = build("next/v1")
    url = nginx.serve("127.70.0.4", "pages", root)
    nginx.start()
    assert get(url, "/about")[2] == (root / "about.html").read_bytes()
    status, _, body = get(url, "/no/such/page")
    assert (status, body) == (404, (root / "404.html").read_bytes())
    astro = build("astro/v1")  # about/index.html, on a second nginx
    second = Nginx(nginx.workdir.parent / "second")
    try:
        url = second.serve("127.70.0.5", "pages", astro)
        second.start()
        assert get(url, "/about/")[2] == (astro / "about" / "index.html").read_bytes()
    finally:
        second.stop()


def test_cdn_prefix_conf(nginx: Nginx) -> None:
    root = build("django/v1")
    url = nginx.serve("127.70.0.6", "cdn-prefix", root, prefix="/static/")
    nginx.start()
    assert get(url, "/static/shop/app.c0cd86a85302.js")[0] == 200
    assert get(url, "/shop/app.c0cd86a85302.js")[0] == 404
    assert get(url, "/static/.hidden")[0] in (403, 404)


def test_auth_conf(nginx: Nginx) -> None:
    url = nginx.serve("127.70.0.7", "auth", build("vue/v1"))
    nginx.start()
    assert get(url, "/index.html")[0] == 401
    assert get(url, "/assets/index-DactLZJg.js")[0] == 401


def test_an_unfilled_placeholder_is_refused() -> None:
    with pytest.raises(AssertionError, match="unfilled"):
        render("django", listen="127.0.0.1:1", root="/x")  # no version
