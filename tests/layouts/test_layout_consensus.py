"""Siblings agree only on content they serve: real nginx fleets, no release manifest.

webpack 5's build (tests/fixtures/builds/webpack-r1) with its ``manifest.json``, whose
values are host-absolute (``/static/js/main.ca16dfb6.js``), served by nginx. When the
files it lists are not where they are asked for (an Encore build under ``/build/``
asked at the root), every instance answers 404, or the SPA's ``index.html``, for every
one of them: siblings agreeing on those answers agree on nothing, and an instance
serving another release's CSS there must never pass as "agrees with its 2 siblings".
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from layout_cli import build, no_pages, release, serve_fleet, targets, verify
from layout_nginx import Nginx

from artifactcheck.cli.main import main

BUILDS = Path(__file__).resolve().parents[1] / "fixtures" / "builds"
SUBNET = "127.64.0"
CSS = "static/css/main.138366f0.css"
R2_CSS = BUILDS / "webpack-r2" / "static" / "css" / "main.5b9d8667.css"
JS = "static/js/main.ca16dfb6.js"
V2_CSS = "static/css/main.5b9d8667.css"
NOTHING = "nothing it serves was compared with a sibling"


def _site(tmp: Path, name: str, *, under: str | None = None) -> Path:
    """A copy of webpack-r1; with ``under``, every file but ``manifest.json`` and
    ``index.html`` moved into that directory, where the manifest's values do not lead."""
    root = tmp / name
    shutil.copytree(BUILDS / "webpack-r1", root)
    if under is not None:
        (root / under).mkdir()
        for child in list(root.iterdir()):
            if child.name not in ("manifest.json", "index.html", under):
                shutil.move(child, root / under / child.name)
    return root


def _fleet(tmp: Path, *, under: str | None = None) -> list[Path]:
    """Three copies; the third serves release r2's stylesheet under r1's name."""
    roots = [_site(tmp, f"i{n}", under=under) for n in range(3)]
    css = roots[2] / (under or "") / CSS
    shutil.copyfile(R2_CSS, css)
    return roots


def _verify(nginx: Nginx, tmp: Path, template: str, roots: list[Path], *args: str):
    urls = serve_fleet(nginx, SUBNET, template, roots)
    nginx.start()
    return urls, verify(tmp / "run", *targets(urls, "1.0.0"), *args)


def test_fixture_is_what_the_tests_say() -> None:
    manifest = (BUILDS / "webpack-r1" / "manifest.json").read_text()
    assert f'"/{CSS}"' in manifest and f'"/{JS}"' in manifest
    assert R2_CSS.read_bytes() != (BUILDS / "webpack-r1" / CSS).read_bytes()


@pytest.mark.parametrize("template", ["static", "spa"])
def test_siblings_agreeing_on_404s_or_the_fallback_page_agree_on_nothing(
    nginx: Nginx, tmp_path: Path, template: str
) -> None:
    """Every file the served manifest lists answers 404 (a plain static host) or
    index.html (an SPA's ``try_files``) on every instance; the third serves another
    release's CSS where nobody looked. Before: exit 0, each "agrees with its 2
    sibling(s)", "11 of 11 files" compared. Now: exit 3, each inconclusive, saying
    why and what to check."""
    urls, run = _verify(nginx, tmp_path, template, _fleet(tmp_path, under="build"))
    assert run.exit_code == 3, run.explain()
    assert set(run.verdicts().values()) == {"inconclusive"}, run.explain()
    for url in urls:
        result = run.result(url)
        assert result["reason"].startswith(NOTHING), run.explain()
        assert "--prefix" in result["reason"] and CSS in result["reason"], run.explain()
        assert not result["verified"], run.explain()
        # the 404s and the fallback pages are not counted as compared
        assert result["coverage"]["compared"] < 3, run.explain()
    assert "agrees with" not in run.table, run.explain()


