"""Rails (Sprockets) behind Apache httpd as the Rails asset pipeline guide configures it.

``RAILS_ENV=production rails assets:precompile`` writes ``public/assets/`` with each
digested file and its ``.gz`` beside it; Apache rewrites a gzip-accepting request to
the ``.gz`` and labels every ``*.css.gz``/``*.js.gz`` ``Content-Encoding: gzip``, also
to a client that asks for the ``.gz`` itself with ``Accept-Encoding: identity``. The
README's commands: ``manifest build public/assets --version 1.0.0``, then ``verify
... --prefix /assets/``, on three instances and a CDN (another Apache) under
``/assets/``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from layout_apache import Apache
from layout_cli import build, release, targets, verify

SUBNET = "127.64.1"
CDN_HOST = "127.64.2.1"


def _assets(name: str) -> Path:
    return build(f"rails/{name}") / "assets"


def _one(name: str, pattern: str) -> str:
    (found,) = sorted(p.name for p in _assets(name).glob(pattern))
    return found


R1_CSS = _one("r1", "application-*.css")
R2_CSS = _one("r2", "application-*.css")


@pytest.fixture
def apache() -> Iterator[Apache]:
    server = Apache()
    try:
        yield server
    finally:
        server.stop()


def _r2_css_under_r1(tmp: Path) -> Path:
    """r1's public/ with r1's stylesheet (and its .gz) holding r2's bytes: a rebuild
    that changed the CSS under the name r1 gave it."""
    root = tmp / "drifted"
    shutil.copytree(build("rails/r1"), root)
    for suffix in ("", ".gz"):
        shutil.copyfile(_assets("r2") / f"{R2_CSS}{suffix}", root / "assets" / f"{R1_CSS}{suffix}")
    return root


def _start(apache: Apache, roots: list[Path]) -> tuple[list[str], str]:
    urls = [apache.serve(f"{SUBNET}.{i}", root) for i, root in enumerate(roots, start=1)]
    cdn = apache.serve(CDN_HOST, build("rails/r1"))
    apache.start()
    return urls, f"{cdn}assets/"


def _release(tmp: Path) -> list[str]:
    """``artifactcheck manifest build public/assets --version 1.0.0``."""
    return ["--release-manifest", str(release(_assets("r1"), "1.0.0", tmp))]


def test_fixture_is_what_the_tests_say() -> None:
    """Rails' own output: digested files, a Sprockets .gz beside each CSS and JS (its
    decoded bytes the file's), the Sprockets manifest; r2 changed the CSS and JS."""
    for name in ("r1", "r2"):
        css = _assets(name) / _one(name, "application-*.css")
        assert gzip.decompress(Path(f"{css}.gz").read_bytes()) == css.read_bytes()
        assert _one(name, ".sprockets-manifest-*.json")
        assert _one(name, "application-*.js.gz")
    assert R1_CSS != R2_CSS
    assert b"release v1" in (_assets("r1") / R1_CSS).read_bytes()
    assert b"release v2" in (_assets("r2") / R2_CSS).read_bytes()


def test_manifest_build_records_the_gz_as_an_encoding_of_its_file(tmp_path: Path) -> None:
    doc = json.loads(release(_assets("r1"), "1.0.0", tmp_path).read_text())
    assert not [p for p in doc["files"] if p.endswith(".gz")], doc
    css = doc["files"][R1_CSS]
    stored = (_assets("r1") / f"{R1_CSS}.gz").read_bytes()
    assert css["encodings"]["gzip"]["size"] == len(stored)
    assert set(css["encodings"]) == {"gzip"}


@pytest.mark.parametrize(
    "codings",
    [[], ["--compare-encoding", "identity", "--compare-encoding", "gzip"]],
    ids=["identity", "identity+gzip"],
)
def test_a_correct_rails_fleet_is_consistent(
    apache: Apache, tmp_path: Path, codings: list[str]
) -> None:
    urls, cdn = _start(apache, [build("rails/r1")] * 3)
    args = [*targets(urls, "1.0.0"), *_release(tmp_path), "--prefix", "/assets/", *codings]
    run = verify(tmp_path, *args, "--cdn", cdn)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    asked = [line for line in apache.access() if ".gz " in line]
    assert all(line.endswith(" 200 gzip") for line in asked), asked


