"""Real layouts behind a real nginx: a release's files served under a prefix.

A Django site as deployed: ``collectstatic`` output (``ManifestStaticFilesStorage``
names, ``staticfiles.json``) served by an nginx ``alias`` at ``/static/``, every other
path a 302 to ``/login/``, the version at the host root; a CDN holding the same files
at ``https://cdn/static/`` (``STATIC_URL``). And a Next.js-style static export under a
sub-path with no served manifest, whose CDN (``assetPrefix``) holds only
``_next/static/``. Each test runs ``verify`` as a user types it and reads the exit code,
the JSON report and nginx's access log (what was really asked for).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from artifactcheck.cli.main import main

DJANGO_SOURCES = {
    "admin/css/base.css": b"body { margin: 0; }\n",
    "admin/js/core.js": b"'use strict'; var django = {};\n",
    "app/app.js": b"console.log('app 1.0.0');\n",
    "app/site.css": b"main { display: grid; }\n",
}
NEXT_FILES = {
    "index.html": b"<!DOCTYPE html><html><body>next 1.0.0</body></html>",
    "about/index.html": b"<!DOCTYPE html><html><body>about</body></html>",
    "_next/static/chunks/main-3f2a9c.js": b"self.__next_f=[];\n",
    "_next/static/css/app-7d1e.css": b"body{font:16px sans-serif}\n",
    "favicon.ico": b"\x00\x00\x01\x00icon",
}
LOGIN = b"<!DOCTYPE html><html><body><form>log in</form></body></html>"


def collectstatic(root: Path, sources: dict[str, bytes]) -> None:
    """What ``collectstatic`` with ManifestStaticFilesStorage writes: each file under
    its own name and its hashed name (md5 of the content, 12 hex), and the manifest."""
    paths = {}
    for name, body in sources.items():
        stem, dot, ext = name.rpartition(".")
        hashed = f"{stem}.{hashlib.md5(body).hexdigest()[:12]}{dot}{ext}"  # noqa: S324
        for path in (name, hashed):
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(body)
        paths[name] = hashed
    doc = {"paths": paths, "version": "1.1", "hash": "0123456789ab"}
    (root / "staticfiles.json").write_text(json.dumps(doc))


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, body in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(body)


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class Layouts:
    """The nginx servers of one test, their URLs, the release manifests and the log."""

    tmp: Path
    urls: dict[str, str]
    log: Path

    def requests(self, name: str) -> list[str]:
        """The request URIs the server ``name`` received, in order."""
        host = self.urls[name].split("//", 1)[1].split("/", 1)[0]
        return [
            line.split(" ", 1)[1]
            for line in self.log.read_text().splitlines()
            if line.split(" ", 1)[0] == host
        ]

    def build(self, site: str, version: str) -> str:
        """``artifactcheck manifest build`` of a site directory: the release manifest."""
        out = self.tmp / f"{site}-{version}.json"
        result = CliRunner().invoke(
            main,
            ["manifest", "build", str(self.tmp / site), "--version", version, "-o", str(out)],
        )
        assert result.exit_code == 0, result.output
        return str(out)


SERVERS = {
    # name: nginx server body; {root} is the test's directory
    "django": """
        location /static/ { alias {root}/static_root/; }
        location = /version { default_type application/json; return 200 '{"version":"1.0.0"}'; }
        location = /login/ { root {root}; try_files /login.html =404; }
        location / { return 302 /login/; }
    """,
    "twin": """
        location /static/ { alias {root}/static_root/; }
        location = /login/ { root {root}; try_files /login.html =404; }
        location / { return 302 /login/; }
    """,
    "stale": """
        location /static/ { alias {root}/stale_root/; }
        location = /login/ { root {root}; try_files /login.html =404; }
        location / { return 302 /login/; }
    """,
    "empty": """
        location /static/ { alias {root}/empty_root/; }
        location = /login/ { root {root}; try_files /login.html =404; }
        location / { return 302 /login/; }
    """,
    "cdn": """
        location /static/ { alias {root}/static_root/; }
        location / { return 404; }
    """,
    "next": """
        location /app/ { root {root}/sites; try_files $uri $uri/index.html /app/index.html; }
        location / { return 404; }
    """,
    "nextcdn": """
        location /_next/static/ { root {root}/sites/app; }
        location / { return 404; }
    """,
}


@pytest.fixture
def layouts(tmp_path: Path) -> Iterator[Layouts]:
    binary = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if binary is None:
        pytest.skip("nginx is not installed (apt-get install nginx-light)")
    collectstatic(tmp_path / "static_root", DJANGO_SOURCES)
    stale = dict(DJANGO_SOURCES)
    collectstatic(tmp_path / "stale_root", stale)
    # one file rebuilt in place: same names, other bytes (a half-finished rsync)
    (tmp_path / "stale_root" / "app" / "site.css").write_bytes(b"main { display: block; }\n")
    (tmp_path / "empty_root").mkdir()
    (tmp_path / "login.html").write_bytes(LOGIN)
    write_tree(tmp_path / "sites" / "app", NEXT_FILES)
    write_tree(tmp_path / "app", NEXT_FILES)  # the build output, as `next build` leaves it
    log = tmp_path / "access.log"
    urls: dict[str, str] = {}
    servers = []
    for i, (name, body) in enumerate(SERVERS.items(), start=1):
        host = f"127.94.20.{i}"
        port = _free_port(host)
        urls[name] = f"http://{host}:{port}/"
        servers.append(
            f"server {{ listen {host}:{port}; {body.replace('{root}', str(tmp_path))} }}"
        )
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        f"""
daemon off;
master_process off;
worker_processes 1;
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/error.log warn;
events {{ worker_connections 64; }}
http {{
    log_format uri '$server_addr:$server_port $request_uri';
    access_log {log} uri;
    client_body_temp_path {tmp_path}/body;
    types {{ application/javascript js; text/css css; text/html html;
             application/json json; image/x-icon ico; }}
    {"".join(servers)}
}}
"""
    )
    proc = subprocess.Popen(
        [binary, "-p", str(tmp_path), "-c", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        for url in urls.values():
            host, port = url.split("//", 1)[1].rstrip("/").split(":")
            while True:
                try:
                    socket.create_connection((host, int(port)), timeout=0.5).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        err = proc.stderr.read().decode() if proc.stderr else ""
                        pytest.fail(f"nginx did not start: {err}")
                    time.sleep(0.05)
        yield Layouts(tmp=tmp_path, urls=urls, log=log)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def verify(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["verify", *args, "-o", "json"], catch_exceptions=False)
    assert result.exit_code in (0, 1, 3), result.output
    return result.exit_code, json.loads(result.stdout)


def one(doc: dict) -> dict:
    [result] = doc["results"]
    return result


def kinds(result: dict) -> set[str]:
    return {f["kind"] for f in result["findings"]}


def django_args(layouts: Layouts, target: str = "django", *extra: str) -> list[str]:
    return [
        "-t",
        f"{layouts.urls[target]}=1.0.0",
        "--release-manifest",
        layouts.build("static_root", "1.0.0"),
        "--cdn",
        layouts.urls["cdn"] + "static/",
        *extra,
    ]


def test_django_at_the_instance_root_detects_static_and_checks_the_cdn_there(
    layouts: Layouts,
) -> None:
    """The issue's first hour: target the root, release from STATIC_ROOT, --cdn = STATIC_URL.
    Was exit 1, every instance mismatch, the CDN asked for /static/static/...."""
    code, doc = verify(*django_args(layouts))
    r = one(doc)
    assert code == 0, r["reason"]
    assert r["verdict"] == "consistent"
    assert r["reason"] == "serves release 1.0.0 (under /static/, detected)"
    said = [f for f in r["findings"] if f["kind"] == "layout"]
    assert said and "served under /static/" in said[0]["message"]
    assert "--prefix /static/" in said[0]["message"]
    asked = layouts.requests("cdn")
    assert "/static/admin/css/base.css" in asked
    assert not [u for u in asked if u.startswith("/static/static/")], asked
    served = layouts.requests("django")
    assert "/static/app/app.js" in served and "/static/staticfiles.json" in served


def test_a_given_prefix_is_used_without_probing_and_not_reported(layouts: Layouts) -> None:
    code, doc = verify(*django_args(layouts, "django", "--prefix", "/static/"))
    r = one(doc)
    assert code == 0, r["reason"]
    assert "layout" not in kinds(r)
    # every release file was asked for under /static/ only: no probe at the root
    served = layouts.requests("django")
    assert "/app/app.js" not in served and "/static/app/app.js" in served


@pytest.mark.parametrize("wrong", ["/assets/", "/"])
def test_a_wrong_prefix_is_inconclusive_naming_the_right_one(layouts: Layouts, wrong: str) -> None:
    code, doc = verify(*django_args(layouts, "django", "--prefix", wrong))
    r = one(doc)
    assert code == 3, r["reason"]
    assert r["verdict"] == "inconclusive"
    assert r["reason"].endswith("give --prefix /static/"), r["reason"]
    assert "mismatch" not in {x["verdict"] for x in doc["results"]}
    if wrong == "/assets/":  # every well-known name answers the login page: one clause
        [missing] = [f["message"] for f in r["findings"] if f["kind"] == "manifest-missing"]
        assert "and 6 more answer a page that is not a build manifest" in missing
    # the CDN is not asked for paths whose place is unknown
    assert not [u for u in layouts.requests("cdn") if u.startswith("/static/static/")]


def test_a_stale_file_under_the_detected_prefix_is_still_a_mismatch(layouts: Layouts) -> None:
    """Detection is about where files are, never about their bytes: a rebuilt file under
    /static/ is caught as before."""
    code, doc = verify(*django_args(layouts, "stale"))
    r = one(doc)
    assert code == 1, r["reason"]
    assert r["verdict"] == "mismatch"
    differs = [f["path"] for f in r["findings"] if f["kind"] == "content-differs"]
    assert differs == ["app/site.css"], r["findings"]


def test_nothing_of_the_release_anywhere_is_inconclusive_naming_what_was_tried(
    layouts: Layouts,
) -> None:
    code, doc = verify(*django_args(layouts, "empty"))
    r = one(doc)
    assert code == 3, r["reason"]
    # the root's redirect (to /login/) is tried first, as evidence of where the site lives
    assert "nor under /login/, /static/, /assets/" in r["reason"], r["reason"]
    assert "--prefix PATH" in r["reason"]


def test_the_version_endpoint_resolves_against_the_target_not_the_prefix(
    layouts: Layouts,
) -> None:
    """Assets under /static/, the version at the host root: /version is asked at the
    root whatever the prefix (configured or detected)."""
    for extra in (["--prefix", "/static/"], []):
        code, doc = verify(
            "-t",
            layouts.urls["django"],
            "--release-manifest",
            layouts.build("static_root", "1.0.0"),
            "--version-endpoint",
            "/version#/version",
            *extra,
        )
        r = one(doc)
        assert code == 0, r["reason"]
        assert r["reported_version"] == "1.0.0"
    served = layouts.requests("django")
    assert "/version" in served and "/static/version" not in served


def test_the_version_endpoint_in_yaml_takes_the_cli_spelling(
    layouts: Layouts, tmp_path: Path
) -> None:
    config = tmp_path / "check.yaml"
    config.write_text(
        f"targets: [{{url: '{layouts.urls['django']}'}}]\n"
        f"release: {{manifests: [{layouts.build('static_root', '1.0.0')}]}}\n"
        "prefix: /static/\n"
        'version_endpoint: "/version#/version"\n'
    )
    code, doc = verify("-c", str(config))
    assert code == 0, one(doc)["reason"]


def test_no_served_manifest_under_a_sub_path_is_judged_by_the_release_file_list(
    layouts: Layouts,
) -> None:
    """A Next.js-style export at /app/ with the SPA fallback and no manifest at any
    well-known name (each answers index.html): judged by the release's file list."""
    release = layouts.build("app", "1.0.0")
    code, doc = verify("-t", layouts.urls["next"] + "app/=1.0.0", "--release-manifest", release)
    r = one(doc)
    assert code == 0, r["reason"]
    assert r["reason"].startswith("serves release 1.0.0")
    # the release lists no build manifest: none is missing, and none is said to be
    assert "manifest" not in r["reason"]
    assert "manifest-missing" not in {f["kind"] for f in r["findings"]}
    assert r["coverage"]["compared"] == r["coverage"]["total"] == len(NEXT_FILES)


