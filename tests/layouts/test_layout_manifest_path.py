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
    assert "404" not in run.table, run.explain()
    assert not [line for line in nginx_log(nginx) if "/build/build/" in line]
