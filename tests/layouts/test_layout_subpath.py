"""An app under a sub-path: Angular 20 built with ``ng build --base-href /app/`` and
served at ``/app/`` of a shared host whose root redirects there, with the SPA fallback
the app's own ``/app/index.html``; the CDN holds the build under ``/app/`` too.

The user must give the prefix here (the app lives at ``/app/``): targets and ``--cdn``
are ``.../app/``. ``ngsw.json``'s URLs carry the base href (``/app/main-….js``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from layout_cli import build, ngsw_release, release, targets, verify
from layout_nginx import Nginx

SUBNET = "127.67.0"
CDN_HOST = "127.67.1.1"
POLYFILLS = "polyfills-5CFQRCPP.js"


def _site(tmp: Path, name: str, build_name: str) -> Path:
    """A document root holding the build at ``app/``."""
    www = tmp / name
    shutil.copytree(build(build_name), www / "app")
    return www


def _start(nginx: Nginx, tmp: Path, builds: list[str], cdn_lacks: str | None = None):
    urls = [
        nginx.serve(f"{SUBNET}.{i}", "subpath", _site(tmp, f"www{i}", name))
        for i, name in enumerate(builds, start=1)
    ]
    cdn_root = _site(tmp, "cdn", "angular-app/v1")
    if cdn_lacks:
        (cdn_root / "app" / cdn_lacks).unlink()
    cdn = nginx.serve(CDN_HOST, "static", cdn_root)
    nginx.start()
    return [f"{u}app/" for u in urls], f"{cdn}app/"


def _releases(tmp: Path) -> list[str]:
    return [
        "--release-manifest",
        str(release(build("angular-app/v1"), "1.0.0", tmp)),
        "--release-manifest",
        str(release(build("angular-app/v2"), "2.0.0", tmp)),
    ]


def test_fixture_is_built_for_the_sub_path() -> None:
    index = (build("angular-app/v1") / "index.html").read_text()
    assert '<base href="/app/">' in index
    urls = json.loads((build("angular-app/v1") / "ngsw.json").read_text())["hashTable"]
    assert f"/app/{POLYFILLS}" in urls and all(u.startswith("/app/") for u in urls)


def test_a_correct_fleet_under_a_sub_path_is_consistent(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _start(nginx, tmp_path, ["angular-app/v1"] * 3)
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()


def test_a_drifted_instance_under_a_sub_path_alone_is_flagged(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _start(nginx, tmp_path, ["angular-app/v1"] * 2 + ["angular-app/v2"])
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    assert run.result(urls[2])["serves_version"] == "2.0.0", run.explain()


def test_a_cdn_under_a_sub_path_missing_a_file_is_named(nginx: Nginx, tmp_path: Path) -> None:
    urls, cdn = _start(nginx, tmp_path, ["angular-app/v1"] * 3, cdn_lacks=POLYFILLS)
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert {f["path"] for f in run.findings("cdn-missing")} == {POLYFILLS}, run.explain()
    assert POLYFILLS in run.table


def test_siblings_under_a_sub_path_read_the_served_ngsw_json(nginx: Nginx, tmp_path: Path) -> None:
    """No release: the served ``ngsw.json`` (URLs under ``/app/``) lists the files; the
    drifted instance is the minority."""
    urls, _ = _start(nginx, tmp_path, ["angular-app/v1"] * 2 + ["angular-app/v2"])
    run = verify(tmp_path, *targets(urls, "1.0.0"))
    assert run.exit_code == 1, run.explain()
    assert run.verdicts()[urls[2]] == "mismatch", run.explain()
    assert run.verdicts()[urls[0]] == "consistent", run.explain()
    assert nginx.requests_for(f"/app/{POLYFILLS}") >= 3
    assert nginx.requests_for(f"/app/app/{POLYFILLS}") == 0


def test_ngsw_json_with_a_base_href_as_the_release(nginx: Nginx, tmp_path: Path) -> None:
    """``dist/ngsw.json`` as the release, its URLs ``/app/…``, targets at
    ``/app/``: each URL is the file at the target, never ``/app/app/…``.

    Today: exit 2 (ngsw.json refused as a release)."""
    urls, cdn = _start(nginx, tmp_path, ["angular-app/v1"] * 2 + ["angular-app/v2"])
    ngsw = ngsw_release(build("angular-app/v1"), "1.0.0", tmp_path)
    run = verify(tmp_path, *targets(urls, "1.0.0"), "--release-manifest", ngsw, "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        urls[0]: "consistent",
        urls[1]: "consistent",
        urls[2]: "mismatch",
    }, run.explain()
    assert nginx.requests_for(f"/app/app/{POLYFILLS}") == 0
