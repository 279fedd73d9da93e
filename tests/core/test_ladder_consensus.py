"""The consensus rungs of the verdict ladder (judge/ladder.py): siblings, no release.

Without a release source, siblings reporting one version are compared with each other:
fewer than two, nothing compared with a sibling, or agreeing with none of them is
``inconclusive``; agreeing with some is ``consistent``, and the reason says with how
many and which files none of them serves. Consensus counts only content served.
Two instances answering the same 404, 403, 5xx, redirect or fallback page for a file
agree on nothing; nor does agreeing on the served manifest or the entry page alone
vouch for a file. Each row is three siblings giving the same answer for the release's
files; none of them may be ``consistent``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from compare_support import A1, B1, IDX1, K, fetched, obs

from artifactcheck.judge.compare import compare_fleet, consensus_agreement
from artifactcheck.model.values import Fetched, Manifest, ManifestEntry, Verdict

JS, CSS = "assets/a.js", "assets/b.css"
MANIFEST = "manifest.json"
LISTED = Manifest(
    format="webpack-manifest",
    files={p: ManifestEntry(path=p) for p in ("index.html", JS, CSS)},
)
M1 = "1" * 64
PAGE = {"content-type": "text/html"}


@dataclass(frozen=True)
class Row:
    id: str
    answers: dict[str, Fetched]  # what each of the three siblings answered


def _same(status: int, sha: str | None = None, content_type: str | None = None) -> Row:
    answers = {p: fetched(p, sha, status=status, content_type=content_type) for p in (JS, CSS)}
    return Row(f"{status}", answers)


NOTHING_SHARED = [
    _same(404),
    _same(410),
    _same(403),
    _same(500),
    _same(302),
    Row(
        "fallback-page",
        {
            "index.html": fetched("index.html", IDX1, content_type="text/html"),
            JS: fetched(JS, IDX1, content_type="text/html"),
            CSS: fetched(CSS, IDX1, content_type="text/html"),
        },
    ),
    Row(
        "login-page-after-a-redirect",  # HTML where a stylesheet was asked for
        {JS: fetched(JS, "7" * 64, content_type="text/html; charset=utf-8")},
    ),
    Row(
        "manifest-and-entry-page-only",
        {
            MANIFEST: fetched(MANIFEST, M1),
            "index.html": fetched("index.html", IDX1, content_type="text/html"),
            JS: fetched(JS, status=404),
            CSS: fetched(CSS, status=404),
        },
    ),
]


def _fleet(answers: dict[str, Fetched]) -> list:
    manifest_fetch = answers.get(MANIFEST)
    files = {p: f for p, f in answers.items() if p != MANIFEST}
    return [
        obs(
            name,
            "1.0",
            files,
            manifest_path=MANIFEST,
            manifest=LISTED if manifest_fetch is not None else None,
            manifest_fetch=manifest_fetch,
        )
        for name in ("a", "b", "c")
    ]


@pytest.mark.parametrize("row", NOTHING_SHARED, ids=[r.id for r in NOTHING_SHARED])
def test_siblings_sharing_no_served_file_agree_on_nothing(row: Row) -> None:
    results = compare_fleet(_fleet(row.answers), expectations=None)
    for r in results:
        assert r.verdict is Verdict.INCONCLUSIVE, (row.id, r.reason)
        assert not r.content_verified, row.id
        assert "agrees with" not in r.reason, r.reason
    agreement = consensus_agreement(_fleet(row.answers))
    assert {a.agreeing for a in agreement.values()} == {0}, row.id
    assert {a.compared for a in agreement.values()} == {()}, row.id


def test_a_lone_instance_is_no_consensus() -> None:
    """No release and no sibling reporting its version: nothing vouches for its bytes."""
    (r,) = compare_fleet(
        [obs("a", "1.0", {JS: fetched(JS, A1), CSS: fetched(CSS, B1)})], expectations=None
    )
    assert (r.verdict, r.reason) == (
        Verdict.INCONCLUSIVE,
        "no release source and no sibling reports 1.0: consensus needs at least two instances",
    )
    assert not r.content_verified


def test_the_reason_names_the_files_absent_everywhere() -> None:
    (r, *_) = compare_fleet(_fleet(NOTHING_SHARED[0].answers), expectations=None)
    assert r.reason == (
        "nothing it serves was compared with a sibling: 2 file(s) it was asked for answer "
        "404 or the fallback page on every instance (assets/a.js, assets/b.css); a wrong "
        "--prefix or --manifest-path?"
    )
    assert r.coverage is not None and r.coverage.compared == 0
    assert dict(r.coverage.not_compared) == {JS: "answers 404", CSS: "answers 404"}


def test_content_against_absence_is_a_difference_not_agreement() -> None:
    """Two serve the script, one answers 404: the two agree with each other, the third
    is the minority lacking a file, and it agrees with nobody."""
    served = {JS: fetched(JS, A1), CSS: fetched(CSS, B1)}
    fleet = [obs(n, "1.0", dict(served)) for n in ("a", "b")]
    fleet.append(obs("c", "1.0", {JS: fetched(JS, status=404), CSS: fetched(CSS, B1)}))
    agreement = consensus_agreement(fleet)
    assert {n: a.agreeing for n, a in agreement.items()} == {"a": 1, "b": 1, "c": 0}
    results = {r.instance.name: r for r in compare_fleet(fleet, expectations=None)}
    assert results["c"].verdict is Verdict.MISMATCH
    (f,) = [f for f in results["c"].findings if f.kind is K.MINORITY_CONTENT]
    assert (f.path, f.expected, f.actual) == (JS, A1, "answers 404")
    assert results["a"].reason == "agrees with 1 of its 2 sibling(s) on 1.0"


def test_a_file_most_siblings_lack_blames_nobody() -> None:
    """One instance serves a file (a source map) its two siblings answer 404 for: no
    finding against anyone; it agrees with neither, so it is inconclusive, not
    consistent, and the two agree with each other."""
    both = {JS: fetched(JS, A1)}
    fleet = [obs(n, "1.0", both | {CSS: fetched(CSS, status=404)}) for n in ("a", "b")]
    fleet.append(obs("c", "1.0", both | {CSS: fetched(CSS, B1)}))
    results = {r.instance.name: r for r in compare_fleet(fleet, expectations=None)}
    assert not any(f.kind is K.MINORITY_CONTENT for r in results.values() for f in r.findings)
    assert results["c"].verdict is Verdict.INCONCLUSIVE
    assert results["c"].reason.startswith("agrees with none of its 2 sibling(s) on 1.0")
    assert results["a"].verdict is Verdict.CONSISTENT


def test_agreement_without_the_fleet_is_never_consistent() -> None:
    """``judge_instance`` told of two peers but of no agreement (nothing compared with
    a sibling): inconclusive, never "agrees with its siblings"."""
    from compare_support import serving

    from artifactcheck.judge.compare import HashIndex, judge_instance

    r = judge_instance(
        obs("a", "1.0", serving({JS: A1})), expectation=None, index=HashIndex({}), peers=2
    )
    assert r.verdict is Verdict.INCONCLUSIVE and not r.content_verified


def test_a_served_manifest_answering_404_without_a_release_says_what_to_give() -> None:
    """``--manifest-path`` naming nothing, no release: what was asked and what to give,
    and the missing manifest's finding says no release was given (no "release's file
    list", there is none)."""
    fleet = [
        obs(n, "1.0", {}, manifest_path=MANIFEST, manifest_fetch=fetched(MANIFEST, status=404))
        for n in ("a", "b")
    ]
    for r in compare_fleet(fleet, expectations=None):
        assert r.verdict is Verdict.INCONCLUSIVE
        assert r.reason.startswith(
            "nothing was fetched to judge by: manifest.json answers HTTP 404; no release was given"
        ), r.reason
        assert "artifactcheck manifest build DIST --version V" in r.reason
        (f,) = [f for f in r.findings if f.kind is K.MANIFEST_MISSING]
        assert f.message == (
            "served manifest manifest.json answers 404, and no release was given: nothing "
            "names the files to compare with its siblings"
        )


@pytest.mark.parametrize(
    ("answers", "reason"),
    [
        pytest.param(
            dict(NOTHING_SHARED[-1].answers) | {CSS: fetched(CSS, B1)},
            "agrees with its 2 sibling(s) on 1.0 (1 file(s) answer 404 or the fallback page "
            "on every instance, not compared: assets/a.js)",
            id="one-served-file-shared",
        ),
        pytest.param(
            {JS: fetched(JS, A1), CSS: fetched(CSS, status=404)},
            "agrees with its 2 sibling(s) on 1.0 (1 file(s) answer 404 or the fallback page "
            "on every instance, not compared: assets/b.css)",
            id="files-absent-everywhere-said-beside",
        ),
    ],
)
def test_one_served_file_shared_is_agreement(answers: dict[str, Fetched], reason: str) -> None:
    """One file served and shared: agreement, verified; a 404 every sibling answers is
    no difference between them, and the reason says which file none of them serves
    (not compared, not agreed on). The first row is the manifest-and-entry-page row
    with the stylesheet served."""
    results = compare_fleet(_fleet(answers), expectations=None)
    assert [(r.verdict, r.reason, r.content_verified) for r in results] == [
        (Verdict.CONSISTENT, reason, True)
    ] * 3
