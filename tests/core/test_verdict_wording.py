"""A verdict's reason and a finding say each fact once, and claim only what they show.

"serves 2.0.0's content:" lists 2.0.0's files, and the reported release's files the
instance lacks apart from them (a 1.0.0 file answering 404 is not 2.0.0's); a CDN
difference names the release's hash and the CDN's once each, in every rendering.
"""

from __future__ import annotations

from compare_support import A1, A2, B1, B2, IDX1, IDX2, K, fetched, obs, release

from artifactcheck.judge.compare import HashIndex, judge_instance
from artifactcheck.model.values import (
    Expectation,
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


def test_one_body_that_is_the_release_s_entry_page_is_still_missing_files() -> None:
    """The right index.html answering for every missing asset is the site with its
    assets missing: a mismatch, as before."""
    r = judge_instance(
        obs(
            "i1",
            "1.0.0",
            {p: fetched(p, IDX1, content_type="text/html") for p in ("index.html", OLD_JS, CSS)},
        ),
        expectation=Expectation("1.0.0", V1),
        index=HashIndex({"1.0.0": V1}),
    )
    assert r.verdict is Verdict.MISMATCH, r.reason


def test_empty_files_beside_a_right_entry_page_are_a_mismatch() -> None:
    """A deploy that wrote empty assets: the bodies differ from the page, so judged."""
    assets = {"index.html": fetched("index.html", IDX1)}
    assets |= {p: fetched(p, EMPTY) for p in (OLD_JS, CSS)}
    r = judge_instance(
        obs("i1", "1.0.0", assets), expectation=Expectation("1.0.0", V1), index=HashIndex({})
    )
    assert r.verdict is Verdict.MISMATCH, r.reason


def test_one_body_with_a_404_among_the_answers_is_judged_as_before() -> None:
    assets = {p: fetched(p, EMPTY) for p in ("index.html", CSS)}
    assets[OLD_JS] = fetched(OLD_JS, status=404)
    r = judge_instance(
        obs("i1", "1.0.0", assets), expectation=Expectation("1.0.0", V1), index=HashIndex({})
    )
    assert r.verdict is Verdict.MISMATCH, r.reason


def test_assets_alike_without_the_entry_page_are_judged_as_before() -> None:
    """Only the entry page answering like everything else marks a catch-all answer."""
    assets = {p: fetched(p, EMPTY) for p in (OLD_JS, CSS)}
    r = judge_instance(
        obs("i1", "1.0.0", assets), expectation=Expectation("1.0.0", V1), index=HashIndex({})
    )
    assert r.verdict is Verdict.MISMATCH, r.reason
