"""Two servers nobody here had used, as a new user meets them: Caddy and lighttpd.

Caddy 2 (Debian ``caddy``) serves a Hugo site (Debian ``hugo``, fingerprinted assets,
``.gz`` beside each file) with ``file_server { precompressed gzip }``; lighttpd 1.4
(Debian ``lighttpd``) serves the Vite + Vue build, dotfiles included, with its docs'
SPA set-up ``server.error-handler-404 = "/index.html"`` (the entry page, and 200, for
any missing path). The README's commands: ``manifest build DIST --version V``, then
``verify``.
"""

from __future__ import annotations

import gzip
import http.client
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from layout_cli import build, release, targets, verify
from layout_others import Caddy, Lighttpd

HUGO_CSS_V1 = "css/main.min.b7e4402427bddc855950550034104a7d00d852c307445737d200a8eab145a23a.css"
HUGO_CSS_V2 = "css/main.min.f759bec0ec0ee99b0c4bfdf65666432001bdeca9a75a76fdb8f05741b5826a60.css"
HINT = "artifactcheck manifest build DIST --version V"


@pytest.fixture
def caddy(tmp_path: Path) -> Iterator[Caddy]:
    server = Caddy(tmp_path / "caddy")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def lighttpd(tmp_path: Path) -> Iterator[Lighttpd]:
    server = Lighttpd(tmp_path / "lighttpd")
    try:
        yield server
    finally:
        server.stop()


def _get(url: str, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def _releases(tmp: Path, name: str) -> list[str]:
    out: list[str] = []
    for dist, version in ((f"{name}/v1", "1.0.0"), (f"{name}/v2", "2.0.0")):
        out += ["--release-manifest", str(release(build(dist), version, tmp))]
    return out


def test_the_servers_behave_as_their_docs_say(caddy: Caddy, lighttpd: Lighttpd) -> None:
    hugo, vue = build("hugo-caddy/v1"), build("vue/v1")
    c = caddy.serve("127.66.0.1", hugo)
    spa = caddy.serve("127.66.0.2", vue, spa=True)
    lt = lighttpd.serve("127.66.1.1", vue, spa=True)
    caddy.start()
    lighttpd.start()
    plain = (hugo / HUGO_CSS_V1).read_bytes()
    assert _get(c, f"/{HUGO_CSS_V1}")[2] == plain
    status, headers, body = _get(c, f"/{HUGO_CSS_V1}", **{"Accept-Encoding": "gzip"})
    assert headers.get("content-encoding") == "gzip" and gzip.decompress(body) == plain
    assert _get(c, "/missing.css")[0] == 404
    index = (vue / "index.html").read_bytes()
    for url in (spa, lt):
        assert _get(url, "/wrong/manifest.json")[::2] == (200, index)
    assert _get(lt, "/.vite/manifest.json")[0] == 200  # lighttpd serves dotfiles


def test_a_correct_hugo_fleet_on_caddy_is_consistent_in_both_codings(
    caddy: Caddy, tmp_path: Path
) -> None:
    urls = [caddy.serve(f"127.66.2.{n}", build("hugo-caddy/v1")) for n in (1, 2, 3)]
    caddy.start()
    codings = ["--compare-encoding", "identity", "--compare-encoding", "gzip"]
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path, "hugo-caddy"), *codings)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()


def test_a_hugo_instance_serving_the_next_release_is_named(caddy: Caddy, tmp_path: Path) -> None:
    roots = [build("hugo-caddy/v1"), build("hugo-caddy/v1"), build("hugo-caddy/v2")]
    urls = [caddy.serve(f"127.66.3.{n}", root) for n, root in enumerate(roots, start=1)]
    caddy.start()
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path, "hugo-caddy"))
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    odd = run.result(urls[2])
    assert odd["serves_version"] == "2.0.0", run.explain()
    head, _, lacks = odd["reason"].partition("; ")
    assert HUGO_CSS_V2 in head and HUGO_CSS_V1 not in head, odd["reason"]
    assert HUGO_CSS_V1 in lacks, odd["reason"]


def test_zero_config_on_a_hugo_site_compares_what_its_pages_load(
    caddy: Caddy, tmp_path: Path
) -> None:
    """Hugo writes no build manifest: with no release, the files its entry page loads
    are compared between siblings. Before: exit 3, nothing to compare, what to give."""
    urls = [caddy.serve(f"127.66.4.{n}", build("hugo-caddy/v1")) for n in (1, 2)]
    caddy.start()
    run = verify(tmp_path, *targets(urls, "1.0.0"))
    assert run.exit_code == 0, run.explain()
    for url in urls:
        reason = run.result(url)["reason"]
        assert reason == "agrees with its 1 sibling(s) on 1.0.0", reason
    assert "release's file list" not in run.table, run.explain()


