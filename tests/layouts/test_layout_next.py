"""Next.js 16 static export (``output: 'export'``) behind nginx, built once plainly and
once with ``assetPrefix`` (its ``_next/static/`` served from a CDN).

nginx serves ``out/`` as Next's docs say (``try_files $uri $uri.html $uri/ =404``).
Next writes no manifest of its own: the instances are judged by the release's file
list (``manifest build out/``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from layout_cli import build, copy_build, release, serve_fleet, targets, verify
from layout_nginx import Nginx

SUBNET = "127.65.0"
CDN_HOST = "127.65.1.1"
CHUNK = "_next/static/chunks/0cz1d0mv5g_q7.js"  # the same name and bytes in v1 and v2


def _releases(tmp: Path, name: str) -> list[str]:
    return [
        "--release-manifest",
        str(release(build(f"{name}/v1"), "1.0.0", tmp)),
        "--release-manifest",
        str(release(build(f"{name}/v2"), "2.0.0", tmp)),
    ]


def _plain(nginx: Nginx, tmp: Path, roots: list[Path], cdn_lacks: str | None = None):
    """The whole export behind a CDN too (it caches every path)."""
    urls = serve_fleet(nginx, SUBNET, "pages", roots)
    cdn_root = copy_build("next/v1", tmp / "cdn")
    if cdn_lacks:
        (cdn_root / cdn_lacks).unlink()
    cdn = nginx.serve(CDN_HOST, "static", cdn_root)
    nginx.start()
    return urls, cdn


def _prefixed(nginx: Nginx, tmp: Path, roots: list[Path], cdn_lacks: str | None = None):
    """assetPrefix: the CDN holds only ``_next/``, the origin serves everything."""
    urls = serve_fleet(nginx, "127.66.0", "pages", roots)
    cdn_root = tmp / "cdn"
    cdn_root.mkdir()
    shutil.copytree(build("next-prefix/v1") / "_next", cdn_root / "_next")
    if cdn_lacks:
        (cdn_root / cdn_lacks).unlink()
    cdn = nginx.serve("127.66.1.1", "static", cdn_root)
    nginx.start()
    return urls, cdn


def test_fixture_is_what_the_tests_say() -> None:
    for name in ("next/v1", "next/v2", "next-prefix/v1", "next-prefix/v2"):
        assert (build(name) / CHUNK).is_file(), name
    assert "release v2" in (build("next/v2") / "index.html").read_text()
    assert (
        "https://cdn.example.com/_next/static/"
        in (build("next-prefix/v1") / "index.html").read_text()
    )
    assert "cdn.example.com" not in (build("next/v1") / "index.html").read_text()


def test_a_correct_next_fleet_is_consistent(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _plain(nginx, tmp_path, [build("next/v1")] * 3)
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path, "next"), "--cdn", cdn)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()


def test_a_drifted_next_instance_alone_is_flagged(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _plain(nginx, tmp_path, [build("next/v1")] * 2 + [build("next/v2")])
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path, "next"), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    assert run.result(urls[2])["serves_version"] == "2.0.0", run.explain()
    assert "serves 2.0.0" in run.result(urls[2])["reason"], run.explain()


def test_swapped_next_instances_are_each_named(nginx: Nginx, tmp_path: Path) -> None:
    """The first serves 1.0.0 and reports 2.0.0, the third the other way round: each is
    flagged with what it serves; the one in between is consistent."""
    urls, cdn = _plain(nginx, tmp_path, [build("next/v1"), build("next/v1"), build("next/v2")])
    args = ["-t", f"{urls[0]}=2.0.0", "-t", f"{urls[1]}=1.0.0", "-t", f"{urls[2]}=1.0.0"]
    run = verify(tmp_path, *args, *_releases(tmp_path, "next"), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "mismatch",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    assert run.result(urls[0])["serves_version"] == "1.0.0", run.explain()
    assert run.result(urls[2])["serves_version"] == "2.0.0", run.explain()


def test_a_cdn_missing_a_chunk_is_named(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _plain(nginx, tmp_path, [build("next/v1")] * 3, cdn_lacks=CHUNK)
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path, "next"), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert {f["path"] for f in run.findings("cdn-missing")} == {CHUNK}, run.explain()
    assert set(run.verdicts().values()) == {"cdn-missing"}, run.explain()
    assert CHUNK in run.table


def _yaml_include(tmp: Path) -> list[str]:
    """``cdn_include`` from a YAML config: the one way to say it today."""
    config = tmp / "artifactcheck.yaml"
    config.write_text('cdn_include: ["_next/static/**"]\n')
    return ["-c", str(config)]


def test_asset_prefix_fleet_with_cdn_include_in_yaml(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _prefixed(nginx, tmp_path, [build("next-prefix/v1")] * 3)
    releases = _releases(tmp_path, "next-prefix")
    args = [*_yaml_include(tmp_path), *targets(urls, "1.0.0"), *releases, "--cdn", cdn]
    run = verify(tmp_path, *args)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()


def test_asset_prefix_drift_and_cdn_gap_are_both_named(nginx: Nginx, tmp_path: Path) -> None:
    """The drifted instance is flagged; the CDN's missing chunk is named, only it."""
    roots = [build("next-prefix/v1")] * 2 + [build("next-prefix/v2")]
    urls, cdn = _prefixed(nginx, tmp_path, roots, cdn_lacks=CHUNK)
    releases = _releases(tmp_path, "next-prefix")
    args = [*_yaml_include(tmp_path), *targets(urls, "1.0.0"), *releases, "--cdn", cdn]
    run = verify(tmp_path, *args)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts()[urls[0]] == "cdn-missing", run.explain()
    assert run.verdicts()[urls[2]] == "mismatch", run.explain()
    assert run.result(urls[2])["serves_version"] == "2.0.0", run.explain()
    missing = {f["path"] for f in run.findings("cdn-missing")}
    assert CHUNK in missing, run.explain()
    assert all(p.startswith("_next/static/") for p in missing), run.explain()


def test_asset_prefix_fleet_with_cdn_include_on_the_command_line(
    nginx: Nginx, tmp_path: Path
) -> None:
    """``--cdn-include '_next/static/**'``: the same as the YAML setting.

    Today: "No such option '--cdn-include'"."""
    urls, cdn = _prefixed(nginx, tmp_path, [build("next-prefix/v1")] * 3)
    releases = _releases(tmp_path, "next-prefix")
    args = [*targets(urls, "1.0.0"), *releases, "--cdn", cdn, "--cdn-include", "_next/static/**"]
    run = verify(tmp_path, *args)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    broken = verify(tmp_path / "gap", *args[:-2], "--cdn-exclude", "*.html")
    assert broken.exit_code == 1, broken.explain()  # without the include: root files missing