def test_next_asset_prefix_cdn_checked_only_for_its_globs(layouts: Layouts) -> None:
    """assetPrefix: the CDN holds _next/static/ only. Without --cdn-include every root
    file is cdn-missing (exit 1); with it, exit 0."""
    release = layouts.build("app", "1.0.0")
    base = ["-t", layouts.urls["next"] + "app/=1.0.0", "--release-manifest", release]
    base += ["--cdn", layouts.urls["nextcdn"]]
    code, doc = verify(*base)
    assert code == 1 and one(doc)["verdict"] == "cdn-missing"
    assert "favicon.ico" in one(doc)["reason"]
    code, doc = verify(*base, "--cdn-include", "_next/static/*")
    assert code == 0, one(doc)["reason"]
    code, doc = verify(*base, "--cdn-exclude", "favicon.ico")
    assert code == 0, one(doc)["reason"]


def test_a_target_at_the_prefix_is_told_how_to_reach_a_root_endpoint(layouts: Layouts) -> None:
    """Targets at /static/: /version resolves to /static/version (404); the report says
    to target the root and give --prefix instead."""
    code, doc = verify(
        "-t",
        layouts.urls["django"] + "static/",
        "--release-manifest",
        layouts.build("static_root", "1.0.0"),
        "--version-endpoint",
        "/version#/version",
    )
    r = one(doc)
    assert code == 3, r["reason"]
    assert "/static/version" in layouts.requests("django")
    root = layouts.urls["django"]
    assert r["endpoint_error"].endswith(f"target {root} and give --prefix /static/)"), r