def test_siblings_serving_the_listed_files_agree_and_the_odd_one_is_caught(
    nginx: Nginx, tmp_path: Path
) -> None:
    """The same builds where the manifest's values lead: the rule above leaves a
    correct fleet consistent and the one serving r2's CSS a mismatch."""
    urls, run = _verify(nginx, tmp_path, "static", _fleet(tmp_path))
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    assert "agrees with 1 of its 2 sibling(s) on 1.0.0" in run.result(urls[0])["reason"]
    odd = [f for f in run.result(urls[2])["findings"] if f["kind"] == "minority-content"]
    assert [f["path"] for f in odd] == [CSS], run.explain()


def test_a_correct_fleet_agrees(nginx: Nginx, tmp_path: Path) -> None:
    roots = [_site(tmp_path, f"i{n}") for n in range(3)]
    urls, run = _verify(nginx, tmp_path, "spa", roots)
    assert run.exit_code == 0, run.explain()
    for url in urls:
        assert run.result(url)["reason"] == "agrees with its 2 sibling(s) on 1.0.0"
        assert run.result(url)["verified"], run.explain()


@pytest.mark.parametrize(
    ("template", "answer"), [("static", "answers 404"), ("spa", "answers with index.html")]
)
def test_a_file_missing_on_one_instance_is_its_mismatch(
    nginx: Nginx, tmp_path: Path, template: str, answer: str
) -> None:
    """One instance lacks the entry script its siblings serve: nginx answers 404, or
    the SPA's index.html. It is the minority, missing the file (before, a 404 was no
    answer at all and the instance "agreed with its 2 siblings")."""
    roots = [_site(tmp_path, f"i{n}") for n in range(3)]
    (roots[1] / JS).unlink()
    urls, run = _verify(nginx, tmp_path, template, roots)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "mismatch",
        urls[2]: "consistent",
    }, run.explain()
    missing = [f for f in run.result(urls[1])["findings"] if f["kind"] == "minority-content"]
    assert [f["path"] for f in missing] == [JS], run.explain()
    assert f"is missing here (it {answer}" in missing[0]["message"], run.explain()


def test_zero_config_without_a_known_manifest_says_what_to_give(
    nginx: Nginx, tmp_path: Path
) -> None:
    """Vite + Vue behind nginx as its docs say (``.vite/manifest.json`` denied as a
    dotfile), no release, no ``--manifest-path``: exit 3 naming what to give, and no
    word of a release's file list, since none was given. Before: "nothing was fetched
    to judge by" and a finding "judged by the release's file list"."""
    urls, run = _verify(nginx, tmp_path, "spa", [build("vue/v1")] * 2, *no_pages(tmp_path))
    assert run.exit_code == 3, run.explain()
    for url in urls:
        result = run.result(url)
        assert result["verdict"] == "inconclusive", run.explain()
        reason = result["reason"]
        assert reason.startswith("nothing was fetched to judge by: no release was given")
        for needed in ("--release-manifest", "artifactcheck manifest build DIST --version V"):
            assert needed in reason, reason
        assert "--manifest-path" in reason, reason
        (missing,) = [f for f in result["findings"] if f["kind"] == "manifest-missing"]
        assert "no release was given" in missing["message"], missing
    assert "release's file list" not in run.table, run.explain()
    assert "release's file list" not in json.dumps(run.doc), run.explain()


def test_another_release_served_whole_is_said_as_it_is(nginx: Nginx, tmp_path: Path) -> None:
    """webpack: the third instance serves r2's build whole while reporting 1.0.0, and
    1.0.0's entry script answers 404 there. The reason lists 2.0.0's files as 2.0.0's
    and 1.0.0's missing files apart: before, "serves 2.0.0's content:" listed 1.0.0's
    ``main.ca16dfb6.js`` among them."""
    roots = [BUILDS / "webpack-r1"] * 2 + [BUILDS / "webpack-r2"]
    releases: list[str] = []
    for name, version in (("webpack-r1", "1.0.0"), ("webpack-r2", "2.0.0")):
        releases += ["--release-manifest", str(release(BUILDS / name, version, tmp_path))]
    urls, run = _verify(nginx, tmp_path, "static", roots, *releases)
    assert run.exit_code == 1, run.explain()
    assert run.result(urls[2])["serves_version"] == "2.0.0", run.explain()
    reason = run.result(urls[2])["reason"]
    head, _, lacks = reason.partition("; ")
    assert head.startswith("reports 1.0.0 but serves 2.0.0's content: "), reason
    assert JS not in head and CSS not in head and V2_CSS in head, reason
    assert lacks.startswith("4 file(s) it lacks (404 or the fallback page): "), reason
    assert CSS in lacks and JS in lacks and V2_CSS not in lacks, reason