@pytest.mark.parametrize("server", ["caddy", "lighttpd"])
def test_a_wrong_manifest_path_on_an_spa_server_is_no_mismatch(
    server: str, caddy: Caddy, lighttpd: Lighttpd, tmp_path: Path
) -> None:
    """``--manifest-path`` naming nothing: Caddy's ``try_files`` and lighttpd's
    ``error-handler-404`` answer it with index.html and 200. With the release, the
    fleet is consistent (its 13 files right); without, too, by what its page loads.
    Before: every instance "content differs: wrong/manifest.json" ("not valid JSON"),
    exit 1, on a correct fleet."""
    host = caddy if server == "caddy" else lighttpd
    subnet = "127.66.5" if server == "caddy" else "127.66.6"
    urls = [host.serve(f"{subnet}.{n}", build("vue/v1"), spa=True) for n in (1, 2)]
    host.start()
    wrong = ["--manifest-path", "/wrong/manifest.json"]
    vue = ["--release-manifest", str(release(build("vue/v1"), "1.0.0", tmp_path))]
    run = verify(tmp_path / "with", *targets(urls, "1.0.0"), *wrong, *vue)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    assert not run.findings("manifest-invalid"), run.explain()
    # without a release, the files the entry page loads are compared between siblings
    run = verify(tmp_path / "without", *targets(urls, "1.0.0"), *wrong)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    assert not run.findings("manifest-invalid"), run.explain()


def test_a_vue_fleet_on_lighttpd_agrees_by_its_served_manifest(
    lighttpd: Lighttpd, tmp_path: Path
) -> None:
    """lighttpd serves ``.vite/manifest.json`` (nginx denies it): zero-config finds it,
    and the siblings agree on the files it lists; the one serving v2 is the minority."""
    roots = [build("vue/v1"), build("vue/v1"), build("vue/v2")]
    urls = [lighttpd.serve(f"127.66.7.{n}", r, spa=True) for n, r in enumerate(roots, start=1)]
    lighttpd.start()
    run = verify(tmp_path, *targets(urls, "1.0.0"))
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    assert run.result(urls[0])["reason"] == "agrees with 1 of its 2 sibling(s) on 1.0.0"


def test_a_wrong_base_url_on_lighttpd_agrees_on_nothing(lighttpd: Lighttpd, tmp_path: Path) -> None:
    """``-t URL/app/`` where the app is at the root: every path, the manifest names
    probed included, answers the entry page (200). Nothing there is the site's content:
    exit 3 saying what to give, never exit 0 on the pages the siblings share."""
    urls = [lighttpd.serve(f"127.66.8.{n}", build("vue/v1"), spa=True) for n in (1, 2)]
    lighttpd.start()
    args = [t.replace("/=", "/app/=") for t in targets(urls, "1.0.0")]
    run = verify(tmp_path, *args)
    assert run.exit_code == 3, run.explain()
    assert set(run.verdicts().values()) == {"inconclusive"}, run.explain()
    assert all(HINT in run.result(f"{url}app/")["reason"] for url in urls), run.explain()


def test_a_site_named_by_host_reached_by_ip_is_not_a_mismatch(caddy: Caddy, tmp_path: Path) -> None:
    """Caddy's site is ``http://shop.example:PORT``, the instances are reached by IP:
    Caddy answers every path with 200 and an empty body. Before: both instances of a
    correct fleet "content differs", exit 1. Now: exit 3 naming ``--host-header``;
    with it, consistent."""
    urls = [
        caddy.serve(f"127.66.9.{n}", build("hugo-caddy/v1"), name="shop.example") for n in (1, 2)
    ]
    caddy.start()
    assert _get(urls[0], "/index.html")[::2] == (200, b"")
    hugo = ["--release-manifest", str(release(build("hugo-caddy/v1"), "1.0.0", tmp_path))]
    run = verify(tmp_path / "by-ip", *targets(urls, "1.0.0"), *hugo)
    assert run.exit_code == 3, run.explain()
    for url in urls:
        result = run.result(url)
        assert result["verdict"] == "inconclusive", run.explain()
        assert "answers the same 0-byte body" in result["reason"], result["reason"]
        assert "--host-header" in result["reason"], result["reason"]
    run = verify(
        tmp_path / "named", *targets(urls, "1.0.0"), *hugo, "--host-header", "shop.example"
    )
    assert run.exit_code == 0, run.explain()
