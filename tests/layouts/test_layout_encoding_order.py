"""``--compare-encoding identity --compare-encoding gzip`` on a real nginx with
``gzip_static on``, in both orders: every coding is judged on its own.

Vite 8 + Vue (``gzip -k`` beside each asset). Two ways one instance goes wrong: its
plain entry replaced by 2.0.0's while its ``.gz`` was left as 1.0.0's (right for
browsers, wrong for ``curl``), or the reverse, a stale ``.gz``. Either is a mismatch
naming the entry, whichever order the codings are given in, with a release and with
siblings only; the two correct instances stay consistent.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from layout_cli import build, copy_build, release, serve_fleet, targets, verify
from layout_nginx import Nginx

SUBNET = "127.63.8"
CDN_HOST = "127.63.9.1"
ENTRY = "assets/index-DactLZJg.js"  # vue/v1's entry
V2_ENTRY = "assets/index-DaPUc352.js"
ORDERS = [("identity", "gzip"), ("gzip", "identity")]


def _flags(order: tuple[str, ...]) -> list[str]:
    return [arg for coding in order for arg in ("--compare-encoding", coding)]


def _odd_instance(tmp: Path, which: str) -> Path:
    """vue/v1 with its entry wrong in one coding: ``plain`` replaced by 2.0.0's bytes
    (the ``.gz`` left as it was), or ``gz`` stale (2.0.0's bytes, compressed)."""
    root = copy_build("vue/v1", tmp / f"odd-{which}")
    v2_entry = (build("vue/v2") / V2_ENTRY).read_bytes()
    if which == "plain":
        (root / ENTRY).write_bytes(v2_entry)
    else:
        (root / f"{ENTRY}.gz").write_bytes(gzip.compress(v2_entry, 9, mtime=0))
    return root


def _fleet(nginx: Nginx, tmp: Path, which: str) -> tuple[list[str], str]:
    roots = [build("vue/v1"), build("vue/v1"), _odd_instance(tmp, which)]
    urls = serve_fleet(nginx, SUBNET, "precompressed", roots)
    cdn = nginx.serve(CDN_HOST, "static", build("vue/v1"))
    nginx.start()
    return urls, cdn


def test_the_fixture_is_what_the_tests_say(tmp_path: Path) -> None:
    """The plain-replaced instance is right for gzip, wrong for identity; the stale one
    the reverse."""
    v1 = build("vue/v1")
    plain, stale = _odd_instance(tmp_path, "plain"), _odd_instance(tmp_path, "gz")
    assert gzip.decompress((plain / f"{ENTRY}.gz").read_bytes()) == (v1 / ENTRY).read_bytes()
    assert (plain / ENTRY).read_bytes() != (v1 / ENTRY).read_bytes()
    assert gzip.decompress((stale / f"{ENTRY}.gz").read_bytes()) != (v1 / ENTRY).read_bytes()
    assert (stale / ENTRY).read_bytes() == (v1 / ENTRY).read_bytes()


@pytest.mark.parametrize("which", ["plain", "gz"])
def test_with_a_release_both_orders_flag_the_entry(
    nginx: Nginx, tmp_path: Path, which: str
) -> None:
    urls, cdn = _fleet(nginx, tmp_path, which)
    rel = ["--release-manifest", str(release(build("vue/v1"), "1.0.0", tmp_path))]
    runs = []
    for order in ORDERS:
        run = verify(tmp_path / "-".join(order), *targets(urls, "1.0.0"), *rel, *_flags(order))
        assert run.exit_code == 1, run.explain()
        assert run.verdicts() == {urls[0]: "consistent", urls[1]: "consistent", urls[2]: "mismatch"}
        odd = run.result(urls[2])
        differs = [f["path"] for f in odd["findings"] if f["kind"] == "content-differs"]
        assert ENTRY in differs, run.explain()
        assert odd["coverage"]["encodings"] == ["identity", "gzip"], run.explain()
        runs.append(run)
    assert runs[0].verdicts() == runs[1].verdicts()


@pytest.mark.parametrize("which", ["plain", "gz"])
def test_siblings_only_both_orders_find_the_minority(
    nginx: Nginx, tmp_path: Path, which: str
) -> None:
    """No release: the siblings' served manifest (``.vite/manifest.json``) names the
    files; the odd instance is the minority on its entry in either order, also with
    a CDN to check."""
    urls, cdn = _fleet(nginx, tmp_path, which)
    for order in ORDERS:
        for extra in ([], ["--cdn", cdn]):
            run = verify(
                tmp_path / "-".join(order), *targets(urls, "1.0.0"), *extra, *_flags(order)
            )
            assert run.exit_code == 1, run.explain()
            assert run.verdicts()[urls[2]] == "mismatch", run.explain()
            assert run.verdicts()[urls[0]] == "consistent", run.explain()
            minority = [f["path"] for f in run.findings("minority-content")]
            assert minority == [ENTRY], run.explain()