def test_a_cdn_difference_says_each_hash_once(nginx: Nginx, tmp_path: Path) -> None:
    """A CDN holding other bytes for the stylesheet: the table and the Markdown summary
    say the release's hash and the CDN's once each. Before: "expected (release) X, the
    CDN serves Y (expected X, got Y)"."""
    cdn_root = tmp_path / "cdn"
    shutil.copytree(BUILDS / "webpack-r1", cdn_root)
    shutil.copyfile(R2_CSS, cdn_root / CSS)
    want = hashlib.sha256((BUILDS / "webpack-r1" / CSS).read_bytes()).hexdigest()[:12]
    got = hashlib.sha256(R2_CSS.read_bytes()).hexdigest()[:12]
    urls = serve_fleet(nginx, SUBNET, "static", [BUILDS / "webpack-r1"])
    cdn = nginx.serve("127.64.1.1", "static", cdn_root)
    nginx.start()
    summary = tmp_path / "summary.md"
    run = verify(
        tmp_path / "run",
        *targets(urls, "1.0.0"),
        "--release-manifest",
        str(release(BUILDS / "webpack-r1", "1.0.0", tmp_path)),
        "--cdn",
        cdn,
        "-o",
        f"markdown={summary}",
    )
    assert run.exit_code == 1 and run.verdicts()[urls[0]] == "cdn-mismatch", run.explain()
    (finding,) = [f for f in run.findings("cdn-differs") if f["path"] == CSS]
    assert finding["message"] == (
        f"{CSS} on the CDN differs from release 1.0.0: the release has {want}, the CDN serves {got}"
    )
    flat = " ".join(run.table.split())  # the table wraps long lines
    (line,) = [s for s in re.split(r"\[\w[\w-]*\]", flat) if "on the CDN differs" in s]
    markdown = summary.read_text()
    (row,) = [s for s in markdown.splitlines() if "on the CDN differs" in s]
    for shown in (line, row):
        assert shown.count(want) == 1 and shown.count(got) == 1, shown
        assert "expected" not in shown, shown


def test_investigate_never_counts_shared_404s_as_the_same_content(
    nginx: Nginx, tmp_path: Path
) -> None:
    """``investigate`` on the fleet of the first test: its siblings answer the same
    404s, which is no content served alike. Before: "3 of those serve this content"."""
    urls = serve_fleet(nginx, SUBNET, "static", _fleet(tmp_path, under="build"))
    nginx.start()
    args = ["investigate", f"{urls[0]}=1.0.0", *targets(urls[1:], "1.0.0"), "-o", "json"]
    r = CliRunner(env={"COLUMNS": "200"}).invoke(main, args)
    assert r.exit_code == 3, r.output
    doc = json.loads(r.output)
    assert doc["siblings"]["same_version"] == 3, doc["siblings"]
    assert doc["siblings"]["same_version_same_content"] == 0, doc["siblings"]
    table = CliRunner(env={"COLUMNS": "200"}).invoke(main, args[:-2])
    flat = " ".join(table.output.split())
    assert "it serves no file to compare with them" in flat, table.output
    assert "serve this content" not in flat, table.output


def test_investigate_counts_siblings_serving_the_same_files(nginx: Nginx, tmp_path: Path) -> None:
    urls = serve_fleet(nginx, SUBNET, "static", [_site(tmp_path, f"i{n}") for n in range(3)])
    nginx.start()
    args = ["investigate", f"{urls[0]}=1.0.0", *targets(urls[1:], "1.0.0"), "-o", "json"]
    r = CliRunner(env={"COLUMNS": "200"}).invoke(main, args)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["siblings"]["same_version_same_content"] == 3, r.output
