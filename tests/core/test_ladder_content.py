"""The content rung of the verdict ladder (judge/ladder.py): mismatch, and what it says.

Instance-side evidence that its content is wrong is a ``mismatch``, and its reason says
each fact once and claims only what it shows: "serves 2.0.0's content:" lists 2.0.0's
files, and the reported release's files the instance lacks apart from them (a 1.0.0
file answering 404 is not 2.0.0's). One body answering every path, the entry page
included, is no build of the site at all: not content, so never a mismatch.
"""

from __future__ import annotations

import pytest
from compare_support import A1, A2, B1, B2, IDX1, IDX2, K, fetched, obs, release

from artifactcheck.judge.compare import HashIndex, judge_instance
from artifactcheck.model.values import (
    Expectation,
    Fetched,
    InstanceResult,
    Manifest,
    ManifestEntry,
    Verdict,
)

OLD_JS, NEW_JS, CSS = "assets/app-1.js", "assets/app-2.js", "assets/b.css"
V1 = release("1.0.0", {"index.html": IDX1, OLD_JS: A1, CSS: B1})
V2 = release("2.0.0", {"index.html": IDX2, NEW_JS: A2, CSS: B2})
SERVED_V2 = Manifest(
    format="webpack-manifest",
    files={p: ManifestEntry(path=p) for p in ("index.html", NEW_JS, CSS)},
)


def _serving_v2_whole() -> InstanceResult:
    """Reports 1.0.0, serves 2.0.0 whole: 1.0.0's script answers 404 there."""
    assets = {
        "index.html": fetched("index.html", IDX2, content_type="text/html"),
        OLD_JS: fetched(OLD_JS, status=404),
        NEW_JS: fetched(NEW_JS, A2),
        CSS: fetched(CSS, B2),
    }
    o = obs("i1", "1.0.0", assets, manifest=SERVED_V2, manifest_path="manifest.json")
    index = HashIndex({"1.0.0": V1, "2.0.0": V2})
    return judge_instance(o, expectation=Expectation("1.0.0", V1), index=index)


def test_another_release_served_whole_lists_its_files_and_the_missing_apart() -> None:
    r = _serving_v2_whole()
    assert r.verdict is Verdict.MISMATCH and r.serves_version == "2.0.0", r.reason
    assert r.reason == (
        "reports 1.0.0 but serves 2.0.0's content: assets/app-2.js, assets/b.css, "
        "index.html; 1 file(s) it lacks (404 or the fallback page): assets/app-1.js"
    )
    assert {f.kind for f in r.findings} >= {K.FILE_MISSING, K.SERVES_OTHER_RELEASE}


EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_one_body_for_every_path_is_not_the_site() -> None:
    """Caddy reached by IP for a site named by host: 200 and no body, whatever the path."""
    r = judge_instance(
        obs("i1", "1.0.0", {p: fetched(p, EMPTY) for p in ("index.html", OLD_JS, CSS)}),
        expectation=Expectation("1.0.0", V1),
        index=HashIndex({"1.0.0": V1}),
    )
    assert r.verdict is Verdict.INCONCLUSIVE, r.reason
    assert r.reason.startswith(
        "every file of release 1.0.0 asked for answers the same 10-byte body (e3b0c44298fc)"
    ), r.reason
    assert "--host-header" in r.reason


@pytest.mark.parametrize(
    ("assets", "indexed"),
    [
        pytest.param(
            {p: fetched(p, IDX1, content_type="text/html") for p in ("index.html", OLD_JS, CSS)},
            True,
            id="the-releases-entry-page-answering-for-every-asset",
        ),
        pytest.param(
            {"index.html": fetched("index.html", IDX1)}
            | {p: fetched(p, EMPTY) for p in (OLD_JS, CSS)},
            False,
            id="empty-files-beside-a-right-entry-page",
        ),
        pytest.param(
            {p: fetched(p, EMPTY) for p in ("index.html", CSS)}
            | {OLD_JS: fetched(OLD_JS, status=404)},
            False,
            id="one-body-with-a-404-among-the-answers",
        ),
        pytest.param(
            {p: fetched(p, EMPTY) for p in (OLD_JS, CSS)},
            False,
            id="assets-alike-without-the-entry-page",
        ),
    ],
)
def test_one_body_short_of_every_path_is_still_content(
    assets: dict[str, Fetched], indexed: bool
) -> None:
    """Only the entry page answering like everything else, with a body no release
    holds, marks a catch-all answer; anything short of it is judged as content (the
    right index.html answering for every missing asset is the site, its assets gone)."""
    r = judge_instance(
        obs("i1", "1.0.0", assets),
        expectation=Expectation("1.0.0", V1),
        index=HashIndex({"1.0.0": V1} if indexed else {}),
    )
    assert r.verdict is Verdict.MISMATCH, r.reason


def test_files_missing_beside_a_served_entry_page_are_named() -> None:
    """Something of the release is served (its entry page): the base URL is right, and
    the reason names the files missing rather than asking about the base URL."""
    assets = {
        "index.html": fetched("index.html", IDX1, content_type="text/html"),
        OLD_JS: fetched(OLD_JS, status=404),
        CSS: fetched(CSS, status=404),
    }
    r = judge_instance(
        obs("i1", "1.0.0", assets),
        expectation=Expectation("1.0.0", V1),
        index=HashIndex({"1.0.0": V1}),
    )
    assert (r.verdict, r.reason) == (
        Verdict.MISMATCH,
        "reports 1.0.0 but 2 file(s) are missing: assets/app-1.js, assets/b.css",
    )