def test_a_release_listing_the_gz_files_is_judged_by_their_stored_bytes(
    apache: Apache, tmp_path: Path
) -> None:
    """A release that lists ``x.css.gz`` as a file (written before encodings were
    recorded, or by any tool hashing the directory): Apache answers it labelled gzip,
    even to identity, and its stored bytes are the release's (a correct fleet is
    consistent, the CDN too); the drifted instance's .gz differs as stored."""
    old = {"schema": "artifactcheck/release-manifest/v1", "version": "1.0.0", "files": {}}
    for path in sorted(_assets("r1").iterdir()):
        data = path.read_bytes()
        old["files"][path.name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    assert f"{R1_CSS}.gz" in old["files"]
    listed = tmp_path / "release-listed.json"
    listed.write_text(json.dumps(old))
    urls, cdn = _start(apache, [build("rails/r1")] * 2 + [_r2_css_under_r1(tmp_path)])
    args = [*targets(urls, "1.0.0"), "--release-manifest", str(listed), "--prefix", "/assets/"]
    run = verify(tmp_path, *args, "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts()[urls[0]] == "consistent", run.explain()
    assert run.verdicts()[urls[1]] == "consistent", run.explain()
    bad = run.result(urls[2])
    assert bad["verdict"] == "mismatch", run.explain()
    differs = sorted(f["path"] for f in bad["findings"] if f["kind"] == "content-differs")
    assert differs == [R1_CSS, f"{R1_CSS}.gz"], run.explain()
    assert not run.findings("cdn-differs"), run.explain()


def test_r2_css_under_r1_is_flagged_naming_the_file(apache: Apache, tmp_path: Path) -> None:
    urls, cdn = _start(apache, [build("rails/r1")] * 2 + [_r2_css_under_r1(tmp_path)])
    args = [*targets(urls, "1.0.0"), *_release(tmp_path), "--prefix", "/assets/"]
    run = verify(tmp_path, *args, "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    differs = {
        f["path"]: f for f in run.result(urls[2])["findings"] if f["kind"] == "content-differs"
    }
    # the stylesheet, and its .gz asked for by name: judged as stored, and said so
    assert sorted(differs) == [R1_CSS, f"{R1_CSS}.gz"], run.explain()
    assert "its stored gzip bytes" in differs[f"{R1_CSS}.gz"]["message"], run.explain()
    assert "once decoded" not in differs[f"{R1_CSS}.gz"]["message"], run.explain()
    assert R1_CSS in run.table, run.explain()


def test_a_stale_gz_is_caught_in_every_coding_order(apache: Apache, tmp_path: Path) -> None:
    """r1 with its stylesheet right but its ``.gz`` left from r2: browsers get r2's
    CSS. Asked for by name, the ``.gz`` differs as stored; compared in gzip, the
    stylesheet differs as browsers get it; the same in both orders of the codings."""
    stale = tmp_path / "stale"
    shutil.copytree(build("rails/r1"), stale)
    shutil.copyfile(_assets("r2") / f"{R2_CSS}.gz", stale / "assets" / f"{R1_CSS}.gz")
    urls, cdn = _start(apache, [build("rails/r1")] * 2 + [stale])
    base = [*targets(urls, "1.0.0"), *_release(tmp_path), "--prefix", "/assets/", "--cdn", cdn]
    plain = verify(tmp_path / "identity", *base)
    assert plain.exit_code == 1, plain.explain()
    differs = [f["path"] for f in plain.findings("content-differs")]
    assert differs == [f"{R1_CSS}.gz"], plain.explain()
    for order in (("identity", "gzip"), ("gzip", "identity")):
        flags = [arg for coding in order for arg in ("--compare-encoding", coding)]
        run = verify(tmp_path / "-".join(order), *base, *flags)
        assert run.exit_code == 1, run.explain()
        assert run.verdicts()[urls[2]] == "mismatch", run.explain()
        assert run.verdicts()[urls[0]] == "consistent", run.explain()
        found = {f["path"]: f["message"] for f in run.findings("content-differs")}
        assert sorted(found) == [R1_CSS, f"{R1_CSS}.gz"], run.explain()
        assert "gzip-encoded" in found[R1_CSS], run.explain()
