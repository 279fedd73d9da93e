"""The previous release during the skew window, against a real cache in front of an origin.

After a rollout to 2.0.0 (Vite build ``vite-r2``), pages opened on 1.0.0 (``vite-r1``)
keep asking for 1.0.0's hashed files. The CDN is a real Varnish in front of an nginx
origin: an origin that holds only the new release makes those files 404 through the
cache (``skew-missing``, exit 1, each file named); an origin that keeps both releases
passes. Releases are made with ``artifactcheck manifest build`` from the committed builds.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from layout_cli import release, targets, verify
from layout_nginx import Nginx
from layout_varnish import Varnish

BUILDS = Path(__file__).resolve().parents[1] / "fixtures" / "builds"
R1, R2 = BUILDS / "vite-r1", BUILDS / "vite-r2"
#: 1.0.0's hashed files that 2.0.0 no longer has (the others are shared byte for byte).
ONLY_R1 = ["assets/index-Bfu9pp8v.js", "assets/index-CQbHzygI.css", "assets/report-50WvgzG_.js"]


def both(dest: Path) -> Path:
    """An origin that kept 1.0.0's files when 2.0.0 was deployed over them."""
    shutil.copytree(R1, dest)
    shutil.copytree(R2, dest, dirs_exist_ok=True)
    return dest


@pytest.fixture
def varnish(tmp_path: Path) -> Iterator[Varnish]:
    cache = Varnish(tmp_path / "varnish")
    try:
        yield cache
    finally:
        cache.stop()


def releases(tmp: Path) -> list[str]:
    return [
        "--release-manifest",
        str(release(R1, "1.0.0", tmp)),
        "--release-manifest",
        str(release(R2, "2.0.0", tmp)),
    ]


def start(
    nginx: Nginx, varnish: Varnish, origin: Path, instances: list[Path]
) -> tuple[list[str], str]:
    urls = [nginx.serve(f"127.61.0.{i}", "static", r) for i, r in enumerate(instances, 1)]
    origin_url = nginx.serve("127.61.1.1", "static", origin)
    nginx.start()
    return urls, varnish.start("127.61.2.1", origin_url)


def test_a_cdn_that_lost_the_previous_release_is_exit_1_naming_its_files(
    tmp_path: Path, nginx: Nginx, varnish: Varnish
) -> None:
    urls, cdn = start(nginx, varnish, R2, [R2, R2])
    run = verify(
        tmp_path,
        *targets(urls, "2.0.0"),
        *releases(tmp_path),
        "--cdn",
        cdn,
        "--previous-version",
        "1.0.0",
    )
    assert run.exit_code == 1, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    (on_cdn,) = run.doc["previous_releases"]
    assert on_cdn["version"] == "1.0.0" and on_cdn["where"] == "cdn" and on_cdn["url"] == cdn
    assert on_cdn["missing"] == ONLY_R1 and on_cdn["differs"] == [] and on_cdn["error"] is None
    (finding,) = run.findings("skew-missing")
    assert "1.0.0" in finding["message"] and all(p in finding["message"] for p in ONLY_R1)
    assert "skew-missing" in run.table and ONLY_R1[0] in run.table


def test_a_cdn_that_kept_both_releases_is_exit_0(
    tmp_path: Path, nginx: Nginx, varnish: Varnish
) -> None:
    urls, cdn = start(nginx, varnish, both(tmp_path / "origin"), [R2])
    run = verify(
        tmp_path,
        *targets(urls, "2.0.0"),
        *releases(tmp_path),
        "--cdn",
        cdn,
        "--previous-version",
        "1.0.0",
    )
    assert run.exit_code == 0, run.explain()
    (on_cdn,) = run.doc["previous_releases"]
    assert on_cdn["missing"] == [] and on_cdn["differs"] == [] and on_cdn["unchecked"] == []
    # all but index.html (the origin's page, not the CDN's) and .vite/manifest.json (the
    # build's own record, denied by servers, loaded by no page)
    assert (on_cdn["required"], on_cdn["total"]) == (6, 8)
    assert run.findings("skew-missing") == []


def test_a_previous_file_with_other_bytes_on_the_cdn_is_skew_differs(
    tmp_path: Path, nginx: Nginx, varnish: Varnish
) -> None:
    origin = both(tmp_path / "origin")
    (origin / ONLY_R1[1]).write_text("body{color:red}\n", encoding="utf-8")  # rebuilt
    urls, cdn = start(nginx, varnish, origin, [R2])
    run = verify(
        tmp_path,
        *targets(urls, "2.0.0"),
        *releases(tmp_path),
        "--cdn",
        cdn,
        "--previous-version",
        "1.0.0",
    )
    assert run.exit_code == 1, run.explain()
    (on_cdn,) = run.doc["previous_releases"]
    assert on_cdn["differs"] == [ONLY_R1[1]] and on_cdn["missing"] == []
    (finding,) = run.findings("skew-differs")
    assert ONLY_R1[1] in finding["message"] and "1.0.0" in finding["message"]


def test_instances_asked_for_the_previous_release_name_the_ones_without_it(
    tmp_path: Path, nginx: Nginx, varnish: Varnish
) -> None:
    urls, cdn = start(nginx, varnish, both(tmp_path / "origin"), [both(tmp_path / "kept"), R2])
    run = verify(
        tmp_path,
        *targets(urls, "2.0.0"),
        *releases(tmp_path),
        "--cdn",
        cdn,
        "--previous-version",
        "1.0.0",
        "--previous-on-instances",
    )
    assert run.exit_code == 1, run.explain()
    by_place = {p["where"]: p for p in run.doc["previous_releases"]}
    assert by_place["cdn"]["missing"] == []
    kept, lost = (by_place[name] for name in sorted(set(by_place) - {"cdn"}))
    assert (kept["url"], kept["missing"], kept["differs"]) == (urls[0], [], [])
    assert (lost["url"], lost["missing"]) == (urls[1], ONLY_R1)
    # index.html is 2.0.0's on both: one path holds one release at a time, not a finding
    assert "index.html" not in kept["differs"] + lost["differs"]
    (finding,) = run.findings("skew-missing")
    assert finding["instance"] == lost["where"]


def test_no_release_for_the_previous_version_is_inconclusive_naming_the_source(
    tmp_path: Path, nginx: Nginx, varnish: Varnish
) -> None:
    urls, cdn = start(nginx, varnish, R2, [R2])
    run = verify(
        tmp_path,
        *targets(urls, "2.0.0"),
        *releases(tmp_path),
        "--cdn",
        cdn,
        "--previous-version",
        "1.5.0",
    )
    assert run.exit_code == 3, run.explain()
    (check,) = run.doc["previous_releases"]
    assert check["where"] == "release" and "release-1.0.0.json" in check["error"]
    assert run.findings("skew-missing") == [] and run.findings("skew-differs") == []
    (finding,) = run.findings("expectation-unavailable")
    assert "1.5.0" in finding["message"] and "release-2.0.0.json" in finding["message"]