def test_siblings_go_straight_to_the_prefix_found_for_the_first(layouts: Layouts) -> None:
    """The prefix found for one instance is where its siblings are looked at first:
    one round of probing per run, not per instance."""
    release = layouts.build("static_root", "1.0.0")
    base = ["--release-manifest", release, "--processes", "1", "--concurrency", "1"]
    code, doc = verify(
        "-t", f"{layouts.urls['django']}=1.0.0", "-t", f"{layouts.urls['stale']}=1.0.0", *base
    )
    assert code == 1  # the stale sibling's rebuilt file
    verdicts = {r["url"]: r["verdict"] for r in doc["results"]}
    assert set(verdicts.values()) == {"consistent", "mismatch"}
    # the entry page (/, which redirects to /login/) is read on each, wherever files are
    entry = ("/", "/login/")
    asked = [[u for u in layouts.requests(n) if u not in entry] for n in ("django", "stale")]
    # whichever was observed second was asked for nothing outside /static/
    assert any(all(u.startswith("/static/") for u in one) for one in asked), asked
    assert not all(all(u.startswith("/static/") for u in one) for one in asked)
    for r in doc["results"]:
        said = [f for f in r["findings"] if f["kind"] == "layout"]
        assert said and "served under /static/" in said[0]["message"]


