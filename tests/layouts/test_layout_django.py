"""Django 5.2 as deployed: ``collectstatic`` with ManifestStaticFilesStorage behind nginx.

nginx serves ``/static/`` as an alias to STATIC_ROOT, answers ``/version`` with
``{"version":"1.0.0"}``, and redirects every other path to the login page, as a
Django site does for a visitor without a session. The CDN serves STATIC_ROOT under
``/static/`` too (STATIC_URL = ``https://cdn.example.com/static/``). The user runs
what the README says: ``manifest build STATIC_ROOT``, targets at the instance root.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from layout_cli import build, copy_build, release, serve_fleet, targets, verify
from layout_nginx import Nginx

SUBNET = "127.62.0"
CDN_HOST = "127.62.1.1"
APP_JS = "shop/app.c0cd86a85302.js"  # v1's hashed copy of shop/app.js (v2: another hash)


def _fleet(nginx: Nginx, tmp: Path, *, drifted: bool = False, cdn_lacks: str | None = None):
    roots = [build("django/v1"), build("django/v1"), build("django/v2" if drifted else "django/v1")]
    urls = serve_fleet(nginx, SUBNET, "django", roots, version="1.0.0")
    cdn_root = copy_build("django/v1", tmp / "cdn")
    if cdn_lacks:
        (cdn_root / cdn_lacks).unlink()
    cdn = nginx.serve(CDN_HOST, "cdn-prefix", cdn_root, prefix="/static/")
    nginx.start()
    return urls, f"{cdn}static/"


#: Where the user points the targets: the instance root (the first natural setup,
#: failing before 0.1.0) or STATIC_URL on each instance (works today).
BASES = pytest.mark.parametrize("base", ["", "static/"], ids=["root", "static-url"])


def _releases(tmp: Path) -> list[str]:
    return [
        "--release-manifest",
        str(release(build("django/v1"), "1.0.0", tmp)),
        "--release-manifest",
        str(release(build("django/v2"), "2.0.0", tmp)),
    ]


def test_fixture_is_what_the_test_says() -> None:
    """The hashed app script the CDN test removes is v1's own, and v2 renamed it."""
    assert (build("django/v1") / APP_JS).is_file()
    assert not (build("django/v2") / APP_JS).exists()
    assert APP_JS in (build("django/v1") / "staticfiles.json").read_text()


