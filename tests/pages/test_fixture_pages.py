"""Sites built by real tools that ship no manifest artifactcheck knows (Hugo, MkDocs,
Parcel), served by nginx: the pages name every file of the build, as the files on disk
say, and the integrity= values Hugo writes hold for the bytes it wrote.

The builds are committed under tests/fixtures/frameworks/<name>/v1 and v2 (their
build.sh beside them); each test compares what the pages load with the build's files.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from layout_nginx import Nginx

from artifactcheck.fetch.fetcher import Fetcher
from artifactcheck.manifests.page import parse_page
from artifactcheck.manifests.subresource import (
    IntegrityVerdict,
    check_integrity,
    strongest_hashes,
)
from artifactcheck.model.settings import CheckSpec, HttpSettings, RetrySettings
from artifactcheck.model.values import Instance
from artifactcheck.observe.pages import observe_pages

FRAMEWORKS = Path(__file__).resolve().parent.parent / "fixtures" / "frameworks"
HOST = "127.0.77.10"

#: framework -> (entry pages, files of the build no page loads, with the reason)
SITES: dict[str, tuple[list[str], set[str]]] = {
    "hugo": (["/", "/about/"], set()),
    # the built-in theme's source maps (devtools only), its darkmode.js (loaded only with
    # its color_mode option) and the sitemap (for crawlers) are built, and no page loads them
    "mkdocs": (
        ["/", "/guide/"],
        {
            "js/darkmode.js",
            "css/bootstrap.min.css.map",
            "js/bootstrap.bundle.min.js.map",
            "sitemap.xml",
            "sitemap.xml.gz",
        },
    ),
    # lazy.js (app.js's import()) is named by the page's import map
    "parcel": (["/", "/login.html"], set()),
}


def build_files(root: Path) -> set[str]:
    """Every file of a build but its pages (HTML)."""
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.suffix not in (".html", ".htm")
    }


def _one(files: set[str], pattern: str) -> str:
    """The one file matching ``lazy.{}.js`` (a hashed name that changes with the build)."""
    if "{}" not in pattern:
        return pattern
    head, tail = pattern.split("{}")
    found = [f for f in files if f.startswith(head) and f.endswith(tail)]
    assert len(found) == 1, (pattern, found)
    return found[0]


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Nginx]:
    server = Nginx(tmp_path / "nginx")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def fetcher() -> AsyncIterator[Fetcher]:
    async with Fetcher(http=HttpSettings(), retry=RetrySettings(attempts=1)) as f:
        yield f


@pytest.mark.parametrize("release", ["v1", "v2"])
@pytest.mark.parametrize("name", list(SITES))
async def test_the_pages_load_every_file_of_the_build(
    name: str, release: str, nginx: Nginx, fetcher: Fetcher
) -> None:
    root = FRAMEWORKS / name / release
    pages, unloaded = SITES[name]
    url = nginx.serve(HOST, "pages", root)
    nginx.start()
    seen = await observe_pages(
        Instance(name=name, base_url=url), spec=CheckSpec(pages=pages), fetcher=fetcher
    )
    assert seen.complete, [d.problem for d in (*seen.pages, *seen.stylesheets)]
    loaded = {f.placement.release_path for f in seen.files}
    built = build_files(root)
    unloaded = {_one(built, name) for name in unloaded}
    assert loaded == built - unloaded
    assert seen.not_requested == ()


def test_hugo_integrity_holds_for_its_own_bytes_and_not_for_the_other_release() -> None:
    v1, v2 = FRAMEWORKS / "hugo" / "v1", FRAMEWORKS / "hugo" / "v2"
    page = parse_page((v2 / "index.html").read_bytes(), "http://site.example/")
    checked = [r for r in page.references if r.integrity]
    assert {r.integrity[0][0] for r in checked} == {"sha384", "sha512"}
    v1_js = next(v1.glob("js/app.min.*.js")).read_bytes()
    for ref in checked:
        body = (v2 / ref.url.removeprefix("http://site.example/")).read_bytes()
        digests = {a: hashlib.new(a, body).hexdigest() for a in ("sha256", "sha384", "sha512")}
        assert check_integrity(ref.integrity, digests) is IntegrityVerdict.OK
        if ref.url.endswith(".js"):
            # v1's script under v2's page: the browser refuses it
            stale = {a: hashlib.new(a, v1_js).hexdigest() for a in ("sha384", "sha512")}
            assert check_integrity(ref.integrity, stale) is IntegrityVerdict.MISMATCH


@pytest.mark.parametrize("swapped", [False, True])
async def test_hugo_integrity_over_http(
    swapped: bool, tmp_path: Path, nginx: Nginx, fetcher: Fetcher
) -> None:
    """The bytes nginx serves satisfy Hugo's integrity= values; a script rebuilt under the
    same name (v1's bytes at v2's name, the rebuilt artifact) does not."""
    root = tmp_path / "site"
    shutil.copytree(FRAMEWORKS / "hugo" / "v2", root)
    if swapped:
        (js,) = root.glob("js/app.min.*.js")
        js.write_bytes(next((FRAMEWORKS / "hugo" / "v1").glob("js/app.min.*.js")).read_bytes())
    url = nginx.serve(HOST, "pages", root)
    nginx.start()
    seen = await observe_pages(
        Instance(name="hugo", base_url=url), spec=CheckSpec(), fetcher=fetcher
    )
    verdicts = {}
    for loaded in seen.files:
        (ref,) = loaded.references
        if not ref.integrity:
            continue
        strongest = strongest_hashes(ref.integrity)
        assert strongest is not None
        got = await fetcher.get_asset(
            url, loaded.placement.request_path or "", algorithms=[strongest[0]]
        )
        verdicts[loaded.placement.release_path] = check_integrity(ref.integrity, got.hashes)
    script = next(p for p in verdicts if p and p.endswith(".js"))
    sheet = next(p for p in verdicts if p and p.endswith(".css"))
    assert verdicts[sheet] is IntegrityVerdict.OK
    expected = IntegrityVerdict.MISMATCH if swapped else IntegrityVerdict.OK
    assert verdicts[script] is expected
