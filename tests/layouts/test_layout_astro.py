"""Astro 5 static output behind nginx, clean URLs (``about/index.html``).

Tried as a new user would: the newest Astro (7.3, and 6.x) needs Node 22.12, so the
fixture is Astro 5.18, the newest that runs on Node 20. Between v1 and v2 only
``index.html`` changes (the release label is in the page; the bundled script and
stylesheet under ``_astro/`` keep their names and bytes): drift is in an entry page.
"""

from __future__ import annotations

from pathlib import Path

from layout_cli import (
    build,
    start_with_cdn,
    targets,
    two_releases,
    verify,
)
from layout_nginx import Nginx

SUBNET = "127.69.0"
CDN_HOST = "127.69.1.1"
CSS = "_astro/index.D2OaaPnZ.css"


def _start(nginx: Nginx, tmp: Path, roots: list[Path], cdn_lacks: str | None = None):
    return start_with_cdn(nginx, tmp, (SUBNET, "pages", roots), (CDN_HOST, "astro/v1"), cdn_lacks)


def _releases(tmp: Path) -> list[str]:
    return two_releases(tmp, "astro")


def test_fixture_is_what_the_tests_say() -> None:
    v1, v2 = build("astro/v1"), build("astro/v2")
    assert (v1 / CSS).read_bytes() == (v2 / CSS).read_bytes()
    assert CSS in (v1 / "index.html").read_text()
    assert (v1 / "about" / "index.html").read_bytes() == (v2 / "about" / "index.html").read_bytes()
    assert (v1 / "index.html").read_bytes() != (v2 / "index.html").read_bytes()


def test_a_correct_astro_fleet_is_consistent(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _start(nginx, tmp_path, [build("astro/v1")] * 3)
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()


def test_a_drifted_astro_instance_alone_is_flagged(nginx: Nginx, tmp_path: Path) -> None:
    """Only its index.html differs, and that is enough: it serves 2.0.0's page."""
    urls, cdn = _start(nginx, tmp_path, [build("astro/v1")] * 2 + [build("astro/v2")])
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    assert run.result(urls[2])["serves_version"] == "2.0.0", run.explain()
    differs = [f["path"] for f in run.result(urls[2])["findings"] if f["kind"] == "content-differs"]
    assert differs == ["index.html"], run.explain()


def test_a_cdn_missing_a_stylesheet_is_named(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _start(nginx, tmp_path, [build("astro/v1")] * 3, cdn_lacks=CSS)
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert {f["path"] for f in run.findings("cdn-missing")} == {CSS}, run.explain()
    assert set(run.verdicts().values()) == {"cdn-missing"}, run.explain()
    assert CSS in run.table