@BASES
def test_a_correct_django_fleet_is_consistent(nginx: Nginx, tmp_path: Path, base: str) -> None:
    """The release from STATIC_ROOT, ``--cdn`` = STATIC_URL on the CDN.

    At the root, today: exit 1, every instance ``mismatch`` (release paths fetched at
    the host root and answered by the login redirect, called "the fallback page"), the
    CDN asked for ``/static/static/...``.
    """
    urls, cdn = _fleet(nginx, tmp_path)
    bases = [u + base for u in urls]
    run = verify(tmp_path, *targets(bases, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 0, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    assert nginx.requests_for("/static/static/admin/css/base.css") == 0
    assert nginx.requests_for("/static/admin/css/base.css") >= 1  # the CDN was compared


@BASES
def test_a_drifted_django_instance_alone_is_flagged(
    nginx: Nginx, tmp_path: Path, base: str
) -> None:
    """The third instance serves 2.0.0's STATIC_ROOT and reports 1.0.0."""
    urls, cdn = _fleet(nginx, tmp_path, drifted=True)
    bases = [u + base for u in urls]
    run = verify(tmp_path, *targets(bases, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert run.verdicts() == {
        bases[0]: "consistent",
        bases[1]: "consistent",
        bases[2]: "mismatch",
    }, run.explain()
    assert run.result(bases[2])["serves_version"] == "2.0.0", run.explain()
    assert "serves 2.0.0" in run.result(bases[2])["reason"], run.explain()


@BASES
def test_a_cdn_missing_a_static_file_is_named(nginx: Nginx, tmp_path: Path, base: str) -> None:
    urls, cdn = _fleet(nginx, tmp_path, cdn_lacks=APP_JS)
    bases = [u + base for u in urls]
    run = verify(tmp_path, *targets(bases, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    missing = run.findings("cdn-missing")
    assert missing, run.explain()
    assert {f["path"].removeprefix("static/") for f in missing} == {APP_JS}, run.explain()
    assert set(run.verdicts().values()) == {"cdn-missing"}, run.explain()
    assert APP_JS in run.table, run.explain()


def test_a_cdn_given_without_its_static_prefix_is_never_a_mismatch(
    nginx: Nginx, tmp_path: Path
) -> None:
    """``--cdn https://cdn/`` when the files live under ``/static/``: a wrong prefix is
    the user's mistake, never a wrong deployment (exit 2 or 3 naming ``/static/``, or
    the prefix found by itself and exit 0)."""
    urls, cdn = _fleet(nginx, tmp_path)
    root = cdn.removesuffix("static/")
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", root)
    assert run.exit_code in (0, 2, 3), run.explain()
    if run.exit_code != 0:  # the prefix to use is named where the CDN or prefix is
        hints = [
            line
            for line in run.table.splitlines()
            if "/static/" in line and ("prefix" in line or "CDN" in line or "--cdn" in line)
        ]
        assert hints, run.explain()


def test_the_version_endpoint_json_without_a_pointer_reads_its_version_member(
    nginx: Nginx, tmp_path: Path
) -> None:
    """``--version-endpoint /version`` on ``{"version":"1.0.0"}`` at the host root.

    Today: the whole body is taken as the version."""
    urls, cdn = _fleet(nginx, tmp_path)
    run = verify(
        tmp_path,
        *[a for u in urls for a in ("-t", u)],
        "--version-endpoint",
        "/version",
        *_releases(tmp_path),
        "--cdn",
        cdn,
    )
    assert run.exit_code == 0, run.explain()
    assert {r["reported_version"] for r in run.doc["results"]} == {"1.0.0"}, run.explain()
    assert set(run.verdicts().values()) == {"consistent"}, run.explain()


def test_a_version_endpoint_at_the_host_root_beside_static_targets(
    nginx: Nginx, tmp_path: Path
) -> None:
    """Targets at ``/static/``, ``--version-endpoint /version#/version``: the version lives
    at the host root. Today ``/static/version`` is fetched (404) and the table says only
    "the instance reports no version". Right: the version read (exit 0), or, when the
    endpoint cannot be reached, the endpoint's error in the table (exit 3), never exit 1.
    """
    urls, cdn = _fleet(nginx, tmp_path)
    run = verify(
        tmp_path,
        *[a for u in urls for a in ("-t", u + "static/")],
        "--version-endpoint",
        "/version#/version",
        *_releases(tmp_path),
        "--cdn",
        cdn,
    )
    assert run.exit_code in (0, 3), run.explain()
    if run.exit_code == 0:
        assert set(run.verdicts().values()) == {"consistent"}, run.explain()
    else:
        assert "404" in run.table, run.explain()


def test_a_cdn_missing_the_release_everywhere_is_still_cdn_missing(
    nginx: Nginx, tmp_path: Path
) -> None:
    """The other side of the rule above: the CDN given at its root is judged unjudgeable
    only when the files *are* found under the instances' prefix. A CDN that holds none
    of the release anywhere (the upload step forgotten) is the outage: ``cdn-missing``,
    exit 1, never an inconclusive excuse."""
    urls = serve_fleet(nginx, SUBNET, "django", [build("django/v1")] * 2, version="1.0.0")
    empty = tmp_path / "cdn-empty"
    (empty / "static").mkdir(parents=True)
    cdn = nginx.serve(CDN_HOST, "static", empty)
    nginx.start()
    run = verify(tmp_path, *targets(urls, "1.0.0"), *_releases(tmp_path), "--cdn", cdn)
    assert run.exit_code == 1, run.explain()
    assert set(run.verdicts().values()) == {"cdn-missing"}, run.explain()
    assert APP_JS in {f["path"] for f in run.findings("cdn-missing")}, run.explain()
