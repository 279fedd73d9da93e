"""Vite 8 + Vue behind nginx as its docs say: ``gzip_static on``, dotfiles denied,
``try_files $uri /index.html``; ``.gz`` files made by ``gzip -k -9`` beside each asset.

nginx denies ``.vite/manifest.json`` (a dotfile), so the instances serve no manifest
and are judged by the release's file list; unknown paths answer index.html.
"""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

from layout_cli import (
    build,
    copy_build,
    no_pages,
    serve_fleet,
    start_with_cdn,
    targets,
    two_releases,
    verify,
)
from layout_nginx import Nginx

SUBNET = "127.63.0"
CDN_HOST = "127.63.1.1"
V1_ENTRY = "assets/index-DactLZJg.js"
V2_ENTRY = "assets/index-DaPUc352.js"
V2_LAZY = "assets/About-D0x3GcRG.js"  # the lazily loaded chunk, renamed in v2
SHARED_CSS = "assets/About-vXw73d3n.css"  # the same bytes in v1 and v2


def _start(nginx: Nginx, tmp: Path, roots: list[Path], cdn_lacks: str | None = None):
    return start_with_cdn(nginx, tmp, (SUBNET, "spa", roots), (CDN_HOST, "vue/v1"), cdn_lacks)


def _releases(tmp: Path) -> list[str]:
    return two_releases(tmp, "vue")


def test_fixture_is_what_the_tests_say() -> None:
    v1, v2 = build("vue/v1"), build("vue/v2")
    assert (v1 / V1_ENTRY).is_file() and (v2 / V2_ENTRY).is_file() and (v2 / V2_LAZY).is_file()
    assert (v1 / SHARED_CSS).read_bytes() == (v2 / SHARED_CSS).read_bytes()
    assert gzip.decompress((v1 / f"{V1_ENTRY}.gz").read_bytes()) == (v1 / V1_ENTRY).read_bytes()
    assert (v1 / ".vite" / "manifest.json").is_file()


def test_a_correct_vue_fleet_is_consistent(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _start(nginx, tmp_path, [build("vue/v1")] * 3)
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()


def test_a_correct_fleet_compared_in_every_coding_is_consistent(
    nginx: Nginx, tmp_path: Path
) -> None:
    """No false alarm from ``gzip_static``: asked for gzip, nginx sends the ``.gz``
    (decoded, the same bytes); asked for a ``.gz`` file itself, the file as it is;
    asked for br, which this nginx lacks, identity."""
    urls, cdn = _start(nginx, tmp_path, [build("vue/v1")] * 3)
    codings = ["--compare-encoding", "identity", "--compare-encoding", "gzip"]
    codings += ["--compare-encoding", "br"]
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn, *codings)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    # one order, whatever the flags' order: identity first, then by name
    assert run.result(urls[0])["coverage"]["encodings"] == ["identity", "br", "gzip"]


