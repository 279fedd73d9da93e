"""The layout hint follows the evidence: a site whose root redirects to its sub-path.

Angular 20 built for ``/app/`` behind nginx (conf/subpath.conf: ``location = / { return
302 /app/; }``), the target given as the host's root, no ``--prefix``: the release's files
are not at the root, and the redirect says where they are.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from layout_cli import build, release, serve_fleet, targets, verify
from layout_nginx import Nginx

from artifactcheck.judge.prefix import candidates, redirect_prefix

SUBNET = "127.74.3"


def test_a_root_redirecting_to_the_sub_path_is_where_the_files_are_looked_for(
    nginx: Nginx, tmp_path: Path
) -> None:
    roots = []
    for i in (1, 2):
        www = tmp_path / f"www{i}"
        shutil.copytree(build("angular-app/v1"), www / "app")
        roots.append(www)
    urls = serve_fleet(nginx, SUBNET, "subpath", roots)
    nginx.start()
    rel = release(build("angular-app/v1"), "1.0.0", tmp_path)
    run = verify(tmp_path, *targets(urls, "1.0.0"), "--release-manifest", str(rel))
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    assert "under /app/, detected" in run.table, run.explain()
    assert run.result(urls[0])["manifest"]["format"] == "ngsw", run.explain()


def test_the_redirect_is_evidence_before_the_common_prefixes() -> None:
    base = "http://site.example/"
    assert redirect_prefix(base, "http://site.example/app/") == "app/"
    assert redirect_prefix(base, "http://site.example/app/index.html") == "app/"
    assert redirect_prefix(base, "http://site.example/") is None  # not redirected
    assert redirect_prefix(base, "http://site.example/login") is None  # a page, not a dir
    assert redirect_prefix(base, "http://site.example/login/?next=/") is None  # a login
    assert redirect_prefix("http://site.example/shop/", "http://site.example/app/") is None
    assert redirect_prefix("http://site.example/shop/", "http://site.example/shop/b/") == "b/"
    tried = candidates("", None, None, None, "app/")
    assert tried == ["app/", "static/", "assets/"]


def test_the_linked_directories_seam_comes_after_the_evidence() -> None:
    """The entry page's links (a page parser's output) rank after the stronger evidence
    and before the common guesses."""
    assert candidates("", "app/", linked=["build/", None, "app/"]) == [
        "app/",
        "build/",
        "static/",
        "assets/",
    ]
