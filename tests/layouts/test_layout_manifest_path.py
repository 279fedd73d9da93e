"""``--manifest-path``: from the target's root when it starts with ``/``, else under the
prefix; a manifest found is never looked for again under a prefix learned from it; a
message names the path the server was asked for, with the status it sent.

Real builds behind nginx: Sprockets' ``public/assets`` under ``/assets/`` (conf/rails.conf,
the manifest named ``.sprockets-manifest-<hex>.json``), Encore's ``public/build`` under
``/build/`` (conf/encore.conf).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from layout_cli import FRAMEWORKS, build, release, serve_fleet, targets, verify
from layout_nginx import Nginx

SUBNET = "127.74.2"
SPROCKETS = FRAMEWORKS.parent / "builds" / "sprockets-r1"


def _sprockets_name() -> str:
    (found,) = sorted(p.name for p in SPROCKETS.glob(".sprockets-manifest-*.json"))
    return found


def _rails(nginx: Nginx, tmp: Path) -> list[str]:
    roots = []
    for i in (1, 2):
        root = tmp / f"rails{i}"
        shutil.copytree(SPROCKETS, root / "assets")
        roots.append(root)
    urls = serve_fleet(nginx, SUBNET, "rails", roots)
    nginx.start()
    return urls


def _encore(nginx: Nginx, tmp: Path, count: int = 3) -> list[str]:
    roots = []
    for i in range(1, count + 1):
        root = tmp / f"public{i}"
        shutil.copytree(build("encore/r1"), root / "build")
        roots.append(root)
    urls = serve_fleet(nginx, SUBNET, "encore", roots)
    nginx.start()
    return urls


@pytest.mark.parametrize(
    "args",
    [
        ["--manifest-path", "/assets/{name}"],
        ["--manifest-path", "/assets/{name}", "--prefix", "/assets/"],
        ["--manifest-path", "{name}", "--prefix", "/assets/"],
        ["--manifest-path", "assets/{name}"],
    ],
    ids=["from-root", "from-root-with-prefix", "under-prefix", "relative-prefix-detected"],
)
def test_a_sprockets_manifest_named_by_path_is_read_where_it_is(
    nginx: Nginx, tmp_path: Path, args: list[str]
) -> None:
    """Today ``/assets/.sprockets-manifest-….json`` is read (200), then
    ``/assets/assets/…`` asked: exit 3 "answers HTTP 404"."""
    urls = _rails(nginx, tmp_path)
    name = _sprockets_name()
    given = [a.format(name=name) for a in args]
    rel = release(SPROCKETS, "1.0.0", tmp_path)
    run = verify(tmp_path, *targets(urls, "1.0.0"), "--release-manifest", str(rel), *given)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    assert {run.result(u)["manifest"]["status"] for u in urls} == {200}, run.explain()
    assert nginx.requests_for(f"/assets/assets/{name}") == 0
    assert not [line for line in nginx_log(nginx) if "/assets/assets/" in line]


def nginx_log(nginx: Nginx) -> list[str]:
    log = nginx.workdir / "access.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_missing_manifest_names_the_path_asked_with_its_status(
    nginx: Nginx, tmp_path: Path
) -> None:
    """A wrong name: the message says 404 for the very path that answered 404."""
    urls = _rails(nginx, tmp_path)
    rel = release(SPROCKETS, "1.0.0", tmp_path)
    wrong = "/assets/.sprockets-manifest-0000.json"
    run = verify(
        tmp_path,
        *targets(urls, "1.0.0"),
        "--release-manifest",
        str(rel),
        "--manifest-path",
        wrong,
    )
    assert run.exit_code != 1, run.explain()
    for url in urls:
        said = run.result(url)["manifest"]["error"]
        assert said == f"served manifest {wrong} answers HTTP 404", run.explain()
    assert "/assets/assets/" not in run.table, run.explain()
    assert nginx.requests_for(wrong) >= 2
    assert not [line for line in nginx_log(nginx) if "/assets/assets/" in line]


@pytest.mark.parametrize("given", ["/build/manifest.json", "build/manifest.json"])
def test_an_encore_manifest_named_from_the_root_without_a_release(
    nginx: Nginx, tmp_path: Path, given: str
) -> None:
    """Laravel's and Encore's layout, siblings only: the manifest at ``/build/manifest.json``
    lists ``/build/...``; the prefix ``build/`` is learned from it, and the manifest is
    not looked for again at ``/build/build/manifest.json`` (today: exit 3, "answers 404")."""
    urls = _encore(nginx, tmp_path)
    run = verify(tmp_path, *targets(urls, "1.0.0"), "--manifest-path", given)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    assert "manifest.json answers 404" not in run.table, run.explain()
    assert not [line for line in nginx_log(nginx) if "/build/build/" in line]


def test_an_unknown_served_manifest_named_by_path_is_compared_as_a_file(
    nginx: Nginx, tmp_path: Path
) -> None:
    """Encore's ``entrypoints.json`` is no build manifest artifactcheck reads: named with
    ``--manifest-path`` it is a file of the release like any other, equal here, and
    the report says it was not read (today: exit 1, "content differs")."""
    urls = _encore(nginx, tmp_path, count=2)
    rel = release(build("encore/r1"), "1.0.0", tmp_path)
    run = verify(
        tmp_path,
        *targets(urls, "1.0.0"),
        "--release-manifest",
        str(rel),
        "--prefix",
        "/build/",
        "--manifest-path",
        "/build/entrypoints.json",
    )
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    for url in urls:
        result = run.result(url)
        assert "content-differs" not in {f["kind"] for f in result["findings"]}
        (note,) = [f["message"] for f in result["findings"] if f["kind"] == "manifest-missing"]
        assert note.startswith("served manifest /build/entrypoints.json is not a build manifest")
    assert nginx.requests_for("/build/entrypoints.json") == 2  # read once, compared as read


def test_a_sprockets_manifest_is_found_by_the_name_the_release_lists(
    nginx: Nginx, tmp_path: Path
) -> None:
    """Sprockets 3/4 names its manifest ``.sprockets-manifest-<hex>.json``: no well-known
    name holds it, the release lists it (today: never discovered)."""
    urls = _rails(nginx, tmp_path)
    rel = release(SPROCKETS, "1.0.0", tmp_path)
    run = verify(
        tmp_path, *targets(urls, "1.0.0"), "--release-manifest", str(rel), "--prefix", "/assets/"
    )
    assert run.exit_code == 0, run.explain()
    for url in urls:
        manifest = run.result(url)["manifest"]
        assert (manifest["format"], manifest["status"]) == ("sprockets", 200), run.explain()
        assert manifest["path"] == _sprockets_name()
    assert not run.findings("manifest-missing"), run.explain()


def test_a_missing_sprockets_manifest_is_one_line_naming_it(nginx: Nginx, tmp_path: Path) -> None:
    urls = _rails(nginx, tmp_path)
    name = _sprockets_name()
    for i in (1, 2):
        (tmp_path / f"rails{i}" / "assets" / name).unlink()
    rel = release(SPROCKETS, "1.0.0", tmp_path)
    run = verify(
        tmp_path, *targets(urls, "1.0.0"), "--release-manifest", str(rel), "--prefix", "/assets/"
    )
    assert run.exit_code != 0, run.explain()  # a file of the release is missing
    for url in urls:
        (line,) = [
            f["message"] for f in run.result(url)["findings"] if f["kind"] == "manifest-missing"
        ]
        assert "\n" not in line and len(line) < 300, line
        assert line.startswith(f"no served manifest: {name}, "), line


def test_a_release_without_a_build_manifest_gets_no_manifest_warning(
    nginx: Nginx, tmp_path: Path
) -> None:
    """Encore's build less its two JSON files: nothing to miss, nothing said."""
    dist = tmp_path / "dist"
    shutil.copytree(build("encore/r1"), dist)
    for name in ("manifest.json", "entrypoints.json"):
        (dist / name).unlink()
    roots = []
    for i in (1, 2):
        shutil.copytree(dist, tmp_path / f"public{i}" / "build")
        roots.append(tmp_path / f"public{i}")
    urls = serve_fleet(nginx, SUBNET, "encore", roots)
    nginx.start()
    rel = release(dist, "1.0.0", tmp_path)
    run = verify(
        tmp_path, *targets(urls, "1.0.0"), "--release-manifest", str(rel), "--prefix", "/build/"
    )
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    assert not run.findings("manifest-missing"), run.explain()
    assert "manifest" not in run.table, run.explain()