def test_a_drifted_vue_instance_alone_is_flagged(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _start(nginx, tmp_path, [build("vue/v1")] * 2 + [build("vue/v2")])
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    assert "2.0.0" in run.result(urls[2])["reason"], run.explain()


def test_a_cdn_missing_a_file_is_named(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _start(nginx, tmp_path, [build("vue/v1")] * 3, cdn_lacks=SHARED_CSS)
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert {f["path"] for f in run.findings("cdn-missing")} == {SHARED_CSS}, run.explain()
    assert set(run.verdicts().values()) == {"cdn-missing"}, run.explain()
    assert SHARED_CSS in run.table


def test_a_partial_build_is_never_called_a_release(nginx: Nginx, tmp_path: Path) -> None:
    """2.0.0's build with its lazy chunk missing (the SPA fallback answers index.html),
    reporting 1.0.0: a mix or "content differs" naming the file that fell back, never
    "serves release 2.0.0" (README: only a complete comparison names a release).

    Today: "serves release 2.0.0"."""
    partial = copy_build("vue/v2", tmp_path / "partial")
    (partial / V2_LAZY).unlink()
    (partial / f"{V2_LAZY}.gz").unlink()
    urls, cdn = _start(nginx, tmp_path, [build("vue/v1")] * 2 + [partial])
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    bad = run.result(urls[2])
    assert bad["verdict"] == "mismatch", run.explain()
    assert bad["serves_version"] is None, run.explain()
    assert "serves release 2.0.0" not in run.table, run.explain()
    assert "serves 2.0.0" not in bad["reason"], run.explain()
    assert V2_LAZY in run.table, run.explain()


def _stale_gz_fleet(nginx: Nginx, tmp: Path) -> tuple[list[str], list[str]]:
    """The third instance: 1.0.0 with a ``.gz`` left from 2.0.0 beside its entry, so
    ``gzip_static`` gives browsers 2.0.0's script while ``curl`` gets the right one."""
    stale = copy_build("vue/v1", tmp / "stale")
    v2_entry = (build("vue/v2") / V2_ENTRY).read_bytes()
    (stale / f"{V1_ENTRY}.gz").write_bytes(gzip.compress(v2_entry, 9, mtime=0))
    urls, cdn = _start(nginx, tmp, [build("vue/v1")] * 2 + [stale])
    return urls, [*targets(urls, "1.0.0"), *_releases(tmp), "--cdn", cdn]


def test_a_stale_gz_listed_in_the_release_differs_as_a_file(nginx: Nginx, tmp_path: Path) -> None:
    """The release lists the ``.gz`` files (they are in dist/): fetched as files, the
    stale one differs even when only identity is compared, and only it."""
    urls, args = _stale_gz_fleet(nginx, tmp_path)
    run = verify(tmp_path, *args)
    assert run.exit_code == 1, run.explain()
    differs = [f for f in run.result(urls[2])["findings"] if f["kind"] == "content-differs"]
    assert [f["path"] for f in differs] == [f"{V1_ENTRY}.gz"], run.explain()
    assert run.verdicts()[urls[0]] == "consistent", run.explain()


def test_a_stale_gz_is_named_with_its_encoding(nginx: Nginx, tmp_path: Path) -> None:
    """With ``--compare-encoding gzip`` the entry itself differs as browsers get it, and
    its finding says the gzip coding differs (today: only "index-….js differs")."""
    urls, args = _stale_gz_fleet(nginx, tmp_path)
    run = verify(tmp_path, *args, "--compare-encoding", "identity", "--compare-encoding", "gzip")
    assert run.exit_code == 1, run.explain()
    assert run.verdicts()[urls[2]] == "mismatch", run.explain()
    assert run.verdicts()[urls[0]] == "consistent", run.explain()
    differs = [f for f in run.result(urls[2])["findings"] if f["kind"] == "content-differs"]
    entry = [f for f in differs if f["path"] == V1_ENTRY]
    assert len(entry) == 1, run.explain()
    assert "gzip" in entry[0]["message"], run.explain()


def test_a_target_without_a_version_says_how_to_give_one(nginx: Nginx, tmp_path: Path) -> None:
    """``-t URL`` alone: inconclusive (exit 3), and the table says how to give the
    version (``URL=VERSION`` or ``--version-endpoint``), not only that there is none."""
    urls, cdn = _start(nginx, tmp_path, [build("vue/v1")])
    run = verify(tmp_path, "-t", urls[0], *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 3, run.explain()
    assert "=VERSION" in run.table or "--version-endpoint" in run.table, run.explain()


def test_siblings_that_fetched_nothing_never_agree(nginx: Nginx, tmp_path: Path) -> None:
    """No release, ``--manifest-path .vite/manifest.json``, which nginx denies (403) on
    every instance, and the third serves 2.0.0: nothing was compared, so nothing is
    ``consistent``. Today: exit 0, each "agrees with its 2 sibling(s)", "1 of 1 files"
    compared, and no asset was fetched at all (found while writing these tests)."""
    urls, _ = _start(nginx, tmp_path, [build("vue/v1")] * 2 + [build("vue/v2")])
    manifest = ["--manifest-path", ".vite/manifest.json"]
    run = verify(tmp_path, *targets(urls, "1.0.0"), *manifest, *no_pages(tmp_path))
    assert run.exit_code != 0, run.explain()
    assert "consistent" not in run.verdicts().values(), run.explain()
    assert run.exit_code == 3, run.explain()


def test_copying_the_fixture_does_not_change_it(tmp_path: Path) -> None:
    """The tests break copies only: the committed build keeps its entry's ``.gz``."""
    copy = copy_build("vue/v1", tmp_path / "c")
    (copy / f"{V1_ENTRY}.gz").unlink()
    assert (build("vue/v1") / f"{V1_ENTRY}.gz").is_file()
    shutil.rmtree(copy)


def _vite_manifest_release(tmp: Path) -> str:
    """The build's own ``.vite/manifest.json`` as the release (names, no hashes), under a
    ``{version}`` template since it declares no version."""
    target = tmp / "vite-releases" / "1.0.0" / "manifest.json"
    target.parent.mkdir(parents=True)
    shutil.copyfile(build("vue/v1") / ".vite" / "manifest.json", target)
    return str(tmp / "vite-releases" / "{version}" / "manifest.json")


def test_names_only_is_inconclusive_when_names_match(nginx: Nginx, tmp_path: Path) -> None:
    """``--allow-names-only`` with Vite's manifest: the names match, the bytes are not
    verified, so the instances are ``inconclusive`` (exit 3), not ``consistent``."""
    urls, cdn = _start(nginx, tmp_path, [build("vue/v1")] * 3)
    args = [*targets(urls, "1.0.0"), "--release-manifest", _vite_manifest_release(tmp_path)]
    run = verify(tmp_path, *args, "--allow-names-only", "--cdn", cdn)
    assert run.exit_code == 3, run.explain()
    assert set(run.verdicts().values()) == {"inconclusive"}, run.explain()
    assert "names only" in run.table, run.explain()


def test_names_only_still_catches_renamed_files(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _start(nginx, tmp_path, [build("vue/v1")] * 2 + [build("vue/v2")])
    args = [*targets(urls, "1.0.0"), "--release-manifest", _vite_manifest_release(tmp_path)]
    run = verify(tmp_path, *args, "--allow-names-only", "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts()[urls[2]] == "mismatch", run.explain()
    assert run.verdicts()[urls[0]] == "inconclusive", run.explain()


def test_allow_names_only_help_says_it_cannot_exit_0() -> None:
    """The help of ``--allow-names-only`` says a names-only run never
    exits 0 (today it does not)."""
    from click.testing import CliRunner

    from artifactcheck.cli.main import main

    text = CliRunner(env={"COLUMNS": "200"}).invoke(main, ["verify", "--help"]).output
    start = text.index("--allow-names-only")
    option = " ".join(text[start : text.index("\n  -", start + 1)].split())  # unwrapped
    assert re.search(r"never exits? 0", option), option


def test_instances_behind_basic_auth_are_inconclusive(nginx: Nginx, tmp_path: Path) -> None:
    """A staging fleet behind HTTP basic auth answers 401 to everything: nothing can be
    judged, so ``inconclusive`` (exit 3), never a mismatch for the one on 2.0.0."""
    urls = serve_fleet(
        nginx, "127.63.2", "auth", [build("vue/v1"), build("vue/v1"), build("vue/v2")]
    )
    cdn = nginx.serve(CDN_HOST, "static", copy_build("vue/v1", tmp_path / "cdn"))
    nginx.start()
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 3, run.explain()
    assert set(run.verdicts().values()) == {"inconclusive"}, run.explain()
    assert "401" in run.table, run.explain()
