"""The page as a source: sites with no manifest artifactcheck knows, judged by what their
pages load, with the README's commands against real servers.

Hugo, MkDocs and Parcel builds (tests/fixtures/frameworks, built by the real tools) ship
no build manifest: with no release, siblings reporting one version are compared on the
files their entry pages load (the pages' own bytes are not compared: they may carry
nonces). nginx serves them; Apache httpd serves one fleet too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from layout_apache import Apache
from layout_cli import build, release, serve_fleet, start_with_cdn, targets, verify
from layout_nginx import Nginx

from artifactcheck.cli.main import main

SUBNET = "127.64.33"

HUGO_CSS = (
    "css/site.min.69898cfb34f19c1a166ad84820ba98a4d94fe939af08bee3153972984d8ab02cc"
    "ee8e94b6f0222c71c2e10226f7f8930.css"
)

#: framework -> (a file its entry page loads, another entry page)
SITES = {
    "hugo": (HUGO_CSS, "/about/"),
    "mkdocs": ("css/extra.css", "/guide/"),
    "parcel": ("site.c9cd6bc0.css", "/login.html"),
}


def _fleet(tmp: Path, framework: str, drifted: str | None = None) -> list[Path]:
    """Three copies of v1; the third changed as ``drifted`` says: ``"file"`` (one byte
    of a file its page loads) or ``"v2"`` (v2's build under v1's version)."""
    roots = []
    for n in range(3):
        name = f"{framework}/v2" if drifted == "v2" and n == 2 else f"{framework}/v1"
        root = tmp / f"i{n}"
        shutil.copytree(build(name), root)
        roots.append(root)
    if drifted == "file":
        target = roots[2] / SITES[framework][0]
        target.write_bytes(target.read_bytes() + b"\n/* drifted */\n")
    return roots


def _errors(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings that make an instance wrong (a missing build manifest is information
    on a site whose pages name its files)."""
    return [f for f in result["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("framework", sorted(SITES))
def test_a_correct_fleet_agrees_on_what_its_pages_load(
    nginx: Nginx, tmp_path: Path, framework: str
) -> None:
    """Before: exit 3, "nothing was fetched to judge by". Now each agrees with its two
    siblings on the files its pages load: exit 0."""
    urls = serve_fleet(nginx, SUBNET, "static", _fleet(tmp_path, framework))
    nginx.start()
    run = verify(tmp_path / "run", *targets(urls, "1.0.0"))
    assert run.exit_code == 0, run.explain()
    for url in urls:
        result = run.result(url)
        assert result["verdict"] == "consistent", run.explain()
        assert "agrees with its 2 sibling(s) on 1.0.0" in result["reason"], run.explain()
        assert [f for f in result["findings"] if f["severity"] != "info"] == []


@pytest.mark.parametrize("framework", sorted(SITES))
def test_a_drifted_file_is_named_with_the_page_that_loads_it(
    nginx: Nginx, tmp_path: Path, framework: str
) -> None:
    """One file a page loads differs on the third instance: it is the mismatch, named
    with the file and the entry page; its siblings stay consistent."""
    path, _ = SITES[framework]
    urls = serve_fleet(nginx, SUBNET, "static", _fleet(tmp_path, framework, "file"))
    nginx.start()
    run = verify(tmp_path / "run", *targets(urls, "1.0.0"))
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    found = _errors(run.result(urls[2]))
    # Hugo's page carries the stylesheet's sha384: the changed bytes fail it too
    kinds = (
        ["integrity-failed", "minority-content"] if framework == "hugo" else ["minority-content"]
    )
    assert sorted(f["kind"] for f in found) == kinds, found
    (finding,) = [f for f in found if f["kind"] == "minority-content"]
    assert finding["path"] == path
    assert "loaded by /" in finding["message"], finding
    assert path in run.table
    assert path in run.result(urls[2])["pages"]["loaded_by"]["/"]


@pytest.mark.parametrize("framework", ["hugo", "parcel"])
def test_an_instance_serving_another_build_is_named_by_what_its_page_loads(
    nginx: Nginx, tmp_path: Path, framework: str
) -> None:
    """The third serves v2's build while saying 1.0.0: its page loads a script no
    sibling's page loads, and not theirs. Both are said; the siblings are consistent."""
    urls = serve_fleet(nginx, SUBNET, "static", _fleet(tmp_path, framework, "v2"))
    nginx.start()
    run = verify(tmp_path / "run", *targets(urls, "1.0.0"))
    assert run.exit_code == 1, run.explain()
    assert run.verdicts()[urls[2]] == "mismatch", run.explain()
    assert run.verdicts()[urls[0]] == run.verdicts()[urls[1]] == "consistent", run.explain()
    messages = [f["message"] for f in run.result(urls[2])["findings"]]
    assert any("is not loaded by its pages" in m for m in messages), messages
    assert any("is loaded by its pages (loaded by /" in m for m in messages), messages


def test_the_extra_entry_page_is_read_and_named(nginx: Nginx, tmp_path: Path) -> None:
    """``--page /login.html``: Parcel's login script, loaded only by that page, is
    compared too, and a drift there is named with that page."""
    roots = _fleet(tmp_path, "parcel")
    login = roots[2] / "login.361e08be.js"
    login.write_bytes(login.read_bytes() + b"\n")
    urls = serve_fleet(nginx, SUBNET, "static", roots)
    nginx.start()
    without = verify(tmp_path / "without", *targets(urls, "1.0.0"))
    assert without.exit_code == 0, without.explain()
    run = verify(tmp_path / "run", *targets(urls, "1.0.0"), "--page", "/login.html")
    assert run.exit_code == 1, run.explain()
    (finding,) = _errors(run.result(urls[2]))
    assert finding["path"] == "login.361e08be.js"
    assert "loaded by /login.html" in finding["message"], finding


def test_apache_serves_a_fleet_judged_by_its_pages(tmp_path: Path) -> None:
    """The same judgement from Apache httpd: a drifted MkDocs stylesheet is named."""
    apache = Apache()
    try:
        roots = _fleet(tmp_path, "mkdocs", "file")
        hosts = enumerate(roots, start=1)
        urls = [apache.serve(f"{SUBNET}.{i}", root, extra="") for i, root in hosts]
        apache.start()
        run = verify(tmp_path / "run", *targets(urls, "1.0.0"))
    finally:
        apache.stop()
    assert run.exit_code == 1, run.explain()
    assert run.verdicts()[urls[2]] == "mismatch", run.explain()
    assert [f["path"] for f in _errors(run.result(urls[2]))] == ["css/extra.css"]


def _broken_hugo(tmp: Path) -> Path:
    """Hugo's v1 build whose script was changed after the page's integrity= was written
    (a rebuilt file, a CDN's minifier): browsers refuse it."""
    root = tmp / "broken"
    shutil.copytree(build("hugo/v1"), root)
    (script,) = (root / "js").glob("app.min.*.js")
    script.write_bytes(script.read_bytes() + b"\n// changed after the build\n")
    return root


@pytest.mark.parametrize("with_release", [False, True], ids=["siblings", "release"])
def test_an_asset_failing_its_pages_integrity_is_wrong_with_or_without_a_release(
    nginx: Nginx, tmp_path: Path, with_release: bool
) -> None:
    """Every instance serves the same script, which fails the sha512 integrity= Hugo
    wrote in the page: siblings agree and the release (made from these very files)
    agrees, and still each instance is a mismatch naming the script and the page."""
    broken = _broken_hugo(tmp_path)
    urls = serve_fleet(nginx, SUBNET, "static", [broken] * 2)
    nginx.start()
    args = [*targets(urls, "1.0.0")]
    if with_release:
        args += ["--release-manifest", str(release(broken, "1.0.0", tmp_path))]
    run = verify(tmp_path / "run", *args)
    assert run.exit_code == 1, run.explain()
    assert set(run.verdicts().values()) == {"mismatch"}, run.explain()
    for url in urls:
        (finding,) = _errors(run.result(url))
        assert finding["kind"] == "integrity-failed", finding
        assert finding["path"].startswith("js/app.min."), finding
        assert "integrity= of page /" in finding["message"], finding
        assert finding["expected"].startswith("sha512-"), finding


def test_a_file_its_page_loads_that_the_release_lacks_is_named(
    nginx: Nginx, tmp_path: Path
) -> None:
    """Release 1.0.0 is Parcel's v1 build (``manifest build``: every file); the third
    instance says 1.0.0 and serves v2, whose page loads a script v1 does not have."""
    urls = serve_fleet(nginx, SUBNET, "static", _fleet(tmp_path, "parcel", "v2"))
    nginx.start()
    given = ["--release-manifest", str(release(build("parcel/v1"), "1.0.0", tmp_path))]
    run = verify(tmp_path / "run", *targets(urls, "1.0.0"), *given)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts()[urls[2]] == "mismatch", run.explain()
    unexpected = [f for f in _errors(run.result(urls[2])) if f["kind"] == "file-unexpected"]
    assert [f["path"] for f in unexpected] == ["site.6dd949bd.js"], run.explain()
    assert "is loaded by / but is not part of release 1.0.0" in unexpected[0]["message"]


@pytest.mark.parametrize("with_release", [False, True], ids=["siblings", "release"])
def test_a_file_its_page_loads_that_the_cdn_lacks_is_cdn_missing(
    nginx: Nginx, tmp_path: Path, with_release: bool
) -> None:
    """The seed's symptom seen from the page: the CDN lacks the stylesheet every
    instance's page loads. No manifest names it; the page does: ``cdn-missing``, exit 1."""
    urls, cdn = start_with_cdn(
        nginx,
        tmp_path,
        (SUBNET, "static", _fleet(tmp_path, "parcel")),
        ("127.64.34.1", "parcel/v1"),
        cdn_lacks="site.c9cd6bc0.css",
    )
    args = [*targets(urls, "1.0.0"), "--cdn", cdn]
    if with_release:
        args += ["--release-manifest", str(release(build("parcel/v1"), "1.0.0", tmp_path))]
    run = verify(tmp_path / "run", *args)
    assert run.exit_code == 1, run.explain()
    assert set(run.verdicts().values()) == {"cdn-missing"}, run.explain()
    assert "site.c9cd6bc0.css" in {f["path"] for f in run.findings("cdn-missing")}


def test_a_cross_origin_reference_is_never_requested(nginx: Nginx, tmp_path: Path) -> None:
    """A page loading a script from another origin, and a page whose ``<base href>``
    moves its relative references there: the other server receives nothing."""
    other_root = tmp_path / "other"
    other_root.mkdir()
    (other_root / "bait.js").write_text("// other origin\n")
    (other_root / "based.css").write_text("/* other origin */\n")
    other = nginx.serve("127.64.36.9", "static", other_root)
    roots = _fleet(tmp_path, "parcel")
    for root in roots:
        page = (root / "index.html").read_text()
        (root / "index.html").write_text(
            page.replace("<body>", f'<body><script src="{other}bait.js"></script>', 1)
        )
        (root / "based.html").write_text(
            f'<!doctype html><base href="{other}"><link rel=stylesheet href=based.css>'
        )
    urls = serve_fleet(nginx, SUBNET, "static", roots)
    nginx.start()
    run = verify(tmp_path / "run", *targets(urls, "1.0.0"), "--page", "/based.html")
    assert run.exit_code == 0, run.explain()
    assert nginx.requests_for("/based.html") == 3  # the page itself was read
    assert nginx.requests_for("/bait.js") == 0
    assert nginx.requests_for("/based.css") == 0


def test_investigate_says_which_page_loads_each_file(nginx: Nginx, tmp_path: Path) -> None:
    """``investigate``'s table and JSON name the entry page of each file."""
    urls = serve_fleet(nginx, SUBNET, "static", _fleet(tmp_path, "parcel"))
    nginx.start()
    given = ["--release-manifest", str(release(build("parcel/v1"), "1.0.0", tmp_path))]
    args = ["investigate", f"{urls[0]}=1.0.0", *given, "--page", "/login.html"]
    runner = CliRunner(env={"COLUMNS": "200"})
    out = runner.invoke(main, [*args, "-o", "json"])
    assert out.exit_code == 0, out.output
    rows = {a["path"]: a["loaded_by"] for a in json.loads(out.stdout)["assets"]}
    assert rows["login.361e08be.js"] == ["/login.html"], rows
    assert rows["site.c9cd6bc0.css"] == ["/", "/login.html"], rows
    table = runner.invoke(main, args)
    assert "login.361e08be.js (loaded by /login.html)" in table.stdout, table.stdout


def test_a_pages_query_string_stays_in_the_request(nginx: Nginx, tmp_path: Path) -> None:
    """``site.css?v=2`` is asked for with its query (a CDN or a server may answer by
    it) and matched with the file ``site.css`` without it."""
    roots = _fleet(tmp_path, "parcel")
    for root in roots:
        page = (root / "index.html").read_text()
        (root / "index.html").write_text(page.replace("site.c9cd6bc0.css", "site.c9cd6bc0.css?v=2"))
    urls = serve_fleet(nginx, SUBNET, "static", roots)
    nginx.start()
    given = ["--release-manifest", str(release(roots[0], "1.0.0", tmp_path))]
    run = verify(tmp_path / "run", *targets(urls, "1.0.0"), *given)
    assert run.exit_code == 0, run.explain()
    # on each instance, read as a stylesheet (what it loads) and hashed as a file
    assert nginx.requests_for("/site.c9cd6bc0.css?v=2") == 6
    assert nginx.requests_for("/site.c9cd6bc0.css") == 0
    assert "site.c9cd6bc0.css" in run.result(urls[0])["pages"]["loaded_by"]["/"]
