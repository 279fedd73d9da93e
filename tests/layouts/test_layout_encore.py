"""Symfony Webpack Encore as deployed: the recipe's defaults behind nginx, under ``/build/``.

``setOutputPath('public/build/')`` and ``setPublicPath('/build')``: nginx serves
``public/`` with ``/build/`` as files and every other path from the front controller
(conf/encore.conf). Encore's served ``manifest.json`` maps ``build/app.js`` to
``/build/app.<hash>.js``: host-absolute values, which a browser resolves against the
origin, not against the prefix. The user runs what the README says: ``manifest build
public/build --version V``, then ``verify --prefix /build/``; the CDN holds
``public/build/`` under ``/build/`` (``--cdn https://cdn/build/``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from layout_cli import build, copy_build, release, serve_fleet, targets, verify
from layout_nginx import Nginx

from artifactcheck.cli.main import main

SUBNET = "127.74.0"
CDN_HOST = "127.74.1.1"
R1_CSS = "app.ebf90eb6.css"  # r1's versioned CSS (r2 renamed it: app.50677aaa.css)
R2_CSS = "app.50677aaa.css"
R1_JS = "app.39690c5e.js"


def _public(tmp: Path, name: str, build_name: str, *, swap_css: bool = False) -> Path:
    """A Symfony ``public/`` holding the build at ``build/``; ``swap_css``: r2's CSS
    served under r1's name (a half-updated instance)."""
    public = tmp / name
    shutil.copytree(build(build_name), public / "build")
    if swap_css:
        shutil.copyfile(build("encore/r2") / R2_CSS, public / "build" / R1_CSS)
    return public


def _fleet(
    nginx: Nginx, tmp: Path, *, swap_css: bool = False, cdn_lacks: str | None = None
) -> tuple[list[str], str]:
    roots = [
        _public(tmp, "www1", "encore/r1"),
        _public(tmp, "www2", "encore/r1"),
        _public(tmp, "www3", "encore/r1", swap_css=swap_css),
    ]
    urls = serve_fleet(nginx, SUBNET, "encore", roots)
    cdn_root = tmp / "cdn"
    copy_build("encore/r1", cdn_root / "build")
    if cdn_lacks:
        (cdn_root / "build" / cdn_lacks).unlink()
    cdn = nginx.serve(CDN_HOST, "static", cdn_root)
    nginx.start()
    return urls, f"{cdn}build/"


def _releases(tmp: Path) -> list[str]:
    return [
        "--release-manifest",
        str(release(build("encore/r1"), "1.0.0", tmp)),
        "--release-manifest",
        str(release(build("encore/r2"), "2.0.0", tmp)),
    ]


def test_fixture_is_what_the_tests_say() -> None:
    """Encore's defaults: host-absolute values under /build, r2 renames the CSS only
    by its content (the shared runtime keeps its name)."""
    manifest = (build("encore/r1") / "manifest.json").read_text()
    assert f'"build/app.css": "/build/{R1_CSS}"' in manifest
    assert f'"build/app.js": "/build/{R1_JS}"' in manifest
    assert (build("encore/r2") / R2_CSS).is_file()
    assert not (build("encore/r2") / R1_CSS).exists()


def test_a_correct_encore_fleet_under_build_is_consistent(nginx: Nginx, tmp_path: Path) -> None:
    """Today: exit 1, the manifest's ``/build/app.<hash>.js`` fetched as
    ``/build/build/app.<hash>.js`` (404)."""
    urls, _cdn = _fleet(nginx, tmp_path)
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--prefix", "/build/")
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    assert nginx.requests_for(f"/build/build/{R1_JS}") == 0
    assert nginx.requests_for(f"/build/{R1_JS}") >= 3


def test_a_correct_encore_fleet_with_its_cdn_is_consistent(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _fleet(nginx, tmp_path)
    run = verify(
        tmp_path,
        *targets(urls, "1.0.0"),
        *_releases(tmp_path),
        "--prefix",
        "/build/",
        "--cdn",
        cdn,
    )
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    assert nginx.requests_for(f"/build/{R1_CSS}") >= 4  # three instances and the CDN


def test_a_cdn_lacking_an_encore_file_is_cdn_missing(nginx: Nginx, tmp_path: Path) -> None:
    """Today ``cdn-missing`` cannot be reported: every file is "missing" on the
    instances first."""
    urls, cdn = _fleet(nginx, tmp_path, cdn_lacks=R1_JS)
    run = verify(
        tmp_path,
        *targets(urls, "1.0.0"),
        *_releases(tmp_path),
        "--prefix",
        "/build/",
        "--cdn",
        cdn,
    )
    assert run.exit_code == 1, run.explain()
    assert set(run.verdicts().values()) == {"cdn-missing"}, run.explain()
    assert {f["path"] for f in run.findings("cdn-missing")} == {R1_JS}, run.explain()


@pytest.mark.parametrize("with_cdn", [False, True], ids=["instances", "cdn"])
def test_an_instance_serving_r2s_css_is_named(nginx: Nginx, tmp_path: Path, with_cdn: bool) -> None:
    urls, cdn = _fleet(nginx, tmp_path, swap_css=True)
    more = ["--cdn", cdn] if with_cdn else []
    run = verify(
        tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--prefix", "/build/", *more
    )
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    paths = {f.get("path") for f in run.result(urls[2])["findings"]}
    assert R1_CSS in paths, run.explain()
    assert R1_CSS in run.table, run.explain()


def test_investigate_on_an_encore_instance_says_what_it_serves(
    nginx: Nginx, tmp_path: Path
) -> None:
    """Today ``investigate`` says the instance "answers 404" for files it serves."""
    urls, cdn = _fleet(nginx, tmp_path)
    out = CliRunner(env={"COLUMNS": "200"}).invoke(
        main,
        [
            "investigate",
            f"{urls[0]}=1.0.0",
            *_releases(tmp_path),
            "--prefix",
            "/build/",
            "--cdn",
            cdn,
            "-o",
            "json",
        ],
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["verdict"] == "consistent", out.stdout
    # only the stylesheet the front controller's page links, which no build has, is 404
    missing = [a["path"] for a in doc["assets"] if a["status"] == 404]
    assert missing == ["app.css"], out.stdout


def test_without_a_prefix_the_prefix_is_found_from_the_links_of_the_entry_page(
    nginx: Nginx, tmp_path: Path
) -> None:
    """No ``--prefix``, and no redirect or well-known manifest name at the root: the
    entry page links ``/build/app.css``, so ``/build/`` is probed and found; the
    instance serving r2's CSS is named. Before: every instance inconclusive, asking for
    ``--prefix`` (the entry page's links were not read)."""
    urls, cdn = _fleet(nginx, tmp_path, swap_css=True)
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    assert all("under /build/, detected" in run.result(u)["reason"] for u in urls[:2])
    assert [f["path"] for f in run.findings("content-differs")] == [R1_CSS], run.explain()
    assert nginx.requests_for(f"/build/build/{R1_JS}") == 0