def test_investigate_diff_fetches_under_the_prefix(layouts: Layouts) -> None:
    """``investigate --diff`` fetches the served and the expected bytes again: under the
    prefix the files were found at, from the target and from its sibling."""
    release = layouts.build("static_root", "1.0.0")
    stale = layouts.urls["stale"]
    result = CliRunner().invoke(
        main,
        [
            "investigate",
            stale,
            "-t",
            f"{stale}=1.0.0",
            "-t",
            f"{layouts.urls['django']}=1.0.0",
            "--release-manifest",
            release,
            "--diff",
            "-o",
            "json",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 1, result.output
    [diff] = json.loads(result.stdout)["diffs"]
    assert diff["path"] == "app/site.css"
    assert diff["lines"], diff
    assert any("display: grid" in line for line in diff["lines"])
    assert any("display: block" in line for line in diff["lines"])


def test_siblings_without_a_release_are_compared_under_the_served_manifests_directory(
    layouts: Layouts,
) -> None:
    """No release manifest (consensus): the manifest found at static/staticfiles.json
    lists static/..., so static/ is the prefix and the CDN at STATIC_URL is asked for
    the files under its own path, never /static/static/."""
    targets = [f"{layouts.urls[n]}=1.0.0" for n in ("django", "twin", "stale")]
    args = [a for t in targets for a in ("-t", t)]
    code, doc = verify(*args, "--cdn", layouts.urls["cdn"] + "static/")
    # the stale copy's rebuilt file is the unhashed app/site.css, which the manifest
    # does not list: siblings compare what the manifest lists, and agree
    assert code == 0, [r["reason"] for r in doc["results"]]
    assert {r["verdict"] for r in doc["results"]} == {"consistent"}
    for r in doc["results"]:
        assert [f for f in r["findings"] if f["kind"] == "layout"], r["findings"]
    asked = layouts.requests("cdn")
    assert len(asked) == len(DJANGO_SOURCES) and all(u.startswith("/static/") for u in asked)
    assert not [u for u in asked if u.startswith("/static/static/")], asked


def test_names_only_never_exits_0_even_when_every_name_matches(layouts: Layouts) -> None:
    """Django's own staticfiles.json as the release (--allow-names-only): the names all
    match under /static/, and the run is inconclusive, as --help says."""
    kept = layouts.tmp / "releases" / "1.0.0"
    kept.mkdir(parents=True)
    shutil.copy(layouts.tmp / "static_root" / "staticfiles.json", kept / "staticfiles.json")
    code, doc = verify(
        "-t",
        f"{layouts.urls['django']}=1.0.0",
        "--prefix",
        "/static/",
        "--release-manifest",
        str(layouts.tmp / "releases" / "{version}" / "staticfiles.json"),
        "--allow-names-only",
    )
    r = one(doc)
    assert code == 3, r["reason"]
    assert r["verdict"] == "inconclusive" and "file names only" in r["reason"]
    assert not [f for f in r["findings"] if f["kind"] in ("file-missing", "fallback-page")]
